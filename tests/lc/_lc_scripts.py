"""The seed scenario's model replies in OpenAI's Chat Completions wire format, what the model
was sent back, and the CLI in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from wire_server import Reply, Seen
from wire_shapes import openai_stream

HERE = Path(__file__).parent
STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]

CUSTOMER = '{"email": "ada@example.com"}'
MESSAGE = '{"to": "ada@example.com", "text": "Your refund is on its way."}'
FOUND, SENT = "call_01", "call_02"


def seed_replies() -> list[Reply]:
    return [
        openai_stream(
            tools=[(FOUND, "find_customer", [CUSTOMER]), (SENT, "send_message", [MESSAGE])]
        ),
        openai_stream("Ada has been told."),
    ]


def tool_results(seen: Seen) -> dict[str, str]:
    """The tool results a request sent the model, by call id."""
    return {
        m["tool_call_id"]: str(m.get("content"))
        for m in seen.body["messages"]
        if m.get("role") == "tool"
    }


def env(url: str, ledger: Path, **extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "STEAD_CRASH_AT"}
    out.update(LC_BASE_URL=url, STEAD_TEST_LEDGER=str(ledger), COLUMNS="160", **extra)
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
