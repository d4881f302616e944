"""Benchmark: how ``forensics analyze`` scales with the length of a run (issue 19).

Runs the analysis end to end (read, detect, markdown report without plots) on W&B history CSVs of 10k, 100k, 1M
and 10M steps (``analyze_wandb.history_csv``: seven columns, Student-t noise, two loss spikes and a grad-norm
spike), each in a fresh process, and prints wall time, peak RSS, and the cost per point (a point is one logged
value: three per step and a validation loss every 1,000). The cost per point must not grow with the run: the ratio
of the 10M and 100k per-point costs is the figure of merit (target under 1.5).

    python benchmarks/scaling.py [--steps 10000,100000,1000000,10000000] [--repeat 1] [--tree /path/to/other/checkout]

``--tree`` also runs another checkout on the same files, each step count's runs taking turns (a before/after table
in one run).
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
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps([time.perf_counter() - start, u.ru_maxrss * 1024, u.ru_utime + u.ru_stime]))
'''


def measure(path: Path, repeat: int, tree: Path = ROOT) -> tuple[float, int, float]:
    """Best wall time (process start to report written) with the peak RSS of that run, and the least CPU time
    (user + sys, every thread: on a shared, loaded machine what a change moves), of the checkout ``tree`` (run
    there, so its packages are first on the path)."""
    best: tuple[float, int] = (float("inf"), 0)
    cpu = float("inf")
    with tempfile.TemporaryDirectory() as out:
        for _ in range(repeat):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", RUN, str(path), str(Path(out) / "report.md")],
                                  capture_output=True, text=True, check=True, cwd=tree)
            wall = time.perf_counter() - start
            _, rss, used = json.loads(done.stdout.strip().splitlines()[-1])
            best = min(best, (wall, int(rss)))
            cpu = min(cpu, float(used))
    return (*best, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10000,100000,1000000,10000000")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tree", type=Path, help="another checkout to run as well")
    args = parser.parse_args()
    trees = [("this tree", ROOT), *((("other tree", args.tree.resolve()),) if args.tree else ())]
    data = HERE / "_data"
    data.mkdir(exist_ok=True)
    rows = []
    for steps in (int(x) for x in args.steps.split(",")):
        path = data / f"wandb_history_{steps}.csv"
        if not path.exists():
            history_csv(path, steps)
        points = 3 * steps + steps // 1000
        for label, tree in trees:
            wall, rss, cpu = measure(path, args.repeat, tree)
            rows.append((label, steps, path.stat().st_size, points, wall, rss, cpu))
    print(f"forensics analyze on W&B history CSVs, each in a fresh process, best of {args.repeat}\n")
    print("| tree | steps | file | points | wall s | CPU s | peak RSS | RSS / file | us per point (wall) "
          "| us per point (CPU) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cost: dict[tuple[str, int], tuple[float, float]] = {}
    for label, steps, size, points, wall, rss, cpu in rows:
        cost[label, steps] = wall / points * 1e6, cpu / points * 1e6
        print(f"| {label} | {steps:,} | {size / 1e6:.0f} MB | {points:,} | {wall:.2f} | {cpu:.2f} | {rss / 1e6:.0f} MB "
              f"| {rss / size:.1f}x | {cost[label, steps][0]:.2f} | {cost[label, steps][1]:.2f} |")
    for label, _ in trees:
        if (label, 100_000) in cost and (label, 10_000_000) in cost:
            (w1, c1), (w0, c0) = cost[label, 10_000_000], cost[label, 100_000]
            print(f"\n{label}: per-point cost, 10M steps / 100k steps: {w1 / w0:.2f} wall, {c1 / c0:.2f} CPU "
                  "(target under 1.5)")

if __name__ == "__main__":
    main()
