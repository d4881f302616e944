"""A grad norm logged as exactly 0 at every point of an attempt while its loss is above 0: an absolute check.

A loss above 0 has a gradient; a grad norm of 0 at every logged step beside it means no gradient was measured. Either
the program printed 0 where it did not compute the norm (Megatron-DeepSpeed prints ``grad norm: 0.000`` where the
DeepSpeed engine owns the optimizer: with the loss-scale placeholder ``-1`` beside it the reader drops those zeros
already, :func:`parsers.megatron._without_placeholders`), or no gradient reached the weights (a model frozen by
mistake, a loss detached from them). Where the loss fell meanwhile, the weights were trained, so it is the first;
else the log does not tell which. Either way the grad-norm checks rest on nothing here, which the finding says.
A grad norm of 0 at some steps only is a value (a step skipped, a batch with nothing to learn).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind, shown
from forensics.progress import levels
from parsers import schema as s
from parsers.megatron import PLACEHOLDER_LINES

LEAST_POINTS = PLACEHOLDER_LINES
FELL = 0.05  # a loss whose level fell 5% (and beyond its noise) over these steps was trained
EITHER = ("no gradient was measured: the program printed 0 where it did not compute the norm, or no gradient reached "
          "the weights (a model frozen by mistake, a loss detached from them); the log does not tell which, and the "
          "grad-norm checks rest on nothing here")
TRAINED = ("the loss fell meanwhile, so the weights were trained: the program printed 0 where it did not compute the "
           "norm, and the grad-norm checks rest on nothing here")


@dataclass
class ZeroGradNormDetector:
    """``ZeroGradNormDetector().detect(frames)``: per attempt, one anomaly over its points when every grad norm it
    logged (at least 3) is 0 and its loss at those steps is above 0.

    >>> m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": [5, 6, 7, 5, 6, 7],
    ...     "metric": ["grad_norm"] * 3 + ["loss"] * 3, "value": [0.0, 0.0, 0.0, 11.0008, 11.0021, 10.9997],
    ...     "wall_time": None}), s.METRICS_SCHEMA)
    >>> [a] = ZeroGradNormDetector().detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
    >>> (a.step, a.end_step), a.detail.split(" while")[0]
    ((5, 7), 'grad norm logged as 0 at every one of its 3 points (steps 5–7)')
    """

    name: Kind = Kind.ZERO_GRAD_NORM

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        grad = frames.points(s.GRAD_NORM)
        if grad.is_empty():
            return []
        per_attempt = grad.group_by("attempt", maintain_order=True).agg(
            zero=(pl.col("value") == 0).all(), n=pl.len(), first=pl.col("step").min(), last=pl.col("step").max())
        dead = per_attempt.filter(pl.col("zero") & (pl.col("n") >= LEAST_POINTS))
        out = []
        for attempt, n, first, last in dead.select("attempt", "n", "first", "last").rows():
            loss = frames.points(s.LOSS).filter((pl.col("attempt") == attempt) & pl.col("step").is_between(first, last)
                                                & pl.col("value").is_finite()).sort("step")
            if loss.height < LEAST_POINTS or not (loss["value"] > 0).all():
                continue  # a loss of 0 beside it has no gradient either: the zero-loss finding's
            values = loss["value"].to_numpy()
            start, end = float(values[0]), float(values[-1])
            why = TRAINED if _fell(values) else EITHER
            out.append(Anomaly(
                kind=self.name, metric=s.GRAD_NORM, attempt=int(attempt), step=int(first), end_step=int(last),
                value=0.0, baseline=None,
                detail=f"grad norm logged as 0 at every one of its {n} points (steps {first}–{last}) while the loss "
                       f"was above 0 ({shown(start)} to {shown(end)}): {why}"))
        return out


def _fell(values: np.ndarray) -> bool:
    """Whether the loss's level fell over these points (:func:`forensics.progress.levels`: the medians of its first and
    last tenth, at least 3 points each) by 5% and by two standard errors, so noise about a flat level is no fall.

    >>> _fell(np.array([2.0, 2.06, 1.94, 2.02, 1.97, 2.05])), _fell(np.array([9.9, 9.0, 8.1, 7.2, 6.5, 5.8]))
    (False, True)
    """
    start, end, error = levels(values)
    return start - end > max(FELL * start, 2 * error)
