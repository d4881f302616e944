"""Logit growth (Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer training instabilities"):
attention logits that grow until the softmax saturates, and output logits drifting from the log-probabilities
(the z-loss, log^2 Z, rising), both precede divergence. Read when the run logs them (:data:`parsers.schema.Z_LOSS`,
:data:`parsers.schema.MAX_ATTENTION_LOGIT`).

A finding (:attr:`~forensics.findings.Kind.LOGIT_GROWTH`) is a log-linear rise: on a rolling median of ``SMOOTH``
points (9 to 25: a twentieth of the stretch) of log |value|, a rise of at least ``GROWTH`` (3x) above the series'
running low and at least ``NOISE_SIGMAS`` (4) robust sigmas of its own scatter, with a Theil-Sen slope of log |value|
over the rise whose 95% interval lies above zero. The first tenth of each attempt is burn-in (logits settle while
training starts); each stretch between holes in the log is judged on its own. The onset is where the smoothed value
last stood within 20% of its usual level (its median before the rise; ``baseline``), the end is its peak (``value``).
The detail says how far and how fast it grew, and for attention logits the published marks: Wortsman et al. saw every
run whose attention logits passed 1e4 diverge; Kimi K2's QK-clip caps the max logit at 100.

>>> import numpy as np, polars as pl
>>> from parsers import schema as s
>>> from forensics.detectors.base import RunFrames
>>> steps = np.arange(1, 3001)
>>> logit = 12.0 * np.exp(0.05 * np.random.default_rng(0).standard_normal(3000))
>>> logit = logit * np.where(steps > 2000, np.exp((steps - 2000) / 480), 1.0)   # 8x in the last 1,000 steps
>>> m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": steps,
...                             "metric": s.MAX_ATTENTION_LOGIT, "value": logit}), s.METRICS_SCHEMA)
>>> [found] = LogitGrowthDetector().detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
>>> found.step, found.end_step
(2084, 2992)
>>> print(found.detail)  # doctest: +NORMALIZE_WHITESPACE
max attention logit grew to 7.8x its usual level 12.1 in 908 steps, log-linearly from step 2084 to 94.6 at step 2992
(robust slope, 95% interval above zero; rolling median of 25 points); Kimi K2's QK-clip caps the max logit at 100
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind
from forensics.gaps import stretch_of
from forensics.theil_sen import theil_sen
from parsers import schema as s

GROWTH = 3.0          # the smoothed value must rise this far above its running low
NOISE_SIGMAS = 4.0    # ... and this many robust sigmas of its scatter about its rolling median
SMOOTH = (9, 25)      # points in the rolling median: a twentieth of the stretch, within these bounds
BURN_IN = 0.1         # the first tenth of an attempt's points
MIN_POINTS = 40       # a stretch needs this many points
SLOPE_POINTS = 400    # Theil-Sen compares all pairs: the rise is thinned to about this many points
WORTSMAN_DIVERGED = 1e4   # attention logits above this: every run in Wortsman et al. diverged
QK_CLIP = 100.0           # Kimi K2's QK-clip threshold on the max attention logit
_NAMES = {s.MAX_ATTENTION_LOGIT: "max attention logit", s.Z_LOSS: "z-loss"}


@dataclass(frozen=True)
class LogitGrowthDetector:
    """Attention-logit growth and a rising z-loss (see the module docstring)."""

    name: Kind = Kind.LOGIT_GROWTH

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        present = set(frames.metrics["metric"].unique().cast(pl.String).to_list())
        gaps = frames.gaps()
        out: list[Anomaly] = []
        for metric in (m for m in s.LOGIT_METRICS if m in present):
            points = frames.points(metric).filter(pl.col("value").is_finite() & (pl.col("value") != 0))
            for (attempt,), own in points.group_by("attempt", maintain_order=True):
                steps, values = own["step"].to_numpy(), np.abs(own["value"].to_numpy())
                stretch = stretch_of(steps, gaps, int(attempt))  # nothing measured across a hole
                for part in np.unique(stretch):
                    mine = stretch == part
                    found = _growth(metric, int(attempt), steps[mine], values[mine])  # type: ignore[arg-type]
                    if found:
                        out.append(found)
        return sorted(out, key=lambda a: (a.attempt, a.step, a.metric))


def _growth(metric: str, attempt: int, steps: np.ndarray, values: np.ndarray) -> Anomaly | None:
    first = int(steps.size * BURN_IN)
    steps, y = steps[first:], np.log(values[first:])
    if steps.size < MIN_POINTS:
        return None
    width = int(np.clip(steps.size // 20, *SMOOTH))
    smooth = pl.Series(y).rolling_median(width, min_samples=width).to_numpy()
    ok = np.isfinite(smooth)
    sigma = 1.4826 * float(np.median(np.abs(y[ok] - smooth[ok])))
    need = max(math.log(GROWTH), NOISE_SIGMAS * sigma)
    low = np.fmin.accumulate(np.where(ok, smooth, np.inf))
    fired = np.flatnonzero(ok & (smooth - low >= need))
    if fired.size == 0:
        return None
    at = int(fired[0])
    low_at = int(np.flatnonzero(smooth == low[at])[0])
    usual = float(np.median(smooth[: at][ok[: at]]))
    near = np.flatnonzero(ok[: at] & (np.arange(at) >= low_at) & (smooth[: at] - usual <= math.log(1.2)))
    onset = max(int(near[-1]) - width // 2 + 1, 0) if near.size else low_at
    peak = at + int(np.nanargmax(np.where(ok[at:], smooth[at:], -np.inf)))
    every = max(1, (peak - onset + 1) // SLOPE_POINTS)
    _slope, lower, _upper = theil_sen(y[onset: peak + 1: every], steps[onset: peak + 1: every].astype(float))
    if not lower > 0:
        return None  # not a log-linear rise: a level shift or a wander
    start, top = math.exp(usual), math.exp(float(smooth[peak]))
    name = _NAMES.get(metric, metric)
    detail = (f"{name} grew to {top / start:.1f}x its usual level {start:.3g} in {int(steps[peak] - steps[onset])} "
              f"steps, log-linearly from step {int(steps[onset])} to {top:.3g} at step {int(steps[peak])} (robust "
              f"slope, 95% interval above zero; rolling median of {width} points)")
    if metric == s.MAX_ATTENTION_LOGIT:
        if top >= WORTSMAN_DIVERGED:
            detail += "; above 1e4, where every run in Wortsman et al. 2023 diverged"
        elif top >= QK_CLIP:
            detail += f"; above {QK_CLIP:.0f}, where Kimi K2's QK-clip caps the max logit"
        elif top >= QK_CLIP / 2:
            detail += f"; Kimi K2's QK-clip caps the max logit at {QK_CLIP:.0f}"
    return Anomaly(Kind.LOGIT_GROWTH, metric, attempt, int(steps[onset]), int(steps[peak]), round(top, 6),
                   round(start, 6), detail=detail)
