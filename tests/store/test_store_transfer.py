"""Export and import: the golden logs round-trip byte for byte through both stores, and a
file that is not one this code reads is refused naming its line, with nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stead.core import transfer
from stead.core.event_codec import decode
from stead.errors import Conflict, ImportFileError, UserError
from stead.store import SQLiteStore, Store
from stead.store.lifecycle import (
    export_lines,
    parse,
    select_runs,
    sql_store,
    write,
)

GOLDEN = Path(__file__).parent.parent / "golden" / "logs"
LOGS = sorted(GOLDEN.glob("*.json"))
GOLDEN_TEXT = {p.name: p.read_text() for p in LOGS}


def golden_file(path: Path) -> list[str]:
    """A golden log as an export file: its rows as the store wrote them, at fixed times."""
    doc = json.loads(path.read_text())
    rows = doc["rows"]
    created = json.loads(rows[0][3])
    status = doc["meaning"]["status"] if "meaning" in doc else "failed"
    rid = created["run_id"]
    lines = [transfer.header()]
    lines.append(
        transfer.line(
            "run",
            run_id=rid,
            agent=created["agent"],
            session_id=created.get("session_id", ""),
            correlation_id=created.get("correlation_id", ""),
            status=status,
            last_seq=len(rows),
            created_at=1000.0,
            updated_at=1000.0 + len(rows) / 8,
        )
    )
    for seq, kind, version, data in rows:
        lines.append(
            transfer.line(
                "event",
                run_id=rid,
                seq=seq,
                kind=kind,
                version=version,
                created_at=1000.0 + seq / 8,
                data=json.loads(data),
            )
        )
    lines.append(transfer.line("end", runs=1, records=len(lines) - 1))
    return [text + "\n" for text in lines]


async def export_all(store: Store) -> str:
    s = sql_store(store)
    return "".join([line async for line in export_lines(s, await select_runs(s))])


def test_the_golden_logs_hold_every_event_kind() -> None:
    from stead.core.events import EVENT_TYPES

    kinds = {row[1] for path in LOGS for row in json.loads(path.read_text())["rows"]}
    assert kinds == set(EVENT_TYPES)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.stem)
async def test_export_import_export_is_byte_identical(
    store: Store, tmp_path: Path, path: Path
) -> None:
    original = golden_file(path)
    await write(sql_store(store), parse(path.name, original), now=2000.0)
    first = await export_all(store)
    assert first == "".join(original)  # the store kept every row as the file said

    other = SQLiteStore(tmp_path / "other.db")
    try:
        await write(other, parse("first", first.splitlines(keepends=True)), now=3000.0)
        second = await export_all(other)
    finally:
        await other.close()
    assert second == first

    # Every imported event reads back through the store's own reader, equal to the golden.
    doc = json.loads(GOLDEN_TEXT[path.name])
    rid = json.loads(doc["rows"][0][3])["run_id"]
    stored = await store.read_events(rid)
    assert [e.event for e in stored] == [
        decode(kind, version, json.loads(data)) for _, kind, version, data in doc["rows"]
    ]


async def test_an_existing_run_id_is_refused_and_new_ids_import_beside_it(store: Store) -> None:
    lines = golden_file(GOLDEN / "approval.json")
    await write(sql_store(store), parse("a", lines), now=1.0)
    before = await export_all(store)
    with pytest.raises(Conflict, match=r"already exists.*new id"):
        await write(sql_store(store), parse("a", lines), now=2.0)
    assert await export_all(store) == before  # nothing written

    done = await write(sql_store(store), parse("a", lines), new_ids=True, now=3.0)
    ((old, new),) = done.runs.items()
    assert old == "run_approval" and new != old
    view = (await store.read_events(new))[0].event
    assert view.run_id == new
    original = [e.event for e in await store.read_events(old)]
    copied = [e.event for e in await store.read_events(new)]
    assert copied[1:] == original[1:]


def _bad(lines: list[str], index: int, text: str | None) -> list[str]:
    out = list(lines)
    if text is None:
        del out[index]
    else:
        out[index] = text + "\n"
    return out


def _event_data(lines: list[str], index: int, **change: Any) -> str:
    record = json.loads(lines[index])
    record["data"].update(change)
    return json.dumps(record)


BASIC = golden_file(GOLDEN / "basic.json")
BAD_FILES: list[tuple[str, list[str], int, str]] = [
    ("empty", [], 1, "empty"),
    ("not a header", ['{"hello": 1}\n', *BASIC[1:]], 1, "not a stead export"),
    ("newer format", ['{"stead_export": 2}\n', *BASIC[1:]], 1, "newer than this stead reads"),
    ("not JSON", _bad(BASIC, 3, "{oops"), 4, "not JSON"),
    ("unknown type", _bad(BASIC, 3, '{"type": "gadget"}'), 4, "unknown record type"),
    (
        "missing field",
        _bad(BASIC, 1, json.dumps({k: v for k, v in json.loads(BASIC[1]).items() if k != "agent"})),
        2,
        "'agent' is missing",
    ),
    ("cut short", BASIC[:-1], len(BASIC) - 1, "without its end record"),
    ("seq gap", _bad(BASIC, 3, None), 4, "event seq 3, expected 2"),
    (
        "event that does not decode",
        _bad(BASIC, 3, _event_data(BASIC, 3, owner=7)),
        4,
        "does not decode",
    ),
    (
        "status the log contradicts",
        _bad(BASIC, 1, json.dumps({**json.loads(BASIC[1]), "status": "failed"})),
        2,
        "folds to completed",
    ),
]


@pytest.mark.parametrize(
    ("lines", "line", "says"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES]
)
def test_a_bad_file_is_refused_naming_its_line(lines: list[str], line: int, says: str) -> None:
    with pytest.raises(ImportFileError, match=says) as caught:
        parse("run.jsonl", lines)
    assert caught.value.line == line
    assert str(caught.value).startswith(f"run.jsonl, line {line}: ")
    assert isinstance(caught.value, UserError)
