-- Progress from afar (store/_progress.py): the provisional text deltas of a model call an
-- executor performs, for the run's owner to show while it waits. Lossy by design: written
-- without waiting for the disk, read by the owner, deleted once the call settled; only the
-- settled message is durable.
CREATE TABLE ledger_progress (
    effect_id  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    text       TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (effect_id, seq)
);
