"""The ``before_commit`` hook: the one place a test reaches into an append, on both backends.

Crash tests arm ``before_result_commit`` through this hook's default; production calls the
same hook on the same path (there is no "armed" branch to take). Here a test injects its own:
it sees every append, and whatever it raises leaves nothing written.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from _backends import Backend
from _builders import T0, RunBuilder, result

from stead.core.events import Event
from stead.errors import Conflict
from stead.store.sql._store import crash_before_result

pytestmark = pytest.mark.timeout(60)


class Injected(Exception):
    """What the hook raises when told to fail."""


class Hook:
    """Notes what each append was about to commit; raises while ``fail`` is set."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list[str]]] = []
        self.fail = False

    def __call__(self, run_id: str, events: Sequence[Event]) -> None:
        self.seen.append((run_id, [e.kind for e in events]))
        if self.fail:
            raise Injected(run_id)


async def test_before_commit_sees_every_append_and_what_it_raises_writes_nothing(
    backend: Backend,
) -> None:
    hook = Hook()
    store = backend.open(before_commit=hook)
    b = RunBuilder("run-1")
    await b.create(store)
    b.start()
    b.tool_turn(calls=1, results=False)
    first = await b.flush(store, now=T0 + 1)
    assert hook.seen == [("run-1", [e.kind for e in b.log[1:]])]

    b.add(result(0, "call_0_0"))
    hook.fail = True
    with pytest.raises(Injected):
        await b.flush(store, now=T0 + 2)
    assert (await store.get_run("run-1")).last_seq == first
    assert [s.event for s in await store.read_events("run-1")] == b.log[:first]
    kinds = backend.sql("SELECT kind FROM events WHERE run_id = ?", "run-1")
    assert ("tool_result_recorded",) not in kinds

    hook.fail = False  # the same batch commits now, once: the failed one left no result behind
    b.written = first
    assert await b.flush(store, now=T0 + 3) == first + 1
    assert [s.event for s in await store.read_events("run-1")] == b.log
    assert [kinds for _, kinds in hook.seen[1:]] == [["tool_result_recorded"]] * 2


async def test_a_refused_append_is_refused_whatever_the_hook_saw(backend: Backend) -> None:
    hook = Hook()
    store = backend.open(before_commit=hook)
    b = RunBuilder("run-1")
    await b.create(store)
    b.start()
    with pytest.raises(Conflict, match="expected to append after seq 5"):
        await store.append("run-1", b.pending, expected_seq=5, epoch=0, status=b.status, now=T0)
    assert (await store.get_run("run-1")).last_seq == 1


async def test_by_default_the_hook_is_the_named_crash_point(backend: Backend) -> None:
    """What ``STEAD_CRASH_AT=before_result_commit`` kills at, in ``test_store_processes``
    and ``tests/runtime/test_crash.py``; unarmed (as in this suite) it returns at once."""
    store = backend.open()
    assert store.before_commit is crash_before_result  # type: ignore[attr-defined]
    crash_before_result("run-1", [result(0, "c")])
