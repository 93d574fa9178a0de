"""Runs found by the start of their id (``Store.run_ids_starting``, what ``resolve_run_id``
asks on a miss), on both stores.

A start is a range of the ids index in byte order, so ``%``, ``_`` and ``\\`` are characters
like any, and a miss reads a few index entries however many runs there are: counted here in
rows the database read (PostgreSQL's own plan, through ``auto_explain`` on the store's
connection) and in the instructions SQLite's engine ran, never in time. On a PostgreSQL
database whose collation is a language's (ICU's ``en-US`` sorts ``ab_c`` beside ``abc``),
the range is read from the ids in the C collation (migration 0012).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _builders import T0, created
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stead.core.id_prefix import SHOWN
from stead.errors import AmbiguousId, RunNotFound
from stead.runtime import resolve_run_id
from stead.runtime.agent._ids import CANDIDATES
from stead.store import SQLiteStore, open_store

MAX = "\U0010ffff"
"""The last code point: a start made of it alone has no end to its range."""

POOL = sorted(
    {"".join(t) for t in itertools.product("a%_\\", repeat=3)}
    | {"a", "a%", "ab", "abc", "ab_c", "ab-c", "abd", "AB", "b", "é", "e\u0301", "run_a%b"}
    | {"run_ab_c", "run_", "x\ud7ff", "x\ud7ffz", "x\ue000", MAX, MAX * 2, f"a{MAX}", f"a{MAX}b"}
)
"""Ids whose starts a LIKE pattern or a naive range would get wrong: its metacharacters in
every position, a language's collation's near neighbours, the code points around the
surrogates (which UTF-8 skips) and the last one."""

ALPHABET = "a%_\\b-é" + MAX + "\ud7ff\ue000"


def _icu_database(request: pytest.FixtureRequest) -> str:
    """The URL of a new database in ICU's ``en-US`` collation on the test server, dropped
    when the test ends (skipped where this PostgreSQL has no ICU)."""
    import psycopg

    server = request.getfixturevalue("postgres_server")
    name = f"stead_icu_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        try:
            conn.execute(
                f"CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu "
                "ICU_LOCALE 'en-US' LOCALE 'C.UTF-8' ENCODING 'UTF8'".encode()
            )
        except psycopg.Error as exc:
            pytest.skip(f"this PostgreSQL cannot make an ICU database: {exc}")

    def drop() -> None:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)".encode())

    request.addfinalizer(drop)
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(server)._replace(path=f"/{name}"))


@pytest.fixture(params=["sqlite", "postgres", "postgres-icu"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ids.db'}"
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return _icu_database(request)


def _starting(prefixes: list[str], limit: int) -> list[str]:
    """What the store must answer, stated plainly."""
    return sorted({i for i in POOL if any(i.startswith(p) for p in prefixes)})[:limit]


def test_a_start_finds_exactly_the_ids_it_starts(url: str) -> None:
    loop = asyncio.new_event_loop()
    store = open_store(url)
    assert isinstance(store, SQLiteStore) is url.startswith("sqlite:")

    async def seed() -> None:
        for run_id in POOL:
            await store.create_run(created(run_id), now=T0)

    try:
        loop.run_until_complete(seed())

        @settings(
            max_examples=80,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        )
        @given(
            prefixes=st.lists(
                st.one_of(
                    st.tuples(st.sampled_from(POOL), st.integers(0, 4)).map(lambda t: t[0][: t[1]]),
                    st.text(ALPHABET, max_size=4),
                ),
                min_size=1,
                max_size=3,
            ),
            limit=st.sampled_from([1, 2, 3, 100]),
        )
        def check(prefixes: list[str], limit: int) -> None:
            got = loop.run_until_complete(store.run_ids_starting(prefixes, limit=limit))
            assert got == _starting(prefixes, limit), (prefixes, limit)

        check()
        assert loop.run_until_complete(store.run_ids_starting([], limit=5)) == []
        assert loop.run_until_complete(store.run_ids_starting([MAX], limit=5)) == [MAX, MAX * 2]
        # The collation decides where the range is read: the ids index itself where the
        # database sorts bytewise, an index of the ids in the C collation elsewhere.
        if not isinstance(store, SQLiteStore):
            icu = "stead_icu_" in url
            assert loop.run_until_complete(_has_index(store, "runs_by_id_bytes")) is icu
    finally:
        loop.run_until_complete(store.close())
        loop.close()


async def _has_index(store: Any, name: str) -> bool:
    async with store._conn() as conn:
        row = await (await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))).fetchone()
    return bool(row and row[0])


# -- a miss among many runs reads a few entries ---------------------------------------------

MANY = 3000


def _seed_sqlite(path: Path, n: int) -> None:
    """``n`` runs with random ids, inserted in one statement: only their ids are read."""
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            "INSERT INTO runs (run_id, agent, status, last_seq, created_at, updated_at) "
            "SELECT 'run_' || lower(hex(randomblob(16))), 'a', 'completed', 1, 0, 0 FROM n",
            (n,),
        )


async def _steps_of_a_miss(store: SQLiteStore) -> tuple[int, int]:
    """SQLite engine instructions of a miss (``resolve_run_id``), and of listing the runs."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    store._db.set_progress_handler(count, 1)
    try:
        with pytest.raises(RunNotFound):
            await resolve_run_id(store, "0000ffff")  # no run's id starts so
        miss, steps[0] = steps[0], 0
        await store.list_runs(limit=MANY * 2)
        return miss, steps[0]
    finally:
        store._db.set_progress_handler(None, 1)


