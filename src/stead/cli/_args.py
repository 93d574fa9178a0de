"""argparse types for numbers, and the options ``stead worker``, ``stead executor`` and
``stead serve`` share.

A value out of range is refused by argparse itself (usage line, what was wrong, exit 2)
instead of reaching the runtime as a negative limit or lease."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import Any, TypedDict


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int no float holds
        return False


def positive(kind: Callable[[str], float], most: float = math.inf) -> Callable[[str], Any]:
    """An argparse type: a number above zero and at most ``most`` (a limit a store can take:
    SQLite refuses an integer beyond 2**63 with an ``OverflowError``, not a message)."""
    what = "a whole number" if kind is int else "a number"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not _finite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"must be more than zero, not {text}")
        if value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most:g}, not {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


DAY = 86_400.0
"""The longest any seconds option may be: a day is longer than any sane lease, poll or
grace, and far below what an event loop's timer takes (1e300 seconds overflows it)."""


def not_negative(text: str) -> float:
    """An argparse type: seconds, zero or more, at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not _finite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more, not {text}")
    if value > DAY:
        raise argparse.ArgumentTypeError(f"must be at most {DAY:g} seconds, not {text}")
    return value


def port(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, not {text}")
    return value


def add_token_options(parser: Any, *, env: str | None, when: str = "") -> None:
    """``--token-file`` and ``--token`` of a server (``stead serve``, ``stead executor
    serve``): the file first, since a secret in argv is readable by every local user."""
    also = f"; or ${env}, comma-separated" if env else ""
    parser.add_argument(
        "--token-file",
        default=None,
        help=f"{when}a file of NAME:SECRET lines, one token each (decisions record NAME){also}",
    )
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        help=f"{when}NAME:SECRET, repeatable; prefer --token-file: a secret on the command line "
        "is visible to every local user",
    )


ARGV_SECRET = (
    "warning: --token puts its secret on this process's command line, where every local user "
    "can read it (ps, /proc/PID/cmdline); use --token-file FILE{also} instead"
)
"""What a server started with ``--token`` says on stderr."""


def token_specs(args: argparse.Namespace, env: str | None) -> list[str]:
    """The ``NAME:SECRET`` specs of ``--token-file``, ``$env`` and ``--token``, in that order;
    a warning on stderr when ``--token`` put one on the command line."""
    from stead.server import read_token_file

    specs = read_token_file(args.token_file) if args.token_file else []
    if env:
        specs += [s.strip() for s in os.environ.get(env, "").split(",") if s.strip()]
    if args.token:
        also = f" or ${env}" if env else ""
        print(ARGV_SECRET.format(also=also), file=sys.stderr, flush=True)
        specs += list(args.token)
    return specs


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""How ``stead worker`` and ``stead serve`` log."""


def add_claim_options(parser: Any, *, concurrency: int, when: str = "") -> None:
    """``--concurrency`` and ``--poll`` of a worker (``stead worker``, ``stead serve --worker``):
    one definition, so both refuse the same values. ``when`` starts each help text."""
    parser.add_argument(
        "--concurrency",
        type=positive(int, 10_000),
        default=concurrency,
        help=f"{when}runs driven at once",
    )
    parser.add_argument(
        "--poll",
        type=positive(float, DAY),
        default=1.0,
        help=f"{when}seconds between claim polls",
    )


LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
"""What ``--log-level`` takes (any case)."""


def add_process_options(
    parser: Any, *, lease_ttl: float, lease_help: str, log_help: str = "logging level"
) -> None:
    """``--lease-ttl``, ``--grace`` and ``--log-level`` of a process that serves until SIGTERM
    (``stead worker``, ``stead executor``): one definition, so both refuse the same values."""
    parser.add_argument(
        "--lease-ttl", type=positive(float, DAY), default=lease_ttl, help=lease_help
    )
    parser.add_argument("--grace", type=not_negative, default=30.0, help="shutdown grace, seconds")
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help=log_help
    )


class Serving(TypedDict):
    """What ``Worker`` and the executor ``Pool`` both take from the options above."""

    concurrency: int
    lease_ttl: float
    poll_interval: float
    grace: float


def serving(args: argparse.Namespace) -> Serving:
    """``Serving`` from the parsed options (``--poll`` is ``poll_interval``)."""
    return Serving(
        concurrency=args.concurrency,
        lease_ttl=args.lease_ttl,
        poll_interval=args.poll,
        grace=args.grace,
    )
