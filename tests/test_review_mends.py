"""Defects a review of the change found, each on the smallest input that shows it (each test fails before its fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

import parsers
from parsers import load_run
from parsers.console.hf_trainer import training_arguments
from parsers.textfile import InputError

_DICTS = "".join(f"{{'loss': {2.0 - i / 10}, 'learning_rate': 1e-05, 'epoch': {i + 1}.0}}\n" for i in range(3))


def _trainer_log(tmp_path: Path, arguments: str) -> Path:
    log = tmp_path / "train.log"
    log.write_text("TrainingArguments(\n" + arguments + "output_dir=/w,\n)\n" + _DICTS)
    return log


def test_printed_logging_steps_number_the_dicts_only_when_logging_by_steps(tmp_path: Path) -> None:
    # logging once an epoch prints the default logging_steps=500 all the same: the dicts were put at 500, 1000, 1500
    by_epoch = _trainer_log(tmp_path, "logging_steps=500,\nlogging_strategy=IntervalStrategy.EPOCH,\n")
    assert load_run(by_epoch).metrics.filter(metric="loss")["step"].to_list() == [1, 2, 3]
    by_steps = _trainer_log(tmp_path, "logging_steps=500,\nlogging_strategy=IntervalStrategy.STEPS,\n")
    assert load_run(by_steps).metrics.filter(metric="loss")["step"].to_list() == [500, 1000, 1500]
    # logging_steps=inf was an OverflowError's traceback
    assert load_run(_trainer_log(tmp_path, "logging_steps=inf,\n")).metrics.filter(metric="loss").height == 3


def test_a_bare_argument_value_with_spaces_is_read_whole() -> None:
    # (the lazy value and the spaces after it could split a run of spaces every way: quadratic on a long line)
    assert training_arguments("TrainingArguments(a=b " + " " * 5000 + "c, d=1)") == {"a": "b " + " " * 5000 + "c",
                                                                                   "d": 1}


def test_llamafactory_step_times_need_more_than_whole_seconds(tmp_path: Path) -> None:
    # elapsed_time is printed in whole seconds: lines a second apart gave 0 ms and 1000 ms steps
    (tmp_path / "trainer_log.jsonl").write_text("".join(
        f'{{"current_steps": {i}, "loss": 2.0, "elapsed_time": "0:00:0{e}"}}\n'
        for i, e in enumerate((0, 1, 1, 2, 2, 3), start=1)))
    assert load_run(tmp_path).metrics.filter(metric="iteration_time_ms").height == 0


def test_numeric_wandb_run_ids_are_labels(tmp_path: Path) -> None:
    (tmp_path / "history.csv").write_text("_step,loss,run_id\n" + "".join(
        f"{s},{3 - s / 10},{rid}\n" for rid in (101, 102) for s in range(5)))
    assert sorted(r.name for r in parsers.load_runs(tmp_path)) == ["101", "102"]


def test_a_file_named_like_a_setting_only_in_part_is_not_called_one(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("lr: 0.001\n")
    (tmp_path / "confusion_matrix.json").write_text('{"tp": 3, "fp": 1}\n')
    with pytest.raises(InputError) as exc:
        load_run(tmp_path)
    assert "only settings files" not in str(exc.value) and "confusion_matrix.json" in str(exc.value)


def test_a_lightning_save_after_its_epochs_last_logged_step_keeps_its_step(tmp_path: Path) -> None:
    # logged every 50 steps (49 ... 999), saved at the epoch's end, step 1020: it was moved to 999 and said to be
    # "not a step of this log (Lightning's global_step counts the steps of every optimizer)"
    version = tmp_path / "version_0"
    (version / "checkpoints").mkdir(parents=True)
    (version / "metrics.csv").write_text("epoch,step,train_loss\n" + "".join(
        f"0,{s},{2 - s / 1000}\n" for s in range(49, 1000, 50)))
    (version / "checkpoints" / "epoch=0-step=1020.ckpt").write_bytes(b"")
    run = load_run(version)
    saves = run.events.filter(kind="checkpoint_save")
    assert saves["step"].to_list() == [1020] and "not a step of this log" not in saves["text"][0]


def test_a_sweeps_attention_logit_level_leaves_out_nan_and_inf() -> None:
    # a run's own max-attention-logit series reached the sweep's fits with its NaN and Inf: max nan
    import polars as pl

    from forensics.model_shape import ModelCheck
    from forensics.sweep import run_scaling
    from parsers import schema as s

    m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": range(1, 201),
                                "metric": s.MAX_ATTENTION_LOGIT, "value": [10.0] * 198 + [float("inf"), float("nan")]}),
                  s.METRICS_SCHEMA)
    assert run_scaling(ModelCheck(), m, None)[s.MAX_ATTENTION_LOGIT]["max"] == 10.0


def test_a_completed_bar_keeps_the_note_that_the_log_leaves_out_what_followed(tmp_path: Path) -> None:
    # thai2transformers' wisesight run, its bar at 1352/1352, then a "..." line: the ending said completed and lost
    # that the paste leaves out what followed
    import forensics

    real = Path(__file__).parent / "fixtures" / "real" / "hf_trainer" / "thai2transformers_wisesight_apex_fp16.log"
    log = tmp_path / "wisesight.log"
    log.write_bytes(real.read_bytes() + b"...\n")
    [attempt] = forensics.analyze(load_run(log)).runs[0].attempts
    assert (str(attempt.end_reason), attempt.end_detail) == ("completed", (
        "its training loop reached its last step; no end printed after it; the log leaves out what followed its last "
        "step (a “...” line)"))
