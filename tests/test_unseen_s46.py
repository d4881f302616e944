"""Statements that logs the project had not seen (unseen-log trial and review, stop 46) showed false or missing; every
test here failed on the code before its fix."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import forensics
import reports

FIXTURES = Path(__file__).parent / "fixtures"
REAL, GENERATED = FIXTURES / "real", FIXTURES / "generated"


@cache
def _analysis(path: Path) -> forensics.Analysis:
    return forensics.analyze_path(path)


def _lines(path: Path) -> list[str]:
    return reports.render(_analysis(path), "markdown").splitlines()


def test_a_log_that_stops_within_one_interval_of_its_length_is_not_said_to_stop_short() -> None:
    """nanoGPT logs every log_interval iterations up to max_iters: with max_iters 1005 and log_interval 10 its last
    point is iter 1000, all it would log. The chronicle said "The log ends before the planned length ... at step 1000
    of 1005"."""
    path = GENERATED / "s46_nanogpt_max_iters_between_logs.log"
    [attempt] = _analysis(path).findings.runs[0].attempts
    assert (attempt.end_step, attempt.target_step) == (1000, 1005)
    assert not any("planned length" in line or "Stopped short" in line for line in _lines(path))
