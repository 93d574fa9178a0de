"""``stead resume|approve|deny|decide|answer|cancel``: steer a run of the store, then say who
drives it next."""

from __future__ import annotations

import argparse
import os

from rich.console import Console
from rich.text import Text

from stead.cli._command import add_deps_option, runtime_command
from stead.cli._hints import Hints
from stead.cli._render import plain, summary
from stead.core.states import RESUMABLE, RunStatus
from stead.errors import LeaseHeld, UserError
from stead.runtime import Runtime, RunView
from stead.store import CLAIMABLE

_AGENTS_NOW = "module:attr with the run's agent(s): continue the run now"


def _resume_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id")
    p.add_argument("--agents", required=True, help="module:attr with the run's agent(s)")
    add_deps_option(p)
    p.add_argument("--reason", default="resumed from the CLI")


@runtime_command("resume", "continue a run", _resume_arguments)
async def _resume(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    out.print(summary(await rt.resume(args.run_id, reason=args.reason), Hints.of(args)))
    return 0


def _gate_arguments(p: argparse.ArgumentParser) -> None:
    """What ``approve`` and ``deny`` share."""
    p.add_argument("run_id")
    p.add_argument("call_id")
    p.add_argument("--token", default=None, help="the approval's resume token")
    p.add_argument("--by", default=os.environ.get("USER", "cli"))
    p.add_argument("--agents", default=None, help=_AGENTS_NOW)
    add_deps_option(p, when="with --agents: ")


def _approve_arguments(p: argparse.ArgumentParser) -> None:
    _gate_arguments(p)
    p.add_argument("--args", default=None, help="edited arguments as JSON")


def _deny_arguments(p: argparse.ArgumentParser) -> None:
    _gate_arguments(p)
    p.add_argument("--reason", required=True)


@runtime_command("approve", "approve a gated call", _approve_arguments)
async def _approve(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    import json

    try:
        edited = json.loads(args.args) if args.args else None
    except ValueError as exc:
        raise UserError(f"--args is not JSON: {exc}") from exc
    view = await rt.approve(
        args.run_id, args.call_id, token=args.token, by=args.by, arguments=edited
    )
    return await _then(rt, view, out, Hints.of(args), drive=True)


@runtime_command("deny", "deny a gated call", _deny_arguments)
async def _deny(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    view = await rt.deny(args.run_id, args.call_id, args.reason, token=args.token, by=args.by)
    return await _then(rt, view, out, Hints.of(args), drive=True)


def _decide_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id")
    p.add_argument("call_id")
    p.add_argument("decision", choices=["happened", "not_happened", "skip"])
    p.add_argument("--result", default=None, help="with happened: the call's result")
    p.add_argument("--reason", default="")
    p.add_argument("--token", default=None)
    p.add_argument("--by", default=os.environ.get("USER", "cli"))
    p.add_argument("--agents", default=None, help=_AGENTS_NOW)
    add_deps_option(p, when="with --agents: ")


@runtime_command("decide", "settle a call whose outcome is unknown", _decide_arguments)
async def _decide(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    options = {k: getattr(args, k) for k in ("token", "result", "reason", "by")}
    view = await rt.decide(args.run_id, args.call_id, args.decision, **options)
    return await _then(rt, view, out, Hints.of(args), drive=True)


def _answer_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id")
    p.add_argument("call_id")
    p.add_argument("value", help="the answer: JSON for a typed answer, else plain text")
    p.add_argument("--token", default=None, help="the question's resume token")
    p.add_argument("--by", default=os.environ.get("USER", "cli"))
    p.add_argument("--agents", required=True, help="module:attr with the run's agent(s)")
    add_deps_option(p, when="to continue the run here: ")


@runtime_command("answer", "answer a question a run asked", _answer_arguments)
async def _answer(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    """Answer a question tool's call: the answer is checked against the question's answer
    type (so --agents must name the run's agent), recorded, and is the call's result; the
    run then continues in this process. An answer that does not fit is refused and the run
    keeps waiting."""
    view = await rt.answer(args.run_id, args.call_id, args.value, token=args.token, by=args.by)
    return await _then(rt, view, out, Hints.of(args), drive=True)


def _cancel_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id")
    p.add_argument("--reason", default="cancelled from the CLI")


@runtime_command("cancel", "cancel a run", _cancel_arguments)
async def _cancel(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    view = await rt.cancel(args.run_id, args.reason)
    hints = Hints.of(args).for_run((await rt.state(view.run_id)).config)
    return await _then(rt, view, out, hints, cancel=True)


async def _then(
    rt: Runtime,
    view: RunView,
    out: Console,
    hints: Hints,
    *,
    drive: bool = False,
    cancel: bool = False,
) -> int:
    """After a decision or a cancel: the run's state, who drives it now, and with
    ``--agents`` (``drive``) the run driven here at once, unless someone holds it or its
    agent needs ``--deps`` that were not given.

    The decision is recorded whoever drives the run next, so this succeeds (0) either way:
    a worker that holds the run, or claims it between our look and our claim, goes on with
    it, and the line says so instead of driving here."""
    if drive:
        out.print(Text("recorded: the decision is in the run's log", style="dim"))
    out.print(summary(view, hints))
    driving = drive and _drivable(rt, view) and await _holder(rt, view) is None
    out.print(await _next_step(rt, view, hints, driving, cancel=cancel))
    if driving:
        try:
            view = await rt.run(view.run_id)
        except LeaseHeld:
            holder = await _holder(rt, view) or "another process"
            why = f"{holder} took it over meanwhile and goes on with it, not this process"
            out.print(Text(f"next: {plain(why)}", style="dim", no_wrap=True, overflow="ignore"))
            return 0
        out.print(summary(view, hints))
    return 0


def _drivable(rt: Runtime, view: RunView) -> bool:
    """Whether this process can drive the run: it has the run's agent, and its deps when
    the agent has a ``deps_type``."""
    agent = rt.agents.get(view.agent)
    return agent is not None and (agent.deps_type is None or rt.deps is not None)


async def _holder(rt: Runtime, view: RunView) -> str | None:
    """Who holds the run's lease now (None: nobody, or a lease that lapsed)."""
    record = await rt.store.get_run(view.run_id)
    return record.lease_owner if (record.lease_expires_at or 0) > rt.clock() else None


async def _next_step(
    rt: Runtime, view: RunView, hints: Hints, driving: bool, *, cancel: bool
) -> Text:
    """Who drives the run now, in one line; a command in it works as printed."""
    status = view.status
    resume = hints.resume(view.run_id)
    # A command given --agents this process was not (the run's own, as it records them)
    # loads its agents and deps there.
    if resume is not None and (view.agent not in rt.agents or _drivable(rt, view)):
        here = f"`{resume}` continues it here"
    else:  # in words: a command missing its --agents or --deps would not work as printed
        here = (
            "stead resume continues it here, given --agents (and --deps, if agent "
            f"{view.agent!r} has a deps_type)"
        )
    if driving and status.value in CLAIMABLE:
        why = "continuing now in this process"
    elif status is RunStatus.AWAITING_APPROVAL:
        why = "it still waits on a person for the calls above"
    elif status.value in CLAIMABLE:
        owner = await _holder(rt, view)
        if owner is not None and cancel:
            why = f"its worker {owner} stops it at its next step (`{hints.watch(view.run_id)}`)"
        elif owner is not None:
            why = f"its worker {owner} goes on with it (`{hints.watch(view.run_id)}` follows it)"
        else:
            why = f"a worker with agent {view.agent!r} will pick it up, or {here}"
    elif status in RESUMABLE:
        why = f"nothing drives it; {here}"
    else:
        why = "nothing more to do"
    return Text(f"next: {plain(why)}", style="dim", no_wrap=True, overflow="ignore")


COMMANDS = (_resume, _approve, _deny, _decide, _answer, _cancel)
