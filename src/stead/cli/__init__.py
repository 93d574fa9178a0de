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

import sys
from collections.abc import Sequence
from typing import Any


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``stead`` console script (``stead.cli._main.main`` does the work).

    ``stead --help`` is answered from the catalog of commands (``_catalog``) without
    importing the runtime, pydantic or rich: a help text should not cost a second."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["-h"], ["--help"]):
        from stead.cli._catalog import top_help

        sys.stdout.write(top_help())
        if argv is None:
            sys.exit(0)
        return 0
    from stead.cli._main import main as run

    return run(argv)


def __getattr__(name: str) -> Any:
    """``GROUPS`` and the parser live in ``_main``, imported when first asked for."""
    if name in ("GROUPS", "_parser"):
        from stead.cli import _main

        return getattr(_main, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
