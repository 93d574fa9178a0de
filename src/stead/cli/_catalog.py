"""The commands ``stead --help`` lists, with the help line each one's module gives it: the top
level help is made from this table alone, so it needs none of the command modules (which
import the runtime). ``tests/cli/test_commands.py`` keeps it equal to ``GROUPS``."""

from __future__ import annotations

import argparse
from typing import Final

DESCRIPTION: Final = "Durable LLM agent runs."
STORE_HELP: Final = "store URL (default $STEAD_STORE or sqlite:///stead.db)"

COMMANDS: Final[tuple[tuple[str, str], ...]] = (
    ("demo", "crash an agent after a side effect and recover it"),
    ("run", "run an agent on a prompt, streaming its text"),
    ("runs", "list, inspect, export, import, prune and fork runs"),
    ("store", "whole stores"),
    ("effects", "a run's effects: model and tool calls, by key"),
    ("resume", "continue a run"),
    ("approve", "approve a gated call"),
    ("deny", "deny a gated call"),
    ("decide", "settle a call whose outcome is unknown"),
    ("answer", "answer a question a run asked"),
    ("cancel", "cancel a run"),
    ("worker", "claim runs from the store and drive them until SIGTERM"),
    ("executor", "perform effects (tool calls routed to --queues) from the store until SIGTERM"),
    ("serve", "HTTP API, live stream and dashboard for the runs in the store"),
)
"""(name, help) of every command, in the order ``stead --help`` lists them."""


def top_help() -> str:
    """What ``stead --help`` prints: the parser of ``stead.cli._main`` lists the same."""
    p = argparse.ArgumentParser(prog="stead", description=DESCRIPTION)
    p.add_argument("--store", help=STORE_HELP)
    sub = p.add_subparsers(dest="command", required=True)
    for name, help in COMMANDS:
        sub.add_parser(name, help=help)
    return p.format_help()
