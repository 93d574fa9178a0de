"""``bench/overhead.py`` of two checkouts in alternate rounds: is this tree slower than that one?

    .venv/bin/python bench/against.py ../other-checkout          # this tree vs that one, ext4
    .venv/bin/python bench/against.py ../other-checkout --dir /dev/shm --rounds 9   # tmpfs: CPU

Two versions of stead cannot share a process, and the machine's speed drifts over minutes, so
each round runs one round of each tree's own ``bench/overhead.py`` (``--rounds 1 --json``,
``PYTHONPATH=<tree>/src``, this interpreter for both) in a child process, the two in an order
that alternates from round to round. Reported per side: the median over rounds of µs per step
for the floor and each tool class, the ratio to the floor of the same child (what the README
quotes), and this tree's time over the other's, paired by round. For a figure without noise,
count instructions instead (``bench/instructions.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def one_round(tree: Path, runs: int, directory: str | None) -> dict[str, float]:
    """µs per step of the floor and of each tool class, from one round of ``tree``'s bench."""
    command = [sys.executable, str(tree / "bench" / "overhead.py"), "--rounds", "1"]
    command += ["--runs", str(runs), "--json"] + (["--dir", directory] if directory else [])
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    rows = json.loads(done.stdout)["rows"]
    return {r["tool_effect"] or "floor": r["us_per_step_median"] for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("other", type=Path, help="the checkout to compare with (its src/, bench/)")
    parser.add_argument("--tree", type=Path, default=HERE.parent, help="default: this one")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=30, help="timed runs per batch")
    parser.add_argument("--dir", help="where the SQLite files go (e.g. /dev/shm)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    trees = {"this": args.tree.resolve(), "other": args.other.resolve()}
    seen: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
    for r in range(args.rounds):
        for side in ("this", "other") if r % 2 == 0 else ("other", "this"):
            seen[side].append(one_round(trees[side], args.runs, args.dir))
        print(f"  round {r + 1}/{args.rounds}", file=sys.stderr)
    # Rows both trees have (a newer tree may add one, e.g. the ``effects`` mode).
    names = [n for n in seen["this"][0] if n in seen["other"][0]]
    out: dict[str, Any] = {"trees": {k: str(v) for k, v in trees.items()}, "dir": args.dir}
    for name in names:
        a = [x[name] for x in seen["this"]]
        b = [x[name] for x in seen["other"]]
        out[name] = {
            "this_us": round(statistics.median(a), 1),
            "other_us": round(statistics.median(b), 1),
            "this_x_floor": round(statistics.median(x[name] / x["floor"] for x in seen["this"]), 3),
            "other_x_floor": round(
                statistics.median(x[name] / x["floor"] for x in seen["other"]), 3
            ),
            "this_over_other": round(
                statistics.median(p / q for p, q in zip(a, b, strict=True)), 3
            ),
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"this: {trees['this']}\nother: {trees['other']}\nfiles in: {args.dir or 'a temp dir'}")
    print(
        f"{'side':<17} {'this µs':>8} {'other µs':>9} {'this x fl':>10} {'other x fl':>11} "
        f"{'this/other':>11}"
    )
    for name in names:
        row = out[name]
        print(
            f"{name:<17} {row['this_us']:>8.1f} {row['other_us']:>9.1f} "
            f"{row['this_x_floor']:>9.2f}x {row['other_x_floor']:>10.2f}x "
            f"{row['this_over_other']:>10.3f}"
        )


if __name__ == "__main__":
    main()
