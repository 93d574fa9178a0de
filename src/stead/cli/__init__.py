"""The ``stead`` command: parse, call the runtime, render. No logic of its own.

    stead demo                          crash-and-recover demo on a temporary SQLite store
    stead run MOD:AGENT PROMPT [--model M]
                                        run an agent, streaming its text; M is a model
                                        string such as anthropic:claude-sonnet-4-6
    stead runs list [--status S] [--agent A] [--since 2h] [--json]
                                        runs in the store, most recently active first
    stead runs show RUN [--json]        one run's timeline
    stead runs events RUN [--json]      one run's raw events
    stead runs watch RUN                follow a run live until it rests
    stead resume RUN --agents MOD:ATTR  continue a run (requeues failed/cancelled ones)
    stead approve RUN CALL [--args J] [--agents MOD:ATTR]
                                        approve a gated call (optionally edited); with
                                        --agents, continue the run at once
    stead deny RUN CALL --reason R      deny it; the model reads the reason
    stead decide RUN CALL happened|not_happened|skip [--result R]
                                        settle a call whose outcome is unknown
    stead answer RUN CALL VALUE --agents MOD:ATTR
                                        answer a question the run asked
    stead cancel RUN [--reason R]       cancel a run
    stead worker --agents MOD:ATTR [--concurrency N]
                                        claim and drive runs until SIGTERM

The store comes from ``--store`` (before or after the command) or ``$STEAD_STORE`` (default
``sqlite:///stead.db``). Only ``run``, ``worker``, ``serve`` and ``demo`` create a SQLite file;
every other command refuses one that does not exist. RUN is a run id or any unique start of
one (``runs list`` shows 12 characters), with or without ``run_``.
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
from stead.cli._ids import resolve, short_id
from stead.cli._render import console, plain, summary, timeline
from stead.core.events import encode
from stead.core.states import RESUMABLE, RunStatus
from stead.errors import SteadError, UserError
from stead.runtime import Agent, Runtime, RunView
from stead.store import CLAIMABLE, open_store


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
    lst.add_argument("--agent", default=None, help="only runs of the agent with this name")
    lst.add_argument(
        "--since",
        default=None,
        help="only runs active since: a span (90s, 15m, 2h, 3d, 1w) or an ISO date or time",
    )
    lst.add_argument("--limit", type=positive(int, 100_000), default=50, help="at most this many")
    lst.add_argument("--json", action="store_true", help="one JSON object per run, per line")
    show = rsub.add_parser("show", help="a run's timeline")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true", help="the run as one JSON object")
    ev = rsub.add_parser("events", help="a run's raw events")
    ev.add_argument("run_id")
    ev.add_argument("--json", action="store_true", help="one JSON object per line")
    watch = rsub.add_parser(
        "watch",
        help="follow a run live until it rests",
        description="Follow a run live: its timeline grows as events are appended by any "
        "process (a worker elsewhere included), until the run completes, fails, is cancelled, "
        "times out or waits on a person; then its final state. Streamed text exists only in "
        "the process driving the run, so from another process each reply appears when its "
        "turn is recorded. Ctrl-C stops watching (the run goes on). Exit 0 when the run "
        "completed or waits on a person, 1 otherwise.",
    )
    watch.add_argument("run_id")

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

    from stead.cli._answer import add_answer_parser

    add_answer_parser(sub)
    can = sub.add_parser("cancel", help="cancel a run")
    can.add_argument("run_id")
    can.add_argument("--reason", default="cancelled from the CLI")

    from stead.cli._worker import add_worker_parser

    add_worker_parser(sub)
    from stead.cli._serve import add_serve_parser

    add_serve_parser(sub)
    _store_after(p)
    return p


def _store_after(parser: argparse.ArgumentParser) -> None:
    """``--store`` after the command too (``stead runs list --store X``): every command's
    parser takes it, with no default of its own, so the one given before still counts. And
    every RUN argument says that a prefix will do."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in {id(c): c for c in action.choices.values()}.values():
                for positional in child._actions:
                    if positional.dest == "run_id" and positional.help is None:
                        positional.help = "a run id or any unique start of one (runs list)"
                if not any(a.dest == "store" for a in child._actions):
                    child.add_argument(
                        "--store",
                        default=argparse.SUPPRESS,
                        help="store URL (as before the command)",
                    )
                _store_after(child)


