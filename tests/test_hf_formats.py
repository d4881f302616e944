"""Hugging Face Trainer output (its printed dicts, ms-swift's logging.jsonl, trainer_state.json in an output
directory) and MLX LM's console: real files (fixtures/real/SOURCES.md) with values pinned, and generated cases."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import polars as pl
import pytest

import forensics
from parsers import load_run

REAL = Path(__file__).parent / "fixtures" / "real"


@pytest.mark.parametrize(("path", "fmt", "metric", "rows"), [
    # ms-swift: "Train:   1%| | 1/120 [...]   {'loss': '7.948', ..., 'global_step/max_steps': '1/120', ...}"
    ("hf_trainer/mswift_qwen3_17b_effective.train.log", "hf-trainer", "loss", [(1, 7.948), (2, 7.886)]),
    # "{'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, 'epoch': 0.53}"
    ("hf_trainer/modernbert_issue233_gradnorm_nan.txt", "hf-trainer", "loss", [(1, 0.2051), (2, 0.0), (3, 0.0)]),
    # MLX LM: "Iter 10: Train loss 10.986, Learning Rate 1.000e-05, ..." and "Iter 1: Val loss 14.555, Val took ..."
    ("mlx_lm/filipw_phi35_mlx_lm_lora_readme.txt", "mlx-lm", "loss", [(10, 10.986), (20, 5.275)]),
    ("mlx_lm/filipw_phi35_mlx_lm_lora_readme.txt", "mlx-lm", "val_loss", [(1, 14.555)]),
])
def test_real_printed_values(path: str, fmt: str, metric: str, rows: list[tuple[int, float]]) -> None:
    run = load_run(REAL / path)
    assert [src.format for src in run.sources] == [fmt]
    assert run.metrics.filter(metric=metric).select("step", "value").rows()[:len(rows)] == rows


def test_quoted_values_and_eval_dicts(tmp_path: Path) -> None:
    """transformers 5 quotes every value; an eval dict takes the step of the train dict printed before it."""
    log = tmp_path / "train.log"
    log.write_text("{'loss': '19.85', 'grad_norm': '0.05444', 'learning_rate': '8.571e-05', 'epoch': '0.2941'}\n"
                   " 17% 34/204 [01:03<05:30,  1.94s/it]\n"
                   "{'loss': '19.84', 'grad_norm': 'nan', 'learning_rate': '0.0001913', 'epoch': '0.8824'}\n"
                   "{'eval_loss': '9.86', 'eval_runtime': '4.061', 'epoch': '1'}\n")
    run = load_run(log)
    assert run.metrics.filter(metric="loss").select("step", "value").rows() == [(1, 19.85), (2, 19.84)]
    assert math.isnan(run.metrics.filter(metric="grad_norm", step=2)["value"][0])
    assert run.metrics.filter(metric="val_loss").select("step", "value").rows() == [(2, 9.86)]


def test_plain_trainer_stdout_says_its_steps_are_counts() -> None:
    run = load_run(REAL / "hf_trainer" / "modernbert_issue233_gradnorm_nan.txt")
    assert any("it prints no step: steps here count its printed metrics lines" in w for w in run.warnings)
    assert all(math.isnan(v) for v in run.metrics.filter(metric="grad_norm")["value"])
    swift = load_run(REAL / "hf_trainer" / "mswift_qwen3_17b_effective.train.log").warnings  # it has its step
    assert [w.split(": ", 1)[1] for w in swift] == [
        "its metrics lines also print memory(GiB), token_acc, train_speed(s/it): not read, so nothing here checks them "
        "or rests on them"]


def test_mswift_logging_jsonl() -> None:
    run = load_run(REAL / "hf_trainer" / "mswift_logging_jsonl" / "qwen3_17b_text_effective")
    # {"loss": 7.94849682, "grad_norm": 18.01929855, ..., "global_step/max_steps": "1/120", ...}
    assert run.metrics.filter(metric="grad_norm").select("step", "value").row(0) == (1, 18.01929855)
    assert run.metrics.filter(metric="loss").height == 121 - 1  # 120 steps; the summary row is not a step


def test_trainer_state_output_directory_is_one_run_completed() -> None:
    path = REAL / "hf_trainer_state" / "syGOAT_Mistral-v0.2-Translator-bf16"
    run = load_run(path)
    assert [src.path for src in run.sources] == ["trainer_state.json"]  # the most complete of the three
    # {"epoch": 0.004618937644341801, "grad_norm": 11.009225845336914, "learning_rate": 5.773672055427253e-07,
    #  "loss": 2.4977, "step": 10}
    assert run.metrics.filter(metric="grad_norm").select("step", "value").row(0) == (10, 11.009225845336914)
    assert run.configs.filter(key="summary/train_runtime")["value"].to_list() == ["20387.7129"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # polars' "Comparisons with None" warning reached the CLI's stderr
        attempt = forensics.analyze(run).runs[0].attempts[0]
    assert attempt.end_reason == "completed"


def test_trainer_state_nan_and_a_checkpoint_that_went_back(tmp_path: Path) -> None:
    def state(losses: dict[int, float]) -> str:
        history = [{"epoch": k / 100, "grad_norm": 1.0, "learning_rate": 1e-4, "loss": v, "step": k}
                   for k, v in losses.items()]
        return json.dumps({"global_step": max(losses), "log_history": history, "max_steps": 1000})  # NaN as Python

    out = tmp_path / "out"
    (out / "checkpoint-30").mkdir(parents=True)
    (out / "checkpoint-30" / "trainer_state.json").write_text(state({10: 3.0, 20: 2.9, 30: 2.8}))
    (out / "trainer_state.json").write_text(state({10: 3.0, 20: 2.9, 30: 2.75, 40: float("nan")}))
    run = load_run(out)
    loss = run.metrics.filter(metric="loss").select("step", "value").rows()
    assert loss[:3] == [(10, 3.0), (20, 2.9), (30, 2.75)] and math.isnan(loss[3][1])
    assert run.warnings == ["checkpoint-30/trainer_state.json: its loss history differs from trainer_state.json's "
                            "from step 30: training went back to an earlier checkpoint and ran again from there"]


def test_an_output_directory_with_checkpoints_logging_and_event_files_is_one_run() -> None:
    """ms-swift's output directory: checkpoint-40/80/120 trainer states, logging.jsonl and the Trainer's
    runs/<date>_<host>/ event file. The event file is the full-resolution source; the others are said to be at
    the same steps, not "no metric recognised"."""
    run = forensics.analyze(load_run(REAL / "hf_output_dir" / "zhl-2022_x-algorithm_qwen3_17b_text_effective")).runs[0]
    assert [a.end_reason for a in run.attempts] == ["completed"]
    assert run.coverage["overlaid"] == {"checkpoint-120/trainer_state.json": ["grad_norm", "loss", "lr"],
                                        "logging.jsonl": ["grad_norm", "loss", "lr"]}
    assert run.coverage["metrics"]["loss"]["points"] == 120


def test_trainer_state_cut_short_or_with_a_damaged_entry_keeps_its_sound_entries(tmp_path: Path) -> None:
    """Issue 18: a trainer_state.json cut short, or with one damaged log_history entry, was refused whole."""
    real = (REAL / "hf_trainer_state" / "subro608_Deep_learning_Bert_project2" / "checkpoint-500"
            / "trainer_state.json").read_text()
    whole = load_run(REAL / "hf_trainer_state" / "subro608_Deep_learning_Bert_project2" / "checkpoint-500")
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "trainer_state.json").write_text(real[:real.index('"step": 300') - 5])
    cut = load_run(tmp_path / "cut")
    assert cut.metrics.filter(metric="loss").select("step", "value").rows() == [(100, 1.3676), (200, 1.3177)]
    at = real.rindex("{", 0, real.index('"step": 300'))
    assert cut.warnings == [f"trainer_state.json: not valid JSON from character {at}"
                            " (cut short or damaged); read the 4 sound log_history entries"]
    assert cut.configs.filter(key="global_step")["value"].to_list() == ["500"]  # the settings before the history
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "trainer_state.json").write_text(real.replace('"loss": 1.2147', '"loss": 1.21.47'))
    bad = load_run(tmp_path / "bad")
    assert bad.metrics.filter(metric="loss")["step"].to_list() == [100, 200, 400, 500]
    assert bad.configs.filter(key="micro_batch_size")["value"].to_list() == ["16"]  # and those after it
    assert whole.metrics.filter(metric="loss")["step"].to_list() == [100, 200, 300, 400, 500]


def test_printed_training_arguments_are_its_config_and_number_its_dicts() -> None:
    """thai2transformers' run_mlm output prints 'TrainingArguments(output_dir=..., logging_steps=5, ...)' on one line
    and its dicts without a step: they were numbered 1-8 and the arguments not read; they are its config, and its
    logging_steps puts the dicts at steps 5, 10, ... (the bar after the second dict is at 10/100)."""
    run = load_run(REAL / "hf_trainer" / "thai2transformers_mlm_one_line_arguments.log")
    config = dict(run.configs.select("key", "value").rows())
    assert (config["logging_steps"], config["train_iters"], config["lr"]) == ("5", "100", "0.0005")
    assert run.metrics.filter(metric="loss").select("step", "value").rows()[:2] == [(5, 9.954816436767578),
                                                                                     (10, 9.293991851806641)]
    assert run.metrics.filter(metric="loss")["step"].max() == 40


def test_a_dict_printed_after_the_bar_has_the_bars_step() -> None:
    """thai2transformers' wisesight fine-tuning: '  1%|▏   | 20/1352 [02:11<51:39,  2.33s/it]{'loss': 1.3437...}';
    dicts under a bar already redrawn have no bar (their epoch says their step: 1352 an epoch). They were numbered
    1-130; Apex's 'Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0' lines were not
    read at all."""
    run = load_run(REAL / "hf_trainer" / "thai2transformers_wisesight_apex_fp16.log")
    loss = run.metrics.filter(metric="loss").select("step", "value")
    assert loss.rows()[:5] == [(20, 1.3437000274658204), (30, 1.2052518844604492), (40, 1.1024581909179687),
                               (60, 1.047784423828125), (70, 1.0573417663574218)]
    assert loss["step"].max() == 1350
    overflows = run.events.filter(kind="overflow")
    assert overflows["value"].to_list() == [32768.0, 16384.0, 8192.0]


def test_a_training_bar_at_its_total_completed_and_a_bar_before_the_first_point_is_no_resume() -> None:
    """thai2transformers' wisesight fine-tuning: its bar reached 1352/1352, then the test set's evaluation and W&B's
    summary; the chronicle said 'Stopped short, with no end in the log: attempt 1 at step 1350 of 1352' and, its first
    dict cut by the paste (bar 10/1352 before a line of half a dict), 'the log begins mid-run, at step 20'."""
    findings = forensics.analyze_path(REAL / "hf_trainer" / "thai2transformers_wisesight_apex_fp16.log").findings
    [attempt] = findings.runs[0].attempts
    assert (attempt.end_reason, attempt.bar_step, attempt.bar_total) == ("completed", 1352, 1352)
    assert (attempt.resumed_from_step, attempt.begins_mid_run) == (None, False)


def test_apex_overflows_before_the_first_dict_are_its_start_up_search() -> None:
    """thai2transformers' ThaiNER fine-tuning: five Apex 'Gradient overflow.  Skipping step, loss scaler 0 reducing
    loss scale to 32768.0' ... 2048.0 glued to its bar at 1, 4, 8, 25 and 44 of 1000, before its first dict (step
    50), then none. The chronicle made them one 'skipped iterations' anomaly at step 50 and blamed an 'fp16
    loss-scale collapse / overflow storm'; they are the scaler's search for its first scale, at the steps after the
    bar's counts."""
    path = REAL / "hf_trainer" / "thai2transformers_thainer_apex_overflows.log"
    assert load_run(path).events.filter(kind="overflow")["step"].to_list() == [2, 5, 9, 26, 45]
    run = forensics.analyze_path(path).findings.runs[0]
    assert run.anomalies == [] and run.suspected_causes == []
    assert ("attempt 1: fp16 start-up loss-scale search, the scale fell from 65536 to 2048 over steps 2–45 with 5 "
            "iterations skipped, then nothing more skipped") in " ".join(run.setup)


