"""A loss logged as the same value at many points in a row: an absolute check that needs no statistics.

Per-batch losses differ in their last printed digits from batch to batch; one that prints the same value, to four
or more significant digits, at ``min_points`` (8) or more logged points in a row did not move: the weights are not
being updated (an LR of 0, frozen parameters, every step skipped) or the loss does not depend on them (a broken
graph, constant inputs). LitGPT #689 printed ``loss 10.8259`` (ln 50,304: a uniform guess over GPT-2's padded
vocabulary) at every iteration. A loss of 0 is :mod:`forensics.detectors.zero_loss`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind, shown
from parsers import schema as s

WHY = ("a loss that does not move is not being trained: an LR of 0, frozen weights, every step skipped, or a loss "
       "that does not depend on the weights; the log does not tell which")


def _digits(value: float) -> int:
    """Significant digits of a value as logged.

    >>> _digits(10.8259), _digits(0.00009999999747378752), _digits(2.31)
    (6, 1, 3)
    """
    # (to float32's 7 digits: TensorBoard stores 0.0001 as 9.99999974737875e-05)
    return len(f"{abs(value):.7g}".split("e")[0].replace(".", "").lstrip("0").rstrip("0") or "0")


@dataclass
class FrozenLossDetector:
    """``FrozenLossDetector().detect(frames)``: per attempt, every run of ``min_points`` or more equal losses.

    >>> import polars as pl
    >>> m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": range(10, 110, 10),
    ...     "metric": "loss", "value": [11.02, 10.9, *[10.8259] * 8], "wall_time": None}), s.METRICS_SCHEMA)
    >>> [a] = FrozenLossDetector().detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
    >>> (a.step, a.end_step), a.detail.split(": a loss")[0]
    ((30, 100), 'loss logged as 10.8259 at every one of 8 points in a row, from step 30 to 100')
    """

    name: Kind = Kind.FROZEN_LOSS
    min_points: int = 8
    min_digits: int = 4  # a loss printed to fewer digits (2.31) can repeat by rounding alone

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        points = frames.points(s.LOSS)
        # runs of equal values, in NumPy over the (attempt, step)-ordered points (views, not copies: a million points
        # cost a few boolean arrays); NaN equals nothing, so it ends a run, and a run of Inf is not kept
        values, attempts, steps = (points[c].to_numpy() for c in ("value", "attempt", "step"))
        if values.size == 0:
            return []
        begins = np.flatnonzero(np.r_[True, (values[1:] != values[:-1]) | (attempts[1:] != attempts[:-1])])
        lengths = np.diff(np.r_[begins, values.size])
        keep = (lengths >= self.min_points) & (values[begins] != 0) & np.isfinite(values[begins])
        out = []
        for i, n in zip(begins[keep].tolist(), lengths[keep].tolist(), strict=True):
            value, first, last = float(values[i]), int(steps[i]), int(steps[i + n - 1])
            if _digits(value) < self.min_digits:
                continue
            out.append(Anomaly(
                kind=self.name, metric=s.LOSS, attempt=int(attempts[i]), step=first, end_step=last, value=value,
                baseline=None, detail=f"loss logged as {shown(value)} at every one of {n} points in a row, from step "
                f"{first} to {last}: {WHY}"))
        return sorted(out, key=lambda a: (a.attempt, a.step))
