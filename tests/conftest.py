"""Suite-wide fixtures: a real PostgreSQL server for the tests that need one.

The server is started once per session, the first time a test asks for ``pg_url``, from the
machine's own binaries in a temporary directory (as the ``postgres`` user when we are root),
and stopped at the end. ``STEAD_TEST_POSTGRES_URL`` points the suite at an existing server
instead. Each test gets a schema of its own on it (through the URL's ``search_path``), so
tests never see each other's runs.

Tests that crash the database get a second server, ``crashable_postgres``, always started
from the local binaries (an existing server is not ours to kill), durable, and never the one
every other test shares.

Without PostgreSQL the tests that need it are skipped, except when ``CI`` is set: then they
fail, so a CI run can never pass without having run them.

``make test`` runs the suite in pytest-xdist workers: each worker is a session of its own, so
each starts its own servers (no port, directory or database is shared between workers).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from stead.testing import PostgresServer

PG_ENV = "STEAD_TEST_POSTGRES_URL"

# No wall-clock limits on hypothesis's examples: on a loaded machine (parallel workers, CI)
# a slow example or slow generation is not a bug. A test's own @settings still wins.
settings.register_profile("stead", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("stead")


def _utf8(value: Any) -> Any:
    """``value`` with every string made UTF-8 encodable (a lone surrogate escaped)."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode()
        return value
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_utf8(v) for v in value)
    return value


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(report: Any) -> Any:
    """xdist sends each report to the controller as UTF-8: tests that feed lone surrogates
    through stead log them (captured log, tracebacks), which would crash the worker."""
    data = yield
    return _utf8(data)


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI is set, so PostgreSQL tests must run, not be skipped")
    pytest.skip(why)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for this test session."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[dev]')")
    if os.environ.get(PG_ENV):
        yield os.environ[PG_ENV]
        return
    from stead.testing import postgres_bindir, temporary_postgres

    if postgres_bindir() is None:
        _missing(f"no PostgreSQL server binaries here and {PG_ENV} is not set")
    with temporary_postgres(durable=False) as url:
        yield url


def with_schema(url: str, schema: str) -> str:
    """``url`` with its search_path set to ``schema``."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_url(postgres_server: str) -> Iterator[str]:
    """A PostgreSQL URL whose tables live in a fresh schema, dropped after the test."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    try:
        yield with_schema(postgres_server, schema)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())


@pytest.fixture(scope="session")
def crashable_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this session's own that tests may SIGKILL and start again.

    Durable (fsync and synchronous commit on): a crash must lose no synced commit, as in
    production. Started from the local binaries even when ``STEAD_TEST_POSTGRES_URL`` is set.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[dev]')")
    from stead.testing import PostgresServer, postgres_bindir

    if postgres_bindir() is None:
        _missing("no PostgreSQL server binaries here to start a server the tests may kill")
    with PostgresServer(durable=True) as server:
        yield server


@pytest.fixture
def crashable_postgres(crashable_server: PostgresServer) -> Iterator[PostgresServer]:
    """``crashable_server``, running (a test before may have left it killed)."""
    if not crashable_server.running:
        crashable_server.start()
    yield crashable_server
    if not crashable_server.running:
        crashable_server.start()


@pytest.fixture
def crashable_pg_url(crashable_postgres: PostgresServer) -> str:
    """A URL on ``crashable_postgres`` whose tables live in a fresh schema."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(crashable_postgres.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    return with_schema(crashable_postgres.url, schema)
