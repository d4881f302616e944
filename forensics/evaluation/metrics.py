"""Precision and recall of detected anomalies against injected truth, with a step margin (as ``ruptures.metrics``
scores breakpoints: a detection counts when it lands within the margin of a true event, each truth matched once).

The degenerate cases are scored as ``ruptures.metrics.precision_recall`` scores them, sanity check first:

* no truths: recall is undefined, and asking for it is a sanity failure of the evaluation (``ValueError``), never
  a perfect 1.0. (ruptures' ``sanity_check`` raises ``BadPartitions`` on an empty partition, and its recall
  divides by the number of true breakpoints; only when nothing is detected either does it return ``(0, 0)``, where
  we still refuse a recall over nothing.) Precision stays defined:
  a detection with no truth of its kind or a related kind near it is a false alarm, so on a curve without any
  truths precision is 0.
* nothing detected: recall 0 (no truth was found) and precision 0, ruptures' ``(0, 0)``, not a perfect 1.0.
* a negative margin is refused (``ValueError``; ruptures asserts ``margin > 0``, ours counts a detection within
  the margin inclusively, so 0 means "on the step").

>>> Score("nan", truths=3).recall, Score("nan", truths=3).precision      # three truths, nothing detected
(0.0, 0.0)
>>> Score("nan").recall
Traceback (most recent call last):
ValueError: no nan truths: recall is undefined (the evaluation set has none to find; score a set that does)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from forensics.evaluation.datasets import Truth
from forensics.findings import Anomaly, Kind

# a detection of one kind may rightly land on a truth of a related kind: a divergence starts with a loss spike
# (a kind not listed is related only to itself)
RELATED: dict[Kind, frozenset[Kind]] = {
    Kind.LOSS_SPIKE: frozenset({Kind.LOSS_SPIKE, Kind.DIVERGENCE}),
    Kind.GRAD_NORM_SPIKE: frozenset({Kind.GRAD_NORM_SPIKE, Kind.LOSS_SPIKE, Kind.DIVERGENCE, Kind.LOSS_SCALE_COLLAPSE,
                                     Kind.CHANGEPOINT}),
    Kind.DIVERGENCE: frozenset({Kind.DIVERGENCE}),
    Kind.NAN: frozenset({Kind.NAN}),
    Kind.LOSS_SCALE_COLLAPSE: frozenset({Kind.LOSS_SCALE_COLLAPSE}),
    Kind.CHANGEPOINT: frozenset({Kind.CHANGEPOINT, Kind.DIVERGENCE, Kind.LOSS_SCALE_COLLAPSE, Kind.LOSS_SPIKE}),
    Kind.LOSS_PLATEAU: frozenset({Kind.LOSS_PLATEAU}),
}


@dataclass
class Score:
    """Counts for one kind of event over a set of curves."""

    kind: Kind | str        # a Kind, or a label of a total over kinds ("all kinds")
    truths: int = 0
    found: int = 0          # truths matched by a detection
    detections: int = 0
    false: int = 0          # detections that match no truth of a related kind

    @property
    def recall(self) -> float:
        """Found / truths: 0 when nothing was found. With no truths there is nothing to recall, which is a sanity
        failure of the evaluation (``ValueError``), never a perfect score."""
        if self.truths <= 0:
            raise ValueError(f"no {self.kind} truths: recall is undefined (the evaluation set has none to find; "
                             "score a set that does)")
        return self.found / self.truths

    @property
    def precision(self) -> float:
        """Right detections / detections; nothing detected scores 0, as in ``ruptures.metrics.precision_recall``."""
        return (self.detections - self.false) / self.detections if self.detections else 0.0

    def add(self, other: Score) -> None:
        """Add another score's counts of the same kind (to total over curves)."""
        if other.kind != self.kind:
            raise ValueError(f"cannot add {other.kind} counts to {self.kind} counts")
        self.truths += other.truths
        self.found += other.found
        self.detections += other.detections
        self.false += other.false


def _near(anomaly: Anomaly, truth: Truth, margin: int) -> bool:
    margin = max(margin, truth.margin or 0)
    return anomaly.step <= truth.end_step + margin and truth.step - margin <= anomaly.end_step and (
        abs(anomaly.step - truth.step) <= margin or truth.step <= anomaly.step <= truth.end_step
    )


def score(kind: Kind | str, anomalies: Iterable[Anomaly], truths: Iterable[Truth], margin: int) -> Score:
    """Score detections of ``kind`` (a plain string is taken as the :class:`Kind` it names): recall over truths of
    that kind, precision over detections of that kind (a detection is right when it is within ``margin`` steps of a
    truth of a related kind, :data:`RELATED`).

    >>> from forensics.evaluation.datasets import Truth
    >>> a = Anomaly("loss_spike", "loss", 1, 1002, 1010, 9.0, 3.0)
    >>> s = score("loss_spike", [a], [Truth("loss_spike", 1000, 1020)], margin=5)
    >>> (s.recall, s.precision)
    (1.0, 1.0)
    >>> score("loss_spikes", [a], [], margin=5)
    Traceback (most recent call last):
    ValueError: 'loss_spikes' is not a valid Kind
    """
    kind = Kind(kind)
    if margin < 0:
        raise ValueError(f"margin {margin}: must be 0 or more steps")
    mine = [a for a in anomalies if a.kind == kind]
    truths = list(truths)
    own = [t for t in truths if t.kind == kind and not t.optional]
    related = [t for t in truths if t.kind in RELATED.get(kind, {kind})]
    out = Score(kind=kind, truths=len(own), detections=len(mine))
    used: set[int] = set()
    for truth in own:
        hit = next((i for i, a in enumerate(mine) if i not in used and _near(a, truth, margin)), None)
        if hit is not None:
            used.add(hit)
            out.found += 1
    out.false = sum(1 for a in mine if not any(_near(a, t, margin) for t in related))
    return out
