"""A loss logged as exactly 0: an absolute check that needs no statistics.

A cross-entropy is 0 only when every counted token was predicted with probability 1. A logged loss of exactly 0
(to the digits printed: the Hugging Face Trainer rounds to 4) means the batches gave nothing to learn from: every
label masked or ignored, a loss that underflowed in half precision, a step whose loss was never computed; or a
loss below the printed digits (a model that memorised a small dataset). The log does not tell which, and the
anomaly says so, unless its grad norm is NaN there or the attempt stopped on fp16 overflows (its steps overflowed:
the Trainer logs a window of Inf or NaN losses as 0). Megatron never prints a zero loss (it drops the key), so this
is seen in other frameworks' logs.
Not a finding where the grad norm is non-zero at most of the zero-loss points (the printed loss is not the trained
one: GRPO prints 0 while its policy gradient flows) or where the loss also goes below 0 (a policy or preference
objective, not a cross-entropy). Zeros scattered among ordinary values (under half the points between the first
and the last) are single batches, said as such: a hinge or margin loss is 0 wherever the margin is met.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind, shown
from parsers import schema as s

WHY = ("a loss of 0 (to the digits printed) is no training signal: every label masked or ignored, a loss that "
       "underflowed, or a loss too small for the digits printed; the log does not tell which")
SCATTERED = ("single batches gave a loss of 0: a batch whose labels were all masked or ignored, or a loss with a floor "
             "at 0 that the batch met in full (a hinge or margin loss); a cross-entropy over real tokens is never 0; "
             "the log does not tell which")
_FILTERED = ("the Hugging Face Trainer, for one, leaves NaN and Inf losses out of the mean it logs, its "
             "logging_nan_inf_filter on by default, and logs 0 for a window with nothing else")
NAN_FILTERED = ("the grad norm was NaN or Inf at these steps: the loss was most likely NaN too, logged as 0 "
                f"({_FILTERED})")
OVERFLOWED = ("the program stopped on fp16 overflows right after them: its steps overflowed, their loss most likely Inf "
              f"or NaN, logged as 0 ({_FILTERED})")
NEAR_ZERO = 1e-3  # a cross-entropy below this is a perplexity of 1.001: nothing left to learn
COLLAPSE = 1000.0  # a fall this large in one logged point is a collapse, not learning
FLOWING = 0.01  # a grad norm above this flows (GRPO's 0.087); OLMo #692's 7.7e-08, a memorised model's 1e-3, do not


@dataclass
class ZeroLossDetector:
    """``ZeroLossDetector().detect(frames)``: per attempt, one anomaly from its first zero loss to its last.

    >>> m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": [10, 20, 30, 40, 50],
    ...     "metric": "loss", "value": [2.31, 1.98, 0.0, 0.0, 0.0], "wall_time": None}), s.METRICS_SCHEMA)
    >>> [a] = ZeroLossDetector().detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
    >>> (a.step, a.end_step), a.detail.split(": a loss")[0]
    ((30, 50), 'loss logged as 0 at every point from step 30 to 50 (3 points), after 1.98 at step 20')
    """

    name: Kind = Kind.ZERO_LOSS

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        points = frames.points(s.LOSS).filter(pl.col("value").is_finite())
        zeros = points.filter(pl.col("value") == 0)
        if zeros.height == 0:
            return []
        # a gradient at the zero-loss points says the printed loss is not what was trained on (GRPO prints 0 while
        # its policy gradient is not: TRL #3452), as a loss that also goes below 0 is not a cross-entropy
        flowing = zeros.join(frames.points(s.GRAD_NORM).filter(pl.col("value").is_finite() & (pl.col("value") > FLOWING)),
                             on=["attempt", "step"], how="semi").group_by("attempt").len()
        per_attempt = dict(zeros.group_by("attempt").len().iter_rows())
        trained = {int(a) for a, n in flowing.iter_rows() if n * 2 > per_attempt[a]} | set(frames.negative(s.LOSS))
        # a grad norm NaN or Inf at the zero-loss points: the loss was NaN too, and the Trainer logged 0 for it
        nan_grads = dict(zeros.join(frames.points(s.GRAD_NORM).filter(~pl.col("value").is_finite()),
                                    on=["attempt", "step"], how="semi").group_by("attempt").len().iter_rows())
        filtered = {int(a) for a, n in nan_grads.items() if n * 2 > per_attempt[a]}
        # an attempt that stopped on fp16 overflows (DeepSpeed's "Current loss scale already at minimum")
        stopped = set(frames.events.filter(pl.col("kind") == s.EV_OVERFLOW_STOP)["attempt"].drop_nulls().to_list())
        out = []
        for attempt in zeros["attempt"].unique(maintain_order=True).to_list():
            if attempt in trained:
                continue
            own = points.filter(pl.col("attempt") == attempt)
            steps, values = own["step"].to_numpy(), own["value"].to_numpy()
            at = np.flatnonzero(values == 0)
            first, last = int(at[0]), int(at[-1])
            span = last - first + 1
            where = (f"at step {steps[first]}" if span == 1 else
                     f"at every point from step {steps[first]} to {steps[last]} ({span} points)" if at.size == span
                     else f"at {at.size} of the {span} points from step {steps[first]} to {steps[last]}")
            before = f", after {shown(float(values[first - 1]))} at step {steps[first - 1]}" if first else ""
            # (the overflows' zeros run up to the attempt's last loss point, where the program stopped on them)
            why = (NAN_FILTERED if attempt in filtered else OVERFLOWED if attempt in stopped and last == values.size - 1
                   else WHY)
            if why == WHY and at.size * 2 < span:  # zeros scattered among ordinary values: single batches, not a dead signal
                others = values[first:last + 1][values[first:last + 1] != 0]
                where += f", among ordinary values (their median {shown(float(np.median(others)))})"
                why = SCATTERED
            # the collapse may come a point earlier, to a loss near 0 that prints as a number (12.18, then 1.8e-06,
            # then 0.0): it starts where the loss fell 1000x to below NEAR_ZERO
            onset = first
            while why == WHY and onset > 0 and 0 < values[onset - 1] < NEAR_ZERO:
                onset -= 1
            if not (onset < first and onset > 0 and values[onset - 1] >= COLLAPSE * values[onset]):
                onset = first
            else:
                before = (f", after the loss fell from {shown(float(values[onset - 1]))} at step {steps[onset - 1]} to "
                          f"{shown(float(values[onset]))} at step {steps[onset]}, where the collapse began")
            out.append(Anomaly(
                kind=self.name, metric=s.LOSS, attempt=int(attempt), step=int(steps[onset]),
                end_step=int(steps[last]), value=0.0, baseline=float(values[onset - 1]) if onset else None,
                detail=f"loss logged as 0 {where}{before}: {why}"))
        return sorted(out, key=lambda a: (a.attempt, a.step))
