"""Evaluation harness: labelled curves (:mod:`.datasets`) and precision/recall with a margin (:mod:`.metrics`).

>>> from forensics.evaluation import evaluate
>>> [row] = evaluate(["clean"], seeds=range(2), intervals=[10], noise="t3")
>>> row.curves, row.noise
(2, 't3')
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from forensics.analysis import detect
from forensics.detectors import DEFAULT_DETECTORS, Detector
from forensics.evaluation.datasets import NOISES, SCENARIOS, Curve, Truth, generate
from forensics.evaluation.metrics import Score, score
from forensics.findings import Kind

# the kinds scored, in the order the benchmark reports them
KINDS: tuple[Kind, ...] = (Kind.LOSS_SPIKE, Kind.GRAD_NORM_SPIKE, Kind.DIVERGENCE, Kind.NAN, Kind.LOSS_SCALE_COLLAPSE,
                           Kind.CHANGEPOINT, Kind.LOSS_PLATEAU)


@dataclass
class Row:
    """Scores of one scenario at one log interval over several curves."""

    scenario: str
    log_interval: int
    curves: int = 0
    scores: dict[Kind, Score] = field(default_factory=dict)
    anomalies_on_clean: int = 0
    clean_runs_with_incidents: int = 0   # clean curves with at least one anomaly
    clean_steps: int = 0                 # steps of the clean curves (for a rate per 100k steps)
    lead_errors: list[int] = field(default_factory=list)
    noise: str = "mixed"


def margin_for(log_interval: int) -> int:
    """Steps a detection may be off its truth: 5 steps, or two log intervals."""
    return max(5, 2 * log_interval)


def evaluate(
    scenarios: Iterable[str] = SCENARIOS, seeds: Iterable[int] = range(20), intervals: Iterable[int] = (1, 10),
    detectors: tuple[Detector, ...] = DEFAULT_DETECTORS, noise: str = "mixed", steps: int | None = None,
) -> list[Row]:
    """Generate, detect and score: one row per (scenario, log interval), for one noise family (see
    :data:`forensics.evaluation.datasets.NOISES`). A row's score of a kind its scenario does not inject has no
    truths: its recall raises ``ValueError`` (see :mod:`.metrics`), its precision counts every detection false."""
    rows = []
    seeds = list(seeds)
    for scenario in scenarios:
        for k in intervals:
            row = Row(scenario, k, scores={kind: Score(kind) for kind in KINDS}, noise=noise)
            for seed in seeds:
                curve = generate(scenario, seed, k, noise=noise, steps=steps)
                found = detect(curve.frames(), detectors)
                row.curves += 1
                if scenario == "clean":
                    row.anomalies_on_clean += len(found)
                    row.clean_runs_with_incidents += bool(found)
                    row.clean_steps += int(curve.metrics["step"].max() or 0)
                for kind in KINDS:
                    row.scores[kind].add(score(kind, found, curve.truths, margin_for(k)))
                row.lead_errors.extend(_lead_errors(curve, found))
            rows.append(row)
    return rows


def _lead_errors(curve: Curve, found: list) -> list[int]:
    """For spikes with a known grad-norm lead, |reported lead - true lead| in steps (reported in the detail)."""
    out = []
    for truth in curve.truths:
        if truth.kind != Kind.LOSS_SPIKE or not truth.lead:
            continue
        near = [a for a in found if a.kind == Kind.LOSS_SPIKE and abs(a.step - truth.step) <= margin_for(curve.log_interval)]
        if near and near[0].grad_norm_lead is not None:
            out.append(abs(near[0].grad_norm_lead - truth.lead))
    return out


__all__ = ["KINDS", "NOISES", "SCENARIOS", "Curve", "Row", "Score", "Truth", "evaluate", "generate", "margin_for", "score"]