def test_a_trainer_console_with_only_its_summary_is_read_as_a_completed_run() -> None:
    """sv-v5/train-roberta-ua's example output: 312 steps, fewer than its logging_steps, so no dict but the summary
    '{'train_runtime': 160.7356, ...}'; 'forensics analyze' refused it ('no metrics lines of a text format it knows (...,
    hf-trainer)', exit 2). It is a Trainer's console: completed, its bar at 312 of 312, with nothing to check."""
    run = forensics.analyze_path(REAL / "hf_trainer" / "train-roberta-ua_summary_only.log").findings.runs[0]
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.bar_step, attempt.bar_total) == ("completed", 312, 312)
    assert run.anomalies == [] and [src["format"] for src in run.sources] == ["hf-trainer"]


def test_peft_printed_parameter_count_is_read() -> None:
    """JonOlsenCa/LLaMA-Factory's DPO console prints PEFT's 'trainable params: 645,922,816 || all params:
    8,261,539,328 || trainable%: 7.8184'; the chronicle's Setup said 'printed by the program: n/a'."""
    run = load_run(REAL / "hf_trainer" / "jonolsenca_llamafactory_dpo_results.md.log")
    assert run.events.filter(kind="parameter_count")["value"].to_list() == [8_261_539_328.0]


def test_a_completed_trainer_console_without_steps_is_put_on_its_planned_steps() -> None:
    """JonOlsenCa/LLaMA-Factory's DPO console: 'Total optimization steps = 170', 17 dicts (no step; epochs 0.12 ...
    2.0), 'Training completed.': its steps were counted 1-17; a Trainer that logs every k steps prints floor(170 / k)
    dicts, 17 only at k = 10, and the epochs agree: steps 10-170."""
    run = load_run(REAL / "hf_trainer" / "jonolsenca_llamafactory_dpo_results.md.log")
    loss = run.metrics.filter(metric="loss").select("step", "value")
    assert loss.rows()[:2] == [(10, 0.0017), (20, 0.0004)] and loss["step"].max() == 170


