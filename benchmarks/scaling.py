"""Benchmark: how ``forensics analyze`` scales with the length of a run (issue 19).

Runs the analysis end to end (read, detect, markdown report without plots) on W&B history CSVs of 10k, 100k, 1M
and 10M steps (``analyze_wandb.history_csv``: seven columns, Student-t noise, two loss spikes and a grad-norm
spike), each in a fresh process, and prints wall time, peak RSS, and the cost per point (a point is one logged
value: three per step and a validation loss every 1,000). The cost per point must not grow with the run: the ratio
of the 10M and 100k per-point costs is the figure of merit (target under 1.5).

    python benchmarks/scaling.py [--steps 10000,100000,1000000,10000000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from analyze_wandb import history_csv  # noqa: E402

RUN = r'''
import json, resource, sys, time
start = time.perf_counter()
from forensics.cli import main
sys.argv = ["forensics", "analyze", sys.argv[1], "-o", sys.argv[2], "--no-plots"]
try:
    main()
except SystemExit as exc:
    if exc.code:
        raise
print(json.dumps([time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024]))
'''


def measure(path: Path, repeat: int) -> tuple[float, int]:
    """Best wall time (from interpreter start-up done to report written) and the peak RSS of that run."""
    best: tuple[float, int] = (float("inf"), 0)
    with tempfile.TemporaryDirectory() as out:
        for _ in range(repeat):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", RUN, str(path), str(Path(out) / "report.md")],
                                  capture_output=True, text=True, check=True, cwd=ROOT)
            wall = time.perf_counter() - start
            _, rss = json.loads(done.stdout.strip().splitlines()[-1])
            best = min(best, (wall, int(rss)))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10000,100000,1000000,10000000")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    data = HERE / "_data"
    data.mkdir(exist_ok=True)
    rows = []
    for steps in (int(x) for x in args.steps.split(",")):
        path = data / f"wandb_history_{steps}.csv"
        if not path.exists():
            history_csv(path, steps)
        points = 3 * steps + steps // 1000
        wall, rss = measure(path, args.repeat)
        rows.append((steps, path.stat().st_size, points, wall, rss))
    print(f"forensics analyze on W&B history CSVs, each in a fresh process, best of {args.repeat}\n")
    print("| steps | file | points | wall s | peak RSS | RSS / file | us per point |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    cost = {}
    for steps, size, points, wall, rss in rows:
        cost[steps] = wall / points * 1e6
        print(f"| {steps:,} | {size / 1e6:.0f} MB | {points:,} | {wall:.2f} | {rss / 1e6:.0f} MB | {rss / size:.1f}x "
              f"| {cost[steps]:.2f} |")
    if 100_000 in cost and 10_000_000 in cost:
        print(f"\nper-point cost, 10M steps / 100k steps: {cost[10_000_000] / cost[100_000]:.2f} (target under 1.5)")


if __name__ == "__main__":
    main()
