"""The chronicle tells the truth about launches, ends, holes and what was not seen: pinned on real logs from public
repositories (tests/fixtures/real, sources in SOURCES.md) and on generated cases for what those logs lack."""

from __future__ import annotations

import json
import math
import shutil
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import tb_writer as tb
from conftest import ROOT, real

import forensics
import reports
from forensics.findings import EndReason
from parsers import load_run, load_runs

WANDB_REAL = ROOT / "tests" / "fixtures" / "real" / "wandb"
TB_REAL = ROOT / "tests" / "fixtures" / "real" / "tensorboard"
OFFLINE = ROOT / "tests" / "fixtures" / "wandb"


FIXTURES = ROOT / "tests" / "fixtures"


@cache
def _fixture_findings(path: Path) -> forensics.Findings:
    return forensics.analyze(*load_runs(path))


def _findings(path: Path) -> forensics.Findings:
    # (a fixture's findings are made once per test process and only read; a test's own files each time)
    return _fixture_findings(path) if FIXTURES in path.parents else forensics.analyze(*load_runs(path))


def analyzed(path: Path):
    [run] = _findings(path).runs  # (one run, as load_run requires)
    return run


def chronicle(path: Path) -> list[str]:
    return reports.render(_findings(path), "markdown").splitlines()


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


# --- the real logs ----------------------------------------------------------------------------------------
def test_tr1_13b_ends_on_the_ecc_error_after_a_planned_exit_and_before_a_failed_relaunch():
    run = analyzed(real("tr1-13B"))
    ends = [(a.index, a.end_reason, a.end_kind, a.end_at_step) for a in run.attempts]
    assert ends == [
        (1, EndReason.CRASHED, "host_error", None),          # the bus-error crash the excerpt starts with
        (2, EndReason.EXITED, "exit", 33240),                # a planned exit, not a crash
        (3, EndReason.CRASHED, "cuda_error", 43680),         # the ECC error: a hardware fault
        (4, EndReason.FAILED_STARTUP, "out_of_memory", None),  # the relaunch that ran out of memory in start-up
    ]
    exited, ecc, relaunch = run.attempts[1], run.attempts[2], run.attempts[3]
    assert ecc.end_detail == ("RuntimeError: transform: failed to synchronize: cudaErrorECCUncorrectable: "
                              "uncorrectable ECC error encountered")
    assert exited.ended_at == utc(2021, 8, 8, 1, 0, 51)
    assert exited.ran_for_s == pytest.approx(1190.0357275923093 * 60)  # its own exit line's count of minutes
    assert relaunch.started_at == pytest.approx(utc(2021, 8, 12, 8, 19, 28) + 0.225)
    assert relaunch.start_step is None and relaunch.short
    notices = [(e.attempt, e.step, e.wall_time) for e in run.log_entries if e.kind == "scheduler"]
    assert notices == [(2, 33240, utc(2021, 8, 8, 1, 49, 40)), (2, 33240, utc(2021, 8, 8, 2, 49, 44)),
                       (2, 33240, utc(2021, 8, 8, 3, 56, 54))]
    lines = chronicle(real("tr1-13B"))
    assert ("| 4 | none logged | 2021-08-12 08:19:28 | – | – | – | failed before its first logged step: “RuntimeError: "
            "CUDA error: out of memory” |") in lines
    assert any(line.startswith("| 2 | 29020–33240 | first step or event 2021-08-08 01:00:44 | 2021-08-08 01:00:51 | 19.8 h "
                               "(its exit line) | – | exited as planned after step 33240:") for line in lines)
    assert "- between attempts 2 and 3: no data between steps 33240 and 43680" in lines


def test_tr8b_104b_reports_its_assertion_error_at_8600_and_states_104b():
    run = analyzed(real("tr8b-104B"))
    assert run.model.parameters_stated == 104e9   # the size in "tr8b-104B" is 104B, not the 8b of "tr8b"
    [error] = [e for e in run.log_entries if e.kind == "error"]
    assert (error.attempt, error.step, error.text) == (1, 8600, "AssertionError: AnnealingLR: class input value 1e-06 "
                                                       "and checkpointvalue 1e-05 for minimum learning rate do not match")
    assert (run.attempts[0].end_reason, run.attempts[0].end_step) == (EndReason.CRASHED, 8600)
    assert run.attempts[1].start_step == 12000     # the iterations after the error are a new launch
    lines = chronicle(real("tr8b-104B"))
    assert ("- attempt 1, after step 8600: error: AssertionError: AnnealingLR: class input value 1e-06 and "
            "checkpointvalue 1e-05 for minimum learning rate do not match") in lines
    # consecutive steps, no hole: the LR jumped (--override-lr-scheduler to change min-lr, per the chronicle)
    assert ("- in one jump between consecutive points at steps 12000 and 12001 (attempt 2): lr 5.999e-05 → "
            "5.842e-05") in lines
    assert "- across the gap between steps 13251 and 14000 (attempt 2): loss scale 524288 → 4096" in lines


