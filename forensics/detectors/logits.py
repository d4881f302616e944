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
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind
from forensics.gaps import stretch_of
from forensics.theil_sen import theil_sen
from forensics.timeline import attempt_groups, metric_points
from parsers import schema as s

GROWTH = 3.0          # the smoothed value must rise this far above its running low
NOISE_SIGMAS = 4.0    # ... and this many robust sigmas of its scatter about its rolling median
SMOOTH = (9, 25)      # points in the rolling median: a twentieth of the stretch, within these bounds
BURN_IN = 0.1         # the first tenth of an attempt's points
MIN_POINTS = 40       # a stretch needs this many points
SLOPE_POINTS = 400    # Theil-Sen compares all pairs: the rise is thinned to about this many points
WORTSMAN_DIVERGED = 1e4   # attention logits above this: every run in Wortsman et al. diverged
QK_CLIP = 100.0           # Kimi K2's QK-clip threshold on the max attention logit
_QUANTILE = re.compile(r"p\d+$", re.IGNORECASE)  # a per-layer statistic that is a percentile: max_p95
_NAMES = {s.MAX_ATTENTION_LOGIT: "max attention logit", s.Z_LOSS: "z-loss"}


@dataclass(frozen=True)
class LogitGrowthDetector:
    """Attention-logit growth and a rising z-loss (see the module docstring)."""

    name: Kind = Kind.LOGIT_GROWTH

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        present = _names_logged(frames)
        gaps = frames.gaps()
        out: list[Anomaly] = []
        attention = frames.remember("attention_logits", lambda: attention_logits(frames.metrics))
        for metric in s.LOGIT_METRICS:
            if metric == s.MAX_ATTENTION_LOGIT:
                points = attention
            elif metric in present:
                points = frames.points(metric).with_columns(layer=pl.lit(None, dtype=pl.Int64))
            else:
                continue
            points = points.filter(pl.col("value").is_finite() & (pl.col("value") != 0))
            for attempt, own in attempt_groups(points):
                steps, values = own["step"].to_numpy(), np.abs(own["value"].to_numpy())
                layers = own["layer"].to_numpy()
                stretch = stretch_of(steps, gaps, int(attempt))  # nothing measured across a hole
                grew = []
                for part in np.unique(stretch):
                    mine = stretch == part
                    found = _growth(metric, int(attempt), steps[mine], values[mine],  # type: ignore[arg-type]
                                    layers[mine])
                    if found:
                        grew.append(found)
                if metric == s.MAX_ATTENTION_LOGIT and not any((g.value or 0) >= WORTSMAN_DIVERGED for g in grew):
                    grew += [x for x in [_past_wortsman(int(attempt), steps, values, layers)] if x]
                if metric == s.MAX_ATTENTION_LOGIT and s.MAX_ATTENTION_LOGIT not in present and grew:
                    said = frames.remember("logit_layers_said", lambda: _from_layers(frames.metrics))  # once a run
                    for x in grew:
                        x.detail += said
                out += grew
        return sorted(out, key=lambda a: (a.attempt, a.step, a.metric))


def _names_logged(frames: RunFrames) -> set[str]:
    """The metric names the run logs (one scan of its metrics, kept for the detector and its coverage record)."""
    return frames.remember("metric_names", lambda: set(frames.metrics["metric"].unique().cast(pl.String).to_list()))


def _from_layers(metrics: pl.DataFrame) -> str:
    """What the max attention logit is where the run logs only per-layer series: their largest, and what their
    statistic means."""
    read = layers_read(metrics)
    if read is None:
        return ""
    said = (f"; the max attention logit here is the largest of the {len(read['series'])} per-layer series logged "
            f"(layers {', '.join(map(str, read['layers']))}; statistic {', '.join(read['statistics'])})")
    quantiles = [x for x in read["statistics"] if x != "max" and _QUANTILE.search(x)]
    if quantiles:
        said += (f": {quantiles[0]} is a percentile of a layer's attention logits, below their max, so the max was at "
                 "least this")
    return said


def attention_logits(metrics: pl.DataFrame) -> pl.DataFrame:
    """The run's max attention logit per step: ``attempt, step, value, layer``. Its own series
    (:data:`parsers.schema.MAX_ATTENTION_LOGIT`, ``layer`` null) where it logs one; else the largest of its per-layer
    series (:func:`parsers.schema.is_layer_logit`) at each step, with the layer that held it. Empty without either.

    >>> m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": [1, 1, 2, 2],
    ...     "metric": ["max_attention_logit/0/max", "max_attention_logit/11/max"] * 2, "value": [3.0, 5.0, 9.0, 4.0]}),
    ...     s.METRICS_SCHEMA)
    >>> attention_logits(m).rows()
    [(1, 1, 5.0, 11), (1, 2, 9.0, 0)]
    """
    own = metric_points(metrics, s.MAX_ATTENTION_LOGIT).filter(pl.col("value").is_finite())
    if own.height:
        return own.with_columns(layer=pl.lit(None, dtype=pl.Int64))
    names = [m for m in metrics["metric"].unique().cast(pl.String).to_list() if s.is_layer_logit(m)]
    if not names:
        return own.with_columns(layer=pl.lit(None, dtype=pl.Int64))
    layer = pl.col("metric").cast(pl.String).str.split("/").list.get(1).cast(pl.Int64)
    rows = (metrics.lazy().filter(pl.col("metric").cast(pl.String).is_in(names) & pl.col("value").is_finite())
            .select("attempt", "step", "value", layer=layer)
            .sort("attempt", "step", "value", "layer", descending=[False, False, True, False])
            .group_by("attempt", "step", maintain_order=True).first())
    return rows.collect()


