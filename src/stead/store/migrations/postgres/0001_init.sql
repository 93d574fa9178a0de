-- Runs, their append-only event logs, and one snapshot per run: the SQLite schema, in
-- PostgreSQL types. Event data stays TEXT (not JSONB) so a row reads back byte for byte.
CREATE TABLE runs (
    run_id           TEXT PRIMARY KEY,
    agent            TEXT NOT NULL,
    session_id       TEXT NOT NULL DEFAULT '',
    correlation_id   TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL,
    last_seq         BIGINT NOT NULL,
    epoch            BIGINT NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at DOUBLE PRECISION,
    created_at       DOUBLE PRECISION NOT NULL,
    updated_at       DOUBLE PRECISION NOT NULL
);
CREATE INDEX runs_by_status ON runs (status, updated_at);

-- What workers scan on every claim: runs waiting for a worker or left behind by one.
CREATE INDEX runs_claimable ON runs (updated_at)
    WHERE status IN ('queued', 'running', 'awaiting_tool');

CREATE TABLE events (
    run_id       TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    version      INTEGER NOT NULL,
    turn_index   INTEGER,
    tool_call_id TEXT,
    data         TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- Guarantee 2: one result per (run, turn, call), enforced by the database itself.
CREATE UNIQUE INDEX events_one_result
    ON events (run_id, turn_index, tool_call_id)
    WHERE kind = 'tool_result_recorded';

CREATE TABLE snapshots (
    run_id  TEXT PRIMARY KEY,
    seq     BIGINT NOT NULL,
    version INTEGER NOT NULL,
    state   TEXT NOT NULL
);