def test_tr8_104b_wide_reports_the_hole_and_what_changed_across_it_and_no_recovery():
    run = analyzed(real("tr8-104B-wide"))
    gaps = [(g.attempt, g.after_step, g.before_step) for g in run.gaps]
    assert (2, 6940, 11446) in gaps
    across = {(d.metric, d.before, d.after) for d in run.discontinuities if (d.step_before, d.step_after) == (6940, 11446)}
    assert across == {("lr", 6e-05, 3e-05), ("batch_size", 96.0, 432.0)}
    spike = next(a for a in run.anomalies if (a.attempt, a.kind) == (2, "loss_spike"))
    assert spike.step == 6930 and spike.recovered_step is None  # what happened in the hole is not in the log
    assert spike.detail == ("loss rose to 10.23865 (1.6x 6.598378, the lower median of the 3 points before it); not seen "
                            "again until step 11446, "
                            "after a gap (no data between steps 6940 and 11446), where it was at its level")
    assert not any(a.kind == "divergence" and a.attempt == 2 for a in run.anomalies)
    lines = chronicle(real("tr8-104B-wide"))
    assert ("- across the gap between steps 6940 and 11446 (attempt 2): global batch size 96 → 432; lr 6e-05 → "
            "3e-05") in lines
    assert "- attempt 2: no data between steps 6940 and 11446" in lines


def test_tr11_reshaping_replays_are_one_list_with_the_94768_difference():
    run = analyzed(real("reshaping"))
    assert [a.short for a in run.attempts] == [True] * 7
    [diff] = run.replay_differences
    assert (diff.step, diff.metric) == (94768, "loss")
    assert diff.values == [(1, 1.943883), (2, 1.943954), (3, 1.954172), (4, 1.94582), (5, 1.963261), (6, 1.963201),
                           (7, 2.0429)]
    lines = chronicle(real("reshaping"))
    assert not [line for line in lines if line.startswith("## Attempt ")]   # no section per replay
    listed = lines[lines.index("**Short attempts (at most 3 steps logged) and replays:**") + 2:]
    assert [line.split(":")[0] for line in listed[:7]] == [f"- attempt {i}" for i in range(1, 8)]
    assert listed[7] == ("- **step 94768 gave a different loss when logged again:** 1.943883 (attempt 1), 1.943954 "
                         "(attempt 2), 1.954172 (attempt 3), 1.94582 (attempt 4), 1.963261 (attempt 5), 1.963201 "
                         "(attempt 6), 2.0429 (attempt 7)")


def test_a_scheduler_time_limit_is_a_stop_and_a_short_log_gets_the_absolute_checks():
    run = analyzed(real("pp64-1809655"))
    ended = run.attempts[0]
    assert (ended.end_reason, ended.end_kind) == (EndReason.STOPPED, "time_limit")
    assert not [c for c in run.suspected_causes if c.kind == "hardware"]
    # five loss points at the start of training: too few to know the noise, so only the absolute checks ran, and
    # they catch "lm loss: 1.412743E+01" at 20 -> "lm loss: 7.676836E+01" at 30 (5.4x)
    assert run.coverage["spikes_judged"]["loss"] == {"1": 0}
    assert run.coverage["spike_checks"]["loss"]["1"]["absolute_only"] == 4
    [spike] = [a for a in run.anomalies if a.kind == "loss_spike"]
    assert (spike.step, spike.value, spike.baseline) == (30, 76.76836, 14.12743)
    summary = chronicle(real("pp64-1809655"))
    # "padded vocab (size: 50257) with 431 dummy tokens (new size: 50688)": ln(50688) = 10.83 nats; the first logged
    # loss (14.12743 at step 20) is a fresh model's at hidden 16384 (init std 0.02: 10.83 + 3.28), then 76.77 is not
    assert "- **First anomaly:** loss spike at step 30 (attempt 1)." in summary
    [chance] = [a for a in run.anomalies if a.kind == "loss_above_chance"]
    assert chance.detail == ("loss at every logged point from step 30 to 60 (highest 76.76836, step 30), above "
                             "ln(50688) + 3.28 + 1 = 15.11 nats: worse than a freshly initialised model of its shape (its "
                             "logits' spread 2.56 puts its loss near ln(vocabulary) + 3.28), before the loss had first "
                             "come within chance")
    # what the loss did, as facts: 14.13 to 76.77 and still 16.97 at the end
    assert ("- **Absolute checks only:** attempt 1's 5 loss point(s) are too few to know the noise (fewer than 10 "
            "before each in its stretch of the log); its loss went from 14.12743 (step 20) to 76.76836 at its highest "
            "(step 30), and was 16.9694 at its last step (60).") in summary
    # "number of skipped iterations: 10", 8, 1 at iterations 10-30 (lines 2049-2309): the schedule stood still on
    # them, so its LR at iteration 20 (3.750E-05) is step 2 of the 8-step warm-up, and the peak comes at 30
    assert ("- the LR curve peaks at step 30, after the config's warm-up end (step 8): the 19 iterations skipped "
            "before it (fp16 overflows) did not advance the schedule.") in summary


def test_prequel_stack_dumps_are_a_hang_in_a_collective():
    run = analyzed(real("prequel"))
    last = run.attempts[-1]
    assert (last.end_reason, last.end_kind) == (EndReason.HUNG, "stack_dump")
    [hang] = [a for a in run.anomalies if a.kind == "hang"]
    assert hang.detail == ("2 thread stack dump(s) printed after the last step; 1 dumped frame(s) waiting in a "
                           "collective (broadcast)")


# --- unseen real logs, read by hand (see the closing notes): the statements they contradicted ---------------------
def test_ctrl_c_in_interleaved_rank_output_is_an_interruption_not_a_kill():
    run = analyzed(real("MoE_log_gpt3"))
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_step) == (EndReason.INTERRUPTED, "keyboard_interrupt", 2130)
    # DeepSpeed's launcher cleaning up ("sigkill_handler] Killing subprocess") is no kill of its own
    assert not [e for e in run.log_entries if e.kind == "killed"]
    assert [c.kind for c in run.suspected_causes] == ["interrupted"]


