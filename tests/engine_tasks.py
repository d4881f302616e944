"""Task functions for tests/test_engines.py, in a module of their own so that worker processes (spawned ones and
Ray's) import them by name."""

from __future__ import annotations

import os
import time
from pathlib import Path


def square_after(x: int, delay: float) -> int:
    """``x * x`` after ``delay`` seconds (later items finishing first show that results keep item order)."""
    time.sleep(delay)
    return x * x


def square_when(x: int, marker: str | None = None) -> int:
    """``x * x`` once the file ``marker`` exists (written by the caller when another item's result has reached it:
    an order of finishing that no machine's load can change), or at once without one."""
    deadline = time.monotonic() + 120
    while marker and not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.01)
    return x * x


def die_first(x: int, attempts: str | None = None, deaths: int = 0) -> int:
    """``x``, but the worker process dies (``os._exit(1)``) on the first ``deaths`` attempts; each attempt leaves a
    line in the file ``attempts``."""
    if attempts is None:
        return x
    log = Path(attempts)
    before = len(log.read_text().splitlines()) if log.exists() else 0
    with log.open("a") as out:
        out.write(f"attempt {before + 1} in process {os.getpid()}\n")
    if before < deaths:
        os._exit(1)
    return x


def raise_value_error(x: int) -> int:
    """A task with a bug: raises ValueError."""
    raise ValueError(f"bad item {x}")


DOOMED = "doomed"


def ingest_or_die(name: str, path: Path, cache_dir: Path | None, signature: str | None) -> object:
    """``forensics.compare``'s task, but the worker dies (``os._exit(1)``) on the run named :data:`DOOMED`."""
    from forensics.compare import _ingest_and_cache

    if name == DOOMED:
        os._exit(1)
    return _ingest_and_cache(name, path, cache_dir, signature)


def thread_pools(x: int) -> tuple[int, dict[str, str | None], int]:
    """``x``, the thread variables of the worker's environment and the size of Polars' thread pool in it."""
    import polars as pl

    from forensics.engines import THREAD_VARIABLES

    return x, {name: os.environ.get(name) for name in THREAD_VARIABLES}, pl.thread_pool_size()
