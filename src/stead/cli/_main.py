"""The whole ``stead`` command: the parser built from every command group, and ``main``
with its error handling (``stead.cli.main`` imports this for every command but the
top-level help)."""

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
from stead.cli._catalog import DESCRIPTION, STORE_HELP
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
    p = argparse.ArgumentParser(prog="stead", description=DESCRIPTION)
    p.add_argument(
        "--store",
        default=os.environ.get("STEAD_STORE", "sqlite:///stead.db"),
        help=STORE_HELP,
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
