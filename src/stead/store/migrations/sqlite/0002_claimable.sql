-- Workers look for runs they may claim (queued, or left behind by a lapsed lease) on every
-- poll; this keeps that look-up off the finished runs, which are most of the table.
CREATE INDEX runs_claimable ON runs (updated_at)
    WHERE status IN ('queued', 'running', 'awaiting_tool');
