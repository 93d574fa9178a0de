-- Runs, their append-only event logs, and one snapshot per run.
CREATE TABLE runs (
    run_id           TEXT PRIMARY KEY,
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
CREATE INDEX runs_by_status ON runs (status, updated_at);

CREATE TABLE events (
    run_id       TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    version      INTEGER NOT NULL,
    turn_index   INTEGER,
    tool_call_id TEXT,
    data         TEXT NOT NULL,
    created_at   REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- Guarantee 2: one result per (run, turn, call), enforced by the database itself.
CREATE UNIQUE INDEX events_one_result
    ON events (run_id, turn_index, tool_call_id)
    WHERE kind = 'tool_result_recorded';

CREATE TABLE snapshots (
    run_id  TEXT PRIMARY KEY,
    seq     INTEGER NOT NULL,
    version INTEGER NOT NULL,
    state   BLOB NOT NULL  -- zlib-compressed JSON of the folded state
);
