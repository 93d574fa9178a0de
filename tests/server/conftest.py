"""Fixtures of the server tests: a PostgreSQL schema per module (one server stack each)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from _stack import with_schema


@pytest.fixture(scope="module")
def module_pg_url(postgres_server: str) -> Iterator[str]:
    """A PostgreSQL URL with a schema of this module's own."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    try:
        yield with_schema(postgres_server, schema)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())
