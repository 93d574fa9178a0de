-- A run's life after it is recorded (stead.store._lifecycle; docs/lifecycle.md).
--
-- run_links: a run made from another (a fork), by the run it came from. Retention keeps a
-- source while a run made from it is kept, and must find those runs without reading logs.
-- Written in the transaction that creates the fork (or imports it), deleted with the run.
CREATE TABLE run_links (
    run_id    TEXT NOT NULL,
    source_id TEXT NOT NULL,
    kind      TEXT NOT NULL,
    PRIMARY KEY (run_id, source_id)
){WITHOUT_ROWID};
CREATE INDEX run_links_by_source ON run_links (source_id);

-- run_pins: the agent fingerprint a run of an agent under the `pin` policy must be driven
-- by. A claim skips a run pinned to a fingerprint the claimer does not have, so a worker of
-- another deploy never takes it (and never bumps its epoch).
CREATE TABLE run_pins (
    run_id      TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL
){WITHOUT_ROWID};

-- worker_versions: which fingerprints live workers drive, renewed with their heartbeat, so
-- that `stead runs list` can tell a run waiting for a version no worker has.
CREATE TABLE worker_versions (
    owner       TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    agent       TEXT NOT NULL,
    expires_at  {DOUBLE} NOT NULL,
    PRIMARY KEY (owner, fingerprint)
){WITHOUT_ROWID};

-- Retention deletes a run's execution-ledger rows by the run: without this index each pruned
-- run would read the whole table. Only an executor pool writes these rows.
CREATE INDEX ledger_keys_by_run ON ledger_keys (run_id);
