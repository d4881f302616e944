"""Regression tests for the classes of internal error that ``benchmarks/fuzz.py 2026 5000`` found (issue 18)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import forensics
import tests.tb_writer as tb
from parsers import load_run


def test_a_lightning_metrics_csv_given_alone_names_its_sidecar_from_its_folder() -> None:
    """ValueError in ReadContext.display: the hparams.yaml beside a file given on its own is not inside the file."""
    version = Path(__file__).parent / "fixtures/real/lightning/0Xero7_slm_training/lightning_logs/version_9"
    run = load_run(version / "metrics.csv")
    assert run.metrics.height > 0
    assert run.configs.height > 0  # the hparams.yaml beside it was read


def _state(steps: list) -> str:
    history = [{"loss": 2.0 - i / 10, "learning_rate": 1e-4, "step": step} for i, step in enumerate(steps)]
    return json.dumps({"global_step": 5, "log_history": history})


def test_trainer_state_steps_beyond_64_bits_lose_only_their_entries(tmp_path: Path) -> None:
    """Polars InvalidOperationError (step to i64) and OverflowError (int to float) were internal errors."""
    (tmp_path / "trainer_state.json").write_text(_state([1, 2, 1.7976931348623157e308, 2**63, 5]))
    run = load_run(tmp_path)
    assert run.metrics.filter(metric="loss")["step"].to_list() == [1, 2, 5]
    assert run.warnings == ["trainer_state.json: 2 log_history entries with a step that is not a step number "
                            "(beyond 64 bits, or not a number) left out"]
    (tmp_path / "trainer_state.json").write_text(_state([1, 2, 3]).replace("0.0001", "1" + "0" * 400))
    assert forensics.analyze(load_run(tmp_path)).runs[0].attempts  # a 401-digit learning rate: no OverflowError


def test_event_file_steps_near_the_int64_ends_are_left_out_not_overflowed(tmp_path: Path) -> None:
    """find_gaps subtracted steps of -2**63 and 2**63-1 (a TypeError on an Int128); such a step is damage."""
    tb.write(tmp_path / "events.out.tfevents.1.x", tb.version(),
             *[tb.scalar("loss", 2.0 - i / 10, i) for i in range(5)], tb.scalar("loss", 1.0, -(2**63)),
             tb.scalar("loss", 1.0, 2**63 - 1))
    run = load_run(tmp_path)
    assert run.metrics.filter(metric="loss")["step"].to_list() == [0, 1, 2, 3, 4]
    assert run.warnings[-1].endswith("2 points at a step beyond 2**53 (damage, not a step any training reaches) "
                                     "left out")
    assert forensics.analyze(run).runs[0].attempts


def test_a_negative_or_infinite_learning_rate_has_no_peak_and_no_warning(tmp_path: Path) -> None:
    """schedule() took the peak of rates -922 .. -9.2e8 (IndexError); 1e308 rates overflowed a product on stderr."""
    history = [{"loss": 2.0, "learning_rate": -(10.0 ** i), "step": i + 1} for i in range(4)]
    history += [{"loss": 2.0, "learning_rate": 1.7e308 * (-1) ** i, "step": i + 5} for i in range(4)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = forensics.analyze(load_run(tmp_path)).runs[0]
    assert found.schedule.lr_peak is None


def test_a_metric_with_no_step_in_two_sources_has_no_first_step() -> None:
    """TypeError in coverage (min of None and None): a validation loss logged without a step, in two sources (a
    mutant of the tr8 sample with duplicated and deleted lines found it, in review)."""
    import polars as pl

    from forensics.coverage import coverage
    from parsers import schema as s

    rows = [("a.log", "val_loss", None, 3.0), ("b.log", "val_loss", None, 3.1), ("b.log", "loss", 5, 2.0),
            ("a.log", "loss", 7, 2.1)]
    metrics = s.conform(pl.DataFrame(rows, schema=["source", "metric", "step", "value"], orient="row")
                        .with_columns(run=pl.lit("r"), attempt=pl.lit(1, dtype=pl.Int32)), s.METRICS_SCHEMA)
    got = coverage(metrics, [], {}, ["a.log", "b.log"])["metrics"]
    assert (got["val_loss"]["first_step"], got["val_loss"]["last_step"], got["val_loss"]["points"]) == (None, None, 2)
    assert (got["loss"]["first_step"], got["loss"]["last_step"]) == (5, 7)


def test_a_run_with_no_attempt_renders_its_timeline(tmp_path: Path) -> None:
    """fuzz 4747, mutant 152 (stop 47): a W&B history whose one row has no loss and a step beyond 64 bits gives a run
    with no attempt; the timeline paired each attempt with the next with zip(strict=True) over lists of 0 and 1: a
    ValueError, an internal error."""
    from reports.files import render

    (tmp_path / "history.jsonl").write_text('}\n{"iter": 4775808, "_timesoss": 922337208, "traloss": null, "_step": '
                                            '9223372036854775808, "Sration": null, "lr": 92233775808}\n')
    text = render(forensics.analyze_path(tmp_path / "history.jsonl"), "markdown")
    assert "## Timeline" in text


def test_a_loss_whose_medians_start_at_zero_says_its_change_without_a_share() -> None:
    """fuzz 4747, mutant 1174 (stop 47): Trainer dicts whose every loss is 0.0 (pink #6 excerpt, cut by the fuzzer):
    the learning verdict divided the change by the first tenth's median, 0: ZeroDivisionError, an internal error."""
    from reports.files import render

    path = Path(__file__).parent / "fixtures/generated/fuzz_s47_trainer_dicts_loss_all_zero.txt"
    text = render(forensics.analyze_path(path), "markdown")
    assert "## Summary" in text
