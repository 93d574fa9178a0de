"""PostgreSQL: a claim reads the runs nobody holds and the lapsed leases, never the runs whose
lease is live, however many the fleet holds (migration 0013). Counted in the claim's own
plan (``EXPLAIN ANALYZE``: the rows each scan of ``runs`` returned and threw away), never
timed.

Every worker claims again whenever one of its runs finishes: with one index over every
claimable status, each of those claims walked past every run the whole fleet held, so a
claim cost more the more workers there were.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from _builders import T0, created

from stead.store.postgres import PostgresStore
from stead.store.postgres._load import CLAIM_NEXT

pytestmark = pytest.mark.timeout(60)

HELD = 150
TTL = 60.0


def scans_of_runs(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of the plan that reads ``runs`` (a table or index scan)."""
    found = [plan] if plan.get("Relation Name") == "runs" else []
    for child in plan.get("Plans", []):
        found += scans_of_runs(child)
    return found


def read_by_a_claim(url: str, owner: str, now: float) -> list[tuple[str, int, int]]:
    """(scan, rows it returned, rows it read and threw away) for each scan of ``runs`` in
    ``owner``'s claim at ``now``, executed and rolled back."""
    params = {
        "now": now, "any_agent": True, "agents": [], "any_version": True, "versions": [],
        "limit": 10, "owner": owner, "until": now + TTL,
    }  # fmt: skip
    with psycopg.connect(url) as conn:
        # A table of a few pages is cheaper to read whole than through an index, and the
        # planner rightly says so; a store's runs table (every finished run stays) is not.
        # Sequential scans off: the plan of a table too large to scan, which this one stands
        # for. An index that does not fit the claim is then walked, and its reads show.
        conn.execute("SET LOCAL enable_seqscan = off")
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + CLAIM_NEXT, params).fetchone()
        conn.rollback()
    assert row is not None
    out = []
    for scan in scans_of_runs(row[0][0]["Plan"]):
        name = scan.get("Index Name") or scan["Node Type"]
        thrown = int(scan.get("Rows Removed by Filter", 0)) + int(
            scan.get("Rows Removed by Index Recheck", 0)
        )
        out.append((name, int(scan["Actual Rows"]) * int(scan["Actual Loops"]), thrown))
    return out


async def test_a_claim_reads_no_run_whose_lease_is_live(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        for i in range(HELD):
            await store.create_run(created(f"held-{i}"), now=T0 + i)
        held = await store.claim_next(owner="a", now=T0 + 500, ttl=TTL, limit=HELD)
        assert len(held) == HELD  # live until T0 + 560
        # A run whose worker died (its lease lapsed at T0 + 460), and a new run.
        await store.create_run(created("orphan"), now=T0 + 510)
        assert len(await store.claim_next(owner="gone", now=T0 + 400, ttl=TTL)) == 1
        await store.create_run(created("new"), now=T0 + 520)

        reads = read_by_a_claim(pg_url, "b", T0 + 500)
        assert reads, "the claim reads runs"
        # Each scan returns only what may be claimed and reads nothing else: not one of the
        # runs "a" holds.
        assert all(thrown == 0 for _, _, thrown in reads), reads
        picked = [(name, got) for name, got, _ in reads if name not in ("ModifyTable", "runs_pkey")]
        assert sum(got for _, got in picked) == 2, reads  # "orphan" and "new"

        claimed = await store.claim_next(owner="b", now=T0 + 500, ttl=TTL, limit=10)
        # The oldest first, from either half; the lapsed one names its old owner.
        assert [(c.run_id, c.previous_owner) for c in claimed] == [
            ("orphan", "gone"),
            ("new", None),
        ]
    finally:
        await store.close()
