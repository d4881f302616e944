"""Benchmark: our TensorBoard reader against tbparse and EventAccumulator (all scalars kept).

Writes one event file with 2,000,000 scalar events (10 tags x 200,000 steps, torch/tensorboardX byte layout, ~100 MB)
under benchmarks/_data/ (once), then times each reader in a fresh process and checks that all return the same rows.
The seconds leave out importing each reader's module but include loading numba (lazy, ~0.45 s); the peak RSS growth
includes both (polars ~50 MB, numba ~115 MB). ``forensics`` picks its path by
file size (numba loops from ``parsers.tfrecord.COMPILED_MIN_BYTES`` on); ``forensics, NumPy path`` forces the
Python framing and NumPy decoding that smaller files get. tbparse is not a dependency: ``pip install tbparse``.

    python benchmarks/read_tensorboard.py [--steps 200000] [--repeat 3] [--skip-slow]
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TAGS = ["lm loss", "grad-norm", "learning-rate", "loss-scale", "batch-size", "num-zeros", "params-norm",
        "iteration-time", "world-size", "throughput"]


def generate(path: Path, steps: int) -> None:
    sys.path.insert(0, str(ROOT))
    from parsers.tfrecord import masked_crc

    def record(data: bytes) -> bytes:
        header = struct.pack("<Q", len(data))
        return header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            byte = n & 0x7F
            n >>= 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)

    with path.open("wb") as f:
        f.write(record(b"\x09" + struct.pack("<d", 1.7e9) + b"\x1a\x0dbrain.Event:2"))
        encoded = [t.encode() for t in TAGS]
        for step in range(steps):
            chunk = []
            for k, tag in enumerate(encoded):
                value = b"\x0a" + varint(len(tag)) + tag + b"\x15" + struct.pack("<f", 1.0 + k + step * 1e-6)
                summary = b"\x0a" + varint(len(value)) + value
                event = (b"\x09" + struct.pack("<d", 1.7e9 + step) + (b"\x10" + varint(step) if step else b"")
                         + b"\x2a" + varint(len(summary)) + summary)
                chunk.append(record(event))
            f.write(b"".join(chunk))


COMMON = r'''
import sys, time, resource
path = sys.argv[1]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
'''
OURS = COMMON + r'''
from pathlib import Path
from parsers.tensorboard import parse_event_file
compiled = {"auto": None, "numpy": False}[sys.argv[2]]
t = time.perf_counter()
m = parse_event_file(Path(path), "bench", "bench", compiled=compiled).metrics
elapsed = time.perf_counter() - t
peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024
import polars as pl  # iteration-time is stored in ms; the stock readers give Megatron's seconds
raw = m.select(pl.when(pl.col("metric") == "iteration_time_ms").then(pl.col("value") / 1000).otherwise("value"))
print(elapsed, peak, m.height, float(raw.to_series().sum()))
'''
TBPARSE = COMMON + r'''
from tbparse import SummaryReader
t = time.perf_counter()
df = SummaryReader(path, extra_columns={"wall_time"}).scalars
elapsed = time.perf_counter() - t
print(elapsed, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024, len(df), float(df["value"].sum()))
'''
ACCUMULATOR = COMMON + r'''
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
t = time.perf_counter()
acc = EventAccumulator(path, size_guidance={"scalars": 0})
acc.Reload()
rows = [e for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)]
elapsed = time.perf_counter() - t
peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024
print(elapsed, peak, len(rows), float(sum(e.value for e in rows)))
'''


def timed(code: str, path: Path, *args: str) -> tuple[float, float, int, float]:
    out = subprocess.run([sys.executable, "-c", code, str(path), *args], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), float(out[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-slow", action="store_true", help="time only our reader")
    args = parser.parse_args()
    data_dir = HERE / "_data"
    data_dir.mkdir(exist_ok=True)
    path = data_dir / f"events.out.tfevents.{args.steps}.bench"
    if not path.exists():
        generate(path, args.steps)
    size = path.stat().st_size
    readers = [("forensics", OURS, args.repeat, ("auto",)), ("forensics, NumPy path", OURS, args.repeat, ("numpy",))]
    if not args.skip_slow:
        readers += [("tbparse", TBPARSE, 1, ()), ("EventAccumulator", ACCUMULATOR, 1, ())]
    results = {}
    for name, code, repeat, extra in readers:
        runs = [timed(code, path, *extra) for _ in range(repeat)]
        best = min(runs, key=lambda r: r[0])
        results[name] = (best[0], max(r[1] for r in runs), best[2], best[3])
    ours = results["forensics"][0]
    print(f"file: {path.name}, {size / 1e6:.1f} MB, {len(TAGS) * args.steps:,} scalar events")
    print("| reader                | seconds | ours faster by | peak RSS growth | x file size | rows      | value sum |")
    print("|-----------------------|---------|----------------|-----------------|-------------|-----------|-----------|")
    for name, (secs, peak, rows, total) in results.items():
        print(f"| {name:<21} | {secs:7.2f} | {secs / ours:13.1f}x | {peak / 1e6:12.0f} MB | {peak / size:10.2f}x "
              f"| {rows:9d} | {total:.6g} |")
    same = len({(r[2], f"{r[3]:.6g}") for r in results.values()}) == 1
    print(f"same rows in every reader: {same}")
    print(json.dumps({k: v[0] for k, v in results.items()}))


if __name__ == "__main__":
    main()
