"""``stead run`` and ``stead demo``: drive an agent in this process (the two commands that
make a store of their own rather than read one that exists)."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import replace

from rich.text import Text

from stead.cli._command import add_deps_option, command, load_agents, load_deps
from stead.cli._hints import Hints
from stead.cli._render import console, summary
from stead.core.states import RESUMABLE, RunStatus
from stead.errors import UserError
from stead.runtime import Runtime


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help="SQLite file for the demo (default: a temp file)")


@command("demo", "crash an agent after a side effect and recover it", _demo_arguments)
def _demo(args: argparse.Namespace) -> int:
    from stead.cli._demo import run_demo

    return 0 if run_demo(args.db) == 1 else 1


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("agent", help="module:attr naming the Agent")
    p.add_argument("prompt")
    p.add_argument(
        "--model",
        default=None,
        help="use this model instead of the agent's: anthropic:MODEL, openai:MODEL or "
        "openai-compatible:BASE_URL:MODEL",
    )
    add_deps_option(p)


@command("run", "run an agent on a prompt, streaming its text", _run_arguments)
def _run(args: argparse.Namespace) -> int:
    return asyncio.run(_run_agent(args, args.store, args.agent, args.prompt, args.model))


async def _run_agent(
    args: argparse.Namespace, store: str, spec: str, prompt: str, model: str | None
) -> int:
    from stead.cli._stream import StreamPrinter, usage_line
    from stead.providers import model_from_string

    agents = load_agents(spec, args.deps)
    deps = load_deps(args.deps)
    if len(agents) != 1:
        names = ", ".join(a.name for a in agents)
        raise UserError(f"{spec!r} holds {len(agents)} agents ({names}); name exactly one")
    agent = agents[0]
    if model is not None:
        agent.model = model_from_string(model)
    out = console()
    printer = StreamPrinter()
    async with Runtime(
        store, agents=[agent], on_progress=printer, deps=deps, share_progress=True
    ) as rt:
        run_id = await rt.start(agent, prompt)
        out.print(Text(f"run {run_id} · {agent.name} on {agent.model.model_name}", style="dim"))
        try:
            view = await rt.run(run_id)
        finally:
            printer.end()
    hints = replace(Hints.of(args), agents=spec)
    out.print(summary(view, hints))
    if view.status in RESUMABLE:
        again = f"next: `{hints.resume(view.run_id)}` continues it"
        out.print(Text(again, style="dim", no_wrap=True, overflow="ignore"))
    out.print(usage_line(view, agent.model.model_name))
    return 0 if view.status is RunStatus.COMPLETED else 1


COMMANDS = (_demo, _run)