def test_three_launches_two_complete_from_scratch_the_third_fails_at_startup():
    run = analyzed(real("dual32_run_v2"))
    assert [(a.start_step, a.end_step, a.end_reason) for a in run.attempts] == [
        (1, 20, EndReason.COMPLETED), (1, 20, EndReason.COMPLETED), (None, None, EndReason.FAILED_STARTUP)]
    assert not any(a.rollback for a in run.attempts)   # a start from scratch is a new run, not a rollback
    assert run.replay_differences == []                # the second run reproduced the first bit for bit
    # LR 1.000E-05 at 19 then 1.000E-06 at 20: lr_warmup_iters 19, min_lr 1e-06, train_iters 20 - the schedule's own
    assert run.discontinuities == []
    assert run.attempts[2].end_kind == "nccl_error"
    hardware = next(c for c in run.suspected_causes if c.kind == "hardware")
    assert hardware.confidence == 0.5                  # at start-up only: weaker than a fault that stopped training


def test_arguments_read_through_deepspeeds_report_printed_into_them():
    """DeepSpeed's environment report interleaves with the arguments blocks (lines 1406-1416 and 7713-7747 of the
    fixture): values glued to op names, colour codes and dotted leaders are read as printed, and only the three
    settings that the launches really changed are changes."""
    path = real("dual32_run_v2")
    run = analyzed(path)
    assert [a.config_changes for a in run.attempts[1:]] == [
        {"deepspeed_config": [f"/home/sd/Megatron-DeepSpeed/.context/dsconfig_dual32_tp4pp1dp8_static{a}.json"
                              for a in (1050, 1125)],
         "experiment_name": ["dual32_tp4pp1dp8_static1050", "dual32_tp4pp1dp8_static1125"],
         "experiment_run_id": ["dual32_tp4pp1dp8_static1050_20260324_114252_DGX2-1",
                               "dual32_tp4pp1dp8_static1125_20260324_122649_DGX2-1"]},
        {"deepspeed_config": [f"/home/sd/Megatron-DeepSpeed/.context/dsconfig_dual32_tp4pp1dp8_static{a}.json"
                              for a in (1125, 1200)],
         "experiment_name": ["dual32_tp4pp1dp8_static1125", "dual32_tp4pp1dp8_static1200"],
         "experiment_run_id": ["dual32_tp4pp1dp8_static1125_20260324_122649_DGX2-1",
                               "dual32_tp4pp1dp8_static1200_20260324_131546_DGX2-1"]},
    ]
    configs = load_run(path).configs
    assert configs.group_by("attempt").len().sort("attempt")["len"].to_list() == [333, 333, 333]
    read = {(a, k): v for a, k, v in configs.select("attempt", "key", "value").iter_rows()}
    # 1414 "checkpoint_num_layers ... 1....", 1415 "1.0\x1b[93m[NO]", 7720 "Falsefused_adam", 7738 "Nonedc"
    assert [read[1, "checkpoint_num_layers"], read[1, "classes_fraction"], read[3, "apply_query_key_layer_scaling"],
            read[3, "block_data_path"], read[1, "params_dtype"]] == ["1", "1.0", "False", "None", "torch.bfloat16"]
    assert not {"def", "path", "info", "version", "size", "fused_adam"} & {k for _, k in read}


def test_a_launch_that_just_stops_says_it_may_have_stopped_without_a_word():
    """stark-sim dual8: launch 2 logs iterations 1-14 of 20, then only its wrapper's 'reset GPU8' lines follow."""
    run = analyzed(real("dual8_tp4pp1dp2"))
    assert [(a.start_step, a.end_step, a.end_reason) for a in run.attempts] == [
        (1, 20, EndReason.COMPLETED), (1, 14, EndReason.RUNNING)]
    assert run.attempts[1].end_detail == "still running, cut off, or stopped without a word"
    assert sorted(run.attempts[1].config_changes) == ["deepspeed_config", "experiment_name", "experiment_run_id"]
    assert run.suspected_causes == [] and run.discontinuities == []
    assert ("- **How it ended:** the log ends with no end printed: still running, cut off, or stopped without a "
            "word.") in chronicle(real("dual8_tp4pp1dp2"))


def test_an_old_megatron_log_stopped_by_the_time_limit():
    """BigScience's ZeRO-3 test (Megatron 1.1.5 lines, no grad norm): 4 iterations, then slurm's time limit."""
    run = analyzed(real("meg_ds_zero_gpt2_perf_n16-1999616"))
    # Megatron 1.x pads names to 32 columns: line 1387 "  scaled_upper_triang_masked_softmax_fusion  False" has no dots
    configs = load_run(real("meg_ds_zero_gpt2_perf_n16-1999616")).configs
    assert configs.filter(pl.col("key") == "scaled_upper_triang_masked_softmax_fusion")["value"].to_list() == ["False"]
    [a] = run.attempts
    assert (a.start_step, a.end_step, a.end_reason, a.end_kind) == (1, 4, EndReason.STOPPED, "time_limit")
    # line 6117, slurm's own line that says why (srun's "Job step aborted" at line 6116 comes first)
    assert a.end_detail == ("slurmstepd: error: *** STEP 1999616.0 ON r6i4n5 CANCELLED AT 2021-05-27T21:42:11 DUE TO "
                            "TIME LIMIT ***")
    assert "grad_norm" in run.coverage["missing"]
    assert [c.kind for c in run.suspected_causes] == ["stopped"]


