"""argparse types for numbers, and the options ``stead worker``, ``stead executor`` and
``stead serve`` share.

A value out of range is refused by argparse itself (usage line, what was wrong, exit 2)
instead of reaching the runtime as a negative limit or lease."""

from __future__ import annotations

import argparse
import math
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


def not_negative(text: str) -> float:
    """An argparse type: seconds, zero or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not _finite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more, not {text}")
    return value


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
        "--poll", type=positive(float), default=1.0, help=f"{when}seconds between claim polls"
    )


LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
"""What ``--log-level`` takes (any case)."""


def add_process_options(
    parser: Any, *, lease_ttl: float, lease_help: str, log_help: str = "logging level"
) -> None:
    """``--lease-ttl``, ``--grace`` and ``--log-level`` of a process that serves until SIGTERM
    (``stead worker``, ``stead executor``): one definition, so both refuse the same values."""
    parser.add_argument("--lease-ttl", type=positive(float), default=lease_ttl, help=lease_help)
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
