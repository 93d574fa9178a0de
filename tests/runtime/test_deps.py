"""Dependencies for tools: ``Runtime(deps=...)``, ``Agent(deps_type=...)``, ``ctx.deps``.

Deps are the worker's live objects, handed to every tool call (and reconcile function) of
the runs it drives, never written to the log; both ends are checked at construction. The
two-process case (a run resumed elsewhere gets the new process's deps) is in
``test_output_crash.py``.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mypy import api as mypy_api

import stead
from stead.runtime import Worker
from stead.testing import Reply, ScriptedModel

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Db:
    """Stands in for a connection pool: a live object, not data."""

    rows: dict[int, str] = field(default_factory=lambda: {42: "shipped"})
    queries: int = 0

    def status(self, order_id: int) -> str:
        self.queries += 1
        return self.rows.get(order_id, "unknown")


class Cache:
    pass


@stead.tool(effect="read_only")
def order_status(order_id: int, ctx: stead.ToolContext[Db]) -> str:
    """Look an order up in the database."""
    return ctx.deps.status(order_id)


def _agent(**kw: object) -> stead.Agent:
    model = ScriptedModel(
        [Reply(tool_calls=[("order_status", {"order_id": 42})]), "Order 42 has shipped."]
    )
    return stead.Agent("orders", model, [order_status], deps_type=Db, **kw)  # type: ignore[arg-type]


async def test_a_tool_reads_the_runtimes_deps(tmp_path: Path) -> None:
    db = Db()
    agent = _agent()
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent], deps=db) as rt:
        rid = await rt.start(agent, "Where is order 42?")
        view = await rt.run(rid)
        events = await rt.events(rid)
    assert view.status == "completed"
    assert db.queries == 1  # the very object, not a copy
    assert any(getattr(e.event, "content", None) == "shipped" for e in events)
    assert not any("Db(" in repr(e.event) for e in events)  # never recorded


def test_a_tool_typed_for_other_deps_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(
        stead.UserError, match=r"reads ctx\.deps as Db, but the agent's deps_type is Cache"
    ):
        stead.Agent("x", ScriptedModel([]), [order_status], deps_type=Cache)
    with pytest.raises(stead.UserError, match=r"the agent has no deps_type; pass deps_type=Db"):
        stead.Agent("x", ScriptedModel([]), [order_status])
    with pytest.raises(stead.UserError, match="deps_type takes a class"):
        stead.Agent("x", ScriptedModel([]), deps_type="Db")  # type: ignore[arg-type]


async def test_a_runtime_with_the_wrong_deps_is_refused_and_one_without_only_drives_none(
    tmp_path: Path,
) -> None:
    agent, url = _agent(), f"sqlite:///{tmp_path / 'r.db'}"
    with pytest.raises(stead.UserError, match="this Runtime's deps are a Cache"):
        stead.Runtime(url, agents=[agent], deps=Cache())
    with pytest.raises(stead.UserError, match=r"needs deps of type Db.*--deps module:factory"):
        Worker(url, [agent])  # a worker drives every run it claims: refused at once
    # Without deps the agent's runs are read and steered; driving one is refused, unwritten.
    async with stead.Runtime(url, agents=[agent]) as rt:
        rid = await rt.start(agent, "Where is order 42?")
        with pytest.raises(
            stead.UserError, match=r"needs deps of type Db.*pass Runtime\(deps=\.\.\.\)"
        ):
            await rt.run(rid)
        assert (await rt.get(rid)).status is stead.RunStatus.QUEUED
        assert [e.event.kind for e in await rt.events(rid)] == ["run_created"]
        await rt.cancel(rid, "no database here")
    async with stead.Runtime(url, agents=[agent], deps=Db()) as rt:
        assert (await rt.resume(rid)).output == "Order 42 has shipped."


# On a fresh clone mypy's cache is cold: it checks stead and the SDKs' types from scratch
# (on a busy machine, close to the default 120 s).
@pytest.mark.timeout(300)
def test_ctx_deps_is_typed_for_mypy_strict(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import stead

        class Db:
            def status(self, order_id: int) -> str:
                return "shipped"

        @stead.tool(effect="read_only")
        def ok(order_id: int, ctx: stead.ToolContext[Db]) -> str:
            return ctx.deps.status(order_id)

        @stead.tool(effect="read_only")
        def wrong(order_id: int, ctx: stead.ToolContext[Db]) -> int:
            return ctx.deps.status(order_id)

        @stead.tool(effect="read_only")
        def bare(ctx: stead.ToolContext) -> str:
            return str(ctx.run_id)
        """
    )
    path = tmp_path / "uses_deps.py"
    path.write_text(code)
    out, _, status = mypy_api.run(
        ["--strict", "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary", str(path)]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1, out
    assert (
        'uses_deps.py:14: error: Incompatible return value type (got "str", expected "int")'
        in (errors[0])
    )
    assert status == 1
