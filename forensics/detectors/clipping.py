"""Gradient clipping, post hoc: with the clip threshold known from the config (``clip_grad``: Megatron's name, which
``grad_clip``, ``max_grad_norm`` and ``gradient_clipping`` become; Lightning's ``gradient_clip_val``), what the
logged grad norm says about it. The logged grad norm is taken as the norm *before* clipping (what Megatron, the
Hugging Face Trainer, llm.c, torchtitan and OLMo log), so a point above the threshold is a clipped step. A threshold
of 0 (or none) means no clipping: nothing is said.

Findings (:attr:`~forensics.findings.Kind.CLIPPING`):

Each stretch of an attempt between holes in the log is judged on its own.

* **sustained clipping** (metric :data:`parsers.schema.CLIPPED_SHARE`): the share of clipped points over a rolling
  window of ``WINDOW`` points (10 to 100: a twentieth of the attempt) reached ``SUSTAINED`` (50%) after it had been at
  most ``RARE`` (20%) over ``SETTLED`` (2) windows' points, and at least ``CLEAR`` (2) times the share of clipped points
  before it (since the first tenth of the attempt, or since the sustained windows before): the onset is the window's
  first clipped step. Clipping is common while a run's grad norm settles from its first, large values, often through
  a long warm-up: until the share had been rare over two windows, clipping is that start-up clipping, whatever its ups
  and downs, not an onset. A run that clips most steps from start to end has no onset either: its threshold is simply
  below its usual grad norm, which is a setting, not an event.
* **far above the threshold** (metric ``grad_norm``): the points whose grad norm was ``FAR`` (10x) the threshold or
  more while the median of the ``TRAILING`` (100) points before them (at least 10) was below it, one finding per
  stretch listing them. (A run whose grad norm is usually above its threshold, as in many fine-tunes that log norms
  of 20 against a threshold of 1, clips every step: 10x is its usual level, not an event.)

:func:`what_if` (a suggestion, never a fact about the run): for the points a loose fixed threshold let through at 10x
the usual grad norm or more, the level at which a threshold that adapts would have capped them: ``TRAILING_MULTIPLE``
(3x) the trailing median of the previous ``TRAILING`` (100) points, or ZClip's z-score rule (Kumar et al. 2025:
``ZCLIP_Z`` = 2.5 standard deviations above an EMA of the grad norm with ``ZCLIP_ALPHA`` = 0.97; here the EMA runs
over the logged norms, without ZClip's feeding back of the clipped value).

>>> import polars as pl
>>> from parsers import schema as s
>>> from forensics.detectors.base import RunFrames
>>> grad = [0.5] * 300 + [1.5] * 100 + [0.5] * 99 + [30.0]      # clipped from step 301 to 400; 60x at step 500
>>> m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": range(1, 501),
...                             "metric": "grad_norm", "value": grad}), s.METRICS_SCHEMA)
>>> found = ClippingDetector(1.0).detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
>>> [(a.metric, a.step, a.end_step, a.value) for a in found]
[('clipped_share', 301, 400, 1.0), ('grad_norm', 500, 500, 30.0)]
>>> grad = [0.5] * 300 + [1.5] * 100 + [0.5] * 200 + [1.5] * 100 + [0.5] * 100    # two episodes, rare between
>>> m = m.head(0).vstack(s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": range(1, 801),
...                                              "metric": "grad_norm", "value": grad}), s.METRICS_SCHEMA))
>>> [(a.step, a.end_step, a.baseline) for a in ClippingDetector(1.0).detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA)))]
[(301, 400, 0.0), (601, 700, 0.0)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind, shown
from forensics.gaps import stretch_of
from forensics.timeline import attempt_groups
from parsers import schema as s

CLIP_KEYS = ("clip_grad", "gradient_clip_val")  # canonical config key, then Lightning's (kept by its own name)
WINDOW = (10, 100)    # points in the rolling clipped share: a twentieth of the attempt, within these bounds
SUSTAINED = 0.5       # a rolling share of clipped points at least this is sustained clipping
RARE = 0.2            # ... after it had been at most this, earlier in the attempt,
SETTLED = 2           # ... over this many windows' points (before that, it is start-up clipping)
CLEAR = 2.0           # ... and at least this multiple of the share of clipped points before it
BURN_IN = 0.1         # the first tenth of an attempt: clipping is common while the grad norm settles
FAR = 10.0            # a grad norm at least this multiple of the threshold is listed
TRAILING = 100        # what-if: points in the trailing median
TRAILING_MULTIPLE = 3.0
ZCLIP_ALPHA = 0.97    # ZClip's EMA weight on the old value
ZCLIP_Z = 2.5
LOOSE = 10.0          # what-if: a spike the fixed threshold let through at this multiple of the usual level or more


def thresholds(table: dict[int, dict[str, Any]]) -> dict[int, float]:
    """Per attempt, the clip threshold its config sets (attempts whose config sets none, or 0, are left out).

    >>> thresholds({1: {"clip_grad": 1.0}, 2: {"clip_grad": 0.0}, 3: {"gradient_clip_val": 0.5}, 4: {}})
    {1: 1.0, 3: 0.5}
    """
    out = {}
    for attempt, config in table.items():
        value = next((config[k] for k in CLIP_KEYS if k in config), None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
            out[attempt] = float(value)
    return out


@dataclass(frozen=True)
class ClippingDetector:
    """Sustained clipping and grad norms far above the clip threshold (see the module docstring). ``threshold``: the
    run's clip threshold (None: only the attempts in ``per_attempt`` are judged); ``per_attempt``: an attempt's own,
    when its config sets one."""

    threshold: float | None
    per_attempt: dict[int, float] = field(default_factory=dict, compare=False)
    name: Kind = Kind.CLIPPING

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        points = frames.points(s.GRAD_NORM).filter(pl.col("value").is_finite() & (pl.col("value") > 0))
        out: list[Anomaly] = []
        gaps = frames.gaps()
        for attempt, own in attempt_groups(points):
            limit = self.per_attempt.get(int(attempt), self.threshold)  # type: ignore[arg-type]
            if limit is None:
                continue
            steps, values = own["step"].to_numpy(), own["value"].to_numpy()
            # nothing is measured across a hole in the log: each stretch between holes on its own
            stretch = stretch_of(steps, gaps, int(attempt))
            for part in np.unique(stretch):
                mine = stretch == part
                out += _sustained(int(attempt), steps[mine], values[mine], limit,  # type: ignore[arg-type]
                                  last_stretch=bool(part == stretch[-1]))
                out += _far(int(attempt), steps[mine], values[mine], limit)  # type: ignore[arg-type]
        return sorted(out, key=lambda a: (a.attempt, a.step, a.metric))


def _sustained(attempt: int, steps: np.ndarray, values: np.ndarray, limit: float,
               last_stretch: bool = True) -> list[Anomaly]:
    """Episodes of sustained clipping in one stretch of an attempt (``last_stretch``: none of it comes after)."""
    n = steps.size
    width = int(np.clip(n // 20, *WINDOW))
    if n < 2 * width:
        return []
    clipped = (values > limit).astype(float)
    share = pl.Series(clipped).rolling_mean(width, min_samples=width).to_numpy()
    settled = pl.Series(clipped).rolling_mean(SETTLED * width, min_samples=SETTLED * width).to_numpy()
    start = max(int(n * BURN_IN), width - 1)
    above = np.zeros(n, dtype=bool)
    above[start:] = share[start:] >= SUSTAINED
    rare_seen = np.cumsum(np.r_[np.zeros(start, dtype=bool), settled[start:] <= RARE])  # rare points up to each index
    edges = np.flatnonzero(np.diff(np.r_[0, above.astype(np.int8), 0]))
    out = []
    since = start  # where the stretch before the next episode begins
    for first, stop in zip(edges[::2], edges[1::2], strict=True):  # each run of sustained windows (few)
        end = int(stop) - 1
        rare = rare_seen[first] - (rare_seen[since - 1] if since > 0 else 0) > 0
        onset = int(first) - width + 1 + int(np.flatnonzero(clipped[int(first) - width + 1: int(first) + 1])[0])
        last = int(np.flatnonzero(clipped[: end + 1])[-1])
        onset = max(onset, since)  # (not before the stretch this episode is judged in)
        if onset > last:  # its clipped points all lie before that stretch (start-up clipping the window still holds)
            since = end + 1
            continue
        before = clipped[since:onset]
        during = float(clipped[onset: last + 1].mean())
        if not rare or (before.size and during < CLEAR * before.mean()):
            since = end + 1  # start-up clipping, or not clearly more than before: no onset
            continue
        to = (f"step {int(steps[last])}" if end < n - 1 else "the end of the attempt" if last_stretch
              else f"step {int(steps[last])}, then a hole in the log after step {int(steps[-1])}")
        # (what "before" covers: from the end of the episode before, or after the attempt's start-up points)
        after_startup = f", after its first {start} points" if since == start and start > 0 else ""
        against = (f"against {before.mean():.0%} from step {int(steps[since])}{after_startup}; " if before.size
                   else "")
        out.append(Anomaly(
            Kind.CLIPPING, s.CLIPPED_SHARE, attempt, int(steps[onset]), int(steps[last]), round(during, 4),
            round(float(before.mean()) if before.size else 0.0, 4),
            detail=(f"grad norm above the clip threshold {shown(limit)} at {during:.0%} of logged steps from step "
                    f"{int(steps[onset])} to {to} ({against}rolling share over {width} points)")))
        since = end + 1
    return out


def fold_into_divergences(anomalies: list[Anomaly]) -> list[Anomaly]:
    """Drop the clipping, layer-group drift and logit-growth findings that begin inside a divergence (at or after its
    onset, up to its end): they are its course, as its spikes are (:func:`forensics.precursors.consolidate`)."""
    spans = [(a.attempt, a.step, a.end_step) for a in anomalies if a.kind == Kind.DIVERGENCE]
    if not spans:
        return anomalies
    return [a for a in anomalies if a.kind not in (Kind.CLIPPING, Kind.GRAD_NORM_RATIO, Kind.LOGIT_GROWTH)
            or not any(a.attempt == att and start <= a.step <= end for att, start, end in spans)]


def _far(attempt: int, steps: np.ndarray, values: np.ndarray, limit: float) -> list[Anomaly]:
    usual = pl.Series(values).shift(1).rolling_median(TRAILING, min_samples=10).to_numpy()
    far = np.flatnonzero((values >= FAR * limit) & (usual < limit))  # through a threshold that did not usually bind
    if far.size == 0:
        return []
    top = far[np.argsort(-values[far], kind="stable")][:5]
    listed = ", ".join(f"step {int(steps[i])} ({shown(float(values[i]))}, {values[i] / limit:.0f}x)" for i in sorted(top))
    more = f" and {far.size - top.size} more" if far.size > top.size else ""
    peak = int(far[np.argmax(values[far])])
    return [Anomaly(
        Kind.CLIPPING, s.GRAD_NORM, attempt, int(steps[far[0]]), int(steps[far[-1]]), float(values[peak]), limit,
        detail=(f"{far.size} logged step{'s' if far.size != 1 else ''} with a grad norm {FAR:.0f}x the clip threshold "
                f"{shown(limit)} or more: {listed}{more}"))]


def what_if(points: pl.DataFrame, limits: dict[int, float], until: dict[int, int], most: int = 4) -> list[str]:
    """The points (at most ``most``, the largest first; each attempt's up to its step in ``until``) whose grad norm was
    at least ``LOOSE`` (10) times the median of the ``TRAILING`` points before it and that its fixed clip threshold
    (``limits``, per attempt) let through at ``LOOSE`` times that median or more (not clipped, or clipped at a
    threshold that far above the usual level): one sentence each, with what the fixed threshold did and the level at
    which a threshold that adapts would have capped it (see the module docstring). Suggestions from the logged norms,
    said as such.

    >>> pts = pl.DataFrame({"attempt": 1, "step": list(range(1, 202)), "value": [0.2, 0.3] * 100 + [4.0]})
    >>> what_if(pts, {1: 1.0}, {1: 201})  # clipped at 4x the usual level: the fixed threshold held it
    []
    >>> print(what_if(pts, {1: 5.0}, {1: 201})[0])  # doctest: +NORMALIZE_WHITESPACE
    attempt 1, step 201: grad norm 4 (16x its trailing median 0.25), under the clip threshold 5, so not clipped; a
    threshold of 3x the trailing median would have capped it at 0.75, ZClip's z-score rule (z 2.5 on an EMA) at 0.38
    (what-if from the logged norms, not what happened)
    """
    mine = points.filter(pl.col("attempt").is_in(list(until)) & pl.col("value").is_finite()).sort("attempt", "step")
    if mine.height == 0:
        return []
    before = pl.col("value").shift(1)
    mine = mine.with_columns(
        median=before.rolling_median(TRAILING, min_samples=10).over("attempt"),
        mu=before.ewm_mean(alpha=1 - ZCLIP_ALPHA, adjust=False).over("attempt"),
        sd=before.ewm_std(alpha=1 - ZCLIP_ALPHA, adjust=False).over("attempt"),
        limit=pl.col("attempt").replace_strict(limits, default=None, return_dtype=pl.Float64),
        until=pl.col("attempt").replace_strict(until, default=None, return_dtype=pl.Int64))
    let_through = pl.min_horizontal("value", pl.col("limit").fill_null(float("inf")))
    found = mine.filter((pl.col("step") <= pl.col("until")) & (pl.col("median") > 0)
                        & (pl.col("value") >= LOOSE * pl.col("median")) & (let_through >= LOOSE * pl.col("median")))
    out = []
    for row in found.sort("value", descending=True).head(most).sort("attempt", "step").iter_rows(named=True):
        value, median, limit = row["value"], row["median"], row["limit"]
        if limit is None:
            fixed = "with no clip threshold known"
        elif value > limit:
            fixed = f"clipped to the threshold {shown(limit)} ({limit / median:.1f}x the trailing median)"
        else:
            fixed = f"under the clip threshold {shown(limit)}, so not clipped"
        zclip = row["mu"] + ZCLIP_Z * row["sd"]
        out.append(f"attempt {row['attempt']}, step {row['step']}: grad norm {shown(value)} ({value / median:.0f}x its "
                   f"trailing median {median:.2g}), {fixed}; a threshold of {TRAILING_MULTIPLE:.0f}x the trailing "
                   f"median would have capped it at {TRAILING_MULTIPLE * median:.2g}, ZClip's z-score rule (z "
                   f"{ZCLIP_Z} on an EMA) at {zclip:.2g} (what-if from the logged norms, not what happened)")
    return out
