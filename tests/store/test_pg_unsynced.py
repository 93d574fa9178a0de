"""PostgreSQL commits exactly the writes that may skip the WAL flush without waiting for it.

``append(sync=False)``, ``renew`` and ``release`` commit with ``synchronous_commit = off``;
synced appends, run creation and claims wait for the flush (see ``stead.store.postgres``).

How it is seen: a deferred constraint trigger on ``runs`` fires at COMMIT, inside the
committing transaction, on the store's own connection, and notes
``current_setting('synchronous_commit')``: the value PostgreSQL reads when it writes that
commit record. The store's sessions default to ``on`` here (the suite's server runs with
``off`` for speed), so a write that forgot to turn it off, or one that turned it off by
mistake, shows up as the wrong value.
"""

from __future__ import annotations

import psycopg
import pytest
from _builders import T0, RunBuilder, call_id, result
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from stead.errors import Fenced
from stead.store.postgres import PostgresStore

pytestmark = pytest.mark.timeout(60)

TTL = 30.0

NOTE_COMMITS = """
CREATE TABLE commit_notes (id bigserial PRIMARY KEY, op text NOT NULL, run_id text NOT NULL,
    last_seq bigint NOT NULL, epoch bigint NOT NULL, setting text NOT NULL);
CREATE FUNCTION note_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO commit_notes (op, run_id, last_seq, epoch, setting)
    VALUES (TG_OP, NEW.run_id, NEW.last_seq, NEW.epoch,
            current_setting('synchronous_commit'));
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER note_commit AFTER INSERT OR UPDATE ON runs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_commit();
"""


def synced_by_default(url: str) -> str:
    """``url`` with ``synchronous_commit=on`` as its sessions' default, whatever the server's."""
    options = conninfo_to_dict(url).get("options") or ""
    return make_conninfo(url, options=f"{options} -c synchronous_commit=on".strip())


class Notes:
    """The settings each committed write of ``runs`` saw, read and cleared step by step."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(NOTE_COMMITS.encode())

    def take(self) -> list[tuple[str, str, int, int, str]]:
        rows = self.conn.execute(
            "DELETE FROM commit_notes RETURNING id, op, run_id, last_seq, epoch, setting"
        ).fetchall()
        return [tuple(r[1:]) for r in sorted(rows)]  # type: ignore[misc]

    def close(self) -> None:
        self.conn.close()


async def write(
    store: PostgresStore, b: RunBuilder, *, epoch: int, sync: bool, snapshot: bool = False
) -> None:
    """Append ``b``'s pending events with the given ``sync`` flag."""
    b.written = await store.append(
        b.run_id,
        b.pending,
        expected_seq=b.written,
        epoch=epoch,
        status=b.status,
        now=T0,
        snapshot=(b.state.seq, b.state.to_json()) if snapshot else None,
        sync=sync,
    )
    b.pending = []


async def test_only_unsynced_appends_and_lease_bookkeeping_skip_the_flush(pg_url: str) -> None:
    url = synced_by_default(pg_url)
    store = PostgresStore(url)
    notes = Notes(url)
    try:
        with psycopg.connect(url) as probe:  # the default really is on for these sessions
            assert probe.execute("SHOW synchronous_commit").fetchone() == ("on",)

        b = RunBuilder("r1")
        await b.create(store)
        assert notes.take() == [("INSERT", "r1", 1, 0, "on")]

        epoch = await store.claim("r1", owner="w1", now=T0, ttl=TTL)
        assert notes.take() == [("UPDATE", "r1", 1, 1, "on")]  # a new epoch: synced

        b.start("w1", epoch)
        await write(store, b, epoch=epoch, sync=False)
        assert notes.take() == [("UPDATE", "r1", 2, 1, "off")]

        b.tool_turn(results=False)
        await write(store, b, epoch=epoch, sync=True)
        assert notes.take() == [("UPDATE", "r1", 5, 1, "on")]

        # The statement that also writes a snapshot honours the flag the same way.
        b.add(result(0, call_id(0, 0)))
        await write(store, b, epoch=epoch, sync=False, snapshot=True)
        b.tool_turn()
        await write(store, b, epoch=epoch, sync=True, snapshot=True)
        assert notes.take() == [("UPDATE", "r1", 6, 1, "off"), ("UPDATE", "r1", 10, 1, "on")]

        await store.renew("r1", owner="w1", epoch=epoch, now=T0 + 1, ttl=TTL)
        assert notes.take() == [("UPDATE", "r1", 10, 1, "off")]

        # A refused renewal writes nothing; a release of a claimable run announces it.
        with pytest.raises(Fenced):
            await store.renew("r1", owner="w1", epoch=epoch + 5, now=T0 + 1, ttl=TTL)
        await store.release("r1", owner="w1", epoch=epoch)
        assert notes.take() == [("UPDATE", "r1", 10, 1, "off")]

        [claim] = await store.claim_next(owner="w2", now=T0 + 2, ttl=TTL)
        assert (claim.run_id, claim.epoch) == ("r1", 2)
        assert notes.take() == [("UPDATE", "r1", 10, 2, "on")]  # a new epoch: synced

        # A release of a finished run (not claimable) takes the statement's other branch.
        b.final_turn()
        await write(store, b, epoch=2, sync=True)
        await store.release("r1", owner="w2", epoch=2)
        assert notes.take() == [("UPDATE", "r1", 13, 2, "on"), ("UPDATE", "r1", 13, 2, "off")]
        assert (await store.get_run("r1")).status == "completed"
    finally:
        notes.close()
        await store.close()
