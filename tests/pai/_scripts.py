"""The seed scenario's model replies, in each provider's wire format, and what the model was
sent back (the tool results under their call ids)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from wire_server import Reply, Seen
from wire_shapes import anthropic_stream, openai_stream

HERE = Path(__file__).parent
STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]

CUSTOMER = '{"email": "ada@example.com"}'
MESSAGE = '{"to": "ada@example.com", "text": "Your refund is on its way."}'


def calls_reply(provider: str, *calls: tuple[str, str, str]) -> Reply:
    """One reply asking for ``calls`` (id, tool, JSON arguments)."""
    tools = [(cid, name, [args]) for cid, name, args in calls]
    if provider == "anthropic":
        return anthropic_stream(tools=tools)
    return openai_stream(tools=tools)


def text_reply(provider: str, text: str) -> Reply:
    return anthropic_stream(text) if provider == "anthropic" else openai_stream(text)


def seed_replies(provider: str) -> list[Reply]:
    ids = call_ids(provider)
    return [
        calls_reply(
            provider, (ids[0], "find_customer", CUSTOMER), (ids[1], "send_message", MESSAGE)
        ),
        text_reply(provider, "Ada has been told."),
    ]


def call_ids(provider: str) -> tuple[str, str]:
    return ("toolu_01", "toolu_02") if provider == "anthropic" else ("call_01", "call_02")


def tool_results(provider: str, seen: Seen) -> dict[str, str]:
    """The tool results a request sent the model, by call id."""
    found: dict[str, str] = {}
    for message in seen.body["messages"]:
        if provider == "anthropic":
            content = message.get("content")
            if isinstance(content, list):
                for block in content:
                    if block.get("type") == "tool_result":
                        text = block.get("content")
                        if isinstance(text, list):
                            text = "".join(b.get("text", "") for b in text)
                        found[block["tool_use_id"]] = str(text)
        elif message.get("role") == "tool":
            found[message["tool_call_id"]] = str(message.get("content"))
    return found


def env(provider: str, url: str, ledger: Path, **extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "STEAD_CRASH_AT"}
    out.update(
        PAI_PROVIDER=provider,
        PAI_BASE_URL=url,
        STEAD_TEST_LEDGER=str(ledger),
        COLUMNS="160",
        **extra,
    )
    return out


def stead_cli(
    *args: str, env: dict[str, str], timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STEAD, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        cwd=HERE,
    )


def deliveries(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line]
