"""``stead demo``: crash an agent after it sent a message, recover, and send it only once.

1. A local HTTP message service starts in this process.
2. A worker process drives the run; it looks the order up, sends the message, and is killed
   with SIGKILL right after the message was delivered, before the result was checkpointed.
3. A new worker process resumes: the lookup's recorded result is replayed, the in-flight send
   is reconciled with the service by idempotency key (found: its message id is recorded),
   and only the unfinished work (the final answer) runs.
4. The timeline is printed, then the number of messages the service delivered: 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.rule import Rule
from rich.text import Text

from stead.cli._ids import short_id
from stead.cli._render import console, summary, timeline
from stead.demo import MessageService, build_agent
from stead.runtime import Runtime


def _worker(
    store: str, run_id: str, service: str, crash: str | None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, STEAD_DEMO_SERVICE=service)
    env.pop("STEAD_CRASH_AT", None)
    if crash:
        env["STEAD_CRASH_AT"] = crash
    return subprocess.run(
        [sys.executable, "-m", "stead.demo._child", store, run_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run_demo(store_path: str | None = None) -> int:
    """Run the demo; returns the number of messages delivered (1 when all is well)."""
    out = console()
    folder = tempfile.mkdtemp(prefix="stead-demo-")
    store = f"sqlite:///{store_path or Path(folder) / 'demo.db'}"
    agent = build_agent()
    with MessageService() as service:
        out.print(Rule("stead demo: a crash after a side effect"))
        out.print(Text(f"message service on {service.url}; store {store}"))

        async def create() -> str:
            async with Runtime(store, agents=[agent]) as rt:
                return await rt.start(agent, "Order 42: check it and tell on-call.")

        run_id = asyncio.run(create())
        out.print(f"run {run_id} queued\n")

        out.print(
            "[bold]worker 1[/]: drives the run, armed to die right after send_message "
            "returns and before its result is checkpointed"
        )
        first = _worker(store, run_id, service.url, "after_tool_effect:send_message")
        if first.returncode != -signal.SIGKILL:
            out.print(f"[red]worker 1 was expected to die by SIGKILL, exit {first.returncode}[/]")
            out.print(Text(first.stderr))
            return -1
        out.print(
            f"  worker 1 killed by SIGKILL; messages delivered so far: {len(service.messages)}"
        )

        out.print("\n[bold]worker 2[/]: a new process resumes the same run")
        second = _worker(store, run_id, service.url, None)
        if second.returncode != 0:
            out.print(f"[red]worker 2 failed (exit {second.returncode})[/]")
            out.print(Text(second.stderr))
            return -1
        result = json.loads(second.stdout.strip().splitlines()[-1])
        out.print(f"  worker 2 finished: {result['status']}\n")

        async def show() -> None:
            async with Runtime(store, agents=[agent]) as rt:
                out.print(timeline(await rt.events(run_id), title=f"timeline of {run_id}"))
                out.print()
                out.print(summary(await rt.get(run_id)))

        asyncio.run(show())
        delivered = len(service.messages)
        out.print()
        style = "bold green" if delivered == 1 else "bold red"
        said = (
            "once: the dead worker's message was found by the reconcile function, not sent again"
            if delivered == 1
            else "more than once"
        )
        out.print(f"[{style}]delivered: {delivered}[/] ({said})")
        out.print(Text("\nInspect it yourself:", style="dim"))
        out.print(_whole(f"  stead --store {store} runs show {short_id(run_id)}"))
        out.print(
            Text("Use a real model (ANTHROPIC_API_KEY; or openai:gpt-4.1 and OPENAI_API_KEY):")
        )
        out.print(
            _whole(
                "  stead run stead.demo.assistant:agent 'Where is order 42?' "
                "--model anthropic:claude-sonnet-4-6"
            )
        )
        out.print(Text("See docs/models.md.", style="dim"))
        return delivered


def _whole(command: str) -> Text:
    """A command to copy: printed on one line, whatever the terminal's width."""
    return Text(command, style="dim", no_wrap=True, overflow="ignore")
