"""The compiled PELT loop of :mod:`forensics.changepoint` (numba; imported only when a search runs, so the
command line starts without compiling or loading numba)."""

from __future__ import annotations

import math

import numba
import numpy as np

_NORMAL_EPS = 1e-6  # ruptures CostNormal(add_small_diag=True)


@numba.njit(cache=True, nogil=True)
def _segment_cost(s1: np.ndarray, s2: np.ndarray, start: int, end: int, normal: bool) -> float:
    n = end - start
    total = s1[end] - s1[start]
    sq = s2[end] - s2[start]
    dev = sq - total * total / n
    if dev < 0.0:
        dev = 0.0
    if normal:
        return n * math.log(dev / n + _NORMAL_EPS)
    return dev


@numba.njit(cache=True, nogil=True)
def pelt_loop(s1: np.ndarray, s2: np.ndarray, pen: float, min_size: int, normal: bool) -> np.ndarray:
    n = s1.shape[0] - 1
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    argbest = np.zeros(n + 1, dtype=np.int64)
    admissible = np.empty(n + 1, dtype=np.int64)
    values = np.empty(n + 1)
    count = 0
    end = min_size
    while end <= n:
        candidate = end - min_size
        if candidate == 0 or candidate >= min_size:  # only ends of feasible partitions can start a segment
            admissible[count] = candidate
            count += 1
        low = np.inf
        low_at = -1
        for i in range(count):
            t = admissible[i]
            v = best[t] + (_segment_cost(s1, s2, t, end, normal) + pen)
            values[i] = v
            if v < low:
                low = v
                low_at = t
        best[end] = low
        argbest[end] = low_at
        kept = 0
        for i in range(count):
            if values[i] <= low + pen:
                admissible[kept] = admissible[i]
                kept += 1
        count = kept
        end += 1
    out = []
    end = n
    while end > 0:
        out.append(end)
        end = argbest[end]
    result = np.empty(len(out), dtype=np.int64)
    for i in range(len(out)):
        result[i] = out[len(out) - 1 - i]
    return result
