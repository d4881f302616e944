"""A loss above chance: worse than guessing uniformly over the vocabulary, an absolute check that needs no statistics.

A language model that predicts every token with equal probability has a cross-entropy of ln(vocabulary) nats. A
logged loss more than ``margin`` (1 nat) above ln(vocabulary) is worse than that: the model is broken at that point,
however few points the log holds (an excerpt, a 6-line log). Only when the vocabulary is known (printed, or in the
config); the loss is taken to be in nats, as every supported framework logs it.

A freshly initialised model starts *above* ln(vocabulary): its logits are spread (a unit-variance final hidden state
times output weights of standard deviation ``std`` gives logits of spread s = std x sqrt(hidden)), and the expected
cross-entropy of logits spread s is about ln(vocabulary) + s^2/2 (BLOOM's 104B at std 0.02 and hidden 9216 starts
near 12.5, ln(50688) = 10.8). So at the start of training, until the loss first comes within ln(vocabulary) +
``margin``, a point is judged against ln(vocabulary) + s^2/2 + ``margin`` (``init_spread`` s, from the config's
init std, 0.02 when it names none, and its hidden size); with no hidden size known, or an init std that is no
small-init value (above 0.1), against ln(vocabulary) + ``margin`` as every other point. The start of training is an
attempt whose first logged step is within one logging interval of step 0 (not a resume, not an excerpt).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind, shown
from forensics.timeline import attempt_groups, runs_of_true
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
    # a fresh model's logit spread, std x sqrt(hidden) (None: not known)
    init_spread: float | None = None

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        if not self.vocab or self.vocab < 2:
            return []
        chance = math.log(self.vocab)
        limit = chance + self.margin
        points = frames.points(s.LOSS).filter(pl.col("value").is_finite())
        spacing, mid_run, firsts = frames.spacing(), frames.begins_mid_run(), frames.first_steps()
        out = []
        for attempt, own in attempt_groups(points):
            values, steps = own["value"].to_numpy(), own["step"].to_numpy()
            limits = np.full(values.size, limit)
            first = firsts.get(int(attempt), int(steps[0]))
            if self.init_spread and attempt != mid_run and first <= spacing.get(int(attempt), 1):
                # the start of training (its first logged step within one logging interval of step 0: not a resume):
                # the fresh model's points, until the loss first comes within chance
                within = values <= limit
                fresh = int(np.argmax(within)) if within.any() else values.size
                limits[:fresh] = limit + self.init_spread ** 2 / 2
            for a, b in runs_of_true(values > limits):
                top = a + int(np.argmax(values[a:b + 1]))
                high = float(values[top])
                what = f"loss {shown(high)} at step {steps[a]}" if a == b else (
                    f"loss at every logged point from step {steps[a]} to {steps[b]} (highest {shown(high)}, step "
                    f"{steps[top]})")
                why = (f"above ln({self.vocab}) + {self.margin:g} = {limit:.2f} nats: worse than guessing every token "
                       "uniformly") if limits[a] == limit else (
                       f"above ln({self.vocab}) + {self.init_spread ** 2 / 2:.2f} + {self.margin:g} = {limits[a]:.2f} "
                       f"nats: worse than a freshly initialised model of its shape (its logits' spread "
                       f"{self.init_spread:.2f} puts its loss near ln(vocabulary) + {self.init_spread ** 2 / 2:.2f}), "
                       "before the loss had first come within chance")
                out.append(Anomaly(
                    kind=self.name, metric=s.LOSS, attempt=int(attempt), step=int(steps[a]), end_step=int(steps[b]),
                    value=high, baseline=chance, detail=f"{what}, {why}"))
        return sorted(out, key=lambda x: (x.attempt, x.step))
