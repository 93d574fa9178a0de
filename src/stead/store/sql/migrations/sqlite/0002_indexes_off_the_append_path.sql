-- Indexes that an append does not touch.
--
-- 0001's runs_by_status (status, updated_at) changed on every append: each step moves a run
-- between running and awaiting_tool and sets updated_at, so every commit rewrote a page of
-- that index too (~23% of the WAL frames a run writes). Runs are looked up by status and
-- claimed by lease, and a run being driven holds a lease for its whole drive, so:
--
-- * runs nobody holds (queued, waiting on a person, finished, released or abandoned) are
--   indexed by (status, updated_at); a run enters when its lease is released and leaves
--   when it is claimed: two index writes a run, not one a step;
-- * runs somebody holds are indexed by lease expiry, which only claim/renew/release change
--   (a worker finds lapsed leases there).
--
-- The predicates do not mention status, so a status change under a lease writes neither.
DROP INDEX IF EXISTS runs_by_status;
CREATE INDEX runs_unleased ON runs (status, updated_at) WHERE lease_owner IS NULL;
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE lease_owner IS NOT NULL;
