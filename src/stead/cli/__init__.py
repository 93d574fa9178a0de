"""The ``stead`` command: parse, call the runtime, render. No logic of its own.

    stead demo                          crash-and-recover demo on a temporary SQLite store
    stead run MOD:AGENT PROMPT [--model M]
                                        run an agent, streaming its text; M is a model
                                        string such as anthropic:claude-sonnet-4-6
    stead runs list [--status S]        runs in the store, newest first
    stead runs show RUN                 one run's timeline
    stead runs events RUN [--json]      one run's raw events
    stead resume RUN --agents MOD:ATTR  continue a run (requeues failed/cancelled ones)
    stead approve RUN CALL [--args J] [--agents MOD:ATTR]
                                        approve a gated call (optionally edited); with
                                        --agents, continue the run at once
    stead deny RUN CALL --reason R      deny it; the model reads the reason
    stead decide RUN CALL happened|not_happened|skip [--result R]
                                        settle a call whose outcome is unknown
    stead cancel RUN [--reason R]       cancel a run
    stead worker --agents MOD:ATTR [--concurrency N]
                                        claim and drive runs until SIGTERM

The store comes from ``--store`` or ``$STEAD_STORE`` (default ``sqlite:///stead.db``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import select
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from stead.cli._args import positive
from stead.cli._render import console, plain, runs_table, summary, timeline
from stead.core.events import encode
from stead.core.states import RunStatus
from stead.errors import SteadError, UserError
from stead.runtime import Agent, Runtime


def _load_agents(spec: str | None) -> list[Agent]:
    """``module:attr`` naming an Agent, a list of Agents, or a function returning either.

    Whatever goes wrong (the module does not import or raises while importing, the attribute
    is missing, the factory raises, it gives something else) is one ``UserError`` line that
    names the module or factory and the exception: a person fixing their module needs that,
    not a traceback through stead.
    """
    if not spec:
        return []
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UserError(f"--agents wants module:attribute, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise UserError(
            f"--agents {spec}: importing module {module_name!r} failed: {_one_line(exc)}"
        ) from exc
    try:
        obj: Any = getattr(module, attr)
    except AttributeError as exc:
        raise UserError(f"--agents {spec}: module {module_name!r} has no {attr!r}") from exc
    if callable(obj) and not isinstance(obj, Agent):
        try:
            obj = obj()
        except Exception as exc:
            raise UserError(f"--agents {spec}: {attr}() raised {_one_line(exc)}") from exc
    try:
        agents = [obj] if isinstance(obj, Agent) else list(obj)
    except TypeError:
        agents = [obj]
    if not agents or not all(isinstance(a, Agent) for a in agents):
        raise UserError(
            f"--agents {spec} is {type(obj).__name__}, not an Agent, a list of Agents, or a "
            "function returning one"
        )
    return agents


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (a SyntaxError names its file and line)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


STATUSES = [s.value for s in RunStatus]
"""What ``runs list --status`` takes."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stead", description="Durable LLM agent runs.")
    p.add_argument(
        "--store",
        default=os.environ.get("STEAD_STORE", "sqlite:///stead.db"),
        help="store URL (default $STEAD_STORE or sqlite:///stead.db)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="crash an agent after a side effect and recover it")
    demo.add_argument("--db", default=None, help="SQLite file for the demo (default: a temp file)")

    run = sub.add_parser("run", help="run an agent on a prompt, streaming its text")
    run.add_argument("agent", help="module:attr naming the Agent")
    run.add_argument("prompt")
    run.add_argument(
        "--model",
        default=None,
        help="use this model instead of the agent's: anthropic:MODEL, openai:MODEL or "
        "openai-compatible:BASE_URL:MODEL",
    )

    runs = sub.add_parser("runs", help="list and inspect runs")
    rsub = runs.add_subparsers(dest="runs_command", required=True)
    lst = rsub.add_parser("list", help="runs, newest first")
    lst.add_argument("--status", default=None, choices=STATUSES, help="only runs in this status")
    lst.add_argument("--limit", type=positive(int, 100_000), default=50, help="at most this many")
    show = rsub.add_parser("show", help="a run's timeline")
    show.add_argument("run_id")
    ev = rsub.add_parser("events", help="a run's raw events")
    ev.add_argument("run_id")
    ev.add_argument("--json", action="store_true", help="one JSON object per line")

    res = sub.add_parser("resume", help="continue a run")
    res.add_argument("run_id")
    res.add_argument("--agents", required=True, help="module:attr with the run's agent(s)")
    res.add_argument("--reason", default="resumed from the CLI")

    for name, help_text in (("approve", "approve a gated call"), ("deny", "deny a gated call")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("run_id")
        cmd.add_argument("call_id")
        cmd.add_argument("--token", default=None, help="the approval's resume token")
        cmd.add_argument("--by", default=os.environ.get("USER", "cli"))
        cmd.add_argument(
            "--agents",
            default=None,
            help="module:attr with the run's agent(s): continue the run now",
        )
        if name == "approve":
            cmd.add_argument("--args", default=None, help="edited arguments as JSON")
        else:
            cmd.add_argument("--reason", required=True)

    dec = sub.add_parser("decide", help="settle a call whose outcome is unknown")
    dec.add_argument("run_id")
    dec.add_argument("call_id")
    dec.add_argument("decision", choices=["happened", "not_happened", "skip"])
    dec.add_argument("--result", default=None, help="with happened: the call's result")
    dec.add_argument("--reason", default="")
    dec.add_argument("--token", default=None)
    dec.add_argument("--by", default=os.environ.get("USER", "cli"))
    dec.add_argument(
        "--agents", default=None, help="module:attr with the run's agent(s): continue the run now"
    )

    can = sub.add_parser("cancel", help="cancel a run")
    can.add_argument("run_id")
    can.add_argument("--reason", default="cancelled from the CLI")

    from stead.cli._worker import add_worker_parser

    add_worker_parser(sub)
    from stead.cli._serve import add_serve_parser

    add_serve_parser(sub)
    return p


async def _with_runtime(
    store: str, agents: list[Agent], fn: Callable[[Runtime], Awaitable[int]]
) -> int:
    async with Runtime(store, agents=agents) as rt:
        return await fn(rt)


def _dispatch(args: argparse.Namespace) -> int:
    out = console()
    cmd = args.command
    if cmd == "demo":
        from stead.cli._demo import run_demo

        return 0 if run_demo(args.db) == 1 else 1
    if cmd == "serve":
        from stead.cli._serve import run_serve

        return run_serve(args, _load_agents(args.agents))
    if cmd == "worker":
        from stead.cli._worker import run_worker

        return run_worker(args, _load_agents(args.agents))

    async def go(rt: Runtime) -> int:
        if cmd == "runs":
            if args.runs_command == "list":
                out.print(
                    runs_table(await rt.store.list_runs(status=args.status, limit=args.limit))
                )
            elif args.runs_command == "show":
                view = await rt.get(args.run_id)
                out.print(timeline(await rt.events(args.run_id), title=args.run_id))
                out.print(summary(view))
            else:
                for e in await rt.events(args.run_id):
                    kind, version, data = encode(e.event)
                    if args.json:
                        print(
                            json.dumps(
                                {
                                    "seq": e.seq,
                                    "kind": kind,
                                    "v": version,
                                    "at": e.created_at,
                                    "data": data,
                                }
                            )
                        )
                    else:
                        out.print(Text(f"{e.seq:>5} {kind:<22} {json.dumps(data)[:160]}"))
            return 0
        if cmd == "resume":
            view = await rt.resume(args.run_id, reason=args.reason)
        elif cmd == "approve":
            try:
                edited = json.loads(args.args) if args.args else None
            except ValueError as exc:
                raise UserError(f"--args is not JSON: {exc}") from exc
            view = await rt.approve(
                args.run_id, args.call_id, token=args.token, by=args.by, arguments=edited
            )
        elif cmd == "deny":
            view = await rt.deny(
                args.run_id, args.call_id, args.reason, token=args.token, by=args.by
            )
        elif cmd == "decide":
            view = await rt.decide(
                args.run_id,
                args.call_id,
                args.decision,
                token=args.token,
                result=args.result,
                reason=args.reason,
                by=args.by,
            )
        elif cmd == "cancel":
            view = await rt.cancel(args.run_id, args.reason)
        else:  # pragma: no cover - argparse refuses unknown commands
            raise UserError(f"unknown command {cmd}")
        if cmd in ("approve", "deny", "decide") and rt.agents:
            view = await rt.run(args.run_id)
        out.print(summary(view))
        return 0

    if cmd == "run":
        return asyncio.run(_run_agent(args.store, args.agent, args.prompt, args.model))
    agents = _load_agents(getattr(args, "agents", None))
    return asyncio.run(_with_runtime(args.store, agents, go))


async def _run_agent(store: str, spec: str, prompt: str, model: str | None) -> int:
    from stead.cli._stream import StreamPrinter, usage_line
    from stead.providers import model_from_string

    agents = _load_agents(spec)
    if len(agents) != 1:
        names = ", ".join(a.name for a in agents)
        raise UserError(f"{spec!r} holds {len(agents)} agents ({names}); name exactly one")
    agent = agents[0]
    if model is not None:
        agent.model = model_from_string(model)
    out = console()
    printer = StreamPrinter()
    async with Runtime(store, agents=[agent], on_progress=printer) as rt:
        run_id = await rt.start(agent, prompt)
        out.print(Text(f"run {run_id} · {agent.name} on {agent.model.model_name}", style="dim"))
        try:
            view = await rt.run(run_id)
        finally:
            printer.end()
    out.print(summary(view))
    out.print(usage_line(view, agent.model.model_name))
    return 0 if view.status is RunStatus.COMPLETED else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stead`` console script.

    A ``SteadError`` is one line on stderr and exit code 2 (1 is a run that did not
    complete). Output cut off by a closed pipe (``stead runs events RUN | head``) ends the
    command quietly, as other Unix tools do, with 141 (128 + SIGPIPE); Ctrl-C ends it with
    130, without a traceback.
    """
    args = _parser().parse_args(argv)
    try:
        _check_text(args)
        code = _dispatch(args)
        sys.stdout.flush()
    except SteadError as exc:
        _error(exc)
        code = 2
    except BrokenPipeError:
        if not _stdout_gone():
            raise  # a broken connection of our own: not the reader of our output leaving
        # Python's documented recipe: point stdout at devnull so the flush at exit does not
        # raise again, then leave quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 128 + signal.SIGPIPE
    except KeyboardInterrupt:
        code = 130
    if argv is None:
        sys.exit(code)
    return code


def _check_text(args: argparse.Namespace) -> None:
    """Arguments that are not text (bytes a shell passed that are not UTF-8 arrive as lone
    surrogates) are refused before any store is asked about them."""
    for name, value in vars(args).items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise UserError(
                    f"the {name} argument is not UTF-8 text ({value!r}); pass it as text"
                ) from None


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader closed it (poll says POLLERR)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return True  # no poll (not POSIX) or stdout is gone altogether


def _error(exc: BaseException) -> None:
    """``error: message`` on stderr, as plain text (the message may quote stored text)."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    line = Text("error:", style="red")
    line.append(f" {plain(str(exc))}")
    err.print(line)
