"""How far a run's own noise reaches: the thresholds an excursion must pass before it is evidence of anything.

Per-batch loss and grad-norm noise is heavy-tailed (Student-t-like), so a fixed "k robust sigma" rule is crossed by
noise alone many times in a long run, and the longer the run the more often (``calibrated-detection.md``). The
thresholds here come from the attempt's own residuals (the robust z-scores of :func:`forensics.timeline.
trailing_robust_z`) and its length:

* **Family-wise rate.** A threshold is set so that the attempt's noise alone would reach it with probability
  ``alpha`` (2%) over the *whole* attempt: for ``n`` candidate points the per-point tail probability is
  ``alpha / n``, so a run ten times longer needs a larger excursion.
* **Persistence.** Real instabilities last; one hard batch does not. Each run length ``k`` in :data:`RUNS`
  (1, 2, 3, 5, 8 consecutive points) gets its own threshold, read from the distribution of the run's own
  *k-point minima* (the smallest z of each k consecutive points), so serial correlation (AR noise) is in the
  estimate rather than assumed away, and never below what k independent points of the single-point tail would
  reach together (the k-point minima's own tail is fitted far from its asymptote). ``alpha`` is split evenly
  between the run lengths (Bonferroni).
* **Tail fit.** The far quantile ``1 - alpha / (K n)`` lies beyond the data, so it is extrapolated with a
  generalized Pareto distribution (peaks over threshold): the excesses of the k-point minima over their
  ``1 - q`` empirical quantile ``u0`` (q = 5%, at most 20,000 excesses) are fitted by maximum likelihood with
  shape ``xi`` in [0, 0.5] (``xi = 0``: an exponential tail; a negative, bounded tail is not trusted; 0.5 is t(2),
  the heaviest noise with a finite mean square: a few dozen excesses cannot tell anything heavier from a handful of
  real incidents). The threshold is
  ``u0 + sigma / xi * ((q / p) ** xi - 1)`` (``u0 + sigma * log(q / p)`` at ``xi = 0``).
* **Incidents out of the fit.** A divergence or a long spike would otherwise be most of the tail it is judged
  against (on a short attempt it can be): the caller first judges the attempt with the fixed rule below
  (:func:`fixed_tail`), which already allows noise as heavy as t(3), and leaves out of the fit the points from the
  onset of each incident it finds until it is over (back to its level and within 3 sigmas; NaN z-scores are left
  out).
* **Too few points.** With fewer than :data:`MIN_FIT` minima the fit is unstable; the thresholds are those of
  Student-t noise with 3 degrees of freedom (the heaviest tail seen in practice), in robust-sigma units, for the
  attempt's length: conservative, and the report says so.

Thresholds never fall below the screen (6 robust sigma) for a lone point, nor below 3 for a run of points, and
never rise above the t(3) rule's.

>>> import numpy as np
>>> z = np.random.default_rng(0).standard_t(3, 100_000) / 1.134   # t(3) noise in robust-sigma units
>>> tail = noise_tail(z)
>>> tail.fitted, round(tail.thresholds[0]) > 20, tail.thresholds[1] < tail.thresholds[0]
(True, True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

ALPHA = 0.02          # family-wise: the chance that noise alone raises one incident in an attempt, per series
RUNS = (1, 2, 3, 5, 8)  # run lengths scanned, each at its own threshold
SCREEN = 6.0          # robust sigma: a lone point must be at least this far out
RUN_FLOOR = 3.0       # a run of several points must still be this far out
TAIL_SHARE = 0.05     # excesses over the 95th percentile are fitted
MAX_EXCESSES = 20_000
MAX_XI = 0.5          # the heaviest tail the fit may report (t(2))
MIN_FIT = 400         # fewer k-point minima than this: the fixed t(3) rule
_T3_ROBUST_SIGMA = 1.4826 * stats.t.ppf(0.75, 3)  # t(3)'s 1.4826 x MAD: robust z of t(3) noise is t / this


@dataclass(frozen=True)
class NoiseTail:
    """Thresholds per run length (``thresholds[i]`` for ``RUNS[i]`` consecutive points), from ``points`` z-scores;
    ``fitted`` is False when there were too few for a tail fit and the fixed t(3) rule was used."""

    thresholds: tuple[float, ...]
    points: int
    fitted: bool

    def hot(self, z: np.ndarray, groups: np.ndarray | None = None,
            minima: dict[int, np.ndarray] | None = None) -> np.ndarray:
        """Points that belong to some run of k consecutive points (within one group) all at or above the
        threshold for k: what the noise would not produce in the whole attempt. ``minima``: the
        :func:`all_run_minima` of ``z``, when already known."""
        out = np.zeros(z.size, dtype=bool)
        for (k, lows), limit in zip((minima or all_run_minima(z, groups)).items(), self.thresholds, strict=True):
            with np.errstate(invalid="ignore"):
                starts = np.flatnonzero(lows >= limit)
            for j in range(k):  # mark every point of each such window
                out[starts + j] = True
        return out


def all_run_minima(z: np.ndarray, groups: np.ndarray | None = None,
                   lengths: tuple[int, ...] = RUNS) -> dict[int, np.ndarray]:
    """Per length k in ``lengths`` (increasing), the smallest z of each k consecutive points (``len(z) - k + 1``
    values; NaN where a window holds a NaN or crosses into another group), in one pass of shifted minima."""
    z = np.asarray(z, dtype=float)
    out: dict[int, np.ndarray] = {}
    lows, k = z.copy(), 1
    for length in lengths:
        while k < length and lows.size:
            lows = np.minimum(lows[:-1], z[k:])  # NaN propagates
            k += 1
        if z.size < length:
            out[length] = np.empty(0)
            continue
        if groups is not None and length > 1:
            out[length] = np.where(groups[length - 1:] == groups[: groups.size - length + 1], lows, np.nan)
        else:
            out[length] = lows.copy()
    return out


def noise_tail(z: np.ndarray, groups: np.ndarray | None = None, alpha: float = ALPHA) -> NoiseTail:
    """The thresholds for one attempt's z-scores (see the module docstring)."""
    z = np.asarray(z, dtype=float)
    thresholds = []
    fitted = True
    single = _Tail.of(z[np.isfinite(z)])
    for k, lows in all_run_minima(z, groups).items():
        lows = lows[np.isfinite(lows)]
        p = alpha / (len(RUNS) * max(lows.size, 1))
        floor = SCREEN if k == 1 else RUN_FLOOR
        if lows.size < MIN_FIT:
            fitted = False
            limit = _t3_threshold(k, max(lows.size, 1), alpha)
        else:
            limit = (single if k == 1 else _Tail.of(lows)).quantile(p)
            if k > 1:  # never below what k independent points of the single-point tail reach together
                limit = max(limit, single.quantile(p ** (1.0 / k)))
            # never above the t(3) rule: a tail that looks heavier than the heaviest noise seen in practice is a few
            # points the fit cannot tell from incidents (or slow movements logged sparsely), not noise to allow for
            limit = min(limit, _t3_threshold(k, lows.size, alpha))
        thresholds.append(max(floor, limit))
    return NoiseTail(tuple(thresholds), int(np.isfinite(z).sum()), fitted)


