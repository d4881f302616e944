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
  *k-point minima* (the smallest z of each k consecutive points, each measured against the level at the window's
  first point, :func:`held_run_minima`: a spike several points wide lifts the trailing median behind it), so serial
  correlation (AR noise) is in the estimate rather than assumed away, and never below what k independent points of
  the single-point tail would reach together (the k-point minima's own tail is fitted far from its asymptote).
  ``alpha`` is split evenly between the run lengths (Bonferroni).
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
* **Too few points.** With fewer than :data:`MIN_FIT` minima the far tail cannot be fitted, but the body of the
  residuals still tells how heavy it is: a Student-t distribution is fitted to them for each degree of freedom in
  :data:`LADDER` (by maximum likelihood, the 1% at each end censored so that the spikes being looked for do not
  decide it), and the *heaviest* one the data do not reject (log-likelihood within 1.92 of the best: a 95% likelihood
  ratio test) sets the thresholds, k points taken as independent: t(3), the heaviest tail seen in practice, unless the
  residuals show a lighter one (a loss logged as a mean over many iterations is close to Gaussian). The report names
  the distribution used.

* **Means over an interval.** t(3) is the heaviest noise of a single batch. A point that is the mean over ``m``
  iterations (Megatron's and the Trainer's logged loss) dilutes one hard batch m times while its noise shrinks by
  sqrt(m): in units of the mean's own sigma its tail is the Gaussian body plus the chance that one of the m batches
  alone carries it, ``P(Z > z) = Phi_c(z) + m * P(T3 > sqrt(3 m) z)`` (T3 standard t(3), whose variance is 3; the
  single-big-jump asymptote of a sum of heavy-tailed draws). The t(3) rule for such a series is this tail's quantile
  (:func:`_mean_t3_quantile`): for m = 100 about a third of the single-batch rule (a t(3) power-law tail falls by
  m^(1/6) and the sigma it is counted in by sqrt(3)/1.134), never below the Gaussian quantile. For a lone point
  only: runs of points keep the t(3) rule (consecutive residuals are not independent).

Thresholds never fall below the screen (6 robust sigma) for a lone point, nor below 3 for a run of points, and
never rise above the t(3) rule's (for a run of serially correlated residuals, :func:`serially_correlated`, above the
lone point's).

>>> import numpy as np
>>> z = np.random.default_rng(0).standard_t(3, 100_000) / 1.134   # t(3) noise in robust-sigma units
>>> tail = noise_tail(z)
>>> tail.fitted, round(tail.thresholds[0]) > 20, tail.thresholds[1] < tail.thresholds[0]
(True, True, True)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from forensics.blas import one_blas_thread

ALPHA = 0.02          # family-wise: the chance that noise alone raises one incident in an attempt, per series
RUNS = (1, 2, 3, 5, 8)  # run lengths scanned, each at its own threshold
SCREEN = 6.0          # robust sigma: a lone point must be at least this far out
RUN_FLOOR = 3.0       # a run of several points must still be this far out
TAIL_SHARE = 0.05     # excesses over the 95th percentile are fitted
MAX_EXCESSES = 20_000
MAX_XI = 0.5          # the heaviest tail the fit may report (t(2))
MIN_FIT = 400         # fewer k-point minima than this: a Student-t from the body of the residuals
LADDER = (3.0, 4.0, 6.0, 10.0, 30.0)  # degrees of freedom tried for a short series, heaviest first
MIN_BODY = 30         # fewer residuals than this: t(3), nothing tried
MAX_BODY = 5_000      # residuals the body is fitted on, at most (evenly spaced)
_T3_ROBUST_SIGMA = 1.4826 * 0.7648923284043444  # t(3)'s 1.4826 x MAD (0.7649: t(3)'s upper quartile, stats.t.ppf(0.75, 3))


@dataclass(frozen=True)
class NoiseTail:
    """Thresholds per run length (``thresholds[i]`` for ``RUNS[i]`` consecutive points), from ``points`` z-scores;
    ``fitted`` is False when there were too few for a tail fit and Student-t noise with ``df`` degrees of freedom
    (from the body of the residuals, :data:`LADDER`) was used."""

    thresholds: tuple[float, ...]
    points: int
    fitted: bool
    df: float = 3.0
    mean_of: int = 1  # each point a mean over this many iterations, when that mean's t(3) rule set the lone point's

    @property
    def rule(self) -> str:
        """How the thresholds were set, in words: ``"fitted"``, or the Student-t used (``"t(3)"``)."""
        return "fitted" if self.fitted else f"t({self.df:g})"

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
    lows, k = z.copy(), 1  # lows[:z.size - k + 1]: the minima of the k-point windows (updated in place)
    for length in lengths:
        while k < length and k < z.size:
            np.minimum(lows[:z.size - k], z[k:], out=lows[:z.size - k])  # NaN propagates
            k += 1
        if z.size < length:
            out[length] = np.empty(0)
            continue
        m = z.size - length + 1
        out[length] = lows[:m].copy()
        if groups is not None and length > 1:
            out[length][groups[length - 1:] != groups[:m]] = np.nan
    return out


def held_run_minima(x: np.ndarray, centre: np.ndarray, noise: np.ndarray, groups: np.ndarray | None = None,
                    lengths: tuple[int, ...] = RUNS) -> dict[int, np.ndarray]:
    """Per length k, the smallest z of each k consecutive points measured against the level (``centre``) and noise
    of the window's *first* point: a spike several points wide drags a trailing median up behind it, so its later
    points are read against the level it left, as a reader of the curve reads them. NaN wherever ``x``, ``centre``
    or ``noise`` is (a point left out), or a window crosses into another group. At k = 1 this is the plain z."""
    with np.errstate(invalid="ignore"):
        masked = np.where(np.isfinite(centre) & np.isfinite(noise), x, np.nan)
    out = all_run_minima(masked, groups, lengths)
    for lows in out.values():  # (each its own array: made z in place)
        m = lows.size
        with np.errstate(invalid="ignore"):
            np.subtract(lows, centre[:m], out=lows)
            np.divide(lows, noise[:m], out=lows)
    return out


def without_points(minima: dict[int, np.ndarray], left_out: np.ndarray) -> dict[int, np.ndarray]:
    """``minima`` (of :func:`held_run_minima` or :func:`all_run_minima`) with every window that holds a point of
    ``left_out`` made NaN: what those functions give with the points set to NaN, without recomputing them.

    >>> without_points({1: np.array([1.0, 2.0, 3.0]), 2: np.array([1.0, 2.0])}, np.array([False, True, False]))
    {1: array([ 1., nan,  3.]), 2: array([nan, nan])}
    """
    at = np.flatnonzero(left_out)
    out = {}
    for k, lows in minima.items():
        out[k] = lows.copy()
        for j in range(k):  # the windows that start j points before a left-out point
            starts = at - j
            out[k][starts[(starts >= 0) & (starts < lows.size)]] = np.nan
    return out


def noise_tail(z: np.ndarray, groups: np.ndarray | None = None, alpha: float = ALPHA,
               minima: dict[int, np.ndarray] | None = None, judged: dict[int, int] | None = None,
               least_xi: float = 0.0, mean_of: int = 1) -> NoiseTail:
    """The thresholds for one attempt's z-scores (see the module docstring); ``minima``: their run minima when not
    :func:`all_run_minima` of ``z`` (e.g. :func:`held_run_minima`); ``judged``: per run length, how many windows the
    thresholds will judge, when more than the fit has (points left out of the fit are judged all the same: the
    family-wise rate is over all of them, so a short attempt whose points are all left out is not judged as one
    point); ``least_xi``: the lightest tail shape the fits may report; ``mean_of``: each point is a mean over this
    many iterations (the t(3) rule is then a mean's)."""
    z = np.asarray(z, dtype=float)
    thresholds = []
    fitted = True
    finite = z[np.isfinite(z)]
    single = _Tail.of(finite, least_xi)
    body: tuple[float, float, float] | None = None
    correlated: bool | None = None
    mean_set = False  # the mean's t(3) rule set the lone point's threshold
    for k, lows in (minima or all_run_minima(z, groups)).items():
        lows = lows[np.isfinite(lows)]
        windows = max(lows.size, (judged or {}).get(k, 0), 1)
        p = alpha / (len(RUNS) * windows)
        floor = SCREEN if k == 1 else RUN_FLOOR
        if lows.size < MIN_FIT:
            fitted = False
            df, loc, scale = body = body or student_body(finite)
            limit = loc + scale * (_t3_isf(k, windows, alpha) if df == 3.0 else _t_isf(p ** (1.0 / k), df))
            if k == 1 and mean_of > 1:  # (the t(3) rule of a mean is lighter than any single batch's Student-t)
                rule = _mean_t3_quantile(p, mean_of)
                mean_set = SCREEN < rule < limit
                limit = min(limit, rule)
        else:
            # never above the t(3) rule: a tail that looks heavier than the heaviest noise seen in practice is a few
            # points the fit cannot tell from incidents (or slow movements logged sparsely), not noise to allow for
            # (for a run of serially correlated residuals, the lone point's: k independent t(3) points understate
            # how often correlated noise stays up)
            cap = _t3_threshold(k, lows.size, alpha, mean_of)
            if k == 1:
                own = single.quantile(p)
                limit = min(own, cap)
                mean_set = mean_of > 1 and SCREEN < cap < own
            else:
                correlated = correlated if correlated is not None else serially_correlated(z, groups)
                cap = max(cap, thresholds[0]) if correlated else cap
                # never below what k independent points of the single-point tail reach together (when that is
                # already the cap, the k-point minima's own fit cannot change the threshold and is not made)
                least = single.quantile(p ** (1.0 / k))
                limit = cap if least >= cap else min(max(_Tail.of(lows, least_xi).quantile(p), least), cap)
        thresholds.append(float(max(floor, limit)))
    return NoiseTail(tuple(thresholds), int(np.isfinite(z).sum()), fitted, body[0] if body else 3.0,
                     mean_of if mean_set else 1)


def lead_threshold(z: np.ndarray, windows: int, alpha: float = ALPHA) -> float:
    """The z a lone point reaches with probability ``alpha`` in ``windows`` points of the noise of ``z`` (NaN: left
    out): how far out a point must be to stand out among the few points before an incident, where an attempt's whole
    length would ask far more. From the sample's own tail (its upper 5%, fitted beyond it) where it has a tail to fit,
    else the heaviest Student-t its body allows; never above the t(3) rule for those points.

    >>> z = np.random.default_rng(0).standard_t(3, 20_000) / 1.134   # t(3) noise in robust-sigma units: its tail
    >>> g = np.random.default_rng(0).normal(size=200)                 # 200 Gaussian points: a t(10) body
    >>> round(lead_threshold(z, 21), 1), round(lead_threshold(g, 21), 1)
    (9.1, 3.8)
    """
    finite = np.asarray(z, dtype=float)
    finite = finite[np.isfinite(finite)]
    p = alpha / max(windows, 1)
    cap = _t_isf(p, 3.0) / _T3_ROBUST_SIGMA
    if finite.size >= MIN_FIT:
        return min(_Tail.of(finite).quantile(p), cap)
    df, loc, scale = student_body(finite)
    return min(loc + scale * _t_isf(p, df), cap)


def serially_correlated(z: np.ndarray, groups: np.ndarray | None = None) -> bool:
    """Whether consecutive residuals (within one group, winsorised at 3 sigma) are positively correlated beyond
    chance (and beyond 0.1), or their upper tail comes in runs (twice as many consecutive pairs beyond the 95th
    percentile as independent points give, and 3 sigma beyond it: tail dependence, which a winsorised correlation
    does not see): a hard stretch of data that lasts several batches, as opposed to independent noise.

    >>> rng = np.random.default_rng(0)
    >>> serially_correlated(rng.normal(size=5000)), serially_correlated(np.cumsum(rng.normal(size=5000)))
    (False, True)
    """
    z = np.asarray(z, dtype=float)
    a, b = z[:-1], z[1:]
    keep = np.isfinite(a) & np.isfinite(b)
    if groups is not None:
        keep &= groups[:-1] == groups[1:]
    if keep.sum() < MIN_BODY:
        return False
    # its upper tail: points beyond the 95th percentile that follow one another, against the count independent
    # points would give (a quantised per-batch loss sits on a few levels and stays on a high one for 3-5 batches,
    # its body uncorrelated: runs of high points are then the noise, not incidents)
    a, b = a[keep], b[keep]  # (each a copy: changed in place below)
    edge = np.quantile(a, 0.95)
    high = a >= edge
    pairs = float(np.count_nonzero(high & (b >= edge)))
    expected = float(high.mean()) ** 2 * float(a.size)
    for v in (a, b):  # winsorised: a few spikes do not decide it
        np.clip(v, -3.0, 3.0, out=v)
        v -= v.mean()
    rho = float((a * b).sum() / math.sqrt(float((a * a).sum() * (b * b).sum()) or 1.0))
    return rho > max(0.1, 3.0 / math.sqrt(float(keep.sum()))) or pairs > max(2 * expected,
                                                                              expected + 3 * math.sqrt(expected))


def student_body(z: np.ndarray) -> tuple[float, float, float]:
    """(df, loc, scale) of the heaviest Student-t in :data:`LADDER` that the residuals ``z`` (robust-sigma units) do
    not reject, fitted with their lowest and highest 1% censored; t(3) in robust-sigma units below :data:`MIN_BODY`.

    >>> rng = np.random.default_rng(0)
    >>> student_body(rng.normal(size=300))[0], student_body(rng.standard_t(3, 300))[0]
    (10.0, 3.0)
    """
    z = np.asarray(z, dtype=float)
    if z.size < MIN_BODY:
        return 3.0, 0.0, 1.0 / _T3_ROBUST_SIGMA
    from scipy import optimize  # (here: a short series imports no scipy)

    if z.size > MAX_BODY:  # the body's shape does not need more points than this
        z = z[:: -(-z.size // MAX_BODY)]
    lo, hi = np.quantile(z, [0.01, 0.99])
    inside, below, above = z[(z >= lo) & (z <= hi)], int((z < lo).sum()), int((z > hi).sum())
    loc = float(np.median(z))
    fits = []
    for df in LADDER:
        def nll(log_scale: float, df: float = df) -> float:
            scale = math.exp(log_scale)
            return -float(_t_logpdf(inside, df, loc, scale).sum() + below * _t_logcdf(lo, df, loc, scale)
                          + above * _t_logcdf(-hi, df, -loc, scale))
        best = optimize.minimize_scalar(nll, bounds=(-5.0, 5.0), method="bounded")
        fits.append((df, float(-best.fun), math.exp(float(best.x))))
    top = max(ll for _, ll, _ in fits)
    df, _, scale = next(f for f in fits if f[1] >= top - 1.92)  # the heaviest not rejected
    return df, loc, scale


def fixed_tail(z: np.ndarray, groups: np.ndarray | None = None, alpha: float = ALPHA,
               minima: dict[int, np.ndarray] | None = None, mean_of: int = 1) -> NoiseTail:
    """The thresholds of t(3) noise (of a mean over ``mean_of`` iterations of it) for an attempt of this length,
    whatever its own residuals (see above)."""
    z = np.asarray(z, dtype=float)
    limits = []
    for k, lows in (minima or all_run_minima(z, groups)).items():
        n = int(np.isfinite(lows).sum())
        limits.append(float(max(SCREEN if k == 1 else RUN_FLOOR, _t3_threshold(k, max(n, 1), alpha, mean_of))))
    return NoiseTail(tuple(limits), int(np.isfinite(z).sum()), False, mean_of=mean_of if limits[0] > SCREEN else 1)


def _t3_threshold(k: int, n: int, alpha: float, mean_of: int = 1) -> float:
    """Robust z that k consecutive independent t(3) points all reach with family-wise probability ``alpha``; a lone
    point that is a mean over ``mean_of`` iterations of t(3) noise is read by the mean's tail (:func:`_mean_t3_quantile`).
    Runs of points keep the t(3) rule: consecutive residuals, each read against the points before it, are not
    independent, and two in a row at 3 sigma came from noise (a clean t(4) run logged every 10 steps)."""
    if mean_of > 1 and k == 1:
        return _mean_t3_quantile(alpha / (len(RUNS) * n), mean_of)
    return _t3_isf(k, n, alpha) / _T3_ROBUST_SIGMA


def _mean_t3_quantile(p: float, m: int) -> float:
    """The robust z (1.4826 x MAD, as the detector's) that the mean of ``m`` independent t(3) draws exceeds with
    probability ``p``: the root of ``Phi_c(z) + m * P(T3 > sqrt(3 m) z) = p`` (the module docstring; z in standard
    deviations of the mean), by bisection, times the mean's standard deviation over its robust sigma,
    ``1 + 0.52 / sqrt(m)`` (fitted to simulated means of t(3) draws: 1.37 at m = 2, 1.16 at 10, 1.05 at 100, within 1%).

    >>> round(_mean_t3_quantile(1e-6, 100), 1), round(_mean_t3_quantile(1e-6, 10), 1)   # t(3) alone: 91.2
    (29.1, 47.3)
    >>> round(_mean_t3_quantile(1e-3, 1000), 2)   # where the body decides: near the Gaussian quantile, 3.09
    3.21
    """
    def tail(z: float) -> float:
        t = math.sqrt(3.0 * m) * z  # a t(3) draw this far out carries the mean alone: P(T3 > t), exactly
        return 0.5 * math.erfc(z / math.sqrt(2.0)) + m * (math.atan(math.sqrt(3.0) / t)
                                                          - math.sqrt(3.0) * t / (t * t + 3.0)) / math.pi

    lo, hi = 1e-9, 1e4
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if tail(mid) > p else (lo, mid)
    return hi * (1.0 + 0.52 / math.sqrt(m))


def _t3_isf(k: int, n: int, alpha: float) -> float:
    """The value k consecutive independent standard t(3) points all exceed with family-wise probability ``alpha``
    over ``n`` windows: ``_t_isf((alpha / (len(RUNS) * n)) ** (1 / k), 3)``, from the precomputed table
    (:mod:`forensics.detectors.t3_table`, the same floats) for up to its ``N`` windows at :data:`ALPHA`, so that a short
    log imports no scipy.

    >>> _t3_isf(1, 10, ALPHA) == _t_isf((ALPHA / (len(RUNS) * 10)), 3.0), round(_t3_isf(2, 10_000, ALPHA), 6)
    (True, 11.935699)
    """
    from forensics.detectors import t3_table

    if alpha == t3_table.ALPHA and RUNS == t3_table.RUNS and k in t3_table.T3_ISF and 1 <= n <= t3_table.N:
        return t3_table.T3_ISF[k][n - 1]
    return _t_isf((alpha / (len(RUNS) * n)) ** (1.0 / k), 3.0)


T3_TABLE_N = 400  # windows the table covers: an attempt this long fits its tail (MIN_FIT), which takes scipy anyway


def t3_table_source(n: int = T3_TABLE_N) -> str:
    """The text of :mod:`forensics.detectors.t3_table` (computed with scipy): regenerate it with
    ``python -c "from forensics.detectors.noise_tail import t3_table_source as f; print(f(), end='')"
    > forensics/detectors/t3_table.py`` after a change of :data:`ALPHA` or :data:`RUNS`."""
    head = (
        f'''"""The t(3) quantiles the fixed rule of :mod:`forensics.detectors.noise_tail` needs for up to {n} windows,
precomputed: ``T3_ISF[k][n - 1]`` is ``scipy.stats.t.isf((ALPHA / (len(RUNS) * n)) ** (1 / k), 3)``, as
``noise_tail._t_isf`` computes it (``-scipy.special.stdtrit(3, p)``), for each run length k in ``RUNS``. A short log
then imports no scipy (``scipy.special`` alone takes 0.3-1 s, more than analysing it). Generated by
``noise_tail.t3_table_source()``; tests/test_noise_tail.py checks this file against it, every float bit for bit.
"""

ALPHA = {ALPHA!r}
RUNS = {RUNS!r}
N = {n}

T3_ISF: dict[int, tuple[float, ...]] = {{
''')
    out = [head]
    for k in RUNS:
        rows, row = [], " " * 8
        for n_windows in range(1, n + 1):
            piece = repr(_t_isf((ALPHA / (len(RUNS) * n_windows)) ** (1.0 / k), 3.0)) + ", "
            if len(row) + len(piece) > 120:
                rows.append(row.rstrip())
                row = " " * 8
            row += piece
        rows.append(row.rstrip())
        out.append(f"    {k}: (\n" + "\n".join(rows) + "\n    ),\n")
    return "".join(out) + "}\n"


# Student-t functions from scipy.special, computed as scipy.stats.t computes them: scipy.stats takes 0.2-0.5 s to
# import, more than analysing a short log.
def _t_isf(p: float, df: float) -> float:
    """``scipy.stats.t.isf(p, df)``: the value a standard Student-t exceeds with probability ``p``."""
    from scipy import special

    return float(-special.stdtrit(df, p))


def _t_logpdf(x: np.ndarray, df: float, loc: float, scale: float) -> np.ndarray:
    """``scipy.stats.t.logpdf(x, df, loc, scale)`` for a finite ``df``."""
    from scipy import special

    y = (x - loc) / scale
    return (np.log(special.poch(0.5 * df, 0.5)) - 0.5 * (np.log(df) + np.log(np.pi))
            - (df + 1) / 2 * np.log1p(y * y / df)) - np.log(scale)


def _t_logcdf(x: float, df: float, loc: float, scale: float) -> float:
    """``scipy.stats.t.logcdf(x, df, loc, scale)`` (``logsf(x)`` is ``logcdf(-x)`` with ``-loc``: the t is
    symmetric)."""
    from scipy import special

    y = (x - loc) / scale
    with np.errstate(divide="ignore"):
        return float(np.log(special.stdtr(df, y)) if y < 0 else np.log1p(-special.stdtr(df, -y)))


@dataclass(frozen=True)
class _Tail:
    """A sample's upper tail: its ``1 - share`` quantile ``u0`` and, when a quantile beyond the sample's body is asked
    for, a generalized Pareto fit to the excesses (fitted then, once: most attempts never ask)."""

    x: np.ndarray
    share: float
    u0: float
    excesses: int
    least_xi: float = 0.0

    @classmethod
    def of(cls, x: np.ndarray, least_xi: float = 0.0) -> _Tail:
        share = min(TAIL_SHARE, MAX_EXCESSES / max(x.size, 1))
        u0 = float(np.quantile(x, 1.0 - share)) if x.size else math.nan
        return cls(x, share, u0, int((x > u0).sum()), least_xi)

    @functools.cached_property
    def fit(self) -> tuple[float, float]:
        """(xi, sigma) of the excesses over ``u0``."""
        return _fit(self.x[self.x > self.u0] - self.u0, self.least_xi)

    def quantile(self, p: float) -> float:
        """The value exceeded with probability ``p``: empirical inside the sample's body, extrapolated beyond."""
        if self.excesses < 10 or p >= self.share:
            return float(np.quantile(self.x, 1.0 - min(p, 1.0)))
        xi, sigma = self.fit
        ratio = (self.excesses / self.x.size) / p
        return self.u0 + (sigma * math.log(ratio) if xi < 1e-6 else sigma / xi * (ratio**xi - 1.0))


def _fit(excess: np.ndarray, least_xi: float = 0.0) -> tuple[float, float]:
    """Maximum-likelihood (xi, sigma) of a generalized Pareto distribution with xi in [``least_xi``, MAX_XI]."""
    from scipy import optimize

    scale0 = math.log(max(float(excess.mean()), 1e-6))

    def nll(theta: np.ndarray) -> float:
        xi, log_sigma = float(theta[0]), float(theta[1])
        sigma = math.exp(log_sigma)
        if xi < 1e-6:
            return float(excess.size * log_sigma + excess.sum() / sigma)
        return float(excess.size * log_sigma + (1.0 / xi + 1.0) * np.log1p(xi * excess / sigma).sum())

    least = min(max(least_xi, 0.0), MAX_XI)
    with one_blas_thread():  # (OpenBLAS's threads cost 10x this fit: see forensics.blas)
        best = optimize.minimize(nll, x0=np.array([max(0.1, least), scale0]), method="L-BFGS-B",
                                 bounds=[(least, MAX_XI), (scale0 - 5, scale0 + 5)])
    return float(best.x[0]), float(math.exp(best.x[1]))
