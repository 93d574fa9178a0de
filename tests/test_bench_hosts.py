"""bench/_hosts.py holds each worker of a fleet to a share of a CPU with a cgroup of its own
(cgroup v1 ``cpu``): the quota it writes is the share of the period, each group gets the
processes it was given, the groups go once empty, and where there is no controller the bench
runs uncapped and says why. On a directory laid out as the controller is, so it needs
neither root nor the controller; the kernel's side (throttling) is the kernel's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from _hosts import PERIOD_US, Shares, describe, unavailable


def controller(tmp_path: Path) -> Path:
    root = tmp_path / "cpu"
    root.mkdir()
    (root / "cpu.cfs_quota_us").write_text("-1\n")
    return root


def test_each_group_is_held_to_the_share_of_the_period(tmp_path: Path) -> None:
    root = controller(tmp_path)
    shares = Shares(0.25, root)
    assert shares.applied == 0.25 and shares.why_not is None
    shares.place(101)
    shares.place(102, 103)
    [top] = [p for p in root.iterdir() if p.is_dir()]
    groups = sorted(p for p in top.iterdir())
    assert [(g / "cpu.cfs_period_us").read_text() for g in groups] == [str(PERIOD_US)] * 2
    assert [(g / "cpu.cfs_quota_us").read_text() for g in groups] == [str(PERIOD_US // 4)] * 2
    # A real cgroup.procs takes one pid a write; this one keeps the last written.
    assert [(g / "cgroup.procs").read_text() for g in groups] == ["101", "103"]
    for g in groups:  # the kernel's files: what makes a group removable is its processes
        for f in g.iterdir():
            f.unlink()
    shares.close()
    assert not any(p.is_dir() for p in root.iterdir())
    assert shares.applied == 0.25  # still said of the rows measured under it


def test_without_the_controller_the_workers_run_uncapped_and_the_bench_says_why(
    tmp_path: Path,
) -> None:
    shares = Shares(0.25, tmp_path / "nowhere")
    shares.place(101)  # nothing to place it in: a no-op
    assert shares.applied is None
    assert shares.why_not == f"no cgroup v1 cpu controller at {tmp_path / 'nowhere'}"
    assert unavailable(tmp_path / "nowhere") == shares.why_not
    assert describe(None, "each worker") == "each worker: uncapped"
    uncapped = Shares(None, controller(tmp_path))
    assert (uncapped.applied, uncapped.why_not, uncapped.groups) == (None, None, [])


def test_a_share_out_of_range_is_refused_saying_what_it_takes(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"a CPU share from 0\.01 to the machine's CPUs"):
        Shares(0.001, controller(tmp_path))