async def _with_runtime(
    url: str, agents: list[Agent], fn: Callable[[Runtime], Awaitable[int]]
) -> int:
    # Every command run here reads or steers runs that exist: a SQLite file that does not
    # exist is a mistyped path, not a new store to create (run/worker/serve/demo create one).
    async with Runtime(open_store(url, create=False), agents=agents) as rt:
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
        if cmd == "runs" and args.runs_command == "list":
            return await _runs_list(rt, args, out)
        args.run_id = await resolve(rt.store, args.run_id)
        if cmd == "runs":
            if args.runs_command == "watch":
                from stead.cli._watch import watch

                return await watch(rt, args.run_id, out)
            if args.runs_command == "show":
                if args.json:
                    from stead.cli._list import load_row, show_json

                    row = await load_row(rt, await rt.store.get_run(args.run_id))
                    print(json.dumps(show_json(row), ensure_ascii=False))
                    return 0
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
        elif cmd == "answer":
            view = await rt.answer(
                args.run_id, args.call_id, args.value, token=args.token, by=args.by
            )
        elif cmd == "cancel":
            view = await rt.cancel(args.run_id, args.reason)
        else:  # pragma: no cover - argparse refuses unknown commands
            raise UserError(f"unknown command {cmd}")
        if cmd == "resume":
            out.print(summary(view))
            return 0
        out.print(summary(view))
        driving = cmd in ("approve", "deny", "decide", "answer") and bool(rt.agents)
        out.print(await _next_step(rt, view, driving, cancel=cmd == "cancel"))
        if driving:
            view = await rt.run(args.run_id)
            out.print(summary(view))
        return 0

    if cmd == "run":
        return asyncio.run(_run_agent(args.store, args.agent, args.prompt, args.model))
    agents = _load_agents(getattr(args, "agents", None))
    return asyncio.run(_with_runtime(args.store, agents, go))


async def _runs_list(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    """``runs list``: filtered by status, agent and activity, newest activity first."""
    import time

    from stead.cli._list import load_row, row_json, runs_table, since

    now = time.time()
    cutoff = since(args.since, now) if args.since is not None else None
    records = await rt.list_runs(
        status=args.status, agent=args.agent, limit=args.limit if cutoff is None else 10_000
    )
    if cutoff is not None:
        records = [r for r in records if r.updated_at >= cutoff][: args.limit]
    rows = [await load_row(rt, r) for r in records]
    if args.json:
        for row in rows:
            print(json.dumps(row_json(row, now), ensure_ascii=False))
    else:
        out.print(runs_table(rows, now, width=out.width))
    return 0


async def _next_step(rt: Runtime, view: RunView, driving: bool, *, cancel: bool) -> Text:
    """After a decision or a cancel: who drives the run now, in one line."""
    rid = short_id(view.run_id)
    status = view.status
    if driving and status.value in CLAIMABLE:
        why = "continuing now in this process"
    elif status is RunStatus.AWAITING_APPROVAL:
        why = "it still waits on a person for the calls above"
    elif status.value in CLAIMABLE:
        record = await rt.store.get_run(view.run_id)
        owner = record.lease_owner if (record.lease_expires_at or 0) > rt.clock() else None
        if owner is not None and cancel:
            why = f"its worker {owner} stops it at its next step (`stead runs watch {rid}`)"
        elif owner is not None:
            why = f"its worker {owner} goes on with it (`stead runs watch {rid}` follows it)"
        else:
            why = (
                "a worker (`stead worker --agents MOD:ATTR`) will pick it up, or run "
                f"`stead resume {rid} --agents MOD:ATTR` to continue it here"
            )
    elif status in RESUMABLE:
        why = f"nothing drives it; `stead resume {rid} --agents MOD:ATTR` would continue it"
    else:
        why = "nothing more to do"
    return Text(f"next: {plain(why)}", style="dim")


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