def test_ctrl_c_in_a_random_ltd_run_with_its_glued_field():
    """microsoft's random-LTD baseline prints 'global batch size:   256 |reserve_length:   256 |' (no space before
    the field); 47 iteration lines 10-470, then Ctrl-C tracebacks from every rank."""
    run = analyzed(real("random_ltd_log_gpt3"))
    [a] = run.attempts
    assert (a.start_step, a.end_step, a.end_reason, a.end_kind) == (10, 470, EndReason.INTERRUPTED, "keyboard_interrupt")
    assert run.coverage["metrics"]["loss"]["points"] == 47 and run.gaps == []
    assert [c.kind for c in run.suspected_causes] == ["interrupted"]
    lines = chronicle(real("random_ltd_log_gpt3"))  # stopped by hand: nothing blew up
    assert "## Why it stopped (suspected causes)" in lines and not any("blew up" in line for line in lines)


def test_a_clean_hf_epoch_completes_with_the_trainers_warmup():
    """fyh2001's 2,353-step Gemma SFT epoch (warmup_ratio 0.1): completed, warm-up 236 as the curve and config say."""
    run = analyzed(TB_REAL / "fyh2001_megatron-sft-recipes_fsdp2")
    [a] = run.attempts
    assert (a.start_step, a.end_step, a.end_reason) == (1, 2353, EndReason.COMPLETED)
    assert (run.schedule.warmup_end_step, run.schedule.warmup_end_configured, run.schedule.notes) == (236, 236, [])
    assert run.suspected_causes == [] and run.gaps == []


def test_an_oom_in_training_is_memory_not_hardware():
    run = analyzed(real("screen_boot_tp1pp2dp8"))
    assert (run.attempts[0].end_reason, run.attempts[0].end_kind, run.attempts[0].end_step) == (
        EndReason.CRASHED, "out_of_memory", 5)
    assert [c.kind for c in run.suspected_causes] == ["memory"]


def test_a_tutorial_page_of_five_independent_launches_with_elisions():
    run = analyzed(real("llm-action"))
    assert [(a.start_step, a.end_step, a.end_reason) for a in run.attempts] == [
        (None, None, EndReason.COMPLETED),   # resumed at train_iters: nothing left to train
        (100, 5000, EndReason.COMPLETED), (100, 2000, EndReason.UNKNOWN), (100, 2000, EndReason.COMPLETED),
        (100, 2000, EndReason.COMPLETED)]
    assert run.attempts[0].resumed_from_step == 5000 and not any(a.rollback for a in run.attempts)
    # attempt 3's paste ends "saving checkpoint at iteration 2000 ..." then a "..." line (1305-1306): the author
    # cut it there, so it is not "stopped short" of its 5000 iterations
    assert (run.attempts[2].end_kind, run.attempts[2].end_detail) == (
        "elision", "the log leaves out what followed its last step (a “...” line)")
    lines = chronicle(real("llm-action"))
    assert not any(line.startswith("- **The log ends before the planned length") for line in lines)
    # every "..." elision of the page is a hole, in the attempt with five points too
    assert [(g.attempt, g.after_step, g.before_step) for g in run.gaps] == [
        (2, 100, 1000), (2, 1100, 2000), (2, 2100, 2900), (2, 3100, 4000), (2, 4100, 4800), (3, 200, 1000),
        (3, 1100, 2000)]
    assert run.discontinuities == []   # the warm-up runs straight through the "..." elisions
    assert run.replay_differences == []  # every launch started from scratch


def test_wandb_runs_end_as_their_console_says_and_step_on_iter():
    runs = {r.name: r for r in forensics.analyze(*load_runs(WANDB_REAL / "jackokeefe11__nanoGPT")).runs}
    # four W&B runs, two display names: runs are told apart by their id, not merged as attempts
    assert sorted(runs) == ["mini-gpt (bn1klkfl)", "mini-gpt (mw8ngzqq)", "mini-gpt (o3wk6g8t)",
                            "mini-gpt-beefed-swish"]
    ends = {n: (r.attempts[0].end_reason, r.attempts[0].end_kind) for n, r in runs.items()}
    assert ends == {
        "mini-gpt (bn1klkfl)": (EndReason.INTERRUPTED, "keyboard_interrupt"),   # exit code 255 alone would say crashed
        "mini-gpt (mw8ngzqq)": (EndReason.COMPLETED, "exit_code"),
        "mini-gpt (o3wk6g8t)": (EndReason.INTERRUPTED, "keyboard_interrupt"),
        "mini-gpt-beefed-swish": (EndReason.CRASHED, "out_of_memory"),
    }
    interrupted = runs["mini-gpt (bn1klkfl)"]
    assert interrupted.coverage["step_axis"] == {"wandb/run-20240214_191025-bn1klkfl/run-bn1klkfl.wandb": "iter"}
    assert interrupted.coverage["metrics"]["loss"] == {
        "points": 6, "first_step": 0, "last_step": 1250, "source_tags": ["train/loss"]}
    # its console printed "iter 1330: loss 1.8209 BPC" (output.log line 146) before the KeyboardInterrupt; W&B got
    # its last point at 1250, and "saving checkpoint to out-shakespeare-char" follows "step 1250: ..." (136-137)
    assert (interrupted.attempts[0].end_step, interrupted.attempts[0].end_at_step) == (1250, 1330)
    [stop] = [c for c in interrupted.suspected_causes if c.kind == "interrupted"]
    assert stop.evidence == ["attempt 1 ended after step 1330: KeyboardInterrupt"]
    assert stop.check_next == "nothing failed here; the last checkpoint saved in the logs is at step 1250"
    lines = reports.render(forensics.Findings(runs=[interrupted]), "markdown").splitlines()
    assert ("- **How it ended:** interrupted by hand after step 1330 (as its log printed; its metrics end at step "
            "1250): “KeyboardInterrupt”.") in lines
    assert ("| 1 | 0–1250 | from the start of training | - | step 1330 as its log printed (1250 in its metrics) | "
            "interrupted by hand |") in lines
    # its loss peaked at its first point: said once, not as a climb "from 4.287 (step 0) to 4.287 (step 0)"
    assert ("- **Absolute checks only:** attempt 1's 6 loss point(s) are too few to know the noise (fewer than 10 "
            "before each in its stretch of the log); its loss was 4.287383556365967 at its first point (step 0), its "
            "highest, and was 1.2008771896362305 at its last step (1250).") in lines


