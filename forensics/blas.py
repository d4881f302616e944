"""BLAS on one thread around the analysis's tiny scipy fits.

OpenBLAS starts its worker threads at each call of scipy's L-BFGS-B, whatever the size of the problem: a
2-parameter fit of a few hundred excesses cost 33 ms of CPU on two cores, 3 ms on one (the same numbers: a problem
this small is never split between threads). The limit is taken while any fit runs (threads of one process share
it) and the caller's own limit is put back when the last one ends.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_inside = 0
_limiter: Any = None


@functools.cache
def _controller() -> Any:
    """The BLAS libraries loaded when first asked (after ``scipy.optimize``'s import: scipy loads its own)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread inside the block (import what the block calls before it)."""
    global _inside, _limiter
    with _lock:
        if _inside == 0:
            _limiter = _controller().limit(limits=1)
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                _limiter.restore_original_limits()
                _limiter = None
