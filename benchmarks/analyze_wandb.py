"""Benchmark: ``forensics analyze`` end to end on a 1M-step W&B history CSV against a bare ``polars.read_csv`` of
the same file, each the wall time of a fresh process (issue 19: within 5x).

The history is what ``run.history()`` written by pandas looks like: ``_step``, ``_runtime``, ``_timestamp``,
``train/loss``, ``train/grad_norm``, ``lr`` every step, ``val/loss`` every 1,000 (empty cells between), Student-t(4)
noise on a power-law loss, a warm-up and cosine LR, two loss spikes and a grad-norm spike. Written once under
benchmarks/_data/. The analysis writes its markdown report (no plots) to a temporary directory.

    python benchmarks/analyze_wandb.py [--steps 1000000] [--repeat 3] [--tree /path/to/other/checkout]

``--tree`` also times the analysis of another checkout (a before/after table in one run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def history_csv(path: Path, steps: int, seed: int = 0) -> None:
    """A W&B history export of ``steps`` steps (see the module docstring)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps, dtype=float)
    loss = 2.5 + 8.0 * (1.0 + t / 500.0) ** -0.4 * np.exp(0.02 * rng.standard_t(4, steps))
    grad = np.exp(0.2 * rng.standard_t(4, steps)) * (0.3 + 2.0 / (1.0 + t / 200.0))
    for at in (steps * 3 // 10, steps * 7 // 10):
        loss[at:at + 3] *= 1.8
    grad[steps // 2] *= 40.0
    warm = max(1, steps // 100)
    lr = np.where(t < warm, 3e-4 * (t + 1) / warm, 3e-4 * 0.5 * (1 + np.cos(np.pi * (t - warm) / max(steps - warm, 1))))
    runtime = np.cumsum(0.25 + 0.01 * rng.random(steps))
    val = np.where(t % 1000 == 999, loss + 0.05, np.nan)
    pl.DataFrame({
        "_step": t.astype(np.int64), "_runtime": runtime, "_timestamp": 1.7e9 + runtime, "train/loss": loss,
        "train/grad_norm": grad, "lr": lr, "val/loss": val,
    }).with_columns(pl.col("val/loss").fill_nan(None)).write_csv(path)


# each child prints its peak RSS (bytes) and its CPU time (user + sys, every thread): on a shared, loaded machine the
# CPU time is what a change moves, the wall time also what the other processes do
USAGE = ("u = resource.getrusage(resource.RUSAGE_SELF); "
         "print(json.dumps([u.ru_maxrss * 1024, u.ru_utime + u.ru_stime]))")
READ_CSV = f"import json, resource, sys, polars; polars.read_csv(sys.argv[1]); {USAGE}"


RUN = r'''
import json, resource, sys
from forensics.cli import main
sys.argv = ["forensics", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    if exc.code:
        raise
''' + USAGE + "\n"


def timed(argv: list[str], tree: Path = ROOT) -> tuple[float, int, float]:
    """One fresh process (run in ``tree``, which is then first on the path): its wall time, peak RSS (bytes) and
    CPU time (user + sys)."""
    start = time.perf_counter()
    done = subprocess.run(argv, check=True, capture_output=True, text=True, cwd=tree)
    rss, used = json.loads(done.stdout.strip().splitlines()[-1])
    return time.perf_counter() - start, int(rss), float(used)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", type=Path, help="another checkout to time as well")
    args = parser.parse_args()
    data = HERE / "_data"
    data.mkdir(exist_ok=True)
    path = data / f"wandb_history_{args.steps}.csv"
    if not path.exists():
        history_csv(path, args.steps)
    with tempfile.TemporaryDirectory() as out:
        analyze = [sys.executable, "-c", RUN, "analyze", str(path), "-o", str(Path(out) / "report.md"), "--no-plots"]
        commands = [("python -c 'polars.read_csv(f)'", [sys.executable, "-c", READ_CSV, str(path)], ROOT),
                    *((f"forensics analyze f -o report.md --no-plots ({label})", analyze, tree)
                      for label, tree in (("other tree", args.tree), ("this tree", ROOT)) if tree is not None)]
        # the commands take turns, so that a change in the machine's load falls on each of them alike; per command,
        # the best wall time with its peak RSS, and the least CPU time
        best: dict[str, tuple[float, int]] = {}
        cpu: dict[str, float] = {}
        for _ in range(args.repeat):
            for label, argv, tree in commands:
                seconds, rss, used = timed(argv, tree)
                best[label] = min(best.get(label, (float("inf"), 0)), (seconds, rss))
                cpu[label] = min(cpu.get(label, float("inf")), used)
    rows = [(label, *best[label], cpu[label]) for label, _, _ in commands]
    size = path.stat().st_size
    print(f"{args.steps:,}-step W&B history CSV ({size / 1e6:.0f} MB); best of {args.repeat}, each a fresh process\n")
    print("| command | wall s | x read_csv | CPU s | x read_csv | peak RSS | x file size |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, seconds, rss, cpu in rows:
        print(f"| {label} | {seconds:.2f} | {seconds / rows[0][1]:.1f}x | {cpu:.2f} | {cpu / rows[0][3]:.1f}x "
              f"| {rss / 1e6:.0f} MB | {rss / size:.2f}x |")


if __name__ == "__main__":
    main()
