@sqlite -- Runs, their append-only event logs, and one snapshot per run.
@postgres -- Runs, their append-only event logs, and one snapshot per run: the SQLite schema, in
@postgres -- PostgreSQL types. Event data stays TEXT (not JSONB) so a row reads back byte for byte.
CREATE TABLE runs (
    run_id           TEXT PRIMARY KEY,
    agent            TEXT NOT NULL,
    session_id       TEXT NOT NULL DEFAULT '',
    correlation_id   TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL,
    last_seq         {BIGINT} NOT NULL,
    epoch            {BIGINT} NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at {DOUBLE},
    created_at       {DOUBLE} NOT NULL,
    updated_at       {DOUBLE} NOT NULL
);
CREATE INDEX runs_by_status ON runs (status, updated_at);

@postgres -- What workers scan on every claim: runs waiting for a worker or left behind by one.
@postgres CREATE INDEX runs_claimable ON runs (updated_at)
@postgres     WHERE status IN ('queued', 'running', 'awaiting_tool');
@postgres
CREATE TABLE events (
    run_id       TEXT NOT NULL,
    seq          {BIGINT} NOT NULL,
    kind         TEXT NOT NULL,
    version      INTEGER NOT NULL,
    turn_index   INTEGER,
    tool_call_id TEXT,
    data         TEXT NOT NULL,
    created_at   {DOUBLE} NOT NULL,
    PRIMARY KEY (run_id, seq)
){WITHOUT_ROWID};

-- Guarantee 2: one result per (run, turn, call), enforced by the database itself.
CREATE UNIQUE INDEX events_one_result
    ON events (run_id, turn_index, tool_call_id)
    WHERE kind = 'tool_result_recorded';

CREATE TABLE snapshots (
    run_id  TEXT PRIMARY KEY,
    seq     {BIGINT} NOT NULL,
    version INTEGER NOT NULL,
@sqlite     state   BLOB NOT NULL  -- zlib-compressed JSON of the folded state
@postgres     state   TEXT NOT NULL
);
