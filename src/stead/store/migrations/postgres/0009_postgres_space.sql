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