async def test_a_miss_among_many_sqlite_runs_runs_what_a_miss_among_few_does(
    tmp_path: Path,
) -> None:
    counts = []
    for n in (10, MANY):
        path = tmp_path / f"{n}.db"
        await SQLiteStore(path).close()  # made at the newest schema
        _seed_sqlite(path, n)
        store = SQLiteStore(path)
        try:
            counts.append(await _steps_of_a_miss(store))
        finally:
            await store.close()
    (few, _), (many, many_listed) = counts
    assert many_listed > 10 * MANY  # the measure sees every row a statement reads ...
    assert many <= few + 20, counts  # ... and a miss reads no more among 3,000 than among 10


async def test_a_start_of_more_runs_than_are_read_says_so(tmp_path: Path) -> None:
    """The store is asked for a bounded number of ids: a start of more is refused naming
    the first of them, and says there are at least that many."""
    path = tmp_path / "ids.db"
    await SQLiteStore(path).close()
    import sqlite3

    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO runs (run_id, agent, status, last_seq, created_at, updated_at) "
            "VALUES (?, 'a', 'completed', 1, 0, 0)",
            [(f"run_abcd{i:04d}",) for i in range(CANDIDATES + 50)],
        )
    store = SQLiteStore(path)
    try:
        with pytest.raises(AmbiguousId) as refused:
            await resolve_run_id(store, "abcd")
        message = str(refused.value)
        assert f"start of {CANDIDATES} or more runs" in message
        assert f"and at least {CANDIDATES - SHOWN} more" in message
        assert refused.value.candidates == tuple(f"run_abcd{i:04d}" for i in range(CANDIDATES))
        with pytest.raises(AmbiguousId, match=r"start of 10 runs: .*run_abcd0109; type more"):
            await resolve_run_id(store, "abcd010")  # all of them named: nothing cut
    finally:
        await store.close()


def _plans(notices: list[str]) -> list[dict[str, Any]]:
    """The plans ``auto_explain`` sent as notices (JSON after ``plan:``)."""
    return [json.loads(n.split("plan:", 1)[1])["Plan"] for n in notices if "plan:" in n]


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize("icu", [False, True], ids=["bytewise", "icu"])
async def test_a_miss_among_many_postgres_runs_reads_no_row(
    request: pytest.FixtureRequest, icu: bool
) -> None:
    """The statement a miss runs, as the server planned and ran it on the store's own
    connection: ranges of an index, no row read, however many runs there are."""
    import psycopg

    from stead.store.postgres import PostgresStore

    url = _icu_database(request) if icu else str(request.getfixturevalue("pg_url"))
    store = PostgresStore(url, min_size=1, max_size=1)
    try:
        await store.check_schema()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO runs (run_id, agent, status, last_seq, created_at, updated_at) "
                "SELECT 'run_' || md5(random()::text || g), 'a', 'completed', 1, 0, 0 "
                "FROM generate_series(1, %s) g",
                (MANY,),
            )
            conn.execute("ANALYZE runs")  # as autovacuum would have by now
        with pytest.raises(RunNotFound):  # the first asks which index to read, once a store
            await resolve_run_id(store, "0000fffe")
        notices: list[str] = []
        async with store._conn() as conn:  # the pool's only connection
            for setting in (
                "LOAD 'auto_explain'",
                "SET auto_explain.log_min_duration = 0",
                "SET auto_explain.log_analyze = on",
                "SET auto_explain.log_format = json",
                "SET auto_explain.log_level = notice",
            ):
                await conn.execute(setting.encode())
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        with pytest.raises(RunNotFound):
            await resolve_run_id(store, "0000ffff")
        async with store._conn() as conn:
            await conn.execute(b"LOAD 'auto_explain'")  # flushes nothing, sends no notice
            await conn.execute(b"SET auto_explain.log_min_duration = -1")
        plans = _plans(notices)
        assert len(plans) == 2, notices  # the exact id's read, then the starts' ranges
        nodes = [node for plan in plans for node in _nodes(plan)]
        scans = [n for n in nodes if "Scan" in n["Node Type"] and "Relation Name" in n]
        assert scans and all(n["Node Type"] != "Seq Scan" for n in scans), plans
        read = sum(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in scans)
        assert read == 0, plans
        indexes = {n.get("Index Name") for n in scans}
        assert ("runs_by_id_bytes" in indexes) is icu, indexes
    finally:
        await store.close()