def test_a_notebook_wandb_run_of_successive_trainers_on_train_global_step():
    [run] = forensics.analyze(*load_runs(WANDB_REAL / "satishparaddi__Fine-Tuning-LLaMA-for-Medical-QA")).runs
    assert [a.start_step for a in run.attempts] == [10] * 9          # train/global_step restarts: a new trainer
    assert [a.end_step for a in run.attempts] == [274, 137, 274, 137, 274, 274, 137, 1095, 550]
    assert not any(a.rollback for a in run.attempts)
    # no exit record, but the run's summary holds the last trainer's train_runtime (574.6 s) at its global step 550
    assert run.attempts[-1].end_reason == EndReason.COMPLETED
    assert run.attempts[-1].end_detail == ("training finished: the Trainer's summary in the run's summary "
                                           "(train_runtime 574.6076 s)")
    assert run.discontinuities == [] and run.replay_differences == []
    # each trainer pushed its config before it logged (trainer 3 pushed one and logged nothing): what changed is
    # the notebook's search, read from the config records in force at each trainer's first history row
    assert [a.config_changes for a in run.attempts[1:]] == [
        {"micro_batch_size": [2, 4]},
        {"lr": [0.0002, 0.0001], "micro_batch_size": [4, 2]},
        {"micro_batch_size": [2, 4]},
        {"micro_batch_size": [4, 2]},
        {},
        {"micro_batch_size": [2, 4]},
        {"gradient_accumulation_steps": [4, 5], "num_train_epochs": [1, 5], "micro_batch_size": [4, 2]},
        {"micro_batch_size": [2, 4]},
    ]
    # attempt 5 (trainer 6) has attempt 3's settings, yet its loss is far lower: not the batch size's doing
    assert run.attempts[4].behaviour[0] == (
        "after micro_batch_size 4 → 2: loss 86% lower than attempt 4 over steps 10–130 (0.707 vs 4.976); "
        "but attempt 3, with the same settings, had 5.862 over steps 10–130 (this attempt 0.707): the change does not "
        "explain it")
    assert run.attempts[4].behaviour[1] == (
        "after micro_batch_size 4 → 2: grad norm 0.10x attempt 4's over steps 10–130; but attempt 3, with "
        "the same settings, had 23.34 over steps 10–130 (this attempt 0.7046): the change does not explain it")


def test_hf_trainer_event_files_read_and_its_mean_loss_is_not_the_loss_series():
    run = analyzed(TB_REAL / "fyh2001_megatron-sft-recipes")
    assert run.coverage["metrics"]["loss"]["source_tags"] == ["train/loss"]
    assert run.coverage["metrics"]["loss"]["points"] == 30
    assert "train/train_loss" in run.coverage["other_scalars"]
    assert run.attempts[0].start_step is None                         # the launch that logged no metric
    assert (run.attempts[1].start_step, run.attempts[1].end_step) == (1, 30)
    # v0's event file holds its arguments as text and no scalar: the summary says so, not only the timeline
    summary = chronicle(TB_REAL / "fyh2001_megatron-sft-recipes")
    assert "- **Launches with no training step, error or stop in the logs:** attempt 1 (2026-04-26 18:57:15)." in summary
    assert "- attempt 1: no training step, error or stop in the logs" in summary


# --- generated cases for what the real logs lack --------------------------------------------------------------------
def test_unknown_tensorboard_tags_get_roles_and_their_nan_is_found(tmp_path):
    records = [tb.version()]
    for step in range(1, 201):
        xent = 3.0 - step / 200 if step != 150 else math.nan
        records += [tb.scalar("train/lm_xent", xent, step), tb.scalar("optim/gnorm", 1.0, step),
                    tb.scalar("eval/acc", 0.5, step)]
    tb.write(tmp_path / "run" / "events.out.tfevents.1.host", *records)
    run = analyzed(tmp_path / "run")
    assert run.coverage["roles"] == {"loss": "train/lm_xent", "grad_norm": "optim/gnorm"}
    assert run.coverage["missing"] == ["lr", "loss_scale"]
    [nan] = [a for a in run.anomalies if a.kind == "nan"]
    assert (nan.metric, nan.step) == ("loss", 150)
    lines = chronicle(tmp_path / "run")
    assert ("- **Taken by its name:** the loss is the scalar train/lm\\_xent (no recognised loss metric).") in lines


