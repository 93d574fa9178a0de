-- Events indexed by a run number that grows with each run created, not by the run's id.
--
-- A run id is random ('run_' + a uuid), so the (run_id, seq) index put each run's entries at
-- a random place among every other run's. A run appends its keys one after another at that
-- place: into a page SQLite's balancing had left full, so an insert there rebalanced it
-- with its siblings again and again (3-4 pages each time). On a store of 15 runs that index
-- was 41-57 of the 109-126 WAL pages a strict run of 10 tool turns wrote, and 5-8 of an
-- effects run's 22-25 (it moved with where the random id fell); now 25 of 96 and 4 of 21. Keyed by a number that grows with creation, a run's entries are at the
-- right-hand edge of the index while it is the newest (SQLite's quick append: one page), and
-- near it while other recent runs interleave; an entry is a few bytes instead of ~45.
--
-- runs gains run_no INTEGER PRIMARY KEY (the rowid itself, so a VACUUM cannot renumber it;
-- the table is rebuilt with its rows in their order, run_no = their rowid). stead never
-- deletes a run; a run deleted by hand with its events leaves its number free, and a number
-- taken again whose old events were left behind fails the new run's first insert on the
-- unique index instead of mixing two logs. events keeps run_id (what a person reads in the
-- shell) and gains run_no, which the store fills from runs on insert and reads by.
CREATE TABLE runs_numbered (
    run_no           INTEGER PRIMARY KEY,
    run_id           TEXT NOT NULL UNIQUE,
    agent            TEXT NOT NULL,
    session_id       TEXT NOT NULL DEFAULT '',
    correlation_id   TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL,
    last_seq         INTEGER NOT NULL,
    epoch            INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at REAL,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL
);
INSERT INTO runs_numbered (run_no, run_id, agent, session_id, correlation_id, status, last_seq,
        epoch, lease_owner, lease_expires_at, created_at, updated_at)
    SELECT rowid, run_id, agent, session_id, correlation_id, status, last_seq, epoch,
        lease_owner, lease_expires_at, created_at, updated_at
    FROM runs ORDER BY rowid;
DROP TABLE runs;
ALTER TABLE runs_numbered RENAME TO runs;
-- 0002's indexes, as they were (dropped with the old table).
CREATE INDEX runs_unleased ON runs (status, updated_at) WHERE lease_owner IS NULL;
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE lease_owner IS NOT NULL;

-- An event whose run is missing (none that stead wrote) gets a number no run has.
ALTER TABLE events ADD COLUMN run_no INTEGER NOT NULL DEFAULT 0;
UPDATE events SET run_no = COALESCE(
    (SELECT r.run_no FROM runs r WHERE r.run_id = events.run_id), -events.rowid);
DROP INDEX events_by_seq;
CREATE UNIQUE INDEX events_by_seq ON events (run_no, seq);

-- Guarantee 2: one result per (run, turn, call), enforced by the database itself (as in 0001).
DROP INDEX events_one_result;
CREATE UNIQUE INDEX events_one_result
    ON events (run_no, turn_index, tool_call_id)
    WHERE kind = 'tool_result_recorded';
