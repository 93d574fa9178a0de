"""Conversations, cost and attachments through the local wire
servers, read by the official Anthropic and OpenAI SDKs.

What the provider receives is checked in the request bodies the server saw: a follow-up's
request carries the conversation before it in the provider's own shapes; an image (and, on
Anthropic, a PDF) arrives as the provider's block, base64; the store holds its bytes once and
the log only its digest. Costs come back on the view, per turn and summed, from the model
each reply names (an unknown model: None, not zero).
"""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_runs import model_for, stream
from wire_server import WireServer

import stead
from stead.core.messages import Usage
from stead.core.pricing import PRICES
from stead.store.sql._base import unpack_data

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
PDF = b"%PDF-1.4\n" + b"1 0 obj << >> endobj\n" * 4 + b"%%EOF\n"
MODEL = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1-2025-04-14"}


def chat(kind: str, server: WireServer) -> stead.Agent:
    return stead.Agent("chat", model_for(kind, server), [], system="You are helpful.")


def user_texts(kind: str, body: dict[str, Any]) -> list[str]:
    """The text of every user message of a request, in order, whatever its shape."""
    out = []
    for m in body["messages"]:
        if m["role"] != "user":
            continue
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(b["text"] for b in content if b.get("type") == "text")
    return out


def assistant_texts(kind: str, body: dict[str, Any]) -> list[str]:
    out = []
    for m in body["messages"]:
        if m["role"] == "assistant":
            content = m["content"]
            out.append(content if isinstance(content, str) else content[0]["text"])
    return out


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_follow_up_sends_the_conversation_and_the_view_has_its_cost(
    kind: str, server: WireServer, tmp_path: Path
) -> None:
    u1 = Usage(input_tokens=1000, output_tokens=100)
    u2 = Usage(input_tokens=2000, output_tokens=200)
    server.push(stream(kind, "Order 42 ", "shipped.", usage=u1), stream(kind, "12345.", usage=u2))
    agent = chat(kind, server)
    async with stead.Runtime(tmp_path / "c.db", agents=[agent]) as rt:
        first = await rt.send("c", "Where is order 42?", agent=agent)
        second = await rt.send("c", "and the zip code?")
        assert second.output == "12345."
        body = server.requests[1].body
        assert user_texts(kind, body) == ["Where is order 42?", "and the zip code?"]
        assert assistant_texts(kind, body) == ["Order 42 shipped."]
        assert [m.role for m in second.messages] == ["user", "assistant", "user", "assistant"]
        # cost on the view: each turn by the model its reply names
        price = PRICES.lookup(MODEL[kind])
        assert price is not None
        assert first.cost_usd == pytest.approx(price.cost(u1))
        assert second.cost_usd == pytest.approx(price.cost(u2))
        (turn,) = second.turn_usage
        assert (turn.turn_index, turn.model, turn.usage) == (0, MODEL[kind], u2)
        assert turn.cost_usd == pytest.approx(price.cost(u2))
        assert (await rt.get(second.run_id)).cost_usd == pytest.approx(price.cost(u2))


async def test_a_model_without_a_price_costs_none(server: WireServer, tmp_path: Path) -> None:
    server.push(stream("openai-compatible", "hi", usage=Usage(input_tokens=9, output_tokens=3)))
    agent = chat("openai-compatible", server)
    async with stead.Runtime(tmp_path / "n.db", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "hello"))
        assert view.usage.total_tokens == 12
        assert view.cost_usd is None
        assert view.turn_usage[0].cost_usd is None


def _text(data: str | bytes) -> str:
    return data if isinstance(data, str) else data.decode()


def _raw(path: Path, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_an_image_and_a_document_reach_the_model_stored_once(
    kind: str, server: WireServer, tmp_path: Path
) -> None:
    server.push(stream(kind, "A chart."), stream(kind, "Still a chart."), stream(kind, "Yes."))
    agent = chat(kind, server)
    path = tmp_path / "img.db"
    async with stead.Runtime(path, agents=[agent]) as rt:
        first = await rt.send(
            "c",
            "What is in these?",
            agent=agent,
            attachments=[stead.Image(PNG), stead.Document(PDF, name="report.pdf")],
        )
        assert first.output == "A chart."
        await rt.send("c", "Are you sure?")
        # the same image again, in a new message: the same digest, still one row
        await rt.send("c", "And this one?", attachments=[stead.Image(PNG, "image/png")])
    b64, pdf64 = base64.b64encode(PNG).decode(), base64.b64encode(PDF).decode()
    body = server.requests[0].body
    (user,) = [m for m in body["messages"] if m["role"] == "user"]
    if kind == "anthropic":
        image, document, text = user["content"][:3]
        assert image == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": b64},
        }
        assert document["type"] == "document" and document["title"] == "report.pdf"
        assert document["source"] == {
            "type": "base64",
            "media_type": "application/pdf",
            "data": pdf64,
        }
        assert text["text"] == "What is in these?"
    else:
        text, image, document = user["content"]
        assert text == {"type": "text", "text": "What is in these?"}
        assert image == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}}
        assert document == {
            "type": "file",
            "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{pdf64}"},
        }
    # a later request carries the conversation's image again (the provider needs it) ...
    assert b64 in str(server.requests[1].body)
    # ... but the store holds its bytes once, and the log only the digest
    assert _raw(path, "SELECT media_type FROM blobs ORDER BY media_type") == [
        ("application/pdf",),
        ("image/png",),
    ]
    # every row as its JSON text (a large row is stored zlib-compressed: store/sql/_base.pack_data)
    log = "".join(_text(unpack_data(d)) for (d,) in _raw(path, "SELECT data FROM events"))
    assert b64 not in log and "sha256:" in log
    assert first.messages[0].attachments[0].digest.startswith("sha256:")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("item", "says"),
    [
        (stead.Image(b"BM\x00\x00fake bitmap"), "images of type 'unknown' are not supported"),
        (stead.Image(b"BM\x00\x00", "image/bmp"), "images of type 'image/bmp' are not supported"),
        (stead.Image(b"GIF89a\x01\x00", "image/png"), "says it is image/png but its bytes are"),
        (stead.Image(b""), "data must be the file's bytes"),
        (stead.Document(PNG, media_type="image/png"), "documents of type 'image/png'"),
        (PNG, "wrap it: stead.Image"),
        ("photo.png", "pass stead.Image"),
    ],
)
async def test_an_attachment_of_an_unsupported_type_is_a_user_error(
    tmp_path: Path, item: Any, says: str
) -> None:
    agent = stead.Agent("chat", stead.testing.ScriptedModel(["hi"]), [])
    async with stead.Runtime(tmp_path / "bad.db", agents=[agent]) as rt:
        with pytest.raises(stead.UserError, match=says.replace("(", r"\(")):
            await rt.start(agent, "look", attachments=[item])
        with pytest.raises(stead.UserError, match=says.replace("(", r"\(")):
            await rt.send("c", "look", agent=agent, attachments=[item])
        assert await rt.store.list_runs() == []
        assert await rt.conversation("c") == []
