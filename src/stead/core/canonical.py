"""Canonical JSON (RFC 8785) and the digests derived from it.

Anything stead hashes (request digests, effect ids, tool arguments) goes through
``canonical_json`` so the same value always has the same bytes, whatever the key order
or float spelling a model or a Python dict happened to produce.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import math
from collections.abc import Callable, Sequence
from typing import Any

import rfc8785

JSON = Any
"""A JSON-compatible value (dict, list, str, int, float, bool, None)."""


_MAX_SAFE_INT = 2**53 - 1
_MAX_INT = 2**63
"""Integers are stored in 64 bits (SQLite INTEGER, PostgreSQL BIGINT)."""
_MAX_DEPTH = 64
"""JSON nesting deeper than this is refused (the JSON reader recurses)."""


def json_problem(value: Any, depth: int = 0) -> str | None:
    """What keeps ``value`` from being JSON that reads back equal, or None."""
    t = type(value)
    if value is None or t is bool or isinstance(value, str):
        return None
    if t is int:
        return None if -_MAX_INT < value < _MAX_INT else f"integer {value} is out of range"
    if t is float:
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if isinstance(value, dict | list):
        if depth >= _MAX_DEPTH:
            return f"nested more than {_MAX_DEPTH} levels deep"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            if isinstance(value, dict) and not isinstance(k, str):
                return f"key {k!r} is not a string"
            p = json_problem(v, depth + 1)
            if p is not None:
                return f"[{k!r}]: {p}"
        return None
    if isinstance(value, tuple):
        return "a tuple would read back as a list; pass a list"
    return f"{t.__name__} is not a JSON value"


def _plain(value: Any) -> bool:
    """True when ``json.dumps(sort_keys=True)`` is already the RFC 8785 form of ``value``.

    That holds for JSON without floats (RFC 8785 number formatting differs from Python's),
    without integers beyond 2**53 (RFC 8785 numbers are doubles), and whose keys are ASCII
    (code-point order, which Python sorts by, equals the UTF-16 order RFC 8785 requires).
    Strings need no check: both escape exactly ``"``, ``\\`` and control characters alike.

    Tool arguments are checked on every call: scalars inside a dict or a list are judged in
    its loop (exact types first), not by a call each; anything else by ``_plain_other``.
    """
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int:
        n: int = value
        return -_MAX_SAFE_INT <= n <= _MAX_SAFE_INT
    if t is dict:
        for k in value:
            if not (isinstance(k, str) and k.isascii()):
                return False
        items = value.values()
    elif t is list or t is tuple:
        items = value
    else:
        return _plain_other(value)
    for v in items:
        t = type(v)
        if t is str or t is bool or v is None:
            continue
        if t is int:
            if not -_MAX_SAFE_INT <= v <= _MAX_SAFE_INT:
                return False
        elif not _plain(v):
            return False
    return True


def _plain_other(value: Any) -> bool:
    """``_plain`` of a value of a subclass (a ``StrEnum``, an ``IntEnum``, a dict or list
    subclass), or of no JSON type at all."""
    if isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        return -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT
    if isinstance(value, dict):
        return all(isinstance(k, str) and k.isascii() and _plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return False


def plain_canonical_json(value: JSON) -> str:
    """RFC 8785 text of a value known to satisfy ``_plain`` (no floats, ASCII keys).

    The fast path: the pure-Python RFC 8785 encoder costs ~0.6 ms for a 5 KB request, which
    would dominate a durable step; ``json.dumps`` is ~8x faster and byte-identical here.
    """
    return _PLAIN_ENCODER(value)


def compact_encoder(*, sort_keys: bool) -> Callable[[Any], str]:
    """A reusable compact JSON encoder (``separators=(",", ":")``, UTF-8 kept as is).

    ``json.dumps`` with options builds a new encoder on every call, and even
    ``JSONEncoder.encode`` builds a new C encoder per call: ~2 µs of a ~3 µs encoding of a
    small event, paid on every event of every step. The C encoder is built once here
    (without the circular-reference check: rows and requests are trees we build).
    """
    chunks = compact_chunks(sort_keys=sort_keys)

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


def compact_chunks(*, sort_keys: bool) -> Callable[[Any, int], Sequence[str]]:
    """``compact_encoder``'s C encoder itself: ``"".join(chunks(value, 0))`` is the text.

    For a caller on the hot path that joins the chunks in line (a store's ``event_row``,
    every event of every step): one Python call less than ``compact_encoder``'s."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the C accelerator
        encoder = json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
        return lambda value, _: (encoder.encode(value),)
    chunks: Callable[[Any, int], Sequence[str]] = make(
        None,
        _unserialisable,
        json.encoder.encode_basestring,
        None,
        ":",
        ",",
        sort_keys,
        False,
        True,
    )
    return chunks


def _unserialisable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_PLAIN_ENCODER = compact_encoder(sort_keys=True)


def _as_doubles(value: Any) -> Any:
    """Integers beyond 2**53 are doubles in RFC 8785 (as in JavaScript): keep the ones a double
    represents exactly, so ``canonical_json(1e17)`` can be parsed and canonicalised again;
    refuse the ones it would round."""
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
            return value
        if float(value) == value:
            return float(value)
        raise ValueError(
            f"value is not canonicalisable JSON: integer {value} is not exactly a double"
        )
    if isinstance(value, dict):
        return {k: _as_doubles(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_doubles(v) for v in value]
    return value


def canonical_json(value: JSON) -> str:
    """Return the RFC 8785 canonical text of ``value``.

    Raises ``ValueError`` for values JSON cannot carry (NaN, non-str keys, sets...).
    """
    try:
        plain = _plain(value)
    except RecursionError as exc:
        raise ValueError("value is nested too deeply to canonicalise") from exc
    if plain:
        text = plain_canonical_json(value)
        if text.isascii():  # O(1): nearly all arguments; UTF-8 holds them
            return text
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            pass  # a lone surrogate: let the reference encoder decide
    try:
        return str(rfc8785.dumps(_as_doubles(value)).decode("utf-8"))
    except (rfc8785.CanonicalizationError, TypeError, UnicodeError, RecursionError) as exc:
        raise ValueError(f"value is not canonicalisable JSON: {exc}") from exc


_sha256 = hashlib.sha256


def sha256_hex(text: str) -> str:
    """Hex sha256 of the UTF-8 bytes of ``text``."""
    return _sha256(text.encode("utf-8")).hexdigest()


def digest(value: JSON) -> str:
    """sha256 (hex) of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))


def idempotency_key(run_id: str, tool_call_id: str) -> str:
    """``sha256(run_id + tool_call_id)`` in hex, exactly as docs/design.md fixes it.

    Stable across processes and attempts, so a retried idempotent write carries the same key
    and the service on the other end can deduplicate it. Unique per call because the call id
    is unique in the run: a reused one (``call_0`` in every turn) is renamed before it is
    recorded (``stead.core.builders.unique_call_ids``), and this is computed over that id.
    """
    return _sha256((run_id + tool_call_id).encode("utf-8")).hexdigest()  # sha256_hex, inline


def effect_id(run_id: str, step: int, call_id: str, attempt: int) -> str:
    """Deterministic id of one attempt of one effect (a model call or a tool call).

    A NUL-separated string, not canonical JSON: the parts are fixed strings and integers, so
    this is unambiguous, and it is computed on every step.
    """
    text = f"effect\x00{run_id}\x00{step}\x00{call_id}\x00{attempt}"
    return _sha256(text.encode("utf-8")).hexdigest()[:32]  # sha256_hex, inline (every step)


def command_id(verb: str, effect: str) -> str:
    """Deterministic id of a command (start, settle, recover) acting on one effect.

    Derived, not random, so applying the same command twice is recognisably the same command
    and the first commit wins.
    """
    return digest(["command", verb, effect])[:32]
