"""Benchmark: ``forensics compare`` over 50 generated runs of 100,000 steps each, cold (empty cache) and warm.

Writes the runs once under benchmarks/_data/compare-<runs>x<steps>/ (Megatron text logs, one line per step; every
fifth run diverges), then times ``compare_runs`` in a fresh process: cold with an empty cache, warm with the cache
the cold pass left. Peak memory is reported for the parent (which keeps only rows and binned curves) and for the
largest worker process, with 10, 25 and 50 runs to show that it does not grow with the number of runs.

    python benchmarks/compare.py [--runs 50] [--steps 100000] [--jobs N]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CODE = """
import resource, sys, time
from forensics.compare import compare_runs
paths = sorted(p for p in __import__('pathlib').Path(sys.argv[1]).iterdir() if p.is_dir())[: int(sys.argv[2])]
t = time.perf_counter()
comparison, overlay = compare_runs(paths, cache=sys.argv[3], jobs=int(sys.argv[4]) or None)
elapsed = time.perf_counter() - t
bad = sum(r.outcome in ("diverged", "nan") for r in comparison.rows)
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, len(comparison.rows), bad, overlay.height)
"""


def generate(root: Path, runs: int, steps: int) -> None:
    sys.path.insert(0, str(ROOT))
    from forensics.evaluation.experiments import BASE_ARGS, Trajectory, write_run

    for i in range(runs):
        lr = 1e-4 * (1 + i % 5)
        path = Trajectory(lr=lr, break_step=int(steps * 0.7) if i % 5 == 4 else None)
        write_run(root / f"run-{i:02d}", {**BASE_ARGS, "seed": 1000 + i}, path, steps, seed=i, log_interval=1)


def timed(data: Path, n: int, cache: Path, jobs: int) -> tuple[float, float, float, int, int, int]:
    out = subprocess.run([sys.executable, "-c", CODE, str(data), str(n), str(cache), str(jobs)], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout.split()
    return float(out[0]), float(out[1]), float(out[2]), int(out[3]), int(out[4]), int(out[5])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per CPU)")
    args = parser.parse_args()
    data = HERE / "_data" / f"compare-{args.runs}x{args.steps}"
    if not (data / f"run-{args.runs - 1:02d}" / "train.log").exists():
        generate(data, args.runs, args.steps)
    size = sum(p.stat().st_size for p in data.rglob("*.log"))
    print(f"{args.runs} runs x {args.steps:,} steps: {size / 1e9:.2f} GB of Megatron logs")
    print("| runs | pass | seconds | warm faster by | parent peak RSS | largest worker RSS | rows | failed | curve pts |")
    print("|-----:|------|--------:|---------------:|----------------:|-------------------:|-----:|-------:|----------:|")
    for n in sorted({min(10, args.runs), min(25, args.runs), args.runs}):
        cache = Path(tempfile.mkdtemp(prefix="forensics-bench-cache-"))
        try:
            cold = timed(data, n, cache, args.jobs)
            warm = timed(data, n, cache, args.jobs)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        for name, r in (("cold", cold), ("warm", warm)):
            speed = f"{cold[0] / warm[0]:.1f}x" if name == "warm" else ""
            print(f"| {n:4d} | {name} | {r[0]:7.2f} | {speed:>14} | {r[1] / 1e6:12.0f} MB | {r[2] / 1e6:15.0f} MB "
                  f"| {r[3]:4d} | {r[4]:6d} | {r[5]:9d} |")


if __name__ == "__main__":
    main()
