"""Evaluation harness: labelled curves (:mod:`.datasets`) and precision/recall with a margin (:mod:`.metrics`).

>>> from forensics.evaluation import evaluate
>>> table = evaluate(["clean"], seeds=range(2), intervals=[1])   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from forensics.analyze import detect
from forensics.detectors import DEFAULT_DETECTORS, Detector, RunFrames
from forensics.evaluation.datasets import SCENARIOS, Curve, Truth, generate
from forensics.evaluation.metrics import Score, score

KINDS = ("loss_spike", "grad_norm_spike", "divergence", "nan", "loss_scale_collapse", "changepoint", "loss_plateau")


@dataclass
class Row:
    """Scores of one scenario at one log interval over several curves."""

    scenario: str
    log_interval: int
    curves: int = 0
    scores: dict[str, Score] = field(default_factory=dict)
    anomalies_on_clean: int = 0
    lead_errors: list[int] = field(default_factory=list)


def margin_for(log_interval: int) -> int:
    """Steps a detection may be off its truth: 5 steps, or two log intervals."""
    return max(5, 2 * log_interval)


def evaluate(
    scenarios: Iterable[str] = SCENARIOS, seeds: Iterable[int] = range(20), intervals: Iterable[int] = (1, 10),
    detectors: tuple[Detector, ...] = DEFAULT_DETECTORS,
) -> list[Row]:
    """Generate, detect and score: one row per (scenario, log interval)."""
    rows = []
    seeds = list(seeds)
    for scenario in scenarios:
        for k in intervals:
            row = Row(scenario, k, scores={kind: Score(kind) for kind in KINDS})
            for seed in seeds:
                curve = generate(scenario, seed, k)
                found = detect(RunFrames(curve.metrics, curve.events), detectors)
                row.curves += 1
                if scenario == "clean":
                    row.anomalies_on_clean += len(found)
                for kind in KINDS:
                    got = score(kind, found, curve.truths, margin_for(k))
                    total = row.scores[kind]
                    total.truths += got.truths
                    total.found += got.found
                    total.detections += got.detections
                    total.false += got.false
                row.lead_errors.extend(_lead_errors(curve, found))
            rows.append(row)
    return rows


def _lead_errors(curve: Curve, found: list) -> list[int]:
    """For spikes with a known grad-norm lead, |reported lead - true lead| in steps (reported in the detail)."""
    out = []
    for truth in curve.truths:
        if truth.kind != "loss_spike" or not truth.lead:
            continue
        near = [a for a in found if a.kind == "loss_spike" and abs(a.step - truth.step) <= margin_for(curve.log_interval)]
        if near and near[0].grad_norm_lead is not None:
            out.append(abs(near[0].grad_norm_lead - truth.lead))
    return out


__all__ = ["KINDS", "SCENARIOS", "Curve", "Row", "Score", "Truth", "evaluate", "generate", "margin_for", "score"]
