-- The execution ledger (core/ledger.py): one row per effect key, its short event log, and
-- the executors that hold keys under leases.
--
-- ledger_keys.effect_id is the key's primary key: the first write for a key is either its
-- acceptance or its tombstone (origin), and the database refuses the other one ever after.
-- phase, epoch, executor and position are the fold of ledger_events kept beside it, so that
-- every transition is one conditional UPDATE of this row (its WHERE is the fencing check).
CREATE TABLE ledger_keys (
    effect_id  TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '',
    origin     TEXT NOT NULL CHECK (origin IN ('accepted', 'aborted')),
    kind       TEXT,
    queue      TEXT,
    assignment TEXT,
    phase      TEXT NOT NULL,
    epoch      {BIGINT} NOT NULL DEFAULT 0,
    executor   TEXT,
    position   {BIGINT} NOT NULL,
    cancel     INTEGER NOT NULL DEFAULT 0,
    outcome    TEXT,
    created_at {DOUBLE} NOT NULL,
    updated_at {DOUBLE} NOT NULL
);
CREATE INDEX ledger_open ON ledger_keys (queue, updated_at)
    WHERE phase IN ('accepted', 'claimed', 'started');
CREATE INDEX ledger_by_executor ON ledger_keys (executor)
    WHERE phase IN ('claimed', 'started');

CREATE TABLE ledger_events (
    effect_id  TEXT NOT NULL,
    seq        {BIGINT} NOT NULL,
    kind       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at {DOUBLE} NOT NULL,
    PRIMARY KEY (effect_id, seq)
){WITHOUT_ROWID};

CREATE TABLE executors (
    executor_id      TEXT PRIMARY KEY,
    queues           TEXT NOT NULL,
    lease_expires_at {DOUBLE} NOT NULL,
    started_at       {DOUBLE} NOT NULL
);

-- Fleet-wide limits (store/_limits.py): at most max_concurrent keys of a queue held at once
-- across every executor; none claimed before paused_until (a rate_limited answer).
CREATE TABLE queue_limits (
    queue          TEXT PRIMARY KEY,
    max_concurrent INTEGER,
    paused_until   {DOUBLE} NOT NULL DEFAULT 0
);
