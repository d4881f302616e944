"""Statements that logs the project had not seen (unseen-log trial and review, stop 46) showed false or missing; every
test here failed on the code before its fix."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import polars as pl
import pytest

import forensics
import parsers
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


def test_one_iteration_line_with_no_loss_is_said_to_print_none() -> None:
    """NVIDIA/Megatron-LM #663: one iteration line, "number of skipped iterations: 10", no lm loss field. The
    chronicle said "its 1 iteration line (step 10) prints a loss" (the negation came only with more than one line)."""
    path = REAL / "megatron" / "issue__NVIDIA+Megatron-LM__issue663_overlap_param_gather_excerpt.txt"
    assert ("- **No loss printed:** its 1 iteration line (step 10) prints no loss: it counts all the iterations of its "
            "interval as skipped (fp16 overflow), and Megatron prints no loss for such an interval. Still checked: "
            "NaN/Inf in every scalar.") in _lines(path)


VERL = REAL / "wandb" / "jianghoucheng_Agent_On_Policy_Distillation"


def test_an_underscore_that_may_be_a_decimal_point_states_no_size() -> None:
    """verl's run `qwen1_5b_opd` distils into DeepSeek-R1-Distill-Qwen-1.5B: the chronicle said "stated in its name:
    5.00B" (it read the 5b after the underscore); "1_5b" may be 1.5B as "llama2_7b" is Llama 2 7B: no size is stated."""
    path = VERL / "run-20251129_191857-8g5bqf9b"
    assert _analysis(path).findings.runs[0].model.parameters_stated is None
    assert not any("5.00B" in line for line in _lines(path))


def test_an_lr_logged_in_thousandths_is_the_lr() -> None:
    """verl's SFT trainer logs `train/lr(1e-3)` (0.00027027 at step 1, 0.01 at 37: its config's lr 1e-05 in units of
    1e-3); the chronicle listed it among the other scalars and said "Not found: lr, so the warm-up and the
    learning-rate schedule could not be checked"."""
    path = VERL / "run-20251130_025406-dq9a4cex"
    metrics = parsers.load_run(path).metrics
    lr = metrics.filter(pl.col("metric") == "lr").sort("step")
    assert lr.height == 372 and lr["value"].max() == pytest.approx(1e-05) and lr["step"][lr["value"].arg_max()] == 37
    lines = _lines(path)
    assert "- **Schedule:** LR peaks at 1e-05 (step 37); warm-up ends at step 37." in lines
    assert not any(line.startswith("- **Not found:** lr") for line in lines)


def test_an_lr_decaying_from_the_configured_one_before_its_first_point_is_no_mismatch() -> None:
    """Emon2358/serial-lain-ai: linear decay from 5e-05 with no warm-up, logged every 500 of 3100 steps; its first
    logged LR is 5e-05 x (1 - 500/3100) = 4.19e-05. The chronicle said "the logged LR of the last attempt peaks at
    4.19e-05 but its config's lr is 5e-05" and "LR peaks at ... (step 500); no warm-up seen"."""
    lines = _lines(REAL / "hf_output_dir" / "Emon2358_serial-lain-ai")
    assert not any("but its config's lr" in line for line in lines)
    assert ("- **Schedule:** LR is highest at the log's first point, 4.1935483750421554e-05 (step 500); a warm-up "
            "before step 500 would not show.") in lines


LLMC_CANCELLED = REAL / "llmc" / "HectorFCardenas_gpt2_train.11679031_excerpt.log"


def test_a_schedulers_cancel_glued_onto_a_step_line_ends_the_attempt() -> None:
    """HectorFCardenas/llm.c 11679031: its last line is `step 16256/19560 | loss nan (+nanz)| norm nan (slurmstepd:
    error: *** JOB 11679031 ON g002 CANCELLED AT 2024-10-11T13:44:45 ***`. The step line was read and the cancel was
    not: "The log ends before the planned length, with no end printed"."""
    [attempt] = _analysis(LLMC_CANCELLED).findings.runs[0].attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_step) == ("stopped", "cancelled", 16256)
    assert attempt.end_detail == "slurmstepd: error: *** JOB 11679031 ON g002 CANCELLED AT 2024-10-11T13:44:45 ***"
    assert attempt.end_trouble == "NaN from step 1"
    lines = _lines(LLMC_CANCELLED)
    assert not any("planned length" in line for line in lines)
    assert ("- **What went wrong:** attempt 1 stopped by the scheduler or a person after step 16256: “slurmstepd: "
            "error: \\*\\*\\* JOB 11679031 ON g002 CANCELLED AT 2024-10-11T13:44:45 \\*\\*\\*” (after NaN from step 1); "
            "NaN in the loss from step 1.") in lines


