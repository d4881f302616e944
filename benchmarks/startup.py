"""Benchmark: how fast the command line starts, as ratios to ``python -c "import polars"`` measured in the same run
(targets, issue 17: ``forensics --version`` within 1.3x, ``forensics analyze`` on the 2,000-line sample within 2x).

Reference rows put the ratios in scale: the interpreter alone, numpy, typer (the CLI's framework: ``--version`` and
``--help`` cannot start faster than it; to run a command with options, typer 0.29 also imports pydantic), and scipy's
``special`` and ``optimize`` (what the noise fits of a long enough log load; a short log loads no scipy).
Beside the 2,000-line sample, a short log (LLaVA #918's excerpt: six Trainer dicts), whose analysis is mostly start-up.

Each command runs once first (its byte code and Numba caches written, as an installed package has them: a source
tree run with ``PYTHONDONTWRITEBYTECODE=1`` compiles every module on every start), then ``--repeat`` times, the
commands taking turns (so that a change in a shared machine's load falls on each alike); the best wall time and the
best CPU time (user + system, of the process and its children) are shown: on a machine shared with other work the CPU
time is the steadier of the two. ``--tree`` times the forensics commands of another checkout too (a before/after
table in one run); each runs as ``python -c "from forensics.cli import main; ..."`` in its tree, which is then first
on the path.

    python benchmarks/startup.py [--repeat 5] [--tree /path/to/other/checkout] [--keep-no-bytecode]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_logs" / "tr8-104B-sample"
SHORT = ROOT / "tests" / "fixtures" / "real" / "hf_trainer" / "llava_issue918_loss_spike_excerpt.txt"
# the console script's own code (what the installed ``forensics`` runs), run in a tree
CLI = "import sys; from forensics.cli import main; sys.argv[0] = 'forensics'; sys.exit(main())"


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh run."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    wall = time.perf_counter() - start
    after = os.times()
    return wall, after.children_user - before.children_user + after.children_system - before.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tree", type=Path, help="another checkout whose forensics commands to time as well")
    parser.add_argument("--keep-no-bytecode", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE if set (every module compiled on every start)")
    args = parser.parse_args()
    env = dict(os.environ)
    if not args.keep_no_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    # (label, command, tree, target ratio)
    rows: list[tuple[str, list[str], Path, float | None]] = [
        ("python -c 'import polars'", [py, "-c", "import polars"], ROOT, None),
        ("python -c 'pass'", [py, "-c", "pass"], ROOT, None),
        ("python -c 'import numpy'", [py, "-c", "import numpy"], ROOT, None),
        ("python -c 'import typer'", [py, "-c", "import typer"], ROOT, None),
        # (typer 0.29 imports pydantic when it runs a command with options, not for --version or --help)
        ("python -c 'import typer._adapters' (typer + pydantic)", [py, "-c", "import typer._adapters"], ROOT, None),
        ("python -c 'import scipy.special'", [py, "-c", "import scipy.special"], ROOT, None),
        ("python -c 'import scipy.optimize'", [py, "-c", "import scipy.optimize"], ROOT, None),
    ]
    for name, tree in (("other tree", args.tree), ("this tree", ROOT)):
        if tree is None:
            continue
        tree = tree.resolve()
        rows += [
            (f"forensics --version ({name})", [py, "-c", CLI, "--version"], tree, 1.3),
            (f"forensics --help ({name})", [py, "-c", CLI, "--help"], tree, None),
            (f"forensics analyze {SAMPLE.relative_to(ROOT)} ({name})", [py, "-c", CLI, "analyze", str(SAMPLE)], tree,
             2.0),
            (f"forensics analyze LLaVA #918 excerpt, 6 steps ({name})", [py, "-c", CLI, "analyze", str(SHORT)], tree,
             None),
        ]
    walls: dict[str, float] = {}
    cpus: dict[str, float] = {}
    for n in range(args.repeat + 1):
        for label, command, tree, _ in rows:
            wall, cpu = timed(command, env, tree)
            if n:  # (the first round writes the caches)
                walls[label] = min(walls.get(label, float("inf")), wall)
                cpus[label] = min(cpus.get(label, float("inf")), cpu)
    base = rows[0][0]
    print(f"best of {args.repeat}, each a fresh process, the commands taking turns"
          + (", byte code compiled on every start" if "PYTHONDONTWRITEBYTECODE" in env else ""))
    print("| command | wall s | x import polars | CPU s | x import polars | target |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, _, _, target in rows:
        print(f"| {label} | {walls[label]:.3f} | {walls[label] / walls[base]:.2f} | {cpus[label]:.3f} | "
              f"{cpus[label] / cpus[base]:.2f} | {'' if target is None else f'{target}x'} |")


if __name__ == "__main__":
    main()
