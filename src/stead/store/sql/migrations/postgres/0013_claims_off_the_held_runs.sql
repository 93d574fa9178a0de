-- A claim read every run the fleet holds. 0001's runs_claimable is one index over every
-- claimable status, held or not, by updated_at: a claim walked it past each held run (and the
-- versions each append leaves behind) to find the few nobody holds, so its cost grew with
-- the runs in flight across all workers, and every finished run claims again. Two halves, as
-- SQLite's 0002: the runs nobody holds by updated_at, and the held ones by when their lease
-- lapses, so a claim reads the unheld runs and the lapsed leases and nothing else.
DROP INDEX IF EXISTS runs_claimable;
CREATE INDEX runs_unleased ON runs (updated_at)
    WHERE lease_owner IS NULL AND status IN ('queued', 'running', 'awaiting_tool');
CREATE INDEX runs_leased ON runs ((COALESCE(lease_expires_at, 0)))
    WHERE lease_owner IS NOT NULL AND status IN ('queued', 'running', 'awaiting_tool');
