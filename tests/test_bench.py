"""The overhead benchmark still runs, and the durable work it counts is what the docs say.

Timings are never asserted (the machine is noisy); the commits and fsyncs a run makes are
exact, so they are: stead fsyncs no more than the no-framework floor for every tool class
that has a way to tell "never ran" from "may have run" without a commit of its own, and one
more per call for a non_idempotent tool without a reconcile function.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_bench_reports_every_side_and_the_fsyncs_each_pays(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "overhead.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=tmp_path,
    )
    result = json.loads(out.stdout)
    rows = {r["tool_effect"] or "floor": r for r in result["rows"]}
    assert set(rows) == {
        "floor",
        "read_only",
        "idempotent_write",
        "non_idempotent",
        "non_idem_no_rec",
        "effects",
    }
    floor = rows["floor"]["fsyncs_per_run"]
    assert floor == 22  # one row at creation + one per step (21 steps)
    for side in ("read_only", "idempotent_write", "non_idempotent"):
        assert rows[side]["fsyncs_per_run"] == floor, side
        assert rows[side]["goal_met"] in (True, False)  # judged, whatever the timing
    assert rows["non_idem_no_rec"]["fsyncs_per_run"] == floor + 10  # one per tool call
    assert rows["non_idem_no_rec"]["goal_met"] is None
    # durability="effects" with read_only tools: only the run's creation and its end wait
    # for the disk (its goal is 0.6x the floor).
    assert rows["effects"]["fsyncs_per_run"] == 2
    assert rows["effects"]["goal_met"] in (True, False)
    # WAL pages a run writes (each commit's copy of each page it changed), counted from the
    # WAL itself: the floor at least one a commit; stead's commits are wider (the run's row,
    # the sequence index), and effects' 4 commits write fewer pages than the floor's 22.
    pages = {side: r["wal_pages_per_run"] for side, r in rows.items()}
    assert pages["floor"] >= 22, pages
    assert pages["floor"] < pages["read_only"] <= pages["non_idempotent"], pages
    assert 0 < pages["effects"] < pages["floor"], pages
    assert all(r["us_per_step_median"] > 0 for r in rows.values())


def test_the_in_flight_bench_runs_and_says_why_a_side_is_missing(tmp_path: Path) -> None:
    """``bench/in_flight.py --quick``: the SQLite side completes every run (the bench exits
    if one does not), and a side that cannot run here (a tree without the ``effects``
    mode) is a row that says why, not a crash. LangGraph and DBOS are left out: they
    are optional, and slow to start where they are installed."""
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "in_flight.py"),
            "--quick",
            "--json",
            "--latency",
            "0.01",
            "--sides",
            "stead-sqlite,stead-sqlite-effects",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=tmp_path,
    )
    rows = {r["side"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {"stead-sqlite", "stead-sqlite-effects"}
    stead_row = rows["stead-sqlite"]
    assert stead_row["runs"] == 20
    assert stead_row["steps_per_s"] > 0 and stead_row["x_ideal"] >= 1.0
    for side, row in rows.items():
        assert ("skipped" in row) != ("wall_s" in row), side


def test_a_side_that_fails_or_overruns_is_a_row_and_the_bench_goes_on(tmp_path: Path) -> None:
    """``bench/in_flight.py``: a side that raises (here PostgreSQL at a port nobody listens
    on) is a row saying ``failed:`` with the error's first line, a side that overruns
    ``--budget`` is killed and its row says so, and the sides after them still run."""
    argv = [sys.executable, str(ROOT / "bench" / "in_flight.py"), "--json", "--waves", "1"]
    argv += ["--latency", "0.01", "--in-flight", "5"]
    env = {**os.environ, "STEAD_BENCH_POSTGRES_URL": "postgresql://nobody@127.0.0.1:1/none"}

    def rows(*extra: str) -> dict[str, dict[str, object]]:
        out = subprocess.run(
            [*argv, *extra],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
            cwd=tmp_path,
            env=env,
        )
        return {str(r["side"]): r for r in json.loads(out.stdout)}

    failed = rows("--sides", "stead-postgres,stead-sqlite")
    assert str(failed["stead-postgres"]["failed"]).startswith("OperationalError: ")
    assert "\n" not in str(failed["stead-postgres"]["failed"])
    assert failed["stead-sqlite"]["runs"] == 5
    late = rows("--sides", "stead-sqlite", "--budget", "0.01")
    assert late["stead-sqlite"] == {
        "in_flight": 5,
        "side": "stead-sqlite",
        "unfinished": "did not finish in 0.01 s",
    }


def test_the_bench_readme_has_one_dated_table_per_script() -> None:
    """bench/README.md: a section per script in bench/, and each section that shows figures
    says once when and on what machine they were taken. Figures are current, not a diary:
    no times of day."""
    text = (ROOT / "bench" / "README.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    named = {section.split("`")[1] for section in sections}
    assert named == {p.name for p in (ROOT / "bench").glob("*.py")}
    for section in sections:
        dated = re.findall(r"^20\d\d-\d\d-\d\d, the 2-vCPU VM", section, re.M)
        assert len(dated) == (1 if "| ---: |" in section else 0), section.split("\n")[0]
    assert not re.search(r"\bUTC\b|\b\d\d:\d\d\b", text)
