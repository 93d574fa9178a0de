"""The ``stead`` command: parse, call the runtime, render. No logic of its own.

    stead demo                          crash-and-recover demo on a temporary SQLite store
    stead run MOD:AGENT PROMPT [--model M]
                                        run an agent, streaming its text; M is a model
                                        string such as anthropic:claude-sonnet-4-6
    stead runs list [--status S] [--agent A] [--conversation C] [--since 2h] [--json]
                                        runs in the store, most recently active first
    stead runs show RUN [--json]        one run's timeline
    stead runs events RUN [--json]      one run's raw events
    stead runs watch RUN                follow a run live until it rests
    stead effects list RUN [--json]     a run's effects by key: how each ended, the
                                        reconciler's verdicts, redispatches
    stead effects show RUN EFFECT       one effect's events
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
every other command refuses one that does not exist. RUN is a run id, or a start of one of at
least 4 characters (``runs list`` shows 12), with or without ``run_``, that starts no other.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Final

from rich.console import Console
from rich.text import Text

from stead.cli import _effects, _executor, _lifecycle, _run, _runs, _serve, _steer, _worker
from stead.cli._command import Command
from stead.cli._render import plain
from stead.errors import SteadError, UserError

GROUPS: Final[tuple[tuple[Command, ...], ...]] = (
    _run.COMMANDS,  # demo, run
    _runs.COMMANDS,  # runs list|show|events|watch|export|import|prune|fork
    _lifecycle.COMMANDS,  # store copy
    _effects.COMMANDS,  # effects list|show
    _steer.COMMANDS,  # resume, approve, deny, decide, answer, cancel
    _worker.COMMANDS,  # worker
    _executor.COMMANDS,  # executor
    _serve.COMMANDS,  # serve
)
"""Every subcommand, by the module of its group, in the order ``stead --help`` lists them.
A new command is a function decorated ``@command`` or ``@runtime_command``
(``stead.cli._command``) in its group's ``COMMANDS``; a new group is its module here."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stead", description="Durable LLM agent runs.")
    p.add_argument(
        "--store",
        default=os.environ.get("STEAD_STORE", "sqlite:///stead.db"),
        help="store URL (default $STEAD_STORE or sqlite:///stead.db)",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        for command in group:
            command.add_to(sub)
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
                        positional.help = (
                            "a run id, or 4+ of its first characters that start no other"
                        )
                if not any(a.dest == "store" for a in child._actions):
                    child.add_argument(
                        "--store",
                        default=argparse.SUPPRESS,
                        help="store URL (as before the command)",
                    )
                _store_after(child)


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
        handler: Callable[[argparse.Namespace], int] = args.handler
        code = handler(args)
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
