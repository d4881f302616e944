"""Exact PELT changepoint search (Killick, Fearnhead & Eckley 2012) with O(1) segment costs from cumulative sums.

Two costs, for one-dimensional signals:

* ``"l2"``: piecewise-constant mean, cost of ``x[s:e]`` = sum of squared deviations from its mean
  (``ruptures``' ``CostL2``);
* ``"normal"``: piecewise-constant mean *and* variance, cost = ``(e - s) * log(var + 1e-6)`` with the biased
  variance and the same small diagonal ``ruptures``' ``CostNormal`` adds so constant segments stay finite.

The search is the one ``ruptures.Pelt(model=..., jump=1, min_size=...)`` runs: the same recursion
``F(e) = min_t F(t) + cost(t, e) + pen`` over the same admissible set, the same tie-break (the earliest ``t``) and
the same pruning rule (drop ``t`` once ``F(t) + cost(t, e) > F(e)``), so it returns the same breakpoints; only the
costs come from prefix sums instead of a pass over each segment. Up to :data:`NUMPY_MAX` points (every search the
regime detector runs) the loop over segment ends is NumPy, each end's candidates in one vectorised step (about 20 ms
for 2,000 points); beyond, it is compiled with numba, which costs 0.3 s to load and is not worth it below.

PELT is linear when the number of changes grows with the length of the signal; with very few changes in a long
signal its pruning keeps most candidates and the search tends to O(n^2). Callers that segment long training
curves for regime shifts decimate first (see :mod:`forensics.detectors.regimes`).
"""

from __future__ import annotations

import math

import numpy as np

COSTS = ("l2", "normal")
NUMPY_MAX = 5000     # longer signals go to the numba loop
_NORMAL_EPS = 1e-6   # ruptures CostNormal(add_small_diag=True)


def pelt(signal: np.ndarray, penalty: float, cost: str = "l2", min_size: int = 2) -> list[int]:
    """Breakpoints of the optimal segmentation, in ``ruptures``' convention: the end index of every segment, the
    last one being ``len(signal)``.

    >>> import numpy as np
    >>> x = np.r_[np.zeros(50), np.ones(50) * 5] + np.sin(np.arange(100))
    >>> pelt(x, penalty=10.0)
    [50, 100]
    """
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {COSTS}, not {cost!r}")
    if not penalty >= 0:
        raise ValueError(f"penalty must be a number at least 0, not {penalty!r}")
    x = np.asarray(signal, dtype=np.float64).ravel()
    if x.size < 2 * min_size:
        return [int(x.size)] if x.size else []
    if not np.isfinite(x).all():
        raise ValueError("signal holds NaN or Inf; drop or fill them before segmenting")
    # the costs do not depend on an offset; centring keeps the prefix sums accurate, and an integer offset keeps
    # integer signals (loss scales, counters) exact, so constant segments cost exactly 0 and ties break as in ruptures
    integral = bool(np.all(x == np.round(x))) and float(np.abs(x).max()) < 2.0**20
    x = x - (np.round(np.median(x)) if integral else x.mean())
    s1 = np.concatenate(([0.0], np.cumsum(x)))
    s2 = np.concatenate(([0.0], np.cumsum(x * x)))
    if x.size <= NUMPY_MAX:
        return _pelt_numpy(s1, s2, float(penalty), int(min_size), cost == "normal")
    from forensics.pelt_kernel import pelt_loop

    return [int(b) for b in pelt_loop(s1, s2, float(penalty), int(min_size), cost == "normal")]


def _pelt_numpy(s1: np.ndarray, s2: np.ndarray, pen: float, min_size: int, normal: bool) -> list[int]:
    """:func:`forensics.pelt_kernel.pelt_loop` with each segment end's candidates costed at once."""
    n = s1.size - 1
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    argbest = np.zeros(n + 1, dtype=np.int64)
    admissible = np.empty(0, dtype=np.int64)
    for end in range(min_size, n + 1):
        candidate = end - min_size
        if candidate == 0 or candidate >= min_size:  # only ends of feasible partitions can start a segment
            admissible = np.append(admissible, candidate)
        length = end - admissible
        total = s1[end] - s1[admissible]
        dev = np.maximum(s2[end] - s2[admissible] - total * total / length, 0.0)
        values = best[admissible] + ((length * np.log(dev / length + _NORMAL_EPS) if normal else dev) + pen)
        i = int(np.argmin(values))  # the first of equal minima: ruptures' tie-break
        best[end], argbest[end] = values[i], admissible[i]
        admissible = admissible[values <= values[i] + pen]
    out, end = [], n
    while end > 0:
        out.append(end)
        end = int(argbest[end])
    return out[::-1]


def bic_penalty(signal: np.ndarray, cost: str = "l2") -> float:
    """A BIC-style penalty: ``2 * log(n) * sigma^2`` for the L2 cost (sigma from the median absolute first
    difference, robust to the changes themselves) and ``3 * log(n)`` for the normal cost (a mean, a variance and
    a location per segment; less lets two-point segments of near-equal values win)."""
    x = np.asarray(signal, dtype=np.float64)
    n = max(x.size, 2)
    if cost == "normal":
        return 3.0 * math.log(n)
    diffs = np.abs(np.diff(x))
    sigma = float(np.median(diffs)) / (0.6745 * math.sqrt(2.0)) if diffs.size else 0.0
    return 2.0 * math.log(n) * max(sigma, 1e-12) ** 2
