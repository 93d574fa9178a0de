"""Logs written by earlier stead code still load, to the same meaning.

``logs/*.json`` hold real runs as the store wrote them (``make_logs.py``), and
``logs/sqlite-*.db`` is a whole SQLite store file written by the same code. Every change of
the events, the codec, the snapshot or the store must keep them readable: a row that changes
shape needs an upcaster, not a new fixture. Never regenerate these files to make this pass.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from make_logs import meaning, plain

import stead
from stead.core.events import EVENT_TYPES
from stead.core.fold import STATE_VERSION, RunState, apply, fold
from stead.store.sql._base import decode_row

LOGS = Path(__file__).parent / "logs"
RUNS = sorted(p for p in LOGS.glob("*.json") if not p.stem.startswith("every_kind"))
EVERY_KIND = sorted(LOGS.glob("every_kind*.json"))


def _doc(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _events(doc: dict[str, Any]) -> list[tuple[int, Any]]:
    run_id = doc["meaning"]["run_id"] if "meaning" in doc else doc["name"]
    return [
        (seq, decode_row(run_id, seq, kind, version, data))
        for seq, kind, version, data in doc["rows"]
    ]


def test_there_are_golden_logs() -> None:
    assert len(RUNS) >= 6
    assert (LOGS / "every_kind.json").exists()
    assert list(LOGS.glob("sqlite-*.db"))


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_a_golden_log_folds_to_what_it_meant(path: Path) -> None:
    doc = _doc(path)
    state = fold(e for _, e in _events(doc))
    assert meaning(state) == doc["meaning"]


@pytest.mark.parametrize("path", [p for p in RUNS if _doc(p)["snapshot"]], ids=lambda p: p.stem)
def test_a_golden_snapshot_plus_its_tail_means_the_same(path: Path) -> None:
    doc = _doc(path)
    snap = doc["snapshot"]
    state = RunState.from_json(snap["state"])  # an older version is upcast, never refused
    assert state.seq == snap["seq"]
    for seq, event in _events(doc):
        if seq > snap["seq"]:
            apply(state, event, seq)
    assert meaning(state) == doc["meaning"]


def test_the_golden_logs_hold_every_kind_and_the_current_snapshot_version() -> None:
    """A new event kind or snapshot version needs a log written by the code that added it
    (``make_logs.py every_kind-vN`` / ``NAME-vN``), so the next change must still read it."""
    kinds = {row[1] for p in EVERY_KIND for row in _doc(p)["rows"]}
    assert set(EVENT_TYPES) - kinds == set()
    versions = {_doc(p)["snapshot"]["state"]["v"] for p in RUNS if _doc(p)["snapshot"]}
    assert STATE_VERSION in versions and min(versions) < STATE_VERSION, versions


@pytest.mark.parametrize("path", EVERY_KIND, ids=lambda p: p.stem)
def test_every_kind_of_row_decodes_to_the_same_fields(path: Path) -> None:
    doc = _doc(path)
    events = [e for _, e in _events(doc)]
    assert len(events) == len(doc["fields"])
    for event, want in zip(events, doc["fields"], strict=True):
        got = plain(event)
        # A field added since the file was written (RunCompleted.data, an assistant
        # message's settings, a request's final, RunCreated.history and .attachments) reads
        # as its default; the rest as written.
        assert {k: v for k, v in got.items() if k in want} == want
        for f in dataclasses.fields(event):
            if f.name in want:
                continue
            factory = f.default_factory
            default = factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
            # Empty is empty whether plain() gave a list and the default is a tuple.
            assert got[f.name] == default or (not got[f.name] and not default), f.name
    assert len({row[1] for row in doc["rows"]}) == len(doc["rows"])


async def test_a_store_file_written_by_earlier_code_still_loads(tmp_path: Path) -> None:
    (source,) = LOGS.glob("sqlite-*.db")
    copy = tmp_path / "old.db"
    shutil.copy(source, copy)
    commit = source.stem.partition("-")[2]  # the file holds the runs that commit wrote
    written = [p for p in RUNS if _doc(p)["written_by"].startswith(commit)]
    expected = {_doc(p)["meaning"]["run_id"]: _doc(p)["meaning"] for p in written}
    async with stead.Runtime(f"sqlite:///{copy}") as rt:
        records = await rt.store.list_runs(limit=100)
        assert {r.run_id for r in records} == set(expected)
        for rid, want in expected.items():
            state = await rt.state(rid)
            got = meaning(state)
            # The file's runs were made by the same scenarios, so all but timing-free
            # figures agree; statuses, outputs, conversations and calls must.
            for key in ("status", "output", "seq", "conversation", "approvals", "turn_index"):
                assert got[key] == want[key], (rid, key)
            assert [e.seq for e in await rt.events(rid)] == list(range(1, want["seq"] + 1))


def test_the_children_log_holds_both_kinds_of_child_wait() -> None:
    """``children.json``: a call that waited on an ``agent_tool`` child (its result
    ``source="child"``) and one whose handler waited on a ``run_child`` child (the wait
    ended by ``approve``, the handler's own result after it)."""
    events = [e for _, e in _events(_doc(LOGS / "children.json"))]
    waits = [e for e in events if getattr(e, "kind", "") == "approval_requested"]
    assert [w.reason for w in waits] == ["child", "child"]
    assert [w.payload.get("index") for w in waits] == [None, 0]
    results = {e.name: e for e in events if getattr(e, "kind", "") == "tool_result_recorded"}
    assert results["writer"].source == "child"
    assert results["draft"].source == "executed" and results["draft"].content.startswith("drafted")
    decided = [e.decision for e in events if getattr(e, "kind", "") == "approval_decided"]
    assert decided == ["answer", "approve"]
