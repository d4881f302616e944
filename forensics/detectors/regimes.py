"""Regime shifts: lasting level changes found by exact PELT (:mod:`forensics.changepoint`).

What is segmented, per attempt and stretch of its log between holes: the grad norm (log scale; a new level after a
spike or a config change), the iteration time (a throughput drop: a slow node, a changed parallel layout) and the
loss scale (log2; an fp16 run stuck at a lower scale). Long series are reduced to at most 2,000 block medians
first (PELT's pruning is weak when changes are few, and a regime lasts far longer than a block; the budget is the
attempt's, shared by its stretches), then segmented with the L2 cost and a BIC-style penalty tripled to keep to
clear shifts.

A breakpoint is reported when the level moves the worrying way by at least ``min_ratio`` (grad norm up 2x,
iteration time up 1.25x, loss scale down 4x; falling grad norm and faster iterations are what training does),
both segments hold at least ``min_points`` blocks, and it is not in the first tenth of the attempt (grad norm
falls and timings settle while training starts). Shifts that run into a divergence are folded into it
(:func:`forensics.precursors.consolidate`).

A stretch too short for PELT's segments (fewer than 3 x ``min_points`` points, at least 2 x ``short_points``: a log
every few hundred steps) gets an absolute check instead, for the grad norm and the iteration time: a split, outside
the first tenth, with at least ``short_points`` (5) points on each side, where the level moves the worrying way by
``min_ratio``, every point after it is beyond every one of the (up to 10) points before it (with 5 points a side,
exchangeable noise separates so with probability 1/252), and the move is a step, not a climb: the two points around
the split hold at least half of it (from the point before the split to the point after its first, which may be a
mean half in each regime; a grad norm that rises steadily over a short fine-tuning run is no new regime).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.changepoint import bic_penalty, pelt
from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind
from forensics.gaps import stretches
from forensics.timeline import attempt_groups
from parsers import schema as s

MAX_BLOCKS = 2000
_SETTINGS = {  # metric: (min ratio between levels, direction worth reporting (+1 up, -1 down), what it means)
    s.GRAD_NORM: (2.0, 1, "grad norm rose to a new level"),
    s.ITERATION_TIME_MS: (1.25, 1, "iterations got slower (throughput drop)"),
    s.LOSS_SCALE: (4.0, -1, "loss scale fell to a new level"),
}


_PEAK_SAID = 5.0  # a point inside a rise to a new level this many times that level is named in its detail


@dataclass
class RegimeShiftDetector:
    """``RegimeShiftDetector(metric="grad_norm").detect(frames)``: kind ``changepoint``."""

    metric: str = s.GRAD_NORM
    min_points: int = 20
    short_points: int = 5  # a stretch too short for PELT: points each side of a step-like shift (absolute check)
    penalty_factor: float = 3.0
    skip_share: float = 0.1

    @property
    def name(self) -> Kind:
        return Kind.CHANGEPOINT

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        min_ratio, direction, meaning = _SETTINGS.get(self.metric, (2.0, 1, f"{self.metric} rose to a new level"))
        least = 2 * self.short_points if direction > 0 else 3 * self.min_points
        if frames.points(self.metric).height < least:  # (no attempt can have enough: most runs' metrics)
            return []
        points = frames.points(self.metric).filter(pl.col("value").is_finite() & (pl.col("value") > 0))
        spacing = frames.spacing()
        out = []
        for attempt, whole in attempt_groups(points):
            if whole.height < least:
                continue
            block = max(1, math.ceil(whole.height / MAX_BLOCKS))  # the attempt's budget, shared by its stretches
            for own in stretches(whole, spacing.get(attempt, 1), frames.cuts(attempt)):
                out += self._stretch(int(attempt), own, block, min_ratio, direction, meaning)
        return out

    def _stretch(self, attempt: int, own: pl.DataFrame, block: int, min_ratio: float, direction: int, meaning: str
                 ) -> list[Anomaly]:
        """The shifts within one stretch of the log between holes (a level is never compared across a hole)."""
        out: list[Anomaly] = []
        steps, levels = _blocks(own["step"].to_numpy(), np.log(own["value"].to_numpy()), block)
        if levels.size < 3 * self.min_points:
            short = _step_shift(levels, self.short_points, self.skip_share, math.log(min_ratio)) \
                if direction > 0 and levels.size >= 2 * self.short_points else None
            # (its levels as the check read them: the up-to-10 points before, a grad norm still settling further back)
            edges = [max(0, short - 2 * self.short_points), short, levels.size] if short is not None else []
        elif np.ptp(levels) < math.log(min_ratio):
            return out
        else:
            edges = [0, *pelt(levels, self.penalty_factor * bic_penalty(levels), min_size=self.min_points)]
        for i in range(1, len(edges) - 1):
            at = edges[i]
            if at < self.skip_share * levels.size:
                continue
            before = float(np.median(levels[edges[i - 1]:at]))
            after = float(np.median(levels[at:edges[i + 1]]))
            if (after - before) * direction < math.log(min_ratio):
                continue
            old, new = math.exp(before), math.exp(after)
            first, last = int(steps[at]), int(steps[edges[i + 1] - 1])
            detail = (f"{meaning}: median {old:.4g} before step {first}, {new:.4g} after ({new / old:.2f}x, until step "
                      f"{last})")
            if direction > 0:  # a point far above the new level inside it is said, not hidden in the median
                inside = own.filter(pl.col("step").is_between(first, last))
                top = inside.row(int(inside["value"].arg_max()), named=True) if inside.height else None
                if top is not None and top["value"] > _PEAK_SAID * new:
                    detail += f"; its highest {top['value']:.4g} at step {top['step']} ({top['value'] / new:.1f}x it)"
            out.append(Anomaly(
                kind=Kind.CHANGEPOINT, metric=self.metric, attempt=int(attempt), step=first,
                end_step=last, value=new, baseline=old, detail=detail,
            ))
        return out


def _step_shift(x: np.ndarray, least: int, skip_share: float, rise: float) -> int | None:
    """The index where a short series of log values steps up to a new level (the module docstring's absolute check),
    or None: at least ``least`` points each side, not in the first ``skip_share``, medians ``rise`` apart (after
    against the (up to) ``2 * least`` points before), every point after above every one of those, the two points
    around the split holding at least half the rise; of several, the one with the largest move there.

    >>> _step_shift(np.log([1.0, 1.1, 0.9, 1.0, 1.05, 3.0, 2.9, 3.2, 3.1, 2.8]), 5, 0.1, np.log(2.0))
    5
    >>> _step_shift(np.log(np.linspace(1.0, 3.0, 10)), 5, 0.1, np.log(2.0)) is None   # a steady climb
    True
    """
    n = x.size
    at = np.arange(max(least, math.ceil(skip_share * n)), n - least + 1)
    if not at.size:
        return None
    # against the (up to) 2 x ``least`` points just before: a grad norm still settling from the start of training
    # is higher further back
    after_min = np.minimum.accumulate(x[::-1])[::-1][at]
    before_max = np.array([x[max(0, i - 2 * least):i].max() for i in at])  # (a short series: a few dozen splits)
    shift = np.array([np.median(x[i:]) - np.median(x[max(0, i - 2 * least):i]) for i in at])
    move = x[np.minimum(at + 1, n - 1)] - x[at - 1]
    ok = (shift >= rise) & (after_min > before_max) & (move >= shift / 2)
    return int(at[ok][np.argmax(move[ok])]) if ok.any() else None


def _blocks(steps: np.ndarray, values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Medians of blocks of ``size`` points (each labelled with its first step)."""
    if size == 1:
        return steps, values
    m = values.size // size * size
    medians = np.median(values[:m].reshape(-1, size), axis=1)
    return steps[:m:size], medians
