"""Precision and recall of detected anomalies against injected truth, with a step margin (as ``ruptures.metrics``
scores breakpoints: a detection counts when it lands within the margin of a true event, each truth matched once)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from forensics.evaluation.datasets import Truth
from forensics.findings import Anomaly

# a detection of one kind may rightly land on a truth of a related kind: a divergence starts with a loss spike
RELATED: dict[str, frozenset[str]] = {
    "loss_spike": frozenset({"loss_spike", "divergence"}),
    "grad_norm_spike": frozenset({"grad_norm_spike", "loss_spike", "divergence", "loss_scale_collapse", "changepoint"}),
    "divergence": frozenset({"divergence"}),
    "nan": frozenset({"nan"}),
    "loss_scale_collapse": frozenset({"loss_scale_collapse"}),
    "changepoint": frozenset({"changepoint", "divergence", "loss_scale_collapse", "loss_spike"}),
    "loss_plateau": frozenset({"loss_plateau"}),
}


@dataclass
class Score:
    """Counts for one kind of event over a set of curves."""

    kind: str
    truths: int = 0
    found: int = 0          # truths matched by a detection
    detections: int = 0
    false: int = 0          # detections that match no truth of a related kind

    @property
    def recall(self) -> float:
        """Found / truths; with no truths there is nothing to recall, which is a sanity failure of the evaluation
        (``ValueError``), never a perfect score."""
        if not self.truths:
            raise ValueError(f"no {self.kind} truths: recall is undefined (the evaluation set is missing them)")
        return self.found / self.truths

    @property
    def precision(self) -> float:
        """Right detections / detections; nothing detected scores 0, as in ``ruptures.metrics.precision_recall``."""
        return (self.detections - self.false) / self.detections if self.detections else 0.0


def _near(anomaly: Anomaly, truth: Truth, margin: int) -> bool:
    margin = max(margin, truth.margin or 0)
    return anomaly.step <= truth.end_step + margin and truth.step - margin <= anomaly.end_step and (
        abs(anomaly.step - truth.step) <= margin or truth.step <= anomaly.step <= truth.end_step
    )


def score(kind: str, anomalies: Iterable[Anomaly], truths: Iterable[Truth], margin: int) -> Score:
    """Score detections of ``kind``: recall over truths of that kind, precision over detections of that kind
    (a detection is right when it is within ``margin`` steps of a truth of a related kind).

    >>> from forensics.evaluation.datasets import Truth
    >>> a = Anomaly("loss_spike", "loss", 1, 1002, 1010, 9.0, 3.0)
    >>> s = score("loss_spike", [a], [Truth("loss_spike", 1000, 1020)], margin=5)
    >>> (s.recall, s.precision)
    (1.0, 1.0)
    """
    mine = [a for a in anomalies if a.kind == kind]
    truths = list(truths)
    own = [t for t in truths if t.kind == kind and not t.optional]
    related = [t for t in truths if t.kind in RELATED.get(kind, frozenset({kind}))]
    out = Score(kind=kind, truths=len(own), detections=len(mine))
    used: set[int] = set()
    for truth in own:
        hit = next((i for i, a in enumerate(mine) if i not in used and _near(a, truth, margin)), None)
        if hit is not None:
            used.add(hit)
            out.found += 1
    out.false = sum(1 for a in mine if not any(_near(a, t, margin) for t in related))
    return out
