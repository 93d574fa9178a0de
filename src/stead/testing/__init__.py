"""What users need to test their own agents: a scripted model, crash points, an effect ledger.

    from stead.testing import ScriptedModel, Reply, arm_crash, EffectLedger

Crash points kill the process with SIGKILL at a named durability boundary (see
``CRASH_POINTS``); arm them in a child process with ``STEAD_CRASH_AT=<point>[:tool][#n]``.
``temporary_postgres()`` starts a throwaway PostgreSQL server from the machine's binaries;
``PostgresServer`` is one a test may also crash (SIGKILL) and start again on the same data.
``VirtualClock`` runs a Runtime and its event loop in virtual time: leases, polls, backoffs and
deadlines pass without being waited for.
"""

from stead._crash import ENV as CRASH_ENV
from stead._crash import POINTS as CRASH_POINTS
from stead._crash import arm as arm_crash
from stead._crash import disarm as disarm_crashes
from stead.testing._clock import VirtualClock
from stead.testing._commits import SQLiteCommits
from stead.testing._ledger import EffectLedger, assert_valid_history
from stead.testing._postgres import PostgresServer, postgres_bindir, temporary_postgres
from stead.testing._scripted import Reply, ScriptedModel

__all__ = [
    "CRASH_ENV",
    "CRASH_POINTS",
    "EffectLedger",
    "PostgresServer",
    "Reply",
    "SQLiteCommits",
    "ScriptedModel",
    "VirtualClock",
    "arm_crash",
    "assert_valid_history",
    "disarm_crashes",
    "postgres_bindir",
    "temporary_postgres",
]