def test_llmcs_evaluation_before_its_first_step_is_at_step_0() -> None:
    """llm.c evaluates at the top of its loop: `val loss nan` before `step 1/19560` is the model before any update.
    It was "printed before the first line that gives a step: no step, not read", so the NaN at initialisation was
    lost and the first NaN was said to be at step 1."""
    run = parsers.load_run(LLMC_CANCELLED)
    val = run.metrics.filter(pl.col("metric") == "val_loss")
    assert val.select("step", "value").rows()[0][0] == 0 and math.isnan(val["value"][0])
    assert not any("before the first line that gives a step" in w for w in run.warnings)
    assert "  - step 0: **non finite** (val\\_loss): NaN/Inf in val\\_loss at step 0" in _lines(LLMC_CANCELLED)


def test_a_loss_whose_fall_is_not_judged_says_so_and_one_at_ln_2_says_where_it_sat() -> None:
    """FAST-GNN-SAT version_54: 19 train_loss points at 0.6931 (ln 2, a 50/50 guess), and nlp2-probing version_0, a
    probe whose loss wanders from 2.35 to 3.99 and back: neither chronicle said anything of whether the loss fell
    ("fell" None said nothing), nor that the first sat at ln 2 from its first point to its last (unseen-log trial
    s45)."""
    lines = _lines(REAL / "lightning" / "Jan21_FAST-GNN-SAT" / "version_54")
    assert ("- **Whether the loss fell, not judged:** 19 points, too few to say that it did not fall (20 needed); "
            "median 0.693051 over its first tenth of points, 0.693128 over its last (steps 49–949).") in lines
    assert ("- **The loss sat at ln 2 = 0.693147:** median 0.693051 over its first tenth of points, 0.693128 over its "
            "last (steps 49–949): the loss of a 50/50 guess between two classes.") in lines
    probe = _analysis(REAL / "lightning" / "Goreg12345_nlp2-probing-lms" / "version_0").findings.runs[0].learning
    assert (probe["fell"], probe["unjudged"], probe["first_top"]) == (None, "early_fall", 3.413884401321411)
    assert "chance" not in probe  # (2.79 to 2.95: near ln 10 = 2.303 at no end)
    # a fall within the noise is said to be (aloshdenny/kevin-token-compressor: -2.1% at a standard error of 0.04)
    assert ("- **Whether the loss fell, not judged:** median 2.15895 over its first tenth of points, 2.1129 over its "
            "last (steps 10–1000), a change of -2.1% that its noise leaves open (standard error 0.04027).") in _lines(
        REAL / "hf_trainer_state" / "aloshdenny_kevin-token-compressor")


def test_a_lightning_run_that_ended_its_planned_epochs_completed() -> None:
    """WarrenZhu050413/torchLoom: version_0 plans num_epochs 100 and its metrics.csv ends with epoch 99's epoch-end
    row (and `epoch=99-step=6300.ckpt`); version_1, the same plan, stops inside epoch 8 at step 514. Both were "the
    log ends with no end printed: still running, cut off, or stopped without a word"."""
    root = REAL / "lightning" / "WarrenZhu050413_torchLoom" / "lightning_logs"
    [done] = _analysis(root / "version_0").findings.runs[0].attempts
    assert (done.end_reason, done.end_kind, done.end_step) == ("completed", "training_ended", 6299)
    assert done.end_detail == ("epoch 99 ended, the last of the 100 its hparams plan (config.num_epochs 100): its "
                               "epoch-end metrics logged")
    # (the reader's own words, not a line of the log: not in quotation marks; review s46)
    assert ("| 1 | 4–6299 | – | – | – | – | completed after step 6299: epoch 99 ended, the last of the 100 its hparams "
            "plan (config.num\\_epochs 100): its epoch-end metrics logged |") in _lines(root / "version_0")
    [cut] = _analysis(root / "version_1").findings.runs[0].attempts
    assert (cut.end_reason, cut.end_step) == ("running", 514)
    [ten] = _analysis(root / "version_2").findings.runs[0].attempts
    assert (ten.end_reason, ten.end_step) == ("completed", 629)


def test_a_short_excerpt_that_begins_mid_run_says_so() -> None:
    """NVIDIA/Megatron-LM #756 (iterations 43-45 of 100) and gpt-neox PR #1000 (iteration 1000 of 10000): the
    chronicles had no start at all (a short attempt gets one line, and it did not say that the log begins mid-run)."""
    assert ("- attempt 1: steps 43–45 (new steps); the log begins mid-run, at step 43 of 100; the log ends with no end "
            "printed: still running, cut off, or stopped without a word") in _lines(
        REAL / "megatron" / "issue__NVIDIA+Megatron-LM__issue756_mixtral_excerpt.txt")
    assert any(line.startswith("- attempt 1: step 1000 (new steps); the log begins mid-run, at step 1000 of 10000; "
                               "crashed after step 1000") for line in _lines(
        REAL / "megatron" / "issue__EleutherAI+gpt-neox__pr1000_excerpt.txt"))


