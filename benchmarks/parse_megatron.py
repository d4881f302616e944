"""Benchmark: the vectorised Megatron parser against a plain line-by-line ``re`` parser.

Writes a 300,000-iteration log (~120 MB) under benchmarks/_data/ (once), and a copy in which every fifth stretch of
1,000 iterations went NaN (no loss, grad norm nan: lines of another shape than the rest). Then times, each in a
fresh process: reading the file alone, a one-pass compiled-regex parser (iteration fields to long rows, event lines
matched), and ``parsers.load_run``. Peak memory is the process's max RSS growth over its state after imports.
``--phases`` adds where the parser's time goes on the clean log (warm, in one process, each phase cumulative: the
look for the format, the blocks read, the lines as Polars frames, their classification, the iteration fields split
and cast, then the whole parse, whose remainder assembles the frames).

    python benchmarks/parse_megatron.py [--iterations 300000] [--phases]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def generate(path: Path, iterations: int, nan_stretches: bool = False) -> None:
    rnd = random.Random(0)
    with path.open("w", encoding="utf-8") as f:
        f.write("------------------------ arguments ------------------------\n")
        for k, v in {"hidden_size": 4096, "num_layers": 32, "seed": 1234, "log_interval": 1}.items():
            f.write(f"  {k} {'.' * (48 - len(k))} {v}\n")
        f.write("-------------------- end of arguments ---------------------\n")
        for it in range(1, iterations + 1):
            loss = 2.0 + 9.0 * (1 + it / 500) ** -0.5 + rnd.gauss(0, 0.01)
            nan = nan_stretches and (it // 1000) % 5 == 4
            f.write(
                f"[default7]: iteration {it:8d}/{iterations:8d} | consumed samples: {it * 1024:12d} | "
                f"consumed tokens: {it * 1024 * 2048:12d} | elapsed time per iteration (s): {10 + rnd.random():.2f} | "
                f"learning rate: {6e-5 * min(1, it / 3000):.3E} | global batch size:  1024 | "
                + ("" if nan else f"lm loss: {loss:.6E} | ")
                + f"loss scale: {2 ** (12 + (it // 5000) % 4):.1f} | "
                f"grad norm: {'nan' if nan else f'{math.exp(rnd.gauss(0, 0.2)):.3f}'} | num zeros: 0.0 | "
                f"number of skipped iterations:   0 | number of nan iterations:   0 | "
                f"samples per second: {100 + rnd.random():.3f} | TFLOPs: {140 + rnd.random():.2f} |\n"
            )
            if it % 1000 == 0:
                f.write(f"saving checkpoint at iteration {it:7d} to /ckpt\n")
                f.write(f"[Rank 0] (after {it} iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0\n")


BASELINE = r'''
import re, sys, time, resource
ITER = re.compile(r"^(?:\d+: |\[[A-Za-z_]+\d+\]: ?)*\s*(?:\[[^\]]*\]\s*)?iteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
FIELD = re.compile(r"\s*([^|:]+?)\s*:\s*([^|]*?)\s*\|")
EVENT = re.compile(r"saving checkpoint at iteration\s+(\d+)|loading checkpoint from .*? at iteration (\d+)|OVERFLOW!|"
                   r"found NaN|Traceback \(most recent call last\)|Error:|-{8,} arguments -{8,}")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
rows, events = [], []
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for n, line in enumerate(f, 1):
        m = ITER.match(line)
        if m:
            step = int(m.group(1))
            for key, val in FIELD.findall(m.group(3)):
                try:
                    rows.append((step, key, float(val)))
                except ValueError:
                    pass
        elif EVENT.search(line):
            events.append((n, line))
elapsed = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(elapsed, peak * 1024, len(rows))
'''

READ_ONLY = r'''
import sys, time
t = time.perf_counter()
data = open(sys.argv[1], "rb").read()
print(time.perf_counter() - t, 0, len(data))
'''

OURS = r'''
import sys, time, resource
import polars as pl
from parsers import load_run
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
run = load_run(sys.argv[1])
elapsed = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(elapsed, peak * 1024, run.metrics.height)
'''


PHASES = r'''
import sys, time
from pathlib import Path
from parsers import megatron as m
from parsers.registry import console_formats
from parsers.textfile import inspect_text, read_blocks, scan_blocks
path, repeat = Path(sys.argv[1]), int(sys.argv[2])
patterns = {"megatron": m.DETECT, **{n: f.detect for n, f in console_formats().items()}}
text = inspect_text(path, path.name, patterns, head_patterns={"pdsh": m.PDSH_CMD}, first_of=True)
prefix = m._prefix_pattern(text.matches.get("pdsh"))
layout = m.learn_layout(text, prefix)
phases = {
    "look (inspect_text, all formats)": lambda: inspect_text(path, path.name, patterns, head_patterns={"pdsh": m.PDSH_CMD},
                                                             first_of=True),
    "read blocks": lambda: [len(b) for b in read_blocks(path)],
    "+ lines as frames (CSV)": lambda: [b.collect(engine="streaming") for b in scan_blocks(text)],
    "+ classify lines": lambda: [m._classify(b, prefix).collect(engine="streaming") for b in scan_blocks(text)],
    "+ split and cast fields": lambda: [m._line_rows(m._classify(b, prefix), prefix, layout).collect(engine="streaming")
                                        for b in scan_blocks(text)],
    "whole parse (+ assemble)": lambda: m.parse_megatron(text, "run", path.name),
}
best = {}
for _ in range(repeat):
    for name, run in phases.items():
        t = time.perf_counter()
        run()
        best[name] = min(best.get(name, 1e9), time.perf_counter() - t)
for name, secs in best.items():
    print(f"{name}\t{secs:.3f}")
'''


def timed(code: str, path: Path) -> tuple[float, float, int]:
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--phases", action="store_true", help="also time the parser's phases on the clean log")
    args = parser.parse_args()
    data_dir = HERE / "_data"
    data_dir.mkdir(exist_ok=True)
    logs = {
        "clean": data_dir / f"megatron_{args.iterations}.log",
        "NaN stretches": data_dir / f"megatron_{args.iterations}_nan.log",
    }
    for kind, path in logs.items():
        if not path.exists():
            generate(path, args.iterations, nan_stretches=kind != "clean")
    header = ("log".ljust(22), "parser".ljust(20), "seconds".rjust(8), "speed-up vs re", "peak RSS growth", "x file size")
    print(f"{args.iterations:,} iteration lines per log; best of {args.repeat}")
    print("| " + " | ".join(header) + " | rows |")
    print(f"|{'-' * 24}|{'-' * 22}|{'-' * 10}|{'-' * 16}|{'-' * 17}|{'-' * 13}|------|")
    timings = {}
    for kind, path in logs.items():
        size = path.stat().st_size
        parsers = (("read file only", READ_ONLY), ("line-by-line re", BASELINE), ("forensics (polars)", OURS))
        results = {}
        for name, code in parsers:
            if name == "read file only" and kind != "clean":
                continue
            runs = [timed(code, path) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r[0])
            results[name] = (best[0], max(r[1] for r in runs), best[2])
        base_t = results["line-by-line re"][0]
        for name, (secs, peak, rows) in results.items():
            label = f"{kind} ({size / 1e6:.0f} MB)"
            print(
                f"| {label:<22} | {name:<20} | {secs:8.2f} | {base_t / secs:13.1f}x | {peak / 1e6:12.0f} MB "
                f"| {peak / size:10.2f}x | {rows} |"
            )
            timings[f"{kind}: {name}"] = secs
    print(json.dumps(timings))
    if args.phases:
        out = subprocess.run([sys.executable, "-c", PHASES, str(logs["clean"]), str(args.repeat)], capture_output=True,
                             text=True, check=True, cwd=ROOT).stdout
        print(f"\nphases on the clean log (warm, one process, cumulative; best of {args.repeat})")
        print("| phase | seconds |\n|---|---:|")
        for line in out.splitlines():
            name, secs = line.split("\t")
            print(f"| {name} | {secs} |")


if __name__ == "__main__":
    main()
