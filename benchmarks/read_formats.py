"""Benchmark: reading a 1M-line nanoGPT stdout, a 200k-entry Hugging Face ``trainer_state.json`` and a 1M-line
step table of JSON lines (``metrics.jsonl``) with ``parsers.load_run`` against a plain reader written here (a compiled
``re`` loop over the lines; ``json.load`` and a loop over ``log_history``; ``json.loads`` per line). Each is timed
in a fresh process, best of ``--repeat``; target: 4x the plain reader.

    python benchmarks/read_formats.py [--lines 1000000] [--entries 200000]
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


def nanogpt(path: Path, lines: int) -> None:
    rnd = random.Random(0)
    with path.open("w", encoding="utf-8") as f:
        f.write("tokens per iteration will be: 491,520\nInitializing a new model from scratch\n")
        for it in range(lines):
            loss = 2.8 + 8 * (1 + it / 2000) ** -0.5 + rnd.gauss(0, 0.02)
            if it % 2000 == 0:
                f.write(f"step {it}: train loss {loss:.4f}, val loss {loss + 0.05:.4f}\n")
                f.write("saving checkpoint to out\n")
            f.write(f"iter {it}: loss {loss:.4f}, time {100 + rnd.random() * 5:.2f}ms, mfu {30 + rnd.random():.2f}%\n")


def trainer_state(path: Path, entries: int) -> None:
    rnd = random.Random(0)
    history = []
    for k in range(1, entries + 1):
        loss = 0.5 + 2 * (1 + k / 500) ** -0.5 + rnd.gauss(0, 0.01)
        history.append({"epoch": k / 10_000, "grad_norm": math.exp(rnd.gauss(0, 0.3)), "learning_rate": 1e-4,
                        "loss": round(loss, 4), "step": k * 10})
        if k % 100 == 0:
            history.append({"epoch": k / 10_000, "eval_loss": loss + 0.1, "eval_runtime": 9.5, "step": k * 10})
    path.write_text(json.dumps({"global_step": entries * 10, "log_history": history, "max_steps": entries * 10}))


def metrics_jsonl(path: Path, lines: int) -> None:
    rnd = random.Random(0)
    with path.open("w", encoding="utf-8") as f:
        for step in range(lines):
            loss = 2.8 + 8 * (1 + step / 2000) ** -0.5 + rnd.gauss(0, 0.02)
            f.write(json.dumps({"step": step, "loss": round(loss, 6), "lr": 3e-4, "grad_norm": round(rnd.random(), 4),
                                "tokens": step * 524288, "elapsed": round(0.25 + rnd.random() / 100, 4)}) + "\n")


PLAIN_NANOGPT = r'''
import re, sys, time
ITER = re.compile(r"^iter (\d+): loss ([-+\w.]+), time ([\d.]+)ms")
EVAL = re.compile(r"^step (\d+): train loss ([-+\w.]+), val loss ([-+\w.]+)")
t = time.perf_counter()
rows = []
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        if m := ITER.match(line):
            step = int(m.group(1))
            rows.append((step, "loss", float(m.group(2))))
            rows.append((step, "iteration_time_ms", float(m.group(3))))
        elif m := EVAL.match(line):
            step = int(m.group(1))
            rows.append((step, "train_loss_eval", float(m.group(2))))
            rows.append((step, "val_loss", float(m.group(3))))
print(time.perf_counter() - t, len(rows))
'''

PLAIN_STATE = r'''
import json, sys, time
t = time.perf_counter()
with open(sys.argv[1]) as f:
    state = json.load(f)
rows = []
for entry in state["log_history"]:
    step = entry["step"]
    for key, value in entry.items():
        if key != "step" and isinstance(value, (int, float)):
            rows.append((step, key, float(value)))
print(time.perf_counter() - t, len(rows))
'''

PLAIN_JSONL = r'''
import json, sys, time
t = time.perf_counter()
rows = []
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        record = json.loads(line)
        step = record["step"]
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)):
                rows.append((step, key, float(value)))
print(time.perf_counter() - t, len(rows))
'''

OURS = r'''
import sys, time
from parsers import load_run
t = time.perf_counter()
run = load_run(sys.argv[1])
print(time.perf_counter() - t, run.metrics.height)
'''


def timed(code: str, path: Path) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = HERE / "_data"
    data.mkdir(exist_ok=True)
    cases = [("nanoGPT stdout", data / f"nanogpt_{args.lines}.log", nanogpt, args.lines, PLAIN_NANOGPT),
             ("trainer_state.json", data / f"trainer_state_{args.entries}" / "trainer_state.json", trainer_state,
              args.entries, PLAIN_STATE),
             ("step table, JSON lines", data / f"metrics_{args.lines}.jsonl", metrics_jsonl, args.lines, PLAIN_JSONL)]
    print(f"best of {args.repeat}, each in a fresh process")
    print("| input | size | plain reader s | forensics s | speed-up | rows (plain / forensics) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, path, make, n, plain in cases:
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            make(path, n)
        base = min((timed(plain, path) for _ in range(args.repeat)), key=lambda r: r[0])
        ours = min((timed(OURS, path) for _ in range(args.repeat)), key=lambda r: r[0])
        print(f"| {label} ({n:,}) | {path.stat().st_size / 1e6:.0f} MB | {base[0]:.2f} | {ours[0]:.2f} "
              f"| {base[0] / ours[0]:.1f}x | {base[1]:,} / {ours[1]:,} |")


if __name__ == "__main__":
    main()