def test_a_run_that_trained_past_its_planned_length_says_so() -> None:
    """AntonioLopardo/OLMo grad_provenance_100: `max_duration=100`, then `[step=101/100]` ... `[step=110/100]` and
    "Training complete"; the chronicle said only "completed after step 110"."""
    lines = _lines(REAL / "olmo" / "AntonioLopardo_OLMo_1B_grad_provenance_100_train.log")
    assert "- **Trained past its planned length:** attempt 1 completed at step 110, 10 steps past the 100 planned." \
        in lines


def test_a_crash_after_a_dropped_network_request_is_blamed_on_the_source_not_the_program() -> None:
    """QIU023/torchtitan_attention_residual: trained to step 8810, then the Hugging Face Hub reset the connection
    while the data loader streamed allenai/c4 ("'[Errno 104] Connection reset by peer' thrown while requesting GET
    https://huggingface.co/datasets/allenai/c4/..."), and the loader's client raised "Cannot send a request, as the
    client has been closed". The chronicle blamed "an error in the program or its configuration"."""
    run = _analysis(REAL / "torchtitan" / "QIU023_torchtitan_attention_residual_crashed_excerpt.log").findings.runs[0]
    top = run.suspected_causes[0]
    assert top.kind == "network" and "program_error" not in {c.kind for c in run.suspected_causes}
    assert top.evidence[1].startswith("before attempt 1's error, after its last step, a request dropped: [rank0]:"
                                      "'[Errno 104] Connection reset by peer' thrown while requesting GET https://"
                                      "huggingface.co/datasets/allenai/c4/")


def test_the_timeline_says_which_clock_its_times_are_on() -> None:
    """verl's W&B run: the chronicle gave 2025-11-29 18:54:06 to 19:24:59 with no zone, while the run's own
    output.log stamps its last save 2025-11-30 03:24:53 (its machine at UTC+8): W&B's times are Unix times, shown in
    UTC; a Megatron log's are its machine's clock as printed, with no zone."""
    assert "**Times:** UTC where they come from wandb (Unix times)." in _lines(VERL / "run-20251130_025406-dq9a4cex")
    assert ("**Times:** as the megatron log printed them (the stamps' digits; a time zone printed with them is "
            "neither shown nor applied)."
            in _lines(Path(__file__).parent.parent / "sample_logs" / "tr8-104B-sample"))
    # (a folder whose timed source is TensorBoard says UTC of it alone: its trainer_state.json has no times)
    assert "**Times:** UTC where they come from tensorboard (Unix times)." in _lines(
        REAL / "hf_output_dir" / "Emon2358_serial-lain-ai")


def test_a_models_config_json_beside_the_trainer_state_gives_its_size() -> None:
    """Silver-8ce/llamaTest: a Trainer output directory with TinyLlama's `config.json` (22 layers, hidden 2048,
    intermediate 5632, 4 KV heads, vocabulary 32000, untied); the file was skipped as "no reader for this layout" and
    the size was "n/a"."""
    run = _analysis(REAL / "hf_output_dir" / "Silver-8ce_llamaTest").findings.runs[0]
    assert round(run.model.parameters_from_shape) == 1_100_048_384  # (TinyLlama-1.1B's count)
    assert "config.json" in {src["path"] for src in run.sources if src["format"] == "hf-model-config"}


def test_one_end_of_training_two_files_record_is_listed_once() -> None:
    """Emon2358/serial-lain-ai: the TensorBoard file and trainer_state.json both record the Trainer's summary (its
    runtime as float32, 3202.52978515625, and as printed, 3202.5299): the events listed two ends of training."""
    ends = [line for line in _lines(REAL / "hf_output_dir" / "Emon2358_serial-lain-ai") if "training ended" in line]
    assert ends == ["- attempt 1, after step 3100, 2024-06-29 07:24:59: training ended: training finished: the Trainer's "
                    "summary (train\\_runtime 3202.52978515625 s)"]
    # (one of the rows whole: its file, its time and its text, the TensorBoard file's; review s46)
    [entry] = [e for e in _analysis(REAL / "hf_output_dir" / "Emon2358_serial-lain-ai").findings.runs[0].log_entries
               if e.kind == "training_ended"]
    assert entry.source.endswith("events.out.tfevents.1719642696.6a29ce405cda.1269.0") and entry.wall_time is not None


