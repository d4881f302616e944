"""Benchmark: what the run cache's content digest costs, against parsing the same log.

The cache keys every input file on a digest of its bytes (:func:`forensics.cache.content_digest`, SHA-256 streamed
in 1 MiB blocks), so that a file rewritten with its size and mtime restored is not served stale. This prints, for
generated Megatron logs of growing size (``benchmarks/parse_megatron.py``'s generator, written once under
benchmarks/_data/): reading the file alone (what any digest pays), the digest, the whole cache key
(:func:`forensics.cache.input_signature`), parsing (:func:`parsers.load_runs`), a cache hit
(:func:`forensics.cache.cached_load_runs` with the entry there: key, seal check, Parquet read) and parse / digest.
Then the throughput of other hashes on the largest log, for the choice of SHA-256. Best of ``--repeat`` runs, in
this process, with the file in the page cache (a cold read from disk costs the digest and the parser alike).

    python benchmarks/cache_digest.py [--iterations 25000 100000 300000 1250000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from parse_megatron import generate  # noqa: E402

from forensics.cache import CHUNK, cached_load_runs, content_digest, input_signature  # noqa: E402
from parsers import load_runs  # noqa: E402


def best(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def read_only(path: Path) -> None:
    block = bytearray(CHUNK)
    with path.open("rb") as handle:
        while handle.readinto(block):
            pass


def streamed(update_factory: Callable[[], Callable[[memoryview], object]]) -> Callable[[Path], None]:
    def run(path: Path) -> None:
        update = update_factory()
        block = bytearray(CHUNK)
        view = memoryview(block)
        with path.open("rb") as handle:
            while size := handle.readinto(block):
                update(view[:size])
    return run


def crc(function: Callable[[memoryview, int], int]) -> Callable[[], Callable[[memoryview], object]]:
    def factory() -> Callable[[memoryview], object]:
        state = [0]

        def update(data: memoryview) -> None:
            state[0] = function(data, state[0])
        return update
    return factory


def other_hashes() -> dict[str, Callable[[Path], None]]:
    found: dict[str, Callable[[Path], None]] = {
        name: streamed(lambda name=name: hashlib.new(name).update) for name in ("sha256", "blake2b", "sha1", "md5")
    }
    found["zlib.crc32 (32-bit)"] = streamed(crc(zlib.crc32))
    try:
        import crc32c  # already a dependency (TFRecord checks)

        found["crc32c (32-bit)"] = streamed(crc(crc32c.crc32c))
    except ImportError:
        pass
    for module, factory in (("xxhash", "xxh3_128"), ("blake3", "blake3")):
        try:
            lib = __import__(module)
            found[f"{module}.{factory}"] = streamed(lambda lib=lib, factory=factory: getattr(lib, factory)().update)
        except ImportError:
            found[f"{module}.{factory}"] = None  # type: ignore[assignment]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, nargs="+", default=[25_000, 100_000, 300_000, 1_250_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data_dir = HERE / "_data"
    data_dir.mkdir(exist_ok=True)
    logs = []
    for iterations in args.iterations:
        path = data_dir / f"megatron_{iterations}.log"
        if not path.exists():
            generate(path, iterations)
        logs.append(path)

    print(f"best of {args.repeat}; file in the page cache; SHA-256 streamed in {CHUNK >> 20} MiB blocks")
    print("| log size | read only | digest | cache key | parse (load_runs) | cache hit | parse / digest | "
          "parse / cache hit |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for path in logs:
        read_only(path)  # into the page cache
        cache = Path(tempfile.mkdtemp())
        try:
            read = best(args.repeat, lambda path=path: read_only(path))
            digest = best(args.repeat, lambda path=path: content_digest(path))
            key = best(args.repeat, lambda path=path: input_signature(path))
            parse = best(args.repeat, lambda path=path: load_runs(path))
            cached_load_runs(path, cache)  # the entry
            hit = best(args.repeat, lambda path=path, cache=cache: cached_load_runs(path, cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        size = path.stat().st_size
        print(f"| {size / 1e6:,.0f} MB | {read:.3f} s | {digest:.3f} s ({size / digest / 1e9:.2f} GB/s) | "
              f"{key:.3f} s | {parse:.2f} s ({size / parse / 1e6:.0f} MB/s) | {hit:.3f} s | {parse / digest:.1f}x | "
              f"{parse / hit:.1f}x |")

    largest = logs[-1]
    size = largest.stat().st_size
    print(f"\nother hashes on the {size / 1e6:,.0f} MB log (same streaming):")
    print("| hash | seconds | GB/s |")
    print("|---|---:|---:|")
    for name, run in other_hashes().items():
        if run is None:
            print(f"| {name} | not installed | |")
            continue
        seconds = best(args.repeat, lambda run=run: run(largest))
        print(f"| {name} | {seconds:.3f} | {size / seconds / 1e9:.2f} |")


if __name__ == "__main__":
    main()
