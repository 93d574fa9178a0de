"""A store migrated by a newer stead is refused, with both versions, by every entry point:
the store, ``Runtime``, and the CLI's readers, ``stead worker``, ``stead executor`` and
``stead serve`` (real processes), before any of them reads or writes a row."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

import stead
from stead.store import open_store
from stead.store.sql import migrations

STEAD = str(Path(sys.executable).with_name("stead"))
FUTURE = 9_999
KNOWN = migrations("sqlite")[-1][0]


def _from_the_future(url: str) -> None:
    """A store as a newer stead leaves it: one migration this code has never heard of."""
    store = open_store(url)
    asyncio.run(store.close())
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            db.execute("INSERT INTO schema_migrations VALUES (?, 'from_a_newer_stead')", (FUTURE,))
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO schema_migrations VALUES (%s, 'from_a_newer_stead')", (FUTURE,)
            )


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return str(request.getfixturevalue("pg_url"))


async def test_the_store_and_the_runtime_refuse_it_naming_both_versions(url: str) -> None:
    await asyncio.to_thread(_from_the_future, url)
    with pytest.raises(stead.errors.SchemaTooNew) as caught:
        open_store(url)
    assert (caught.value.found, caught.value.known) == (FUTURE, KNOWN)
    assert f"schema version {FUTURE}, newer than the {KNOWN} this stead knows" in str(caught.value)
    with pytest.raises(stead.errors.SchemaTooNew):
        async with stead.Runtime(url):
            pass


def test_an_older_store_is_still_migrated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    open_store(url)  # made at the newest version this code knows
    store = open_store(url)  # and opened again, as every later process does
    asyncio.run(store.close())


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "list"],
        ["cancel", "run_x"],
        ["worker", "--agents", "stead.demo._agent:agents"],
        ["executor", "--agents", "stead.demo._agent:agents", "--queues", "q"],
        ["serve", "--port", "0"],
        ["serve", "--port", "0", "--worker", "--agents", "stead.demo._agent:agents"],
    ],
)
def test_every_command_refuses_it_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _from_the_future(url)
    done = subprocess.run(
        [STEAD, "--store", url, *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"schema version {FUTURE}, newer than the {KNOWN} this stead knows" in done.stderr
    assert "Traceback" not in done.stderr and "stead serve:" not in done.stdout


def test_a_worker_that_outlives_an_upgrade_stops(tmp_path: Path) -> None:
    # A worker started on this schema; a newer stead migrates the store under it.
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    open_store(url)
    worker = subprocess.Popen(
        [STEAD, "--store", url, "worker", "--agents", "stead.demo._agent:agents", "--poll", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert worker.stderr is not None
        for line in worker.stderr:  # it is up once it says so
            if "ready" in line:
                break
        _from_the_future(url)
        # It notices at its next sweep (every 10 s by default) and stops with the message.
        _, err = worker.communicate(timeout=90)
        assert worker.returncode == 2, err
        assert f"schema version {FUTURE}, newer than the {KNOWN} this stead knows" in err
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
