"""Whether the loss fell at all: a run can end "completed" with no anomaly and have learned nothing (a loss at chance
from the first step to the last), which no spike or divergence check sees.

The loss's level at the start is the median of its first tenth of points (at least 3), at the end the median of
its last tenth, over the path the run finally took (:func:`forensics.timeline.by_step`) since its last attempt that
counted its steps from the start again (a new run, or the next stage of one); the validation loss's first
and last values beside it. The fall is *beyond the noise* when it exceeds two standard errors of the difference of
the two medians (each 1.253 x 1.4826 x MAD / sqrt(points), the median's standard error under Gaussian noise), or
when every point of the last tenth is below every point of the first. The
loss *fell* when its fall is beyond the noise and more than ``NO_GAIN`` (1%) of the start; it *barely fell* when the
fall is beyond the noise but smaller (a loss sliding from 0.6931 to 0.6881 at every point fell, slowly: not "did not
fall"). That it did *not* fall is said only when the noise allows it: no fall beyond the noise nor one over 1%, and
the fall plus two standard errors stays under ``CLEAR_FALL`` (5%) of the start; a fall under 0.1% of the start is
none. Otherwise (a 2% drop within a noise of 2%) ``fell`` is
None: too noisy to say either way; and with fewer than ``MIN_POINTS`` (20) only that it fell is said (from 6 points
on). A log that begins mid-run is
not judged (a late excerpt of a converged run is flat by nature). The validation loss rising while the training loss
fell over the same steps is overfitting (:func:`val_rising`). A loss that goes below 0 is not judged either way (no
cross-entropy: a WGAN critic's loss or a DPO margin rises and crosses 0 in a healthy run). When ``fell`` is None and
the fall is not a slight one, ``unjudged`` says why (:class:`Unjudged`), so the chronicle can say it did not judge.

A loss that sits at a guess's level, its medians at the start and at the end both within ``AT_CHANCE`` (0.5%) of
ln(vocabulary) (a uniform guess over the tokens) where the vocabulary is known, else of ln 2 (a 50/50 guess between
two classes), is said to
(``chance``): whatever its noise, it did not leave the level that knowing nothing gives.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

import numpy as np
import polars as pl

from forensics.timeline import by_step
from parsers import schema as s

NO_GAIN = 0.01     # the end must be this much below the start for the loss to have fallen
CLEAR_FALL = 0.05  # "did not fall" only when even two standard errors more would not make a fall this large
MIN_POINTS = 20    # fewer loss points: "did not fall" is not said
SHORT_POINTS = 6   # fewer loss points: not judged at all (a fall needs 3 points at each end)
RISING_EVALS = 3   # the validation loss rising at this many evaluations in a row, to the end ...
RISING_BY = 0.05   # ... and by this much in all, while the training loss fell
AT_CHANCE = 0.005  # both medians this close (relative) to a guess's loss: it sat at chance


class Unjudged(StrEnum):
    """Why whether the loss fell was not judged (``learning["unjudged"]``)."""

    NOISE = "noise"                          # a change its noise leaves open
    EARLY_FALL = "early_fall"                # it fell inside its first tenth of points, then held
    FEW_POINTS = "few_points"                # under MIN_POINTS: only a fall is said
    NOT_CROSS_ENTROPY = "not_cross_entropy"  # it goes below 0


def levels(values: np.ndarray) -> tuple[float, float, float]:
    """The level at the start and at the end of a series (the medians of its first and last tenth, at least 3 points
    each) and the standard error of their difference (see the module docstring).

    >>> [round(x, 3) for x in levels(np.array([9.9, 9.0, 8.1, 7.2, 6.5, 5.8]))]
    [9.0, 6.5, 1.223]
    """
    tenth = max(3, values.size // 10)
    first, last = values[:tenth], values[-tenth:]
    error = math.hypot(*(1.253 * 1.4826 * float(np.median(np.abs(x - np.median(x)))) / math.sqrt(x.size)
                         for x in (first, last)))
    return float(np.median(first)), float(np.median(last)), error


def learning(metrics: pl.DataFrame, vocab: int | None = None) -> dict[str, Any] | None:
    """``{"steps": [first, last], "start", "end", "fell", "val_start", "val_end", "val_rising"}`` of a run's loss, and
    ``from_attempt`` where an attempt after the first counted its steps from the start again (the loss is judged from
    that one on); ``fell``: True, False, or None when too noisy to say or when it barely fell (then ``barely_fell``
    True: a fall beyond the noise, under ``NO_GAIN``; else ``unjudged``, why, and ``error``, the standard error of the
    fall); ``chance``: the guess's level it sat at (``vocab``: the vocabulary, when known); ``val_rising``:
    :func:`val_rising` when the loss fell. None with fewer than :data:`SHORT_POINTS` finite points.

    >>> flat = pl.DataFrame({"attempt": 1, "step": range(1, 41), "metric": "loss", "value": [1.386] * 40})
    >>> learning(flat)
    {'steps': [1, 40], 'start': 1.386, 'end': 1.386, 'fell': False, 'val_start': None, 'val_end': None, 'val_rising': None}
    >>> coin = flat.with_columns(value=pl.Series([0.6931, 0.6935, 0.6928, 0.694] * 10))
    >>> {k: v for k, v in learning(coin).items() if k in ("fell", "chance")}
    {'fell': False, 'chance': {'level': 'ln 2', 'nats': 0.693147}}
    """
    metrics, fresh = _since_last_fresh_start(metrics)
    loss = by_step(metrics, s.LOSS, finite=True)
    if loss.height < SHORT_POINTS:
        return None
    values = loss["value"].to_numpy()
    start, end, error = levels(values)
    drop = start - end
    tenth = max(3, values.size // 10)
    # a fall the noise does not explain: beyond two standard errors, or every point of the last tenth below every point
    # of the first (a rank test at its extreme, p = 1 / C(2k, k) <= 0.05 by chance; a steep fall within the first
    # tenth makes its spread, and the standard error read from it, large)
    # (a fall under 0.1% of the start is no fall, whatever the noise: a loss stuck at 4.1744 then printed 4.1743)
    beyond = bool(drop >= 0.001 * abs(start) and (drop > 2 * error or values[-tenth:].max() < values[:tenth].min()))
    fell: bool | None = beyond and drop > NO_GAIN * abs(start)
    barely = beyond and not fell and loss.height >= MIN_POINTS
    # (a fall inside the first tenth, 10 -> 2 then flat, leaves the medians alike: no "did not fall" below its top)
    top = float(values[:tenth].max())
    early_fall = top - end > CLEAR_FALL * abs(start)
    unjudged: Unjudged | None = None
    if not fell and (beyond or early_fall or drop > NO_GAIN * abs(start) or drop + 2 * error >= CLEAR_FALL * abs(start)
                     or loss.height < MIN_POINTS):
        fell = None  # it fell a little, or by more than 1% within its noise, or too noisy to say it did not (with
        # fewer than MIN_POINTS, only a fall is said)
        unjudged = None if barely else Unjudged.FEW_POINTS if loss.height < MIN_POINTS else \
            Unjudged.EARLY_FALL if early_fall and not drop > NO_GAIN * abs(start) else Unjudged.NOISE
    if bool((values < 0).any()):
        # a loss below 0 is no cross-entropy (a policy, preference or adversarial objective): a level that crosses 0
        # is no fall to measure in fractions of its start, and one that rises is not a run learning nothing
        fell, barely, unjudged = None, False, Unjudged.NOT_CROSS_ENTROPY
    # (with the vocabulary known, a guess is over its tokens: a language model's 0.69 is no coin toss)
    name, nats = (f"ln({vocab})", math.log(vocab)) if vocab and vocab > 2 else ("ln 2", math.log(2))
    chance = ({"level": name, "nats": round(nats, 6)}
              if abs(start - nats) <= AT_CHANCE * nats and abs(end - nats) <= AT_CHANCE * nats else None)
    val = by_step(metrics, s.VAL_LOSS, finite=True)
    values = val["value"]
    launch = val.filter(pl.col("attempt") == val["attempt"].max()) if val.height else val  # (one launch's evaluations)
    up = val_rising(launch["step"].to_list(), launch["value"].to_list()) if fell else None
    if up is not None:  # the training loss over the same steps: overfitting is the one falling as the other rises
        span = loss.filter(pl.col("step") >= up["from_step"])["value"].to_numpy()
        k = min(3, span.size // 2)
        if k:
            up |= {"train_from": float(np.median(span[:k])), "train_to": float(np.median(span[-k:])), "train_points": k}
        if not k or not up["train_to"] < up["train_from"] * (1 - NO_GAIN):
            up = None
    return {"steps": [int(loss["step"][0]), int(loss["step"][-1])], "start": start, "end": end, "fell": fell,
            **({"barely_fell": True} if barely else {}),
            **({"unjudged": unjudged.value, "error": round(error, 6), "points": loss.height} if unjudged is not None
               else {}),
            **({"first_top": top} if unjudged == Unjudged.EARLY_FALL else {}),
            **({"chance": chance} if chance is not None else {}),
            "val_start": float(values[0]) if values.len() else None,
            "val_end": float(values[-1]) if values.len() else None, "val_rising": up,
            **({"from_attempt": fresh} if fresh is not None else {})}


def _since_last_fresh_start(metrics: pl.DataFrame) -> tuple[pl.DataFrame, int | None]:
    """The metrics from the last attempt whose loss starts again at the first step of the run's loss (or the one
    after it) on, and that attempt when it is not the first: a later training counted from the start (a new run, or
    the next stage of one: nanochat's mid-training and SFT after its pretraining) is not the path the earlier one
    took, and a loss pooled over both by step would put the one's start beside the other's end.

    >>> m = pl.DataFrame({"attempt": [1, 1, 2, 2], "step": [0, 100, 0, 10], "metric": "loss", "value": [9.0, 3, 1, 1]})
    >>> since, fresh = _since_last_fresh_start(m)
    >>> since["attempt"].to_list(), fresh
    ([2, 2], 2)
    """
    if "attempt" not in metrics.columns:
        return metrics, None
    firsts = metrics.filter((pl.col("metric") == s.LOSS) & pl.col("value").is_finite()).group_by("attempt").agg(
        first=pl.col("step").min())
    if firsts.height < 2:
        return metrics, None
    # (one step of slack: a stage may log its first loss at step 1, the one before it at 0)
    fresh = firsts.filter(pl.col("first") <= pl.col("first").min() + 1)["attempt"].max()
    if fresh == firsts["attempt"].min() and not metrics["attempt"].null_count():  # no fresh start: no copy
        return metrics, None
    return metrics.filter(pl.col("attempt") >= fresh), (int(fresh) if fresh > firsts["attempt"].min() else None)


def val_rising(steps: list[int], values: list[float]) -> dict[str, Any] | None:
    """The validation loss rising from its lowest to the end: at least ``RISING_EVALS`` (3) evaluations after its
    lowest, ``RISING_BY`` (5%) above it at the last, and rising as a trend (of every two evaluations from the lowest
    on, the later is the higher in at least 3 of 4 pairs: a dip now and then does not hide it), the usual sign of
    overfitting while the training loss falls; as ``{"from_step", "from", "to_step", "to", "evaluations", "rises"}``
    (``rises``: how many evaluations after the lowest were above the one before); None otherwise.

    >>> val_rising([1000, 2000, 3000, 4000, 5000], [0.321, 0.3585, 0.3937, 0.4123, 0.42])
    {'from_step': 1000, 'from': 0.321, 'to_step': 5000, 'to': 0.42, 'evaluations': 5, 'rises': 4}
    >>> val_rising([1, 2, 3, 4], [1.0, 0.9, 0.95, 0.94]) is None
    True
    >>> val_rising([1, 2, 3, 4, 5, 6], [1.0, 0.9, 0.96, 1.0, 0.98, 1.01])["rises"]
    3
    """
    if not values:
        return None
    low = len(values) - 1 - int(np.argmin(np.asarray(values[::-1])))  # the last of its lowest
    after = np.asarray(values[low:], dtype=float)
    if after.size - 1 < RISING_EVALS or not after[-1] >= after[0] * (1 + RISING_BY):
        return None
    every = max(1, after.size // 400)  # (pairs of at most 400 evaluations: the share, not every pair of thousands)
    sample = np.r_[after[:-1:every], after[-1]]
    later, earlier = np.triu_indices(sample.size, k=1)[::-1]
    if not (sample[later] > sample[earlier]).mean() >= 0.75:
        return None
    return {"from_step": int(steps[low]), "from": float(after[0]), "to_step": int(steps[-1]), "to": float(after[-1]),
            "evaluations": int(after.size), "rises": int((np.diff(after) > 0).sum())}
