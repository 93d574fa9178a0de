"""CPU instructions per durable step, counted by valgrind's callgrind: a figure without noise.

    .venv/bin/python bench/instructions.py                    # this tree, read_only
    .venv/bin/python bench/instructions.py --tree ../other-checkout --tree .   # compare trees
    .venv/bin/python bench/instructions.py --effect non_idempotent --json

Wall-clock figures (``bench/overhead.py``) move by 10-20 % between rounds on a shared machine,
so a change of a few per cent in the CPU a step costs is invisible there. Counting the
instructions the interpreter executes is deterministic (with ``PYTHONHASHSEED=0``, the same
tree gives the same count to within a few hundred instructions a step), so each change can be
measured on its own.

How: for each tree, run ``stead_batch(effect, N, dir)`` of that tree's ``bench/overhead.py``
(``PYTHONPATH=<tree>/src``, the same interpreter for every tree) under
``valgrind --tool=callgrind`` twice, with N = 2 and N = 7 runs after the warm-up, on a fresh
directory of /dev/shm when there is one (no fsync waits in the count either way: callgrind
counts instructions, not time). Start-up, imports and the warm-up run are the same in both, so

    instructions per step = (I(7) - I(2)) / (5 runs x 21 steps)

Each count takes about half a minute under valgrind. Without valgrind the tool says so and
exits 0 (it is a tool for people, not a test). ``--profile`` prints instead the Python calls
one run makes (cProfile, the same difference of two batches), the other figure that says
where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STEPS_PER_RUN = 21
SMALL, LARGE = 2, 7

CHILD = """
import asyncio, importlib.util, sys
spec = importlib.util.spec_from_file_location("overhead", sys.argv[1])
overhead = importlib.util.module_from_spec(spec)
sys.modules["overhead"] = overhead
spec.loader.exec_module(overhead)
effect, runs, directory = sys.argv[2], int(sys.argv[3]), sys.argv[4]
if len(sys.argv) > 5:
    import cProfile, pstats
    profile = cProfile.Profile()
    profile.enable()
    asyncio.run(overhead.stead_batch(effect, runs, directory))
    profile.disable()
    stats = pstats.Stats(profile)
    print(sum(row[1] for row in stats.stats.values()))
else:
    asyncio.run(overhead.stead_batch(effect, runs, directory))
"""
"""Runs one batch of the tree's own ``bench/overhead.py`` workload (so an older tree is
measured on the workload it shipped with); with a 5th argument, prints the Python calls."""


def child_env(tree: Path) -> dict[str, str]:
    """The measured tree's sources first on the path; hashing fixed so counts repeat."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree / "src")
    env["PYTHONHASHSEED"] = "0"
    return env


def bench_script(tree: Path) -> Path:
    """The tree's own overhead bench, or this one's when the tree has none."""
    own = tree / "bench" / "overhead.py"
    return own if own.exists() else HERE / "overhead.py"


def instructions(tree: Path, effect: str, runs: int, directory: str) -> int:
    """Instructions callgrind counts for one process running ``runs`` runs of ``tree``."""
    with tempfile.TemporaryDirectory() as out:
        target = os.path.join(out, "callgrind.out")
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={target}",
                sys.executable,
                "-c",
                CHILD,
                str(bench_script(tree)),
                effect,
                str(runs),
                directory,
            ],
            env=child_env(tree),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with open(target, encoding="utf-8") as counts:
            for line in counts:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise SystemExit(f"no totals in callgrind's output for {tree}")


def python_calls(tree: Path, effect: str, runs: int, directory: str) -> int:
    """Python function calls (cProfile's count) of one process running ``runs`` runs."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(bench_script(tree)), effect, str(runs), directory, "p"],
        env=child_env(tree),
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--tree",
        action="append",
        type=Path,
        help="a checkout to measure (its src/ and bench/overhead.py); repeat to compare; "
        "default: this one",
    )
    parser.add_argument("--effect", default="read_only", help="the tool's effect class")
    parser.add_argument(
        "--profile", action="store_true", help="Python calls per run (cProfile), no valgrind"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [HERE.parent])]
    if not args.profile and shutil.which("valgrind") is None:
        print("valgrind is not installed: apt-get install valgrind (or use --profile)")
        return
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    rows: list[dict[str, Any]] = []
    for tree in trees:
        with tempfile.TemporaryDirectory(dir=base) as directory:
            count = python_calls if args.profile else instructions
            small = count(tree, args.effect, SMALL, directory)
            large = count(tree, args.effect, LARGE, directory)
        runs = LARGE - SMALL
        if args.profile:
            rows.append({"tree": str(tree), "python_calls_per_run": (large - small) / runs})
        else:
            per_step = (large - small) / (runs * STEPS_PER_RUN)
            rows.append({"tree": str(tree), "instructions_per_step": round(per_step)})
    if args.json:
        print(json.dumps({"effect": args.effect, "rows": rows}, indent=2))
        return
    key = "python_calls_per_run" if args.profile else "instructions_per_step"
    first = rows[0][key]
    for row in rows:
        change = f"  ({(row[key] / first - 1) * 100:+.1f} %)" if row is not rows[0] else ""
        print(f"{row[key]:>12,.0f} {key.replace('_', ' ')}  {row['tree']}{change}")


if __name__ == "__main__":
    main()