def test_an_output_directorys_results_files_are_the_runs_summary(tmp_path: Path) -> None:
    """10844110/t5-summarization-demo: all_results.json, train_results.json and eval_results.json (the Trainer's
    save_metrics) were skipped as "JSON with keys `epoch`, `eval_gen_len`, ... (no reader for this layout)"; they are
    the run's closing values (no step), read as its summary, with the final evaluation's eval_loss."""
    folder = REAL / "hf_output_dir" / "10844110_t5-summarization-demo"
    run = load_run(folder)
    assert run.skipped == []
    assert sorted(src.path for src in run.sources if src.format == "hf-trainer-results") == [
        "all_results.json", "eval_results.json", "train_results.json"]
    summary = {k: (v, src) for k, v, src in run.configs.filter(pl.col("key").str.starts_with("summary/"))
               .select("key", "value", pl.col("source").cast(pl.String)).iter_rows()}
    assert summary["summary/eval_loss"] == ("1.633907675743103", "all_results.json")
    assert summary["summary/train_samples"] == ("287113", "all_results.json")
    assert summary["summary/train_loss"] == ("1.8040490566820844", "trainer_state.json")  # the same value in both
    assert not any("differs between sources" in w and "summary/" in w for w in run.warnings)
    # a file of that name that is not the Trainer's flat object of metrics is not read as one
    (tmp_path / "all_results.json").write_text('{"epoch": 1.0, "per_task": {"acc": 0.5}}')
    (tmp_path / "train.log").write_text("iter 1: loss 2.5000, time 10.00ms, mfu 1.00%\n")
    other = load_run(tmp_path)
    assert other.skipped == ["all_results.json: JSON that is not a flat object of the Trainer's metrics"]
