"""A loss above chance: worse than guessing uniformly over the vocabulary, an absolute check that needs no statistics.

A language model that predicts every token with equal probability has a cross-entropy of ln(vocabulary) nats; a
freshly initialised model starts near it. A logged loss more than ``margin`` (1 nat) above ln(vocabulary) is worse
than that: the model is broken at that point, however few points the log holds (an excerpt, a 6-line log). Only
when the vocabulary is known (printed, or in the config); the loss is taken to be in nats, as every supported
framework logs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind, shown
from forensics.timeline import runs_of_true
from parsers import schema as s


@dataclass
class LossAboveChanceDetector:
    """``LossAboveChanceDetector(vocab=50304).detect(frames)``: one anomaly per run of points above chance.

    >>> import polars as pl
    >>> from parsers import schema as s
    >>> m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": [10, 20, 30, 40],
    ...     "metric": "loss", "value": [10.9, 14.1, 76.8, 9.7], "wall_time": None}), s.METRICS_SCHEMA)
    >>> [a] = LossAboveChanceDetector(50304).detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
    >>> print(a.detail)  # doctest: +NORMALIZE_WHITESPACE
    loss at every logged point from step 20 to 30 (highest 76.8, step 30), above ln(50304) + 1 = 11.83 nats:
    worse than guessing every token uniformly
    """

    vocab: int | None = None
    margin: float = 1.0
    name: Kind = Kind.LOSS_ABOVE_CHANCE

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        if not self.vocab or self.vocab < 2:
            return []
        limit = math.log(self.vocab) + self.margin
        points = frames.points(s.LOSS).filter(pl.col("value").is_finite())
        out = []
        for (attempt,), own in points.group_by("attempt", maintain_order=True):
            values, steps = own["value"].to_numpy(), own["step"].to_numpy()
            for a, b in runs_of_true(values > limit):
                top = a + int(np.argmax(values[a:b + 1]))
                high = float(values[top])
                what = f"loss {shown(high)} at step {steps[a]}" if a == b else (
                    f"loss at every logged point from step {steps[a]} to {steps[b]} (highest {shown(high)}, step "
                    f"{steps[top]})")
                out.append(Anomaly(
                    kind=self.name, metric=s.LOSS, attempt=int(attempt), step=int(steps[a]), end_step=int(steps[b]),
                    value=high, baseline=math.log(self.vocab),
                    detail=f"{what}, above ln({self.vocab}) + {self.margin:g} = {limit:.2f} nats: worse than guessing "
                    "every token uniformly"))
        return sorted(out, key=lambda x: (x.attempt, x.step))
