"""Benchmark: how fast the command line starts, as ratios to ``python -c "import polars"`` measured in the same run
(targets, issue 17: ``forensics --version`` within 1.3x, ``forensics analyze`` on the 2,000-line sample within 2x).

Each command runs once first (its byte code and Numba caches written, as an installed package has them: a source
tree run with ``PYTHONDONTWRITEBYTECODE=1`` compiles every module on every start), then ``--repeat`` times; the
best wall time and the best CPU time (user + system, of the process and its children) are shown: on a machine
shared with other work the CPU time is the steadier of the two.

    python benchmarks/startup.py [--repeat 5] [--keep-no-bytecode]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_logs" / "tr8-104B-sample"


def best(command: list[str], repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds) of ``repeat`` fresh runs, after one run that warms the caches."""
    walls, cpus = [], []
    for n in range(repeat + 1):
        before = os.times()
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
        wall = time.perf_counter() - start
        after = os.times()
        if n:  # (the first run writes the caches)
            walls.append(wall)
            cpus.append(after.children_user - before.children_user + after.children_system - before.children_system)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep-no-bytecode", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE if set (every module compiled on every start)")
    args = parser.parse_args()
    env = dict(os.environ)
    if not args.keep_no_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    cli = [shutil.which("forensics") or sys.executable, *([] if shutil.which("forensics") else ["-m", "forensics.cli"])]
    base = best([sys.executable, "-c", "import polars"], args.repeat, env)
    rows = [
        ("python -c 'import polars'", base, None),
        ("forensics --version", best([*cli, "--version"], args.repeat, env), 1.3),
        ("forensics --help", best([*cli, "--help"], args.repeat, env), None),
        (f"forensics analyze {SAMPLE.relative_to(ROOT)} (stdout)", best([*cli, "analyze", str(SAMPLE)], args.repeat,
                                                                         env), 2.0),
    ]
    print(f"best of {args.repeat}, each a fresh process"
          + (", byte code compiled on every start" if "PYTHONDONTWRITEBYTECODE" in env else ""))
    print("| command | wall s | x import polars | CPU s | x import polars | target |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, (wall, cpu), target in rows:
        print(f"| {label} | {wall:.3f} | {wall / base[0]:.2f} | {cpu:.3f} | {cpu / base[1]:.2f} | "
              f"{'' if target is None else f'{target}x'} |")


if __name__ == "__main__":
    main()
