"""Statements that logs the project had not seen (unseen-log trial and review, stop 46) showed false or missing; every
test here failed on the code before its fix."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import forensics
import reports
from tests.tb_writer import scalar, version

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


def test_a_clock_that_cannot_time_an_attempt_gives_no_wait_after_it(tmp_path: Path) -> None:
    """An attempt whose 120 points were stamped within 0.12 s (written at once, an upload) cannot time the wait
    before the next attempt either: the timeline said "not known" and the JSON gave downtime_after_s 3599.9."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.out.tfevents.1000.host.1").write_bytes(
        version(1000.0) + b"".join(scalar("train/loss", 3 - i / 100, i, 1000.0 + i / 1000) for i in range(120)))
    (run / "events.out.tfevents.4600.host.2").write_bytes(
        version(4600.0) + b"".join(scalar("train/loss", 3 - i / 100, i, 4600.0 + i * 10) for i in range(50, 170)))
    findings = json.loads(reports.render(forensics.analyze_path(run), "json"))
    first, second = findings["runs"][0]["attempts"]
    assert first["clock_note"].startswith("its 120 logged steps were all stamped within 0.1 s")
    assert (first["downtime_after_s"], second["clock_note"]) == (None, None)
