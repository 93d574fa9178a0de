"""Arbitrary model replies, as hypothesis strategies, rendered in both providers' wire formats.

A ``Turn`` is one HTTP exchange described independently of the provider: a stream (text,
thinking, tool calls, unknown blocks, usage numbers of any JSON type, a stop reason that is
known, unknown or missing, an SSE error event, a cut at any byte) or a refusal (any status,
any ``retry-after``, any body, JSON or not), or a 200 that is not a stream at all.
``render(kind, turn)`` builds the ``Reply`` the wire server plays for it: the same bytes
Anthropic's Messages API or OpenAI's Chat Completions would send, as far as the turn is
valid, and exactly the turn's damage where it is not.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from hypothesis import strategies as st
from wire_server import Reply, WireServer
from wire_shapes import sse

MISSING = "<missing>"
"""A value left out of the wire object altogether."""

SURROGATE = "\ud800"


@dataclass
class RawReply(Reply):
    """A reply with these exact bytes as its body (or JSON), under this content type."""

    raw: bytes | None = None
    content_type: str = "application/json"


class FuzzServer(WireServer):
    """The wire server, able to send a body that is not JSON, and to forget the last example."""

    def _json(self, h: BaseHTTPRequestHandler, reply: Reply) -> None:
        if not isinstance(reply, RawReply):
            super()._json(h, reply)
            return
        payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
        h.send_response(reply.status)
        h.send_header("content-type", reply.content_type)
        h.send_header("content-length", str(len(payload)))
        for k, v in reply.headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(payload)
        h.wfile.flush()

    def play(self, kind: str, script: tuple[tuple[Turn, ...], ...]) -> None:
        """Answer like a model: the reply depends on the conversation so far (how many
        assistant messages the request holds) and on how often that turn was asked (its
        attempts; the last one repeats), never on a global order. A re-driven run whose
        reply could not be recorded gets that reply again, as from a real model."""
        self.requests.clear()
        self.served: list[Turn] = []
        asked: dict[int, int] = {}
        server = self

        class Responder:
            def get_nowait(self) -> Reply:
                body = server.requests[-1].body
                messages = body.get("messages", []) if isinstance(body, dict) else []
                turn = sum(
                    1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
                )
                attempt = asked.get(turn, 0)
                asked[turn] = attempt + 1
                step = script[turn] if turn < len(script) else (FINAL,)
                chosen = step[min(attempt, len(step) - 1)]
                server.served.append(chosen)
                return render(kind, chosen, turn)

            def put(self, reply: Reply) -> None:
                raise AssertionError("FuzzServer plays a script")

        self.replies = Responder()  # type: ignore[assignment]


# -- the abstract reply -----------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    id: str  # MISSING: no id on the wire
    name: str  # MISSING: no name on the wire
    fragments: tuple[str, ...]
    index: int | str | None = None  # OpenAI's fragment index; None: its position


@dataclass(frozen=True)
class Turn:
    kind: str  # stream | http_error | json_200 | raw_200
    text: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()
    thinking: tuple[Any, ...] = ()  # (fragments, signature) or redacted data (Anthropic)
    odd: tuple[dict[str, Any], ...] = ()  # unknown blocks / events / chunks
    usage: dict[str, Any] = field(default_factory=dict)
    stop: str | None = MISSING  # MISSING: the provider's usual one
    error_event: tuple[str, str] | None = None  # (type, message) inside the stream
    cut: int | None = None  # cut the stream after this many bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    raw: bytes | None = None

    def strings(self) -> list[str]:
        """Every string the model sent (to tell which known finding an example can hit)."""
        out = [*self.text, *_all_strings(self.thinking)]
        for c in self.calls:
            out += [c.id, c.name, *c.fragments]
            with contextlib.suppress(ValueError):  # parsed, "\\ud800" is a lone surrogate
                out += _all_strings(json.loads("".join(c.fragments)))
        out += _all_strings([self.usage, self.body, self.headers, self.error_event, self.odd])
        return out


def _all_strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in _all_strings(k) + _all_strings(v)]
    if isinstance(obj, list | tuple):
        return [s for v in obj for s in _all_strings(v)]
    return []


# -- strategies -------------------------------------------------------------------------------

TOOL_NAMES = ["lookup", "save", "charge", "refund", "transfer", "listing", "explode"]

texts = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "[/]",
            "[bold]x[/bold]",
            "[link=http://e]y",
            "\x1b[31mred\x1b[0m",
            "\x00\x07\r\n",
            SURROGATE,
            "a\udcffb",
            "\u202eevil",
            "Ω≈ç√",
            "🦊",
            "x" * 5000,
        ]
    ),
)

ids = st.one_of(
    st.sampled_from(["call_0", "call_1", "toolu_01", "", MISSING, "None", "呼び出し", "id\ud800"]),
    st.text(min_size=1, max_size=12),
    st.just("x" * 3000),
)


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        texts,
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
        max_leaves=6,
    )


json_values = _json_values()

good_arguments = st.one_of(
    st.builds(lambda q: {"query": q}, texts),
    st.builds(lambda k, v: {"key": k, "value": v}, texts, st.integers(-5, 5)),
    st.builds(lambda a: {"amount": a}, st.integers(-10, 500)),
    st.builds(lambda a, n: {"amount": a, "note": n}, st.integers(0, 500), texts),
    st.just({}),
    st.builds(lambda x: {"x": x}, st.integers(0, 3)),
)


@st.composite
def argument_fragments(draw: st.DrawFn) -> tuple[str, ...]:
    choice = draw(st.integers(0, 5))
    if choice <= 2:
        text = json.dumps(draw(good_arguments), ensure_ascii=draw(st.booleans()))
    elif choice == 3:
        text = json.dumps(draw(json_values))
    elif choice == 4:
        text = draw(
            st.sampled_from(['{"query": "\\ud800"}', '{"query": "a', "not json", "{}{}", "null"])
        )
    else:
        text = draw(texts)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=3)))
    pieces, last = [], 0
    for c in cuts:
        pieces.append(text[last:c])
        last = c
    pieces.append(text[last:])
    return tuple(pieces)


calls = st.builds(
    Call,
    id=ids,
    name=st.one_of(st.sampled_from(TOOL_NAMES), st.sampled_from(["nope", "", MISSING]), texts),
    fragments=argument_fragments(),
    index=st.one_of(st.none(), st.none(), st.integers(0, 2), st.just("x")),
)

usage_numbers = st.one_of(
    st.integers(0, 2000),
    st.integers(0, 2000),
    st.integers(min_value=-(2**40), max_value=-1),
    st.integers(min_value=2**53, max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["ten", "12", None, True, [], {}]),
)
USAGE_KEYS = [
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
]
usages = st.dictionaries(st.sampled_from(USAGE_KEYS), usage_numbers, max_size=4)

odd_blocks = st.sampled_from(
    [
        {
            "block": {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {},
            }
        },
        {"block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}},
        {"block": {"type": "mystery_block", "payload": 1}},
        {"event": {"type": "mystery_event"}},
        {
            "event": {
                "type": "content_block_delta",
                "index": 99,
                "delta": {"type": "text_delta", "text": "?"},
            }
        },
        {"event": {"type": "content_block_delta", "index": 0, "delta": {"type": "mystery_delta"}}},
        {"chunk": {"choices": [{"index": 1, "delta": {"content": "other choice"}}]}},
        {"chunk": {"choices": None}},
        {"chunk": {"choices": [{"delta": {"refusal": "I cannot"}, "index": 0}]}},
        {"chunk": {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {}}]}}]}},
    ]
)

stop_reasons = st.one_of(
    st.just(MISSING),
    st.sampled_from(
        [
            *("end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"),
            *("stop", "tool_calls", "length", "content_filter", "function_call"),
            *(None, "", "mystery"),
        ]
    ),
)

statuses = st.one_of(
    st.sampled_from([400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529]),
    st.integers(400, 599),
)

retry_after = st.one_of(
    st.sampled_from(
        [
            *("0", "0.01", "-5", "1e9", "100000", "nan", "inf", "soon", ""),
            *("Wed, 21 Oct 2099 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT"),
        ]
    ),
    st.floats(allow_nan=False, allow_infinity=False).map(str),
)
headers = st.dictionaries(
    st.sampled_from(["retry-after", "retry-after-ms", "x-junk"]), retry_after, max_size=2
)

error_bodies = st.one_of(
    st.builds(
        lambda kind, message: {"type": "error", "error": {"type": kind, "message": message}},
        st.sampled_from(["overloaded_error", "rate_limit_error", "invalid_request_error", "odd"]),
        texts,
    ),
    st.builds(
        lambda message, kind, code: {"error": {"message": message, "type": kind, "code": code}},
        texts,
        st.sampled_from(["server_error", "invalid_request_error", "tokens", "odd"]),
        st.sampled_from([None, "rate_limit_exceeded", "invalid_api_key"]),
    ),
    json_values,
)

stream_turns = st.builds(
    Turn,
    kind=st.just("stream"),
    text=st.lists(texts, max_size=3).map(tuple),
    calls=st.lists(calls, max_size=3).map(tuple),
    thinking=st.lists(
        st.one_of(st.tuples(st.lists(texts, max_size=2).map(tuple), texts), texts), max_size=1
    ).map(tuple),
    odd=st.lists(odd_blocks, max_size=2).map(tuple),
    usage=usages,
    stop=stop_reasons,
    error_event=st.one_of(
        st.none(),
        st.none(),
        st.none(),
        st.tuples(
            st.sampled_from(["overloaded_error", "api_error", "rate_limit_error", "odd"]), texts
        ),
    ),
    cut=st.one_of(st.none(), st.none(), st.integers(0, 4000)),
)

error_turns = st.builds(
    Turn, kind=st.just("http_error"), status=statuses, headers=headers, body=error_bodies
)

odd_200 = st.one_of(
    st.builds(Turn, kind=st.just("json_200"), body=json_values),
    st.builds(Turn, kind=st.just("raw_200"), raw=st.binary(max_size=40)),
)

turns = st.one_of(
    stream_turns, stream_turns, stream_turns, stream_turns, error_turns, error_turns, odd_200
)

FINAL = Turn(kind="stream", text=("Done.",))
"""What the model answers once its script is over."""


@st.composite
def scripts(draw: st.DrawFn) -> tuple[tuple[Turn, ...], ...]:
    """Per conversation turn, the replies to its attempts (the last one repeats). Drawn from a
    small pool, so a turn often repeats another: loops, ids reused across turns."""
    pool = draw(st.lists(turns, min_size=1, max_size=3))
    index = st.integers(0, len(pool) - 1)
    steps = draw(st.lists(st.lists(index, min_size=1, max_size=3), min_size=1, max_size=5))
    return tuple(tuple(pool[i] for i in attempts) for attempts in steps)


# -- rendering --------------------------------------------------------------------------------


def _put(obj: dict[str, Any], key: str, value: Any) -> None:
    if value != MISSING:
        obj[key] = value


def _dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))


def render(kind: str, turn: Turn, turn_index: int) -> Reply:
    if turn.kind == "http_error":
        return RawReply(status=turn.status, body=turn.body, headers=dict(turn.headers))
    if turn.kind == "json_200":
        return RawReply(status=200, body=turn.body)
    if turn.kind == "raw_200":
        return RawReply(status=200, raw=turn.raw, content_type="text/event-stream")
    events = anthropic(turn) if kind == "anthropic" else openai(turn)
    if turn.cut is None:
        return Reply(events=events)
    whole = b"".join(events)
    at = turn.cut % max(1, len(whole))
    if at == 0:
        return Reply(events=[whole], cut_after=0)
    return Reply(events=[whole[:at], b"-"], cut_after=1)


def anthropic(turn: Turn) -> list[bytes]:
    usage: dict[str, Any] = {"input_tokens": 10, "output_tokens": 1}
    usage.update({k: v for k, v in turn.usage.items() if k in USAGE_KEYS[:4]})
    out = [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fuzz",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-6",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )
    ]
    index = 0

    def block(content: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        out.append(
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": content},
            )
        )
        for d in deltas:
            out.append(
                sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": d},
                )
            )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    for spec in turn.thinking:
        if isinstance(spec, str):
            block({"type": "redacted_thinking", "data": spec}, [])
        else:
            fragments, signature = spec
            block(
                {"type": "thinking", "thinking": "", "signature": ""},
                [{"type": "thinking_delta", "thinking": p} for p in fragments]
                + [{"type": "signature_delta", "signature": signature}],
            )
    if turn.text:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in turn.text])
    for odd in turn.odd:
        if "block" in odd:
            block(odd["block"], [])
        elif "event" in odd:
            out.append(sse(odd["event"]["type"], odd["event"]))
    if turn.error_event is not None:
        kind, message = turn.error_event
        out.append(sse("error", {"type": "error", "error": {"type": kind, "message": message}}))
    for call in turn.calls:
        content: dict[str, Any] = {"type": "tool_use", "input": {}}
        _put(content, "id", call.id)
        _put(content, "name", call.name)
        block(
            content,
            [{"type": "input_json_delta", "partial_json": p} for p in ("", *call.fragments)],
        )
    delta: dict[str, Any] = {"stop_sequence": None}
    stop = turn.stop
    if stop == MISSING:
        stop = "tool_use" if turn.calls else "end_turn"
    delta["stop_reason"] = stop
    out.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": delta,
                "usage": {"output_tokens": turn.usage.get("output_tokens", 5)},
            },
        )
    )
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


def openai(turn: Turn) -> list[bytes]:
    def chunk(choices: Any, usage: Any = None) -> bytes:
        return sse(
            None,
            {
                "id": "chatcmpl-fuzz",
                "object": "chat.completion.chunk",
                "created": 1741570283,
                "model": "gpt-4.1-2025-04-14",
                "choices": choices,
                "usage": usage,
            },
        )

    def choice(delta: dict[str, Any], finish: Any = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

    out = [chunk(choice({"role": "assistant", "content": ""}))]
    for piece in turn.text:
        out.append(chunk(choice({"content": piece})))
    for odd in turn.odd:
        if "chunk" in odd:
            out.append(chunk(odd["chunk"]["choices"]))
    for i, call in enumerate(turn.calls):
        first: dict[str, Any] = {"type": "function", "function": {"arguments": ""}}
        if call.index != "x":
            first["index"] = i if call.index is None else call.index
        _put(first, "id", call.id)
        _put(first["function"], "name", call.name)
        out.append(chunk(choice({"tool_calls": [first]})))
        for piece in call.fragments:
            frag: dict[str, Any] = {"function": {"arguments": piece}}
            if "index" in first:
                frag["index"] = first["index"]
            out.append(chunk(choice({"tool_calls": [frag]})))
    if turn.error_event is not None:
        kind, message = turn.error_event
        out.append(sse(None, {"error": {"message": message, "type": kind, "code": None}}))
    stop = turn.stop
    if stop == MISSING:
        stop = "tool_calls" if turn.calls else "stop"
    out.append(chunk(choice({}, stop)))
    usage: dict[str, Any] = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
    details: dict[str, Any] = {"cached_tokens": 0}
    for k, v in turn.usage.items():
        if k == "cached_tokens":
            details[k] = v
        elif k in USAGE_KEYS[4:7]:
            usage[k] = v
        elif k == "input_tokens":
            usage["prompt_tokens"] = v
        elif k == "output_tokens":
            usage["completion_tokens"] = v
    usage["prompt_tokens_details"] = details
    out.append(chunk([], usage))
    out.append(sse(None, "[DONE]"))
    return out
