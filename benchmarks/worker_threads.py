"""Benchmark: ``forensics compare`` on the local engine with each worker process's thread pools limited to its share
of the CPUs (``cpus // jobs``, :func:`forensics.engines.worker_threads`) and without (every worker's Polars, BLAS and
OpenMP taking a thread per CPU, as before), in the same run, alternating, cold cache each time.

Uses the Megatron runs of ``benchmarks/compare.py`` (one line per step; written once under benchmarks/_data/).
Reports the wall time and the CPU time of the worker processes (user + system, from ``RUSAGE_CHILDREN``).

    python benchmarks/worker_threads.py [--runs 40] [--steps 20000] [--jobs 2] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CODE = """
import resource, sys, time
from pathlib import Path
from forensics.compare import compare_runs
paths = sorted(p for p in Path(sys.argv[1]).iterdir() if p.is_dir())[: int(sys.argv[2])]
t = time.perf_counter()
compare_runs(paths, cache=sys.argv[3], jobs=int(sys.argv[4]))
wall = time.perf_counter() - t
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, children.ru_utime + children.ru_stime)
"""


def timed(data: Path, runs: int, jobs: int, limited: bool) -> tuple[float, float]:
    from forensics.engines import THREAD_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    if not limited:  # what each worker took before: a thread per CPU (a variable already set is kept by the engine)
        env |= dict.fromkeys(THREAD_VARIABLES, str(os.cpu_count() or 1))
    cache = Path(tempfile.mkdtemp(prefix="forensics-bench-cache-"))
    try:
        out = subprocess.run([sys.executable, "-c", CODE, str(data), str(runs), str(cache), str(jobs)], env=env,
                             capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(HERE)]
    from compare import generate

    data = HERE / "_data" / f"compare-{args.runs}x{args.steps}"
    if not (data / f"run-{args.runs - 1:02d}" / "train.log").exists():
        generate(data, args.runs, args.steps)
    print(f"{args.runs} runs x {args.steps:,} steps, --jobs {args.jobs} on {os.cpu_count()} CPUs, cold cache")
    print("| worker threads | repeat | wall s | workers' CPU s |")
    print("|----------------|-------:|-------:|---------------:|")
    share = max(1, (os.cpu_count() or 1) // args.jobs)
    for repeat in range(1, args.repeats + 1):
        for limited in (False, True):
            wall, cpu = timed(data, args.runs, args.jobs, limited)
            label = f"{share} (cpus // jobs)" if limited else f"{os.cpu_count()} (each: all CPUs)"
            print(f"| {label} | {repeat} | {wall:6.1f} | {cpu:14.1f} |", flush=True)


if __name__ == "__main__":
    main()
