"""Benchmark: finding the runs of a tree in object storage (``forensics.fleet.find_runs`` on a URL), where every
head read is a request. An in-memory fsspec store with a fixed latency per read stands in for S3/GCS; the tree
holds ``--runs`` run folders (a log and a notes file each). Timed with the heads read one at a time
(``parsers.remote.WORKERS = 1``, how the index read them before) and as it reads them now.

    python benchmarks/url_tree.py [--runs 200] [--latency-ms 30]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import fsspec
from fsspec.implementations.memory import MemoryFileSystem

from forensics import fleet
from parsers import remote

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=30.0)
    args = parser.parse_args()
    real = MemoryFileSystem.cat_file
    reads = [0]

    def slow(self: MemoryFileSystem, path: str, start: int | None = None, end: int | None = None, **kw: object) -> bytes:
        reads[0] += 1
        time.sleep(args.latency_ms / 1000)
        return real(self, path, start, end, **kw)

    memory = fsspec.filesystem("memory")
    log = (ROOT / "sample_logs" / "clean-1.3B" / "train.log").read_bytes()[:65536]
    for i in range(args.runs):
        memory.pipe(f"/bench/runs/r{i:05d}/train.log", log)
        memory.pipe(f"/bench/runs/r{i:05d}/notes.md", b"# notes\n")
    MemoryFileSystem.cat_file = slow  # type: ignore[method-assign]
    print(f"{args.runs} run folders, {args.latency_ms:g} ms per head read\n")
    print("| heads in flight | runs found | head reads | wall s | s per run |")
    print("|---|---:|---:|---:|---:|")
    try:
        for workers in (1, remote.WORKERS):
            remote.WORKERS, reads[0] = workers, 0
            start = time.perf_counter()
            found = fleet.find_runs("memory://bench/runs")
            took = time.perf_counter() - start
            label = f"{workers} (one after another, as before)" if workers == 1 else f"{workers} (now)"
            print(f"| {label} | {len(found)} | {reads[0]} | {took:.2f} | {took / max(len(found), 1):.4f} |")
    finally:
        MemoryFileSystem.cat_file = real  # type: ignore[method-assign]
        memory.rm("/bench", recursive=True)


if __name__ == "__main__":
    main()
