"""Benchmark: how fast the command line starts, as ratios to ``python -c "import polars"`` measured in the same run
(targets, issue 17: ``forensics --version`` within 1.3x, ``forensics analyze`` on the 2,000-line sample within 2x).

    python benchmarks/startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_logs" / "tr8-104B-sample"


def best(command: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cli = [shutil.which("forensics") or sys.executable, *([] if shutil.which("forensics") else ["-m", "forensics.cli"])]
    base = best([sys.executable, "-c", "import polars"], args.repeat)
    rows = [
        ("python -c 'import polars'", base, None),
        ("forensics --version", best([*cli, "--version"], args.repeat), 1.3),
        ("forensics --help", best([*cli, "--help"], args.repeat), None),
        (f"forensics analyze {SAMPLE.relative_to(ROOT)} (stdout)", best([*cli, "analyze", str(SAMPLE)], args.repeat), 2.0),
    ]
    print(f"best of {args.repeat}, each a fresh process")
    print("| command | s | x import polars | target |")
    print("|---|---:|---:|---:|")
    for label, seconds, target in rows:
        print(f"| {label} | {seconds:.3f} | {seconds / base:.2f} | {'' if target is None else f'{target}x'} |")


if __name__ == "__main__":
    main()
