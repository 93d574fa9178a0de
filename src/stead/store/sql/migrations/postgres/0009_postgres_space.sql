-- A long state's lists stored in pieces, once each (store/_pgchunks.py).
--
-- A snapshot row held the whole state and was rewritten every snapshot_every events; each
-- rewrite left the previous version's TOAST chunks dead until a vacuum, so a run of 1,000
-- tool turns of 1 KB left 1.7 MB of old snapshots behind a 0.25 MB live one (2.9x its content
-- on disk). The pieces of its messages and turn usage are written here once, keyed by the
-- sha256 of their JSON; the snapshot row keeps the rest and the digests. Existing snapshot
-- rows stay as they are (whole states, read as before) until the run's next snapshot.
CREATE TABLE snapshot_chunks (
    run_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    data   BYTEA NOT NULL,
    PRIMARY KEY (run_id, digest)
);
-- A piece is zlib output already: stored out of line without a pglz attempt that would fail.
ALTER TABLE snapshot_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

-- Events keyed by a run number that grows with creation, not by the run's random id (as
-- SQLite's 0008): an entry of the (run, seq) index is 16 bytes of key instead of ~45, and a
-- new run's entries go to the right-hand edge of the index, where a full page splits 90/10
-- instead of in half. runs gains run_no (existing runs numbered in the order of the table;
-- no index: runs are found by run_id, and events by the run_no read from its row); events
-- keeps run_id (what a person reads in psql) and gains run_no, which an append takes from the
-- UPDATE of its run's row. The table is copied in (run, seq) order, columns ordered so that
-- none pads: a row is about 12 bytes smaller. An event whose run is missing (none that stead
-- wrote) gets a number no run has.
ALTER TABLE runs ADD COLUMN run_no BIGINT GENERATED ALWAYS AS IDENTITY;
CREATE TABLE events_numbered (
    run_no       BIGINT NOT NULL,
    seq          BIGINT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    version      INTEGER NOT NULL,
    turn_index   INTEGER,
    run_id       TEXT NOT NULL,
    kind         TEXT NOT NULL,
    tool_call_id TEXT,
    data         BYTEA NOT NULL,
    PRIMARY KEY (run_no, seq)
);
INSERT INTO events_numbered (run_no, seq, created_at, version, turn_index, run_id, kind,
        tool_call_id, data)
    SELECT COALESCE(r.run_no, -row_number() OVER ()), e.seq, e.created_at, e.version,
        e.turn_index, e.run_id, e.kind, e.tool_call_id, e.data
    FROM events e LEFT JOIN runs r ON r.run_id = e.run_id ORDER BY r.run_no, e.run_id, e.seq;
DROP TABLE events;
ALTER TABLE events_numbered RENAME TO events;
ALTER INDEX events_numbered_pkey RENAME TO events_pkey;

-- Guarantee 2: one result per (run, turn, call), enforced by the database itself (as in 0001).
CREATE UNIQUE INDEX events_one_result
    ON events (run_no, turn_index, tool_call_id)
    WHERE kind = 'tool_result_recorded';
