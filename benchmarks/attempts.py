"""Benchmark: ``forensics analyze`` on a log that restarts every few lines (issue 19: per-attempt work).

A nanoGPT console whose iteration counter goes back every 5 lines (each stretch an attempt, a rollback of two
steps), with 100, 500 and 2,000 attempts, is analysed end to end (markdown without plots, terminal summary) in a
fresh process; the table gives the wall time and the cost per attempt, which must not grow with the attempts.

    python benchmarks/attempts.py [--attempts 100,500,2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def console(path: Path, attempts: int, per: int = 5) -> Path:
    """A nanoGPT stdout of ``attempts`` launches of ``per`` iterations, each starting two steps back."""
    rng = random.Random(1)
    lines = [f"iter {a * (per - 2) + i}: loss {4 - 1e-4 * (a * (per - 2) + i) + rng.gauss(0, 0.02):.4f}, "
             "time 118.20ms, mfu 37.9%" for a in range(attempts) for i in range(per)]
    path.write_text("\n".join(lines) + "\n")
    return path


def best(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", default="100,500,2000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"best of {args.repeat}, each a fresh process")
    print("| attempts | lines | analyze s | ms per attempt |")
    print("|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.attempts.split(",")):
            log = console(Path(tmp) / f"train_{n}.log", n)
            cmd = [sys.executable, "-m", "forensics.cli", "analyze", str(log), "-o", str(Path(tmp) / f"r{n}.md"),
                   "--no-plots"]
            seconds = best(cmd, args.repeat)
            print(f"| {n:,} | {n * 5:,} | {seconds:.2f} | {1000 * seconds / n:.1f} |")


if __name__ == "__main__":
    main()
