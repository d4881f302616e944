"""Statements that real logs the project had not seen (unseen-log trial s45: each chronicle read against its raw
lines) contradicted; every test here failed on the code before its fix."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import forensics
import reports

REAL = Path(__file__).parent / "fixtures" / "real"


@cache
def _analysis(path: Path) -> forensics.Analysis:
    return forensics.analyze_path(path)


def _lines(path: Path) -> list[str]:
    return reports.render(_analysis(path), "markdown").splitlines()


def test_a_loss_that_slid_at_every_point_is_not_said_not_to_have_fallen() -> None:
    """Jan21/FAST-GNN-SAT version_57: train_loss falls at each of its points, 0.69312 to 0.68762, far beyond its
    noise; the chronicle said "The loss did not fall" (the rule asked only whether it fell by 5%)."""
    path = REAL / "lightning" / "Jan21_FAST-GNN-SAT" / "version_57"
    [run] = _analysis(path).findings.runs
    assert run.learning["fell"] is None and run.learning["barely_fell"] is True
    lines = _lines(path)
    assert not any("did not fall" in line for line in lines)
    assert ("- **The loss barely fell:** 0.7% over steps 49–1299 (median 0.693094 over its first tenth of points, "
            "0.688118 over its last): a fall beyond its noise, but under 1%.") in lines


def test_a_fall_within_the_noise_is_not_said_to_be_a_fall() -> None:
    """aloshdenny/kevin-token-compressor: the loss goes from 2.2538 (step 10) to 2.2816 (step 1000) with a noise of
    about 0.1; the medians of its first and last tenths differ by 2%, 1.1 standard errors: "fell": true was said."""
    [run] = _analysis(REAL / "hf_trainer_state" / "aloshdenny_kevin-token-compressor").findings.runs
    assert (run.learning["start"], run.learning["end"]) == (2.15895, 2.1129)
    assert run.learning["fell"] is None and "barely_fell" not in run.learning
