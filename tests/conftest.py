"""Suite-wide fixtures: a real PostgreSQL server for the tests that need one.

The server is started once per session, the first time a test asks for ``pg_url``, from the
machine's own binaries in a temporary directory (as the ``postgres`` user when we are root),
and stopped at the end. ``STEAD_TEST_POSTGRES_URL`` points the suite at an existing server
instead. Each test gets a schema of its own on it (through the URL's ``search_path``), so
tests never see each other's runs.

Without PostgreSQL the tests that need it are skipped, except when ``CI`` is set: then they
fail, so a CI run can never pass without having run them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

PG_ENV = "STEAD_TEST_POSTGRES_URL"


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