def test_six_launches_that_each_died_in_argparse_are_six_attempts() -> None:
    """112292454/ChatGLM-Efficient-Tuning-main's nohup.out: six launches of train_bash.py, each printing its usage
    and dying on a bad argument (L138 --finetuning_type 'p-tuning', then --fp16 at L276 ... L828); the chronicle told
    one attempt and its first error, as if the user had launched once (unseen-log trial s45)."""
    [run] = _analysis(REAL / "console_errors" / "112292454_ChatGLM-Efficient-Tuning-main_nohup.out").findings.runs
    assert len(run.attempts) == 6
    assert "--finetuning_type: invalid choice: 'p-tuning'" in run.attempts[0].end_detail
    assert all(a.end_detail.startswith("train_bash.py: error: argument --fp16: Truthy value expected")
               and a.end_step is None for a in run.attempts[1:])


def test_a_torchtitan_launch_starts_at_its_first_line_not_its_first_step() -> None:
    """QIU023/torchtitan_attention_residual: "torchtitan version: 0.2.2" at 12:17:52, step 1 at 12:18:01; the timeline
    said "first step or event 12:17:57" and gave no duration (known since stop 44)."""
    lines = _lines(REAL / "torchtitan" / "QIU023_torchtitan_attention_residual_crashed_excerpt.log")
    assert any(line.startswith("| 1 | 1–8810 | 2026-04-19 12:17:52 | last step 2026-04-19 15:16:59 | 3.0 h |")
               for line in lines)


def test_the_reviews_inputs_against_this_stops_rules() -> None:
    """Review s46: inputs written to break this stop's rules (kept as fixtures/generated/review_s46_*); each assertion
    was false before its mend."""
    def run(name: str) -> forensics.RunFindings:
        return _analysis(GENERATED / f"review_s46_{name}").findings.runs[0]

    # a W&B upload's dropped request, before or after an unrelated error, is no cause; an error that is itself a
    # dropped connection is the network's
    for name in ("net1_wandb_reset_then_valueerror.log", "net3_reset_after_the_error.log"):
        assert run(name).suspected_causes[0].kind == "program_error", name
    assert run("net2_error_is_connection_reset.log").suspected_causes[0].kind == "network"
    # Lightning: a run killed inside its last epoch (a mid-epoch checkpoint, a validation epoch-end value mid-epoch)
    # did not complete; "warmup.epochs" plans no training
    for name in ("light1_killed_in_last_epoch", "light2_val_midepoch_last_epoch", "light3_warmup_epochs"):
        assert run(f"{name}/lightning_logs/version_0").attempts[0].end_reason == "running", name
    # a model config.json of experts or of an encoder and a decoder gives no dense count
    for name in ("hf2_mixtral_config", "hf3_t5_config"):
        assert run(name).model.parameters_from_shape is None, name
    # a language model's loss near 0.693 is no coin toss where its vocabulary (32000) is known
    assert "chance" not in run("hf1_lm_sft_loss_near_ln2").learning
    # a relaunch that died loading its checkpoint did not resume with nothing left to train
    crashed = run("meg3_relaunch_dies_loading_last_checkpoint.log").attempts[1]
    assert crashed.end_reason != "completed" and not crashed.nothing_left_to_train()
    assert not any("with no step to train" in line
                   for line in _lines(GENERATED / "review_s46_meg3_relaunch_dies_loading_last_checkpoint.log"))
    # the wait before an attempt whose clock is an upload's is not known either
    first = run("clock1_next_attempt_uploaded_at_once").attempts[0]
    assert first.downtime_after_s is None
    # a loss per setting, "train/loss(1e-05)", is not scaled as a unit
    assert parsers.load_run(GENERATED / "review_s46_wandb1_loss_per_weight_decay_history.jsonl").metrics.filter(
        pl.col("metric") == "loss").height == 0
    # a step table's zoned stamps are converted to UTC; a console's stamps are shown as printed, zone not applied
    assert any(line.startswith("**Times:** UTC where they come from step-table")
               for line in _lines(GENERATED / "review_s46_time4_step_table_iso_with_zone.csv"))
    assert ("**Times:** as the torchtitan log printed them (the stamps' digits; a time zone printed with them is "
            "neither shown nor applied).") in _lines(GENERATED / "review_s46_time1_torchtitan_stamps_utc_z.log")
    # a first iteration line at the first logging interval whose loss was not printed (its interval skipped: fp16's
    # start-up search) is the run's start, not a mid-run excerpt (a defect older than this stop)
    meg1 = GENERATED / "review_s46_meg1_first_interval_skipped_short.log"
    assert _analysis(meg1).findings.runs[0].attempts[0].begins_mid_run is False
    assert not any("begins mid-run" in line for line in _lines(meg1))