def test_a_run_with_no_loss_recognised_says_so_and_still_finds_its_nan(tmp_path):
    records = [tb.version()]
    for step in range(1, 101):
        records += [tb.scalar("reward/mean", math.inf if step == 60 else 0.1 * step, step),
                    tb.scalar("policy/entropy", 2.0, step)]
    tb.write(tmp_path / "rl" / "events.out.tfevents.1.host", *records)
    run = analyzed(tmp_path / "rl")
    assert run.coverage["missing"] == ["loss", "grad_norm", "lr", "loss_scale"]
    [bad] = run.anomalies
    assert (bad.kind, bad.metric, bad.step) == ("non_finite", "reward/mean", 60)
    text = "\n".join(chronicle(tmp_path / "rl"))
    assert "no attempt ended in NaN, divergence" not in text and "**Anomalies:** none found" not in text
    assert "- **What went wrong:** not checked: no loss metric recognised" in text
    assert "- **No loss metric recognised;** scalar tags present: policy/entropy, reward/mean. Still checked: NaN/Inf" \
           " in every scalar." in text


def test_keyboard_interrupt_in_a_wandb_runs_console_is_an_interruption(tmp_path):
    shutil.copytree(OFFLINE / "v0.31.0" / "wandb", tmp_path / "wandb")
    run_dir = next(d for d in (tmp_path / "wandb").iterdir() if d.name.endswith("fxclean01"))
    (run_dir / "files").mkdir(exist_ok=True)
    (run_dir / "files" / "output.log").write_text(
        "step 50: loss 2.31\nTraceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
        "    loss.backward()\nKeyboardInterrupt\n")
    runs = {r.name: r for r in forensics.analyze(*load_runs(tmp_path / "wandb")).runs}
    clean = runs["clean-run"].attempts[0]
    # the client recorded exit code 0 for this run; what the program printed decides
    assert (clean.end_reason, clean.end_detail) == (EndReason.INTERRUPTED, "KeyboardInterrupt")


