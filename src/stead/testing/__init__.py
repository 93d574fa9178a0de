"""What users need to test their own agents: a scripted model, crash points, a record of side
effects.

    from stead.testing import ScriptedModel, Reply, arm_crash, SideEffects

Crash points kill the process with SIGKILL at a named durability boundary (see
``CRASH_POINTS``); arm them in a child process with ``STEAD_CRASH_AT=<point>[:tool][#n]``.
``temporary_postgres()`` starts a throwaway PostgreSQL server from the machine's binaries;
``PostgresServer`` is one a test may also crash (SIGKILL) and start again on the same data.
``VirtualClock`` runs a Runtime and its event loop in virtual time: leases, polls, backoffs and
deadlines pass without being waited for.
"""

import warnings

from stead._crash import ENV as CRASH_ENV
from stead._crash import POINTS as CRASH_POINTS
from stead._crash import arm as arm_crash
from stead._crash import disarm as disarm_crashes
from stead.testing._clock import VirtualClock
from stead.testing._commits import SQLiteCommits
from stead.testing._postgres import PostgresServer, postgres_bindir, temporary_postgres
from stead.testing._scripted import Reply, ScriptedModel
from stead.testing._side_effects import SideEffects, assert_valid_history


def __getattr__(name: str) -> object:
    """``EffectLedger``, the old name of ``SideEffects``: still importable, with a
    ``DeprecationWarning`` ("ledger" names the execution ledger alone)."""
    if name == "EffectLedger":
        warnings.warn(
            "stead.testing.EffectLedger is now stead.testing.SideEffects",
            DeprecationWarning,
            stacklevel=2,
        )
        return SideEffects
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CRASH_ENV",
    "CRASH_POINTS",
    "PostgresServer",
    "Reply",
    "SQLiteCommits",
    "ScriptedModel",
    "SideEffects",
    "VirtualClock",
    "arm_crash",
    "assert_valid_history",
    "disarm_crashes",
    "postgres_bindir",
    "temporary_postgres",
]