def fixed_tail(z: np.ndarray, groups: np.ndarray | None = None, alpha: float = ALPHA,
               minima: dict[int, np.ndarray] | None = None) -> NoiseTail:
    """The thresholds of t(3) noise for an attempt of this length, whatever its own residuals (see above)."""
    z = np.asarray(z, dtype=float)
    limits = []
    for k, lows in (minima or all_run_minima(z, groups)).items():
        n = int(np.isfinite(lows).sum())
        limits.append(max(SCREEN if k == 1 else RUN_FLOOR, _t3_threshold(k, max(n, 1), alpha)))
    return NoiseTail(tuple(limits), int(np.isfinite(z).sum()), False)


def _t3_threshold(k: int, n: int, alpha: float) -> float:
    """Robust z that k consecutive independent t(3) points all reach with family-wise probability ``alpha``."""
    p = (alpha / (len(RUNS) * n)) ** (1.0 / k)
    return float(stats.t.isf(p, 3) / _T3_ROBUST_SIGMA)


@dataclass(frozen=True)
class _Tail:
    """A sample's upper tail: its ``1 - share`` quantile ``u0`` and a generalized Pareto fit to the excesses."""

    x: np.ndarray
    share: float
    u0: float
    xi: float
    sigma: float
    excesses: int

    @classmethod
    def of(cls, x: np.ndarray) -> _Tail:
        share = min(TAIL_SHARE, MAX_EXCESSES / max(x.size, 1))
        u0 = float(np.quantile(x, 1.0 - share)) if x.size else math.nan
        over = x[x > u0] - u0
        xi, sigma = _fit(over) if over.size >= 10 else (math.nan, math.nan)
        return cls(x, share, u0, xi, sigma, int(over.size))

    def quantile(self, p: float) -> float:
        """The value exceeded with probability ``p``: empirical inside the sample's body, extrapolated beyond."""
        if self.excesses < 10 or p >= self.share:
            return float(np.quantile(self.x, 1.0 - min(p, 1.0)))
        ratio = (self.excesses / self.x.size) / p
        return self.u0 + (self.sigma * math.log(ratio) if self.xi < 1e-6 else
                          self.sigma / self.xi * (ratio**self.xi - 1.0))


def _fit(excess: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood (xi, sigma) of a generalized Pareto distribution with xi in [0, MAX_XI]."""
    scale0 = math.log(max(float(excess.mean()), 1e-6))

    def nll(theta: np.ndarray) -> float:
        xi, log_sigma = float(theta[0]), float(theta[1])
        sigma = math.exp(log_sigma)
        if xi < 1e-6:
            return float(excess.size * log_sigma + excess.sum() / sigma)
        return float(excess.size * log_sigma + (1.0 / xi + 1.0) * np.log1p(xi * excess / sigma).sum())

    best = optimize.minimize(nll, x0=np.array([0.1, scale0]), method="L-BFGS-B",
                             bounds=[(0.0, MAX_XI), (scale0 - 5, scale0 + 5)])
    return float(best.x[0]), float(math.exp(best.x[1]))
