"""The scale-out store: one PostgreSQL database (``PostgresStore``, with ``stead[postgres]``),
and its half of the execution ledger. Imports no other dialect; importing it needs psycopg, so
``stead.store`` imports it only when a ``postgresql://`` URL is opened."""

from stead.store.postgres._store import PostgresStore

__all__ = ["PostgresStore"]