def test_a_history_that_logs_its_own_iter_is_read_on_it(tmp_path):
    rows = [{"_step": i, "_timestamp": 1.7e9 + i, "iter": 10 * i, "train/loss": 3.0 - i / 100} for i in range(30)]
    rows += [{"_step": 30 + i, "_timestamp": 1.7e9 + 30 + i, "iter": 100 + 10 * i, "train/loss": 2.9} for i in range(5)]
    (tmp_path / "history.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    run = load_run(tmp_path / "history.jsonl")
    loss = run.metrics.filter(pl.col("metric") == "loss")
    assert loss.filter(pl.col("attempt") == 1)["step"].to_list() == list(range(0, 300, 10))
    assert loss.filter(pl.col("attempt") == 2)["step"].to_list() == [100, 110, 120, 130, 140]  # iter went back
    assert "iter" not in set(run.metrics["metric"].cast(pl.String))


def test_a_runs_table_of_seed_replicates_is_separate_runs(tmp_path):
    (tmp_path / "wandb_export.csv").write_text(
        "Name,State,Runtime,lr,seed,epoch,val/loss\n"   # config keys, then summary keys, each alphabetically
        "base,finished,100,0.001,1,3,2.5\nbase,finished,101,0.001,2,3,2.6\n"
        "hot,crashed,50,0.01,1,1,9.0\nhot,crashed,51,0.01,1,1,9.1\n")
    findings = forensics.analyze(*load_runs(tmp_path / "wandb_export.csv"))
    assert [r.name for r in findings.runs] == ["base (seed=1)", "base (seed=2)", "hot (row 3)", "hot (row 4)"]
    assert all(len(r.attempts) == 1 for r in findings.runs)
    lines = reports.render(findings, "markdown").splitlines()
    assert lines[2].startswith("4 runs and no history in the export")
    assert "| base (seed=2) | finished | 101 | 2 | 0.001 | val/loss=2.6, epoch=3 |" in lines


def test_a_launch_that_ooms_at_startup_is_a_failed_launch_of_its_own(tmp_path):
    args = ["------------------------ arguments ------------------------", "  lr ......... 0.0003",
            "  train_iters ........ 100", "-------------------- end of arguments ---------------------"]
    lines = [*args, "> initializing torch distributed ..."]
    lines += [f" iteration {i:8d}/     100 | lm loss: {3.0 - i / 100:.6E} | grad norm: 1.000 |" for i in range(1, 21)]
    lines += ["exiting program at iteration 20"]
    lines += [*args, "> initializing torch distributed ...", "> building GPT model ...",
              "Traceback (most recent call last):", '  File "pretrain_gpt.py", line 1, in <module>',
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    run = analyzed(tmp_path / "train.log")
    assert [(a.start_step, a.end_step, a.end_reason) for a in run.attempts] == [
        (1, 20, EndReason.EXITED), (None, None, EndReason.FAILED_STARTUP)]
    assert run.attempts[1].end_detail == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert "- attempt 2: no step read; failed before its first logged step: “torch.OutOfMemoryError: CUDA out of " \
           "memory. Tried to allocate 2.00 GiB”" in chronicle(tmp_path / "train.log")


# --- every number quoted is one the data holds ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tr8-104B-wide", "tr1-13B", "tr8b-104B"])
def test_spike_values_and_baselines_are_logged_values(name):
    run = load_run(real(name))
    logged = {m: set(run.metrics.filter(pl.col("metric") == m)["value"].to_list()) for m in ("loss", "grad_norm")}
    spikes = [a for a in analyzed(real(name)).anomalies if a.kind in ("loss_spike", "grad_norm_spike")]
    assert spikes
    for a in spikes:
        assert a.value in logged[a.metric] and a.baseline in logged[a.metric], a


def test_a_slow_climb_quotes_the_true_minimum(tmp_path):
    trend = [3.0 - 0.01 * k for k in range(60)] + [2.41 + 0.004 * k for k in range(1, 201)]
    noisy = [v * (1 + 0.01 * math.sin(1.7 * k)) for k, v in enumerate(trend)]  # noise, so no point is a spike
    lines = [f" iteration {i:8d}/    1000 | lm loss: {v:.6E} | grad norm: 1.000 |" for i, v in enumerate(noisy, 1)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    run = analyzed(tmp_path / "train.log")
    [div] = [a for a in run.anomalies if a.kind == "divergence"]
    losses = load_run(tmp_path / "train.log").metrics.filter(pl.col("metric") == "loss")
    assert div.baseline == losses["value"].min()
    assert f"its minimum {losses['value'].min()!r} (step " in div.detail


def test_nothing_is_linked_across_a_hole(tmp_path):
    """A grad-norm spike just before a hole does not 'lead' a loss spike just after it."""
    steps = [*range(1, 101), *range(107, 121)]
    loss = {st: 3.0 - st / 1000 for st in steps} | {110: 9.0}
    grad = {st: 1.0 for st in steps} | {100: 50.0}
    lines = [f" iteration {st:8d}/    1000 | lm loss: {loss[st]:.6E} | grad norm: {grad[st]:.3f} |" for st in steps]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    run = analyzed(tmp_path / "train.log")
    spike = next(a for a in run.anomalies if a.kind == "loss_spike")
    assert spike.step == 110 and spike.grad_norm_lead is None and spike.precursors == []
    assert [(g.after_step, g.before_step) for g in run.gaps] == [(100, 107)]


def test_the_setup_says_what_the_logs_do_not_show():
    wide = chronicle(real("tr8-104B-wide"))
    assert ("- **Batch size:** 96 at the first logged step, 432 the largest logged; the configured batch size is not "
            "in the logs.") in wide   # no "full from step 11446": the target is not in the logs
    tutorial = chronicle(real("llm-action"))
    # attempts 2-5 each train from scratch: the schedule is attempt 5's, whose last line (2000/2000) has
    # "learning rate: 9.305E-05"; lr_warmup_fraction 0.01 of lr_decay_iters 320000 is step 3200
    assert ("- **Schedule (attempt 5 on, the last start from scratch):** LR reaches 9.305e-05 (step 2000); still "
            "rising at the last logged point: the logs end during the warm-up (configured: step 3200).") in tutorial
    # attempt 3 ran at global batch size 16; attempt 5's is 8 from its first line ("global batch size:     8")
    assert "- **Batch size (attempt 5 on, the last start from scratch):** 8, full from the first logged step." in tutorial
    # attempt 5 runs PP=4: its four stages print 75577344 twice, 127090688 and 128137216; launches 1-2 printed
    # 354871296 for the whole model: the sum holds the tied embedding twice, and says so
    assert ("- **Parameters** from its shape: 406.4M (354.9M distinct); printed by the program: 406.4M (summed over "
            "the counts of 4 model-parallel ranks; the tied word embedding counts once in the first and once in the "
            "last pipeline stage); stated in its name: n/a.") in tutorial
    ctrl_c = chronicle(real("MoE_log_gpt3"))
    # one rank printed its count (125262336): no sum to explain; "125M" is in the file name
    assert ("- **Parameters** from its shape: 125.3M; printed by the program: 125.3M; stated in its name: 125.0M (its "
            "total count).") in ctrl_c
    assert ("- **Schedule:** LR reaches 0.0001256 (step 2130); still rising at the last logged point: the logs end "
            "during the warm-up.") in ctrl_c


def test_a_warmup_ratio_ends_where_the_trainer_rounds_it():
    """fyh2001's full-epoch Gemma run: warmup_ratio 0.1 of 2,353 steps; its step-1 LR 4.237288e-08 is 1e-5/236,
    so the Hugging Face Trainer warmed up for ceil(235.3) = 236 steps."""
    from forensics.schedule import configured_warmup
    assert configured_warmup({"lr_warmup_fraction": 0.1, "train_iters": 2353}, pl.DataFrame()) == 236
    assert configured_warmup({"lr_warmup_iters": 0.1, "train_iters": 2353}, pl.DataFrame()) == 236  # warmup_steps<1
    assert configured_warmup({"lr_warmup_fraction": 0.1, "train_iters": 30}, pl.DataFrame()) == 3   # not 4


def test_a_spike_is_never_back_at_its_level_before_the_hole_it_was_not_back_before():
    """Falling losses with a spike, a plateau and one hole: where the chronicle says "not back before a gap; at its
    level again from step N", N lies after the hole (the check inside the stretch and after it use one level)."""
    from forensics.detectors import RunFrames, SpikeDetector
    from parsers import schema as s
    seen = 0
    for seed in range(50):  # (seeds 10 and 39 give the case)
        rng = np.random.default_rng(seed)
        n = 300
        x = np.log(8) - rng.uniform(0, 0.03) * np.arange(n) + rng.uniform(0, 0.03) * rng.standard_normal(n)
        at, k = rng.integers(120, 250), rng.integers(1, 6)
        x[at:at + k] += rng.uniform(0.2, 1.5)
        x[at + k:] = x[at - 1] + rng.uniform(0, 0.2) + rng.uniform(0, 0.02) * rng.standard_normal(n - at - k)
        steps = np.arange(1, n + 1)
        steps[rng.integers(at + k, n - 5):] += 5000
        metrics = s.conform(pl.DataFrame({"run": "r", "source": "a", "attempt": 1, "step": steps, "metric": "loss",
                                          "value": np.exp(x)}), s.METRICS_SCHEMA)
        for inc in SpikeDetector("loss").incidents(RunFrames(metrics, s.empty(s.EVENTS_SCHEMA))):
            if inc.back_after_gap is not None:
                seen += 1
                assert inc.gap_after is not None and inc.back_after_gap >= inc.gap_after.before_step, (seed, inc)
    assert seen  # the case arises


def test_an_arguments_block_without_its_end_line_hides_no_event(tmp_path):
    """A paste that drops 'end of arguments' leaves the block open to the end of the file: the crash after the
    iterations is still read (only argument lines inside a block are not events)."""
    lines = ["------------------------ arguments ------------------------",
             "  exit_signal_handler ............................. False",
             "  seed ............................................ 1234",
             *[f" iteration {st:8d}/     100 | lm loss: {3.0 - st / 100:.6E} | grad norm: 1.000 |" for st in range(1, 11)],
             "Traceback (most recent call last):", "RuntimeError: CUDA error: an illegal memory access was encountered"]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    [a] = analyzed(tmp_path / "train.log").attempts
    assert (a.end_reason, a.end_kind, a.end_detail) == (
        EndReason.CRASHED, "cuda_error", "RuntimeError: CUDA error: an illegal memory access was encountered")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("stretches", [1, 3])
def test_trailing_z_fast_path_is_the_grouped_one(seed, stretches):
    """A few stretches are each taken alone, with Series rolling medians on polars' null-free kernel (leading nulls
    sliced off); many take one pass with ``over``. Both must give the same numbers, NaNs inside and at the start
    included."""
    from forensics import timeline

    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.normal(size=3000)) * 0.01 + rng.standard_t(3, 3000) * 0.05
    if seed % 2:
        x[rng.integers(0, 3000, 20)] = np.nan
    if seed % 3 == 0:
        x[:7] = np.nan
    groups = np.repeat(np.arange(stretches), np.diff(np.linspace(0, 3000, stretches + 1).astype(int)))
    one = timeline.trailing_robust_z(x, 100, 0.01, floor_without_history=0.1, groups=groups)
    frame = timeline._trailing_by_group(pl.Series(x).fill_nan(None), groups, 100, 8)
    level = (frame["recent"] + frame["mid"]).fill_null(float("nan")).to_numpy()
    noise = np.where(frame["history"].to_numpy() >= 10, (frame["mad"] * 1.4826).fill_null(float("nan")).to_numpy(), np.nan)
    assert np.array_equal(one[1], level, equal_nan=True)
    assert np.array_equal(one[3], noise, equal_nan=True)


def test_an_lr_still_rising_into_a_hole_has_no_peak_and_no_warm_up_end(tmp_path):
    """A pasted excerpt ("......" between steps 7 and 998) whose LR rises to its last point before the hole: the peak
    and the end of the warm-up are not seen, and the chronicle does not call step 7 either (it did)."""
    def line(step: int, lr: float) -> str:
        return (f" iteration {step:8d}/    1000 | consumed samples: {step * 64:12d} | learning rate: {lr:.3E} | "
                f"global batch size:    64 | lm loss: 1.300000E+00 | loss scale: 1.0 | grad norm: 9.000 |")
    rows = [line(st, 2.5e-7 * (st - 2)) for st in range(3, 8)] + [" ......"]
    rows += [line(st, 1.25e-7) for st in range(998, 1001)]
    (tmp_path / "train.log").write_text("\n".join(rows) + "\n")
    run = analyzed(tmp_path / "train.log")
    sched = run.schedule
    assert (sched.lr_peak_step, sched.peak_before_hole, sched.warmup_end_step) == (7, 998, None)
    text = reports.render(forensics.Findings(runs=[run]), "markdown")
    assert ("LR reaches 1.25e-06 (step 7); still rising at the last point before a hole in the log (next logged: "
            "step 998): the peak and the end of the warm-up may lie in the hole.") in text


def test_an_lr_printed_to_one_digit_that_doubles_is_a_jump_not_rounding(tmp_path: Path) -> None:
    """A move of one printed digit is rounding only where the digit is a small part of the value (llm.c's 1.01e-06 ->
    1.00e-06); printed to one digit, 0.0001 -> 0.0002 doubles the LR (review of the rounding rule)."""
    dicts = [f"{{'loss': {2 - i / 1000:.4f}, 'grad_norm': 1.0, 'learning_rate': {0.0001 if i < 60 else 0.0002}, "
             f"'epoch': {i / 100:.2f}}}" for i in range(120)]
    log = tmp_path / "train.log"
    log.write_text("\n".join(dicts) + "\n")
    run = forensics.analyze(load_run(log)).runs[0]
    assert [(d.before, d.after, d.step_before, d.step_after) for d in run.discontinuities] == [(0.0001, 0.0002, 60, 61)]


def test_nan_at_every_point_its_series_logged_is_one_stretch_whatever_else_was_logged(tmp_path: Path) -> None:
    """The grad norm logged every 10 steps and NaN at each of them from step 150, the LR logged at every step: "NaN/Inf
    at 6 of the 51 logged steps" counted the LR's steps (review). The count is over the steps its own series logged."""
    rows = ["_step,train/loss,train/grad_norm,train/lr"]
    for step in range(1, 201):
        logged = step % 10 == 0
        grad = ("nan" if step >= 150 else "1.0") if logged else ""
        rows.append(f"{step},{'2.0' if logged else ''},{grad},0.0001")
    csv = tmp_path / "wandb_export.csv"
    csv.write_text("\n".join(rows) + "\n")
    run = forensics.analyze(load_run(csv)).runs[0]
    [nan] = [a for a in run.anomalies if a.kind == "nan"]
    assert (nan.step, nan.end_step, nan.detail) == (150, 200, "NaN/Inf at steps 150-200: grad_norm NaN")
