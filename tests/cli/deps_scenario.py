"""An agent whose pooled tool reports the deps it was handed (``stead executor --deps``).

Imported by the test (the run's owner, with deps of its own) and by the ``stead executor``
process it starts from this folder, whose ``--deps deps_scenario:make_db`` is called there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import stead
from stead.testing import Reply, ScriptedModel

QUEUE = "with-deps"


@dataclass
class Db:
    """Stands for a live client: made in the process that uses it."""

    name: str
    pid: int


def make_db() -> Db:
    """The executor's deps (``--deps deps_scenario:make_db``)."""
    return Db(name="executor", pid=os.getpid())


@stead.tool(effect="read_only", queue=QUEUE)
async def whose_db(ctx: stead.ToolContext[Db]) -> str:
    """Say whose deps this call got."""
    return f"{ctx.deps.name} {ctx.deps.pid}"


def agent() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("whose_db", {})]), "done"])
    return stead.Agent("deps-pooled", model, [whose_db], deps_type=Db)
