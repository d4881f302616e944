"""Benchmark: resynchronising a TFRecord walk over damage (garbage or a zero-filled stretch after a bad header).

Times :func:`parsers.tfrecord._resync` (vectorised) against the per-byte loop it replaced, and a whole
``parsers.load_run`` of a small event file followed by the damage. The loop is timed on at most 2 MB and scaled.

    python benchmarks/resync_tfrecord.py [--mb 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parsers import load_run
from parsers.tfrecord import _header_ok, _resync
from tests import tb_writer as tb


def per_byte_loop(buf: bytes, pos: int) -> int | None:
    """The resync before issue 18: one header check per offset."""
    for candidate in range(pos + 1, len(buf) - 11):
        if _header_ok(buf, candidate):
            return candidate
    return None


def seconds(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    size = parser.parse_args().mb << 20
    print(f"| damage ({size >> 20} MB) | per-byte loop (s) | vectorised (s) | factor | load_run with it (s) |")
    print("|---|---:|---:|---:|---:|")
    records = [tb.version()] + [tb.scalar("loss", 1.0 + i, i) for i in range(100)]
    for name, damage in [("random bytes", os.urandom(size)), ("zero-filled", bytes(size))]:
        sample = min(size, 2 << 20)
        loop = seconds(per_byte_loop, damage[:sample], 0) * size / sample
        fast = seconds(_resync, damage, 0)
        with tempfile.TemporaryDirectory() as tmp:
            tb.write(Path(tmp) / "events.out.tfevents.1.x", *records[:50], damage, *records[50:])
            whole = seconds(load_run, tmp)
        print(f"| {name} | {loop:.2f} | {fast:.3f} | {loop / fast:,.0f}x | {whole:.2f} |")


if __name__ == "__main__":
    main()
