-- run_search: what a search over runs matches a word against, one row a run: its input and
-- its output, lowercased. Derived from the run's log, never the record of anything; the
-- runtime brings it up to date (the rows whose updated_at differs from the run's) before it
-- searches, so no append pays for it. Deleted with the run.
CREATE TABLE run_search (
    run_id     TEXT PRIMARY KEY,
    updated_at {DOUBLE} NOT NULL,
    text       TEXT NOT NULL
){WITHOUT_ROWID};