def layers_read(metrics: pl.DataFrame) -> dict[str, Any] | None:
    """What per-layer attention-logit series a run logs, for its coverage record: ``series`` (the canonical names),
    ``layers``, ``statistics`` (the tags' own: ``max``, ``max_p95``) and ``points``; None without any."""
    names = sorted((m for m in metrics["metric"].unique().cast(pl.String).to_list() if s.is_layer_logit(m)),
                   key=lambda m: (int(m.split("/")[1]), m))
    if not names:
        return None
    return {"series": names, "layers": sorted({int(m.split("/")[1]) for m in names}),
            "statistics": sorted({m.split("/", 2)[2] for m in names}),
            "points": int(metrics.select(pl.col("metric").cast(pl.String).is_in(names).sum()).item())}


def logit_coverage(record: dict[str, Any], frames: RunFrames, tags: list[dict[str, str]]) -> dict[str, Any]:
    """A run's coverage record with the logit series this detector judges out of ``other_scalars`` (they are not
    checked for NaN/Inf only) and under ``logits``: ``metrics`` (the max attention logit and z-loss series the run
    logs, by name) and ``per_layer`` (:func:`layers_read`, with ``tags``: the tags they were read from). Unchanged for a
    run without them."""
    present = _names_logged(frames)
    own = [m for m in s.LOGIT_METRICS if m in present]
    per_layer = layers_read(frames.metrics)
    if not own and per_layer is None:
        return record
    judged = set(own) | set(per_layer["series"] if per_layer else [])
    if per_layer:
        per_layer["tags"] = sorted({t["tag"] for t in tags if t["metric"] in judged and s.is_layer_logit(t["metric"])})
    return {**record, "other_scalars": [m for m in record.get("other_scalars", []) if m not in judged],
            "logits": {"metrics": own, "per_layer": per_layer}}


def _past_wortsman(attempt: int, steps: np.ndarray, values: np.ndarray, layers: np.ndarray) -> Anomaly | None:
    """The max attention logit at or above 1e4 (:data:`WORTSMAN_DIVERGED`) at any logged point of the attempt: from
    the first such point to the last, its peak with its layer. A level, not a trend: it says whether it was already
    there when first logged (so its growth is not in the log)."""
    above = np.flatnonzero(values >= WORTSMAN_DIVERGED)
    if above.size == 0:
        return None
    top = int(above[np.argmax(values[above])])
    first, last = int(above[0]), int(above[-1])
    where = _layer_said(layers[top])
    when = ("from its first logged point, so when it grew past it is not in the log" if first == 0 else
            f"from step {int(steps[first])} (it was {values[first - 1]:.4g} at step {int(steps[first - 1])}, the "
            "point before)")
    detail = (f"max attention logit at or above 1e4, where every run in Wortsman et al. 2023 diverged, at "
              f"{above.size} of its {values.size} logged points, {when}, to step {int(steps[last])}; at most "
              f"{values[top]:,.0f} at step {int(steps[top])}{where}")
    return Anomaly(Kind.LOGIT_GROWTH, s.MAX_ATTENTION_LOGIT, attempt, int(steps[first]), int(steps[last]),
                   round(float(values[top]), 6), None, detail=detail)


STEPS_LARGEST = "the step's largest in layer"  # a smoothed value's layer: the one holding the raw max at its step


def _layer_said(layer: Any, said: str = "in layer") -> str:
    return "" if layer is None or (isinstance(layer, float) and math.isnan(layer)) else f" ({said} {int(layer)})"


def _growth(metric: str, attempt: int, steps: np.ndarray, values: np.ndarray, layers: np.ndarray
            ) -> Anomaly | None:
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
              f"steps, log-linearly from step {int(steps[onset])} to {top:.3g} at step {int(steps[peak])}"
              f"{_layer_said(layers[first + peak], STEPS_LARGEST)} (robust slope, 95% interval above zero; "
              f"rolling median of {width} points)")
    if metric == s.MAX_ATTENTION_LOGIT:
        if top >= WORTSMAN_DIVERGED:
            detail += "; above 1e4, where every run in Wortsman et al. 2023 diverged"
        elif top >= QK_CLIP:
            detail += f"; above {QK_CLIP:.0f}, where Kimi K2's QK-clip caps the max logit"
        elif top >= QK_CLIP / 2:
            detail += f"; Kimi K2's QK-clip caps the max logit at {QK_CLIP:.0f}"
    return Anomaly(Kind.LOGIT_GROWTH, metric, attempt, int(steps[onset]), int(steps[peak]), round(top, 6),
                   round(start, 6), detail=detail)
