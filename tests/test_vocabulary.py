"""One vocabulary (issue 17, §2): the evaluation harness (truths, scores) is on :class:`~forensics.findings.Kind`."""

from __future__ import annotations

import pytest

from forensics.findings import Kind


def test_the_evaluation_harness_speaks_kind() -> None:
    from forensics.evaluation import KINDS, Score, Truth, evaluate, generate, score
    from forensics.evaluation.metrics import RELATED

    assert all(type(k) is Kind for k in KINDS)
    assert all(type(k) is Kind and all(type(r) is Kind for r in related) for k, related in RELATED.items())
    assert set(RELATED) == set(KINDS)
    assert Truth("nan", 10, 10).kind is Kind.NAN  # a plain string is coerced, as Anomaly does
    with pytest.raises(ValueError, match="'nans' is not a valid Kind"):
        Truth("nans", 10, 10)
    truths = [t for scenario in ("fp16_collapse", "spikes") for t in generate(scenario, 0, 10, noise="t3").truths]
    assert truths and all(type(t.kind) is Kind for t in truths)
    with pytest.raises(ValueError, match="'loss_spikes' is not a valid Kind"):
        score("loss_spikes", [], truths, margin=5)
    assert type(score("nan", [], truths, margin=5).kind) is Kind
    [row] = evaluate(["spikes"], seeds=[0], intervals=[10], noise="t3")
    assert all(type(k) is Kind and type(s.kind) is Kind for k, s in row.scores.items())
    assert isinstance(row.scores[Kind.LOSS_SPIKE], Score)
