"""Statements that real logs the project had not seen contradicted (an audit of 21 public logs, each chronicle read
against its raw lines): every test here failed on the code before its fix."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import polars as pl
import pytest

import forensics
import parsers
import reports
from forensics.findings import EndReason, Kind
from parsers import schema

REAL = Path(__file__).parent / "fixtures" / "real"
GENERATED = Path(__file__).parent / "fixtures" / "generated"


HP_METRIC_PLACEHOLDER = ("hp_metric -1 at step 0 (1 record): Lightning's placeholder, logged with the hyperparameters "
                         "at each launch (not a value the run computed); not read")


def _chronicle(path: Path) -> tuple[forensics.RunFindings, list[str]]:
    # (a fixture's chronicle is made once per test process; a test's own files each time)
    return _fixture_chronicle(path) if REAL in path.parents else _made(path)


def _findings(path: Path) -> forensics.Findings:
    # (a fixture's findings are made once per test process and only read; a test's own files each time)
    return _fixture_findings(path) if REAL in path.parents else forensics.analyze_path(path).findings


@cache
def _fixture_findings(path: Path) -> forensics.Findings:
    return forensics.analyze_path(path).findings


def _made(path: Path) -> tuple[forensics.RunFindings, list[str]]:
    findings = _findings(path)
    return findings.runs[0], reports.render(findings, "markdown").splitlines()


_fixture_chronicle = cache(_made)


def test_a_console_that_prints_no_step_beside_its_trainer_state_is_not_put_before_it() -> None:
    """Jaong/Checkpoint-of-CPT: cmd.txt (the console, its dicts numbered 1-10) was put in front of trainer_state.json's
    steps 500-5000, and its copy of the first value became "loss spike at step 500 (3.5x the trailing median)"."""
    run, lines = _chronicle(REAL / "hf_output_dir" / "Jaong_Checkpoint-of-CPT")
    assert run.anomalies == []
    assert run.coverage["metrics"]["loss"]["points"] == 10 and run.coverage["metrics"]["loss"]["first_step"] == 500
    assert run.warnings == ["cmd.txt: its metrics lines also print eval_gen_len, eval_rouge-1, eval_rouge-2, "
                            "eval_rouge-l, eval_runtime, eval_samples_per_second, eval_steps_per_second: not read, so "
                            "nothing here checks them or rests on them",
                            "cmd.txt: it prints no step, and another file of the run logs its metrics at their steps: "
                            "its 50 points (epoch, grad norm, loss, lr, val loss) were not used"]
    # logging_steps 500 and the first entry at step 500 (epoch 0.91): the history is whole, not an excerpt
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.begins_mid_run, attempt.end_reason) == (500, False, "completed")
    assert not any("mid-run" in line for line in lines)
    # the console alone: the Trainer's closing summary is the end of training
    [alone] = forensics.analyze_path(REAL / "hf_output_dir" / "Jaong_Checkpoint-of-CPT" / "cmd.txt").findings.runs[0] \
        .attempts
    assert (alone.end_reason, alone.end_kind) == ("completed", "training_done")
    assert alone.end_detail == "Training completed. Do not forget to share your model on huggingface.co/models =)"


def test_two_ranks_printing_each_dict_is_one_point_per_log() -> None:
    """JIA-Lab-research/MGM #98: every dict printed twice (lines 1 = 2, 3 = 4, ...) read as 19 points, and the LR's
    ordinary warm-up increments as nine "discontinuities in one jump"."""
    run, _ = _chronicle(REAL / "hf_trainer" / "mgm_issue98_rank_copies_loss0.txt")
    assert run.coverage["metrics"]["loss"]["points"] == 10
    assert run.discontinuities == []
    assert any(w.endswith("9 metrics lines repeat the step, loss and time of the line before (first: step 1, line 1): "
                          "the same line printed again as it was (by several ranks, or a console redraw kept in a "
                          "paste), each step read once") for w in run.warnings)
    [zero] = run.anomalies
    assert (zero.kind, zero.step, zero.end_step, zero.baseline) == ("zero_loss", 2, 10, 1.4138)


def test_a_run_whose_loss_and_grad_norm_are_zero_is_not_all_clear() -> None:
    """zai-org/GLM-4 #260: six dicts with 'loss': 0.0 and 'grad_norm': 0.0 read "Anomalies: none found"."""
    run, lines = _chronicle(REAL / "hf_trainer" / "glm4_issue260_loss0_gradnorm0.txt")
    assert [(a.kind, a.step, a.end_step) for a in run.anomalies] == [("zero_loss", 1, 6)]
    assert not any("none found" in line for line in lines)


def test_a_run_that_completed_its_steps_is_completed_not_diverged() -> None:
    """Tanisha-anshu/OpenAi-Whisper-small-Braj: global_step 2640 of max_steps 2640 with should_training_stop, and its
    loss above where it was at step 500 from step 1000 on: "How it ended: diverged". It completed; the divergence is
    what happened in it."""
    run, _ = _chronicle(REAL / "hf_trainer_state" / "Tanisha-anshu_OpenAi-Whisper-small-Braj")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_detail) == (
        "completed", "reached the last iteration; its loss had diverged from step 1000 and was not back by then")
    assert [a.step for a in run.anomalies if a.kind == "divergence"] == [1000]


def test_a_ranks_error_behind_its_launcher_prefix_is_the_crash_not_torchruns_wrapper() -> None:
    """fyh2001/megatron-sft-recipes: each rank prints '[rank2]: torch._inductor.exc.InductorError: AssertionError: ...'
    and torchrun then 'ChildFailedError'; the prefix hid the ranks' error, so the wrapper was quoted as the cause."""
    run, _ = _chronicle(REAL / "console_errors" / "megatron-sft-recipes_gemma4_compile_crash_stdout.log")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_step) == ("crashed", "error", 2)
    assert attempt.end_detail == ("[rank2]: torch._inductor.exc.InductorError: AssertionError: "
                                  "-56034992939621/250000000000000")
    assert [c.kind for c in run.suspected_causes] == ["program_error"]


def test_two_launches_that_printed_no_settings_are_not_said_to_have_changed_nothing(tmp_path: Path) -> None:
    """A how-to's two `mpirun --np 8` / `--np 16` launches of Megatron-LM, iteration lines only (its page could not be
    tied to a repository, so its shape is rebuilt here): only train_iters, read off "iteration 10/  500000", was
    known of either launch, and attempt 2 read "What changed: nothing"."""
    line = (" [2024-09-03 15:{m:02d}:00] iteration {i:8d}/  500000 | consumed samples: {c:12d} | elapsed time per "
            "iteration (ms): 12000.0 | learning rate: 1.000E-05 | global batch size:  1024 | lm loss: {loss:.6E} | "
            "loss scale: 131072.0 | grad norm: 5.000 | number of skipped iterations:   0 | number of nan iterations:"
            "   0 |")
    launch = [line.format(m=i // 10, i=i, c=i * 1024, loss=9.0 - i / 100) for i in range(10, 110, 10)]
    (tmp_path / "two.log").write_text("\n".join(["$ mpirun --np 8 bash train.sh", *launch,
                                                 "$ mpirun --np 16 bash train.sh", *launch]) + "\n")
    run, lines = _chronicle(tmp_path / "two.log")
    assert [(a.start_step, a.config_compared) for a in run.attempts] == [(10, False), (10, False)]
    assert "- **What changed:** no config to compare." in lines


def test_a_pasted_logs_elisions_are_holes_whatever_the_steps_around_them() -> None:
    """ROCm/rocm-blogs' megablocks README: iterations 100, 1000 and 2000 with "..." between them. Three points have
    no usual spacing to find holes by, so the hole was bridged: the checks compared 100, 1000 and 2000 as
    consecutive points, and no hole was listed."""
    run, lines = _chronicle(REAL / "megatron" / "ROCm+rocm-blogs__megablocks_README_gpt2_dense_elided.txt")
    assert [(g.attempt, g.after_step, g.before_step) for g in run.gaps] == [(1, 100, 1000), (1, 1000, 2000)]
    assert "- attempt 1: no data between steps 100 and 1000" in lines
    # each point is a stretch of its own: no spike check had a point before it to compare with
    assert run.coverage["spike_checks"]["loss"]["1"]["absolute_only"] == 0
    assert run.attempts[0].end_reason == "completed"


def test_the_largest_rise_is_said_where_the_noise_allowed_it() -> None:
    """An ms-swift run's grad norm rose 61x (789.6 at step 59) with "Anomalies: none found" and nothing else said of
    it: in a run whose noise is this wide, "no spike" must not read as "no rise". The thresholds line says how far
    the metric rose. llm.c's 'norm:4.29' at step 8715 (line 8785 of the fixture) stands 13.8x over the points before
    it, within a grad-norm noise that needs 141 robust sigmas for a lone point."""
    run, lines = _chronicle(REAL / "llmc" / "SiddanthEmani_log124M_main.log")
    assert run.coverage["spike_checks"]["grad_norm"]["1"]["largest_rise"] == {
        "ratio": pytest.approx(13.8387, abs=1e-4), "step": 8715, "value": 4.29}
    [limits] = [line for line in lines if line.startswith("- **Grad norm spike thresholds**")]
    assert limits.endswith("(fitted on 19,542 points; its largest rise: 13.8x the lower median of the 8 points before, to "
                           "4.29 at step 8715; 9 more with too little history before them (the first of the attempt "
                           "or after a gap), the absolute checks only; 1 with no point before it in its stretch of the log, "
                           "not judged).")
    assert not [a for a in run.anomalies if a.kind == "grad_norm_spike"]


def test_a_lightning_sweep_reads_its_per_step_loss_its_lr_monitor_and_each_versions_own_settings() -> None:
    """Giventicket/FlavorDiffusion, 8 Lightning versions: the loss was the 10-point train/loss_epoch (so "Not
    judged") over the 50-400-point train/loss_step; "Not found: lr" beside lr-AdamW (the LearningRateMonitor); every
    hparams.yaml joined the last attempt, so "config CSP_train differs between sources" x 5; and TensorBoard's
    1000.0 against the YAML's 1000 (0.0 against false) "differed" 13 more times. Each version starts at step 0 with
    settings of its own (a 2x4 sweep): eight runs, not one run's eight attempts."""
    findings = _findings(REAL / "tensorboard" / "Giventicket_FlavorDiffusion")
    runs = findings.runs
    assert [r.name for r in runs] == [f"lightning_logs/version_{n}" for n in range(8)]
    assert [len(r.attempts) for r in runs] == [1] * 8
    assert {tuple(r.coverage["metrics"]["loss"]["source_tags"]) for r in runs} == {("train/loss_step",)}
    assert {tuple(r.coverage["metrics"]["lr"]["source_tags"]) for r in runs} == {("lr-AdamW",)}
    # (each version's only warning: Lightning's hp_metric placeholder, not read as a value)
    assert [[w.split(": ", 1)[1] for w in r.warnings] for r in runs] == [[HP_METRIC_PLACEHOLDER]] * 8
    assert [r.config["batch_size"] for r in runs] == [256.0, 256.0, 64.0, 64.0, 16.0, 16.0, 4.0, 4.0]
    lines = reports.render(findings, "markdown").splitlines()
    assert not any(line.startswith("- **Not found:** lr") for line in lines)


def test_a_shape_says_what_it_assumed_never_prints_a_default_as_read() -> None:
    """FlavorDiffusion's hparams give n_layers 12 and hidden_dim 256 only: the Setup said "ffn_hidden_size=1024,
    num_attention_heads=1" as if read (a 4x default and a placeholder)."""
    _, lines = _chronicle(REAL / "tensorboard" / "Giventicket_FlavorDiffusion")
    shapes = {line for line in lines if line.startswith("- **Shape:**")}  # (one per version: the same settings)
    assert shapes == {"- **Shape:** num\\_layers=12, hidden\\_size=256, gated\\_mlp=False, tied\\_embeddings=True; "
                     "assumed, not in the config: ffn\\_hidden\\_size = 4 x hidden\\_size."}


def test_a_keras_runs_validation_writer_is_its_validation_not_a_second_launch() -> None:
    """TheCodeheadMT/TensorBoard-Tutorial: Keras writes train/ and validation/ event files from one process (same
    host and pid), both for 73 s. The validation writer was "attempt 2" (so attempt 1 "ended: attempt 2 started
    next"), its epoch_loss that attempt's training loss, and its evaluation_loss_vs_iterations (steps 1500-15000)
    put it at "steps 0-15000"."""
    run, _ = _chronicle(REAL / "tensorboard" / "TheCodeheadMT_TensorBoard-Tutorial")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step) == (0, 9)
    assert run.coverage["metrics"]["val_loss"]["points"] == 10
    assert run.coverage["metrics"]["loss"]["points"] == 10


def test_a_wandb_history_that_stops_short_of_its_summary_says_so(tmp_path: Path) -> None:
    """aorvieto/VerySimpleTransformer: the .wandb file's history ends at step 3918 while its wandb-summary.json says
    the run reached step 62509 (after 53 min): the chronicle read "ran 3 minutes, reached step 3918" with nothing to
    say the rest was not in the file. Rebuilt on a real run directory (jackokeefe11/nanoGPT) whose summary is given
    a later _step."""
    import json
    import shutil

    run_dir = tmp_path / "run-20240215_023758-f656tyfr"
    shutil.copytree(REAL / "wandb" / "jackokeefe11__nanoGPT" / "wandb" / run_dir.name, run_dir)
    summary = run_dir / "files" / "wandb-summary.json"
    # (its steps are nanoGPT's iter, the run's step axis: the summary's iter is where it got to; its _step counts
    # W&B's log calls, a count of another kind, and alone it says nothing of the steps)
    original = json.loads(summary.read_text())
    summary.write_text(json.dumps({**original, "_step": 62509}))
    alone, _ = _chronicle(run_dir)
    assert not any("summary says it reached" in w for w in alone.warnings)
    summary.write_text(json.dumps({**original, "_step": 62509, "iter": 62509}))
    run, _ = _chronicle(run_dir)
    assert any(w.endswith("its history ends at step 0, but the run's summary says it reached step 62509: the rest "
                          "of its history is not in the file (cut, or copied while the run was writing it)")
               for w in run.warnings)
    unchanged, _ = _chronicle(REAL / "wandb" / "jackokeefe11__nanoGPT" / "wandb" / run_dir.name)
    assert not any("summary says it reached" in w for w in unchanged.warnings)
    # the audited file was also cut mid-record: that warning says where, this one how much of the run is missing


def test_a_short_attempt_is_judged_against_its_whole_length_not_one_point() -> None:
    """FlavorDiffusion version_0: 50 train/loss_step points, 0.151 among values of 0.11-0.13 at step 649. Every point
    of a stretch under 50 points is left out of the tail fit, and the family-wise threshold was then computed as for
    an attempt of one point: the 6-sigma screen, and an incident. Over its 40 judged points, t(3) noise needs 19.6
    robust sigmas for a lone point: a blip."""
    run, _ = _chronicle(REAL / "tensorboard" / "Giventicket_FlavorDiffusion")
    assert run.coverage["spike_checks"]["loss"]["1"]["lone_point_sigma"] == 19.58
    assert not [a for a in run.anomalies if a.attempt == 1]
    assert [(b.attempt, b.metric, b.largest_step) for b in run.blips] == [(1, "loss", 649)]


def test_a_log_whose_only_error_is_a_python_exception_past_its_first_line_is_read_for_it(tmp_path: Path) -> None:
    """The errors-only check matched its line-anchored patterns (a Python exception, Ctrl-C) only at the start of the
    text: a log whose one fatal line is a Python exception on line 3 was "not a recognised training log"."""
    log = tmp_path / "job.log"
    log.write_text("loading data\nbuilding model\nValueError: tokenizer vocabulary does not match the model\n")
    run, _ = _chronicle(log)
    assert [src["format"] for src in run.sources] == ["text (errors only)"]
    assert (run.attempts[0].end_reason, run.attempts[0].end_detail) == (
        "crashed", "ValueError: tokenizer vocabulary does not match the model")


WANDB_10B_TOKENS = REAL / "wandb" / "ADIOCLASSMATE__Bag-of-tricks-for-Transformers" / "wandb" / "baseline-fixed_tokens_10b"


def test_a_token_budget_is_not_a_model_size_and_a_rise_is_over_the_median_it_names() -> None:
    """A clean 17M-parameter W&B run named '...-baseline-fixed_tokens_10b' (a 10B-token budget) read "stated in its
    name: 10.00B", with the model_params it logged (17039360) unread, and "its largest rise: 3.7x the median of the 8
    points before, to 2.7151 at step 1400": the median of those 8 points is 3.0959 (0.88x); the 3.7x was over the
    trend-following level the detector judges against. Its five train/lr_* scalars went unnamed under "Not found"."""
    run, lines = _chronicle(WANDB_10B_TOKENS)
    assert (run.model.parameters_stated, run.model.parameters_logged, run.model.size_headline) == (None, 17039360.0, "")
    assert "- **Parameters** from its shape: n/a; printed by the program: 17.0M; stated in its name: n/a." in lines
    # loss 2.3290 at step 10800 over the lower median of steps 9200-10600 (as an incident's baseline is): under 1.5x,
    # so not said
    assert run.coverage["spike_checks"]["loss"]["1"]["largest_rise"] == {
        "ratio": pytest.approx(1.0569, abs=1e-4), "step": 10800, "value": 2.3290107250213623}
    assert not any("largest rise" in line for line in lines)
    assert ("- **Not found:** lr (named like one, not taken as it: train/lr\\_head, train/lr\\_matrix, train/lr\\_scalar, "
            "train/lr\\_scale, train/lr\\_tok), so the warm-up and the learning-rate schedule could not be checked."
            ) in lines
    # a clock time is not a size either (stark-sim's "power_lowfreq_20260312_113029b.log": "not 113029B")
    from forensics.model_shape import stated_parameters
    assert stated_parameters("power_lowfreq_20260312_113029b.log") is None


def test_a_loss_that_goes_below_zero_is_not_judged_in_ratios() -> None:
    """An RL policy loss (ijinyu1113/Learned-Remasking-Policy-for-dLLM, -0.0012 to 0.0006) read "diverged from step 538,
    not back at any later logged point; still 0 at step 2000" (1,456 later points are at or below 0.0002: the
    detectors saw only its 115 positive points), blamed the warm-up's end for it, and called its zeros "no training
    signal" while the grad norm was non-zero at 1,728 points."""
    run, lines = _chronicle(REAL / "hf_output_dir" / "ijinyu1113_Learned-Remasking-Policy-for-dLLM")
    assert not [a for a in run.anomalies if a.kind in ("divergence", "loss_spike", "zero_loss")]
    assert run.attempts[0].end_reason != "diverged" and not run.suspected_causes
    assert run.coverage["spike_checks"]["loss"]["1"] == {"statistical": 0, "absolute_only": 0,
                                                        "negative": {"value": -0.0012, "step": 1106}}
    assert ("- **Not judged:** attempt 1's loss goes below 0 (-0.0012 at step 1106): not a cross-entropy, so not judged "
            "for spikes or divergence; its loss went from 0 (step 1) to 0.0006 at its highest (step 538), and was 0 at "
            "its last step (2000).") in lines
    assert any(line.startswith("- **History ends at a checkpoint:** attempt 1's trainer_state.json ends at step 2000 of "
                               "14973") for line in lines)


def test_a_zero_loss_with_a_gradient_is_not_called_no_training_signal() -> None:
    """TRL #3452: GRPO prints 'loss': 0.0 while its grad norm is 0.087-0.106 (expected, says the maintainer); the
    chronicle's first anomaly was "zero loss ... no training signal". A zero loss with a NaN or zero grad norm still is
    one (SY-Xuan/Pink #6, THUDM/GLM-4 #260)."""
    run, _ = _chronicle(REAL / "hf_trainer" / "trl_issue3452_grpo_loss0_excerpt.txt")
    assert [a.kind for a in run.anomalies] == []
    for name in ("pink_issue6_gradnorm_nan_padded_excerpt.txt", "glm4_issue260_loss0_gradnorm0.txt"):
        run, _ = _chronicle(REAL / "hf_trainer" / name)
        assert "zero_loss" in [a.kind for a in run.anomalies], name


PROTBERT = REAL / "tensorboard" / "arashmozhdeh_Protbert"


def test_lightning_values_logged_per_evaluation_batch_are_not_training_steps() -> None:
    """arashmozhdeh/Protbert: Lightning writes val_*_step at a count of validation batches (0-1418 over 11
    validations), read as training steps: "First anomaly: hang at step 0", ten 14-minute "hangs" (each a training
    epoch between validations) and "how far it got: step 1418" where training reached 313. Its LR, logged as
    learning_rate/pg1, was "Not found"."""
    run, lines = _chronicle(PROTBERT / "single")
    assert not [a for a in run.anomalies if a.kind == "hang"]
    # (its first record is a validation at step 28; the 0 was Lightning's hp_metric placeholder)
    assert [(a.start_step, a.end_step) for a in run.attempts] == [(28, 313)]
    assert ("version_23219164/events.out.tfevents.1696344740.mg2.4093021.0: 5 scalar(s) logged per evaluation batch "
            "(val_BinaryAccuracy_step, val_BinaryAveragePrecision_step, val_BinaryF1Score_step, ...): their steps "
            "count evaluation batches, not training steps; not used (their per-evaluation means, the _epoch twins, "
            "are)") in run.warnings
    assert run.coverage["metrics"]["lr"]["source_tags"] == ["learning_rate/pg1"]
    assert not any(line.startswith("- **Not found:** lr") for line in lines)


def test_a_step_the_epoch_counter_logs_again_is_not_a_restart_and_object_addresses_are_not_changes() -> None:
    """Two Protbert sweep jobs: Lightning logs 'epoch' at a validation's step (5) and then at the training step
    before it (4), and that went-back step of the busiest tag made a restart inside one file and one process
    (attempts "0-5" then "4", overlapping in time). Every job's hparams hold reprs with memory addresses
    ('<...LearningRateMonitor object at 0x7f9b338ebf10>'), shown as what changed between jobs. The two jobs both
    start at step 0 on different hosts: two runs."""
    analysis = forensics.analyze_path(PROTBERT / "lightning_logs")
    assert [(r.name, [(a.start_step, a.end_step) for a in r.attempts]) for r in analysis.findings.runs] == [
        ("version_23120771", [(0, 5)]), ("version_23120776", [(0, 5)])]
    assert [r.config["prog_hostname"] for r in analysis.findings.runs] == ["fg3", "mg6"]
    assert not any("object at 0x" in line for line in reports.render(analysis.findings, "markdown").splitlines())
    # and the single job (another host, a week later, its first record a validation at step 28, not step 0 once the
    # hp_metric placeholder is not read) is a run of its own, not a resume of the last job (review of this change)
    analysis = forensics.analyze_path(PROTBERT)
    assert [(r.name, [(a.start_step, a.end_step) for a in r.attempts]) for r in analysis.findings.runs] == [
        ("lightning_logs/version_23120771", [(0, 5)]), ("lightning_logs/version_23120776", [(0, 5)]),
        ("single/version_23219164", [(28, 313)])]


def test_the_hparams_file_of_a_trainer_launch_is_the_same_launch() -> None:
    """Alvi-Rahman/Transformers logs/: each Hugging Face Trainer launch writes its event file and, through torch's
    add_hparams, a second one in a sub-folder named for the time (same process, same second): 32 attempts for 16
    launches; and the hparams plugin's floats (0.0, 3.0) against the text summary's 0, false, 3 filled the config
    differences with every setting."""
    run, _ = _chronicle(REAL / "tensorboard" / "Alvi-Rahman_Transformers" / "logs")
    assert len(run.attempts) == 16
    assert "num_train_epochs" not in run.config_diffs and "adafactor" not in run.config_diffs
    assert run.config_diffs["architectures"]["12"] == ["T5ForConditionalGeneration"]
    assert run.config_diffs["architectures"]["13"] == ["PegasusForConditionalGeneration"]


def test_checks_that_had_nothing_to_read_are_not_said_to_have_found_nothing() -> None:
    """transformers #9996: Trainer dicts with 'learning_rate': 0.0 beside DeepSpeed's 'step=2000, skipped=1999' read
    "the other checks (NaN, loss scale, skipped iterations, hangs) found nothing" (no loss scale, no skipped count and
    no time was read) and "LR peaks at 0 (step 1); no warm-up seen"."""
    _, lines = _chronicle(REAL / "hf_trainer" / "transformers_issue9996_lr0_skipped1999_excerpt.txt")
    assert not any("found nothing" in line for line in lines)  # (DeepSpeed's count of skipped steps is read)
    assert ("- **Schedule:** LR logged as 0 at every point: if that is the rate the optimizer used, no step moved the "
            "weights (a schedule that never started, or every step skipped).") in lines
    assert not any("peaks at 0" in line for line in lines)


def test_a_start_up_search_whose_count_is_cut_is_not_said_to_have_stopped_skipping() -> None:
    """NVIDIA/nccl #743: 10 skipped by iteration 10 (scale 8388608), then the iteration-20 line is cut before its
    skipped count while its scale is 32768 (eight more halvings): the chronicle said "then nothing more skipped"."""
    _, lines = _chronicle(REAL / "megatron" / "issue__NVIDIA+nccl__issue743_megatron_bert_cut.txt")
    assert ("- attempt 1: fp16 start-up loss-scale search, the scale fell from 8388608 to 32768 over steps 10–20 with at "
            "least 10 iterations skipped (1 logged point with no count), and the log of the attempt ends before it "
            "settled (normal: dynamic loss scaling looking for its first scale, not a collapse).") in lines
    assert not any("nothing more skipped" in line for line in lines)


def test_a_trainer_checkpoint_save_is_read() -> None:
    """'Saving model checkpoint to .../checkpoint-200' (2200xiaohu/LMSYS, a console stopped by Ctrl-C) was not read:
    the chronicle said "no checkpoint save appears in the logs". The ms-swift console here saves at 40, 80 and 120."""
    import parsers
    run = parsers.load_run(REAL / "hf_trainer" / "mswift_qwen3_17b_effective.train.log")
    saves = run.events.filter(run.events["kind"] == "checkpoint_saving")
    assert saves["value"].to_list() == [40.0, 80.0, 120.0]


def test_a_fine_tune_from_a_checkpoint_at_iteration_0_is_not_from_scratch() -> None:
    """stark-sim Qwen2.5-7B: 'finetune True' and "successfully loaded checkpoint from ... at iteration 0" (line 1729)
    read "Start: from scratch"."""
    run, lines = _chronicle(
        REAL / "megatron" / "stark-sim+megatron-deepspeed-lock-clock__eth_real_qwen25_7b_static1395_finetune.log")
    [attempt] = run.attempts
    assert (attempt.loaded_weights, attempt.resumed_from_step, attempt.end_reason) == (True, None, "completed")
    assert ("- **Start:** from weights loaded from a checkpoint, its steps counted from the start (a fine-tune, or a "
            "training begun from loaded weights).") in lines


def test_early_stopping_is_a_planned_stop_and_a_loss_that_settled_after_a_warm_up_rise_is_not_a_divergence() -> None:
    """ByErenOzer/Whisper_Finetune: EarlyStoppingCallback (patience 5, counter 5, should_training_stop) stopped it at
    step 1500 of max_steps 10990; the chronicle said "completed", and "divergence from step 300": the loss fell to
    0.118 at step 125, rose to ~0.31 while the LR warmed up to 1e-4 (step 525), and was back to 0.17-0.18 from step
    1125 on."""
    run, _ = _chronicle(REAL / "hf_output_dir" / "ByErenOzer_Whisper_Finetune")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind) == ("exited", "exit")
    assert attempt.end_detail == ("stopped early by its EarlyStoppingCallback at step 1500 of max_steps 10990: 5 "
                                  "evaluations in a row without improvement (patience 5); its best: step 250")
    assert not [a for a in run.anomalies if a.kind == "divergence"]


def test_litgpt_consoles_are_read_and_a_loss_that_does_not_move_is_said() -> None:
    """LitGPT's 'iter N step M: loss X, iter time: Y ms' was refused as not a training log: its #628 excerpt holds a
    jump from 1.7019 (iter 1151) to 11.4630 (iter 1152); its #689 excerpt prints loss 10.8259 (ln 50,304: a uniform
    guess) at every iteration, and a loss that never moves is a finding of its own."""
    run, _ = _chronicle(REAL / "litgpt" / "issue628_codellama_spike_excerpt.txt")
    spike = next(a for a in run.anomalies if a.kind == "loss_spike")
    assert (spike.step, spike.value, spike.baseline) == (1152, 12.1935, 1.7019)
    assert any("its iters count micro-batches and its steps optimizer steps" in w for w in run.warnings)
    run, _ = _chronicle(REAL / "litgpt" / "issue689_flat_excerpt.txt")
    [frozen] = [a for a in run.anomalies if a.kind == "frozen_loss"]
    assert (frozen.step, frozen.end_step, frozen.value) == (76, 98, 10.8259)
    assert frozen.detail.startswith("loss logged as 10.8259 at every one of 23 points in a row, from step 76 to 98: ")


def test_a_slurm_err_that_holds_only_the_time_limit_is_read_for_it() -> None:
    """spyysalo/lumi-llm-scaling: the job's .err holds module notices and slurm's 'CANCELLED ... DUE TO TIME LIMIT':
    alone it was refused ("no metrics lines"), beside its .out it was skipped and the run read "the log ends with no
    end printed"; and the end quoted srun's 'Job step aborted', printed before the line that says why."""
    run, _ = _chronicle(
        REAL / "console_errors" / "spyysalo+lumi-llm-scaling__meg-ds_experiments_175B-scaling-comms_64-node.err")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind) == ("stopped", "time_limit")
    assert attempt.end_detail == ("0: slurmstepd: error: *** STEP 3660463.0 ON nid005740 CANCELLED AT "
                                  "2023-06-09T17:33:54 DUE TO TIME LIMIT ***")
    # the scheduler said why: not "stopped by the scheduler or a person" at 0.30
    [cause] = run.suspected_causes
    assert (cause.kind, cause.cause, cause.confidence) == (
        "stopped", "the job's time limit: the scheduler stopped it, as its own line says", 0.9)


def test_a_console_that_prints_its_planned_steps_completes_at_them() -> None:
    """KellerJordan/modded-nanogpt's 1B record ends 'step:20344/20344 train_loss:2.8204' and its final validation:
    "the log ends with no end printed: still running, cut off, or stopped without a word" (the '/20344' was not
    read)."""
    run, _ = _chronicle(REAL / "modded_nanogpt" / "KellerJordan_scaleup1b_87bd51fd_last120.txt")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_step, attempt.target_step) == ("completed", 20344, 20344)
    # the parameter-golf excerpt stops at step 1000 of 20000: not completed
    run, _ = _chronicle(REAL / "modded_nanogpt" / "parameter-golf_issue839_start.txt")
    assert run.attempts[-1].target_step == 20000 and run.attempts[-1].end_reason != "completed"


def test_a_spike_followed_by_a_zero_loss_is_not_a_divergence_nor_the_end_of_the_log() -> None:
    """tloen/alpaca-lora #418: a loss of 61674848 at the 15th dict, then 'loss': 0.0 five times and 'eval_loss': nan.
    The chronicle said "the log of the attempt ends here" of the spike and "diverged": the zeros were left out of the
    ratios, so nothing seemed to follow."""
    run, _ = _chronicle(REAL / "hf_trainer" / "alpaca-lora_issue418_spike_then_loss0_evalnan.txt")
    assert [(a.kind, a.step, a.end_step) for a in run.anomalies] == [
        ("loss_spike", 15, 15), ("zero_loss", 16, 20), ("non_finite", 20, 20)]
    assert run.anomalies[0].detail.endswith("; then logged as 0 from step 16")
    assert run.attempts[0].end_reason != "diverged"


def test_the_start_of_a_log_every_100_steps_is_the_start_of_training() -> None:
    """anthonyrathe/fixed-whisperv2-flemish, a clean fine-tune logged every 100 steps: 'loss spike at step 800'
    (0.4013 after 0.7504, 0.3565, 0.2271, 0.2206, 0.2448, 0.1832, 0.1504) with "instability after the warm-up" as
    its cause. Its first point is step 100, so the start-of-training burn-in did not apply ("before step 100"),
    and the absolute check took a loss back at a level it had left five points before for a spike."""
    run, _ = _chronicle(REAL / "hf_output_dir" / "anthonyrathe_fixed-whisperv2-flemish")
    assert run.anomalies == [] and run.attempts[0].end_reason == "completed"
    assert not [c for c in run.suspected_causes if c.kind == "warmup"]


def test_a_python_tag_in_hparams_costs_nothing_but_itself() -> None:
    """daankaasjager/thesis_final_coding: Lightning wrote '!!python/object:src.tokenizer.SelfiesTokenizer' into every
    hparams.yaml (a module that keeps its tokenizer); the safe loader refused it, and with it the version's plain
    metrics.csv ("no readable training logs", exit 2). The tag's node is read as the plain mapping it holds;
    nothing is instantiated."""
    import parsers
    run = parsers.load_run(REAL / "lightning" / "daankaasjager_thesis_final_coding" / "version_10")
    assert run.metrics.filter(run.metrics["metric"] == "loss").height == 373
    settings = dict(run.configs.select("key", "value").iter_rows())
    assert settings["config.lr_scheduler.num_warmup_steps"] == "2500"
    assert not any("cannot read hparams" in w for w in run.warnings)


def test_gemma_is_gated_and_its_8x_ffn_is_not_a_setup_fault() -> None:
    """ananyakaligal/Gemma2B-Finetuning: Gemma-2b's config (hidden_act gelu, hidden_activation gelu_pytorch_tanh,
    intermediate_size 16384 = 8x hidden 2048) read as an ungated MLP: 1.90B from its shape (it has 2.51B) and the
    setup finding "ffn_hidden_size 16384 is 8.00x hidden (expected 8192)"."""
    run, _ = _chronicle(REAL / "tensorboard" / "ananyakaligal_Gemma2B-Finetuning")
    assert run.model.shape["gated_mlp"] is True and run.model.notes == []
    assert round(run.model.parameters_from_shape / 1e9, 2) == 2.51


def test_a_program_that_fails_after_its_training_is_not_all_clear_and_distilbert_has_its_width() -> None:
    """tsebaka/T-Lab-2024-LLM-Alignment: the Trainer's summary, then 'Error executing job' and a ConfigAttributeError
    in the next stage (W&B exit code 1) read "What went wrong: no attempt ended in ... a crash". DistilBERT's config
    (dim 768, hidden_dim 3072: its FFN) gave hidden_size 3072 and 770.4M from its shape (it has 65.8M)."""
    run, lines = _chronicle(REAL / "wandb" / "tsebaka__T-Lab-2024-LLM-Alignment" / "wandb"
                            / "run-20241216_135818-xmayk974")
    [attempt] = run.attempts
    assert attempt.end_reason == "completed"
    assert attempt.failed_after_training == "omegaconf.errors.ConfigAttributeError: Key 'I' is not in struct"
    [went] = [line for line in lines if line.startswith("- **What went wrong:**")]
    assert went.endswith("; then the program failed after its training: “omegaconf.errors.ConfigAttributeError: "
                         "Key 'I' is not in struct”.")
    assert (run.model.shape["hidden_size"], run.model.shape["ffn_hidden_size"]) == (768, 3072)
    assert round(run.model.parameters_from_shape / 1e6, 1) == 65.2


def test_the_trainers_summary_in_an_event_file_is_the_end_of_training() -> None:
    """wisdom-pan/ChatGLM-LoRA: a 1-step run whose event file holds the Trainer's train/train_runtime and
    train/train_loss (the run's mean) read "the log ends with no end printed" and "Taken by its name: the loss is the
    scalar train/train_loss"; ChatGLM2's multi-query attention (2 groups) was counted as full: 7.12B for its 6.24B."""
    run, lines = _chronicle(REAL / "tensorboard" / "wisdom-pan_ChatGLM-LoRA")
    [attempt] = run.attempts
    # (training_ended: the reader's words about the event file, not quoted as a printed line; stop 46)
    assert (attempt.end_reason, attempt.end_kind) == ("completed", "training_ended")
    assert not any(line.startswith("- **Taken by its name:**") for line in lines)
    assert round(run.model.parameters_from_shape / 1e9, 2) == 6.24


def test_an_arguments_block_behind_srun_labels_is_read() -> None:
    """spyysalo/lumi-llm-scaling: srun --label right-aligns its numbers ('   0: ----- arguments -----'): the block
    was not read, so a 175B run had no shape, no schedule check and "the configured batch size is not in the logs"."""
    from parsers.megatron import PDSH_CMD, parse_megatron
    from parsers.textfile import inspect_text
    path = REAL / "console_errors" / "spyysalo+lumi-llm-scaling__meg-ds_experiments_175B-scaling-comms_64-node_first2200.out"
    log = parse_megatron(inspect_text(path, path.name, head_patterns={"pdsh": PDSH_CMD}), run="r", source=path.name)
    settings = dict(log.configs.select("key", "value").iter_rows())
    assert (settings["hidden_size"], settings["num_layers"], settings["global_batch_size"]) == ("14336", "70", "1024")


def test_trainer_dicts_pasted_with_typographic_quotes_are_read() -> None:
    """transformers #33336: '{‘loss’: 1.453, ‘grad_norm’: 2.47...}' (a paste's typography) was refused as not a
    training log."""
    run, _ = _chronicle(REAL / "hf_trainer" / "transformers_issue33336_curly_quotes_excerpt.txt")
    assert run.coverage["metrics"]["loss"]["points"] == 12
    assert run.sources[0]["format"] == "hf-trainer"


def test_llamafactory_trainer_log_is_read_with_its_relaunch() -> None:
    """rameyjm7/SFT-Training-LLM: LLaMA-Factory's trainer_log.jsonl (often the only log such a run commits) was
    refused. Two processes append each step (0.8548 and 0.8547 at step 10); at line 1047 a relaunch from
    checkpoint-5000 starts its elapsed_time again (22:08:06 -> 0:02:38); the last line, without a loss, ends
    training at 6565 of 6566."""
    run, _ = _chronicle(REAL / "llamafactory" / "rameyjm7_SFT-Training-LLM")
    first, second = run.attempts
    assert (first.start_step, first.end_step, first.target_step) == (10, 5240, 6566)
    assert (second.start_step, second.resumed_from_step, second.rollback, second.end_reason) == (
        5010, 5000, True, "completed")
    assert run.coverage["metrics"]["loss"]["points"] == 680


def test_llamafactory_elapsed_time_is_the_wall_time_per_step(tmp_path: Path) -> None:
    """rameyjm7/SFT-Training-LLM: each line's elapsed_time ("0:02:12" at step 10, "0:04:43" at step 20) was read only
    to see relaunches; the time between two lines over their steps is the wall time per step (15.1 s at step 20),
    none at an attempt's first line (the relaunch at line 1047: 5010 at 0:02:38, 5020 at 0:05:03: 14.5 s). An
    evaluation line's time is its own: the next training line counts from it."""
    import parsers
    run = parsers.load_run(REAL / "llamafactory" / "rameyjm7_SFT-Training-LLM")
    times = run.metrics.filter(metric="iteration_time_ms").sort("attempt", "step")
    assert times.filter(attempt=1).select("step", "value").rows()[:2] == [(20, 15100.0), (30, 14700.0)]
    assert times.filter(attempt=2).select("step", "value").row(0) == (5020, 14500.0)
    assert {"source": "trainer_log.jsonl", "tag": "elapsed_time", "metric": "iteration_time_ms"} in run.tags
    (tmp_path / "trainer_log.jsonl").write_text(
        '{"current_steps": 10, "loss": 2.0, "elapsed_time": "0:00:20"}\n'
        '{"current_steps": 20, "loss": 1.9, "elapsed_time": "0:00:40"}\n'
        '{"current_steps": 20, "eval_loss": 2.1, "elapsed_time": "0:05:40"}\n'
        '{"current_steps": 30, "loss": 1.8, "elapsed_time": "0:06:00"}\n')
    steps = parsers.load_run(tmp_path).metrics.filter(metric="iteration_time_ms").select("step", "value").rows()
    assert steps == [(20, 2000.0), (30, 2000.0)]


def test_a_damaged_llamafactory_log_costs_only_its_damage(tmp_path: Path) -> None:
    """Lines that are not JSON are skipped with a warning; a file with none is refused in one line; a line without
    the planned steps or with a clock that is not one costs nothing else."""
    import pytest

    import parsers
    lines = (REAL / "llamafactory" / "rameyjm7_SFT-Training-LLM" / "trainer_log.jsonl").read_text().splitlines()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "trainer_log.jsonl").write_text("\n".join([*lines[:20], lines[20][:40], *lines[21:40]]) + "\n")
    run = parsers.load_run(tmp_path / "cut")
    assert run.warnings == ["trainer_log.jsonl: 1 line(s) that are not JSON were skipped (first: line 21)"]
    assert run.metrics.filter(run.metrics["metric"] == "loss").height == 20  # 39 lines, two writers per step
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "trainer_log.jsonl").write_text('{"current_steps": 1\n')
    with pytest.raises(parsers.InputError, match=r"trainer_log.jsonl: not JSON lines \(no line is JSON"):
        parsers.load_run(tmp_path / "none")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "trainer_log.jsonl").write_text(
        '{"current_steps": "x", "loss": "y"}\n{"current_steps": 2, "loss": 1.5, "elapsed_time": "bogus"}\n')
    assert parsers.load_run(tmp_path / "odd").metrics["value"].to_list() == [1.5]


def test_an_excerpt_whose_lines_print_the_same_epoch_begins_mid_run() -> None:
    """huggingface/trl #1236: three DPO dicts pasted from a run, each at 'epoch': 0.46 (a Trainer prints two
    decimals), read "Start: from the start of training", its LR "peaks" at its first point, and its points "in the
    burn-in at the start of training"."""
    run, lines = _chronicle(REAL / "hf_trainer" / "trl_issue1236_dpo_loss0_excerpt.txt")
    [attempt] = run.attempts
    assert (attempt.begins_mid_run, attempt.first_epoch) == (True, 0.46)
    assert "- **Start:** the log begins mid-run, at epoch 0.46 (its first logged point); what came before is not in it " \
           "(an excerpt, or a resume whose checkpoint load was not logged)." in lines
    assert not any("start of training" in line or "burn-in" in line for line in lines)
    assert "- **Not judged for loss spikes:** attempt(s) 1: no point has a point before it in its stretch of the log." \
        in lines


def test_deepspeed_skipped_steps_are_counted() -> None:
    """liguodongiot/llm-action's Megatron-DeepSpeed LLaMA log: DeepSpeed's own count says 1,586 of 2,500 steps were
    skipped (`step=2500, skipped=1586`) with `Overflow detected. Skipping step. Attempted loss scale: 1, reducing to
    1`, while Megatron's counter printed 0 (Megatron-DeepSpeed PR #434): the chronicle found no skipped iterations."""
    run, _ = _chronicle(REAL / "megatron" / "liguodongiot__megatron-deepspeed_llama-note_overflow.log.txt")
    [skipped] = [a for a in run.anomalies if a.kind == "skipped_iterations"]
    assert (skipped.step, skipped.end_step, skipped.value) == (2499, 2500, 1585)
    assert skipped.detail == ("1585 iterations skipped (fp16 overflow) between steps 4 and 2500 (DeepSpeed's running "
                              "count: skipped=1586 at step=2500, 63.4% of its steps)")
    assert run.suspected_causes[0].cause == "fp16 loss-scale collapse / overflow storm"


def test_deepspeed_overflow_lines_of_a_console_without_steps_are_each_a_skipped_step() -> None:
    """ymcui/Chinese-LLaMA-Alpaca #534: five `OVERFLOW! Rank 0 Skipping step` lines halving the scale 64 -> 2 beside
    one Trainer dict (a console whose lines carry no step): read as one or two skipped steps, below a burst."""
    run, _ = _chronicle(REAL / "hf_trainer" / "chinese-llama-alpaca_issue534_deepspeed_overflow_cascade.txt")
    [skipped] = [a for a in run.anomalies if a.kind == "skipped_iterations"]
    assert skipped.value == 5 and skipped.detail.startswith("5 iterations skipped (fp16 overflow)")


def test_deepspeed_running_count_in_an_excerpt_is_a_count_by_its_step() -> None:
    """transformers #9996: `step=2000, skipped=1999` beside Trainer dicts with the LR at 0: every step skipped. The
    dicts print no step (their steps count lines), so DeepSpeed's step=2000 is not put on their axis."""
    run, _ = _chronicle(REAL / "hf_trainer" / "transformers_issue9996_lr0_skipped1999_excerpt.txt")
    [skipped] = [a for a in run.anomalies if a.kind == "skipped_iterations"]
    assert (skipped.step, skipped.detail) == (3, "1999 iterations skipped (no overflow line or loss scale in the log "
                                                 "says why; an fp16 overflow is the usual one) by the count printed "
                                                 "after step 3 (DeepSpeed's running count: skipped=1999)")


def test_a_stop_on_repeated_overflows_is_an_overflow_storm_not_a_program_error() -> None:
    """EleutherAI/gpt-neox #482: "Exception: Skipped 50 iterations in a row due to Overflow - Exiting training." was
    blamed on "an error in the program or its configuration"."""
    run, _ = _chronicle(REAL / "console_errors" / "gptneox_issue482_overflow_monitor_exit.txt")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind) == ("crashed", "overflow_stop")
    [cause] = run.suspected_causes
    assert (cause.kind, cause.confidence) == ("loss_scale", 0.8)
    assert cause.evidence == ["attempt 1 ended with no step read from its logs: Skipped 50 iterations in a row "
                              "due to Overflow - Exiting training."]


def test_an_mlflow_run_that_finished_is_not_said_to_be_cut_off() -> None:
    """GhadeerElmkaiel/SegFormer: an MLflow run whose meta.yaml says status 3 (FINISHED) with its end_time read "the
    log ends with no end printed: still running, cut off, or stopped without a word"."""
    run, _ = _chronicle(REAL / "mlflow" / "GhadeerElmkaiel_SegFormer")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_at_step, round(attempt.ran_for_s, 3)) == ("completed", 60, 72.435)
    assert attempt.end_detail == "MLflow run status FINISHED (the program ended its run without an error)"


def test_torchtitans_placeholder_loss_on_a_pipeline_stage_is_not_a_loss() -> None:
    """pytorch/torchtitan #1232: rank 0 of a pipeline-parallel run prints `loss: -1.0000` (the last stage alone
    computes the loss): read as a loss going below 0, "a policy or preference objective (RL, DPO)"."""
    run, lines = _chronicle(REAL / "torchtitan" / "torchtitan_issue1232_pipeline_stage_loss_minus1.txt")
    assert any(w.endswith("loss printed as -1 on 4 line(s): torchtitan's placeholder on a pipeline stage that does not "
                          "compute the loss (only the last stage does); not read as a loss") for w in run.warnings)
    assert not any("policy or preference" in line or "goes below 0" in line for line in lines)
    assert "- **Not found:** loss, so loss spikes, divergence and NaN in the loss could not be checked." in lines


def test_overflows_that_halve_the_scale_at_one_step_are_each_a_skipped_step() -> None:
    """fairseq #512: twelve 'overflow detected, setting loss scale to' lines, the scale halving from 0.25 to
    0.000122 with no update line between them, then a traceback: one skipped step, below a burst."""
    run, _ = _chronicle(REAL / "fairseq" / "fairseq_issue512_overflow_to_min_scale_excerpt.txt")
    [skipped] = [a for a in run.anomalies if a.kind == "skipped_iterations"]
    assert (skipped.step, skipped.value, skipped.detail) == (
        10199, 12, "12 iterations skipped (fp16 overflow) at step 10199")


def test_a_spike_says_what_its_baseline_is_and_that_it_lasted_to_the_end() -> None:
    """ml-explore/mlx-examples #620: the loss 1.593, 1.406, then 3.316 and 6.437: "4.6x the trailing median 1.406"
    (1.406 is the lower of the two points before the onset) and "the log of the attempt ends here" said of a spike at
    step 75 while the log runs to step 200."""
    run, _ = _chronicle(REAL / "mlx_lm" / "mlx-examples_issue620_loss_quadruples_excerpt.txt")
    [spike] = [a for a in run.anomalies if a.kind == "loss_spike"]
    assert spike.detail == ("loss rose to 6.437 (4.6x 1.406, the lower median of the 2 points before it); still above "
                            "its level at step 200, where the log of the attempt ends")


def test_a_noisy_per_batch_loss_after_a_resume_is_not_a_spike() -> None:
    """Issikul/russian_asr: a NeMo run resumed from step 6990, logging one batch's CTC loss every 50 steps (it swings
    30% from point to point): "First anomaly: loss spike at step 7440 ... 1.3x the trailing median" in the first
    points after the resume, where the noise is not yet known (and, at step 7590, read off its first ten residuals)."""
    runs = _findings(REAL / "tensorboard" / "Issikul_russian_asr")
    [run] = [r for r in runs.runs if r.name == "version_91_ru_r2_large_12x1"]
    lines = reports.render(replace(runs, runs=[run]), "markdown").splitlines()
    assert [a.resumed_from_step for a in run.attempts] == [None, 6990]
    assert not [a for a in run.anomalies if a.kind == "loss_spike"]
    assert not any(line.startswith("- **First anomaly:**") for line in lines)


def test_unrelated_lightning_versions_are_runs_of_their_own_and_a_resume_continues_its_run() -> None:
    """Issikul/russian_asr's lightning_logs/ (35 versions: an4, LibriSpeech, Russian and Mozilla ASR experiments) read
    as one run of 42 attempts: "attempt 34 went back to step 6990 (rollback)" (it resumed its own predecessor, which
    stopped at 6990; another experiment had reached 470416), "lowering lr got further" from two experiments'
    spikes, and "step 13090 gave a different loss when logged again" across experiments. Here four of them: two
    NeMo runs from scratch that differ in their data manifest (both go NaN), and a run with its resume."""
    findings = _findings(REAL / "tensorboard" / "Issikul_russian_asr")
    assert [(r.name, [(a.start_step, a.end_step) for a in r.attempts]) for r in findings.runs] == [
        ("version_84", [(49, 3299)]), ("version_85", [(49, 2701)]),
        ("version_91_ru_r2_large_12x1", [(49, 6990), (7040, 30113)])]
    assert not [a for r in findings.runs for a in r.attempts if a.rollback]
    assert not [r for r in findings.runs if r.replay_differences]
    # version_84's event file: train_loss NaN from step 2299 to its last, 3299
    assert [(a.kind, a.step) for a in findings.runs[0].anomalies] == [("nan", 2299)]
    assert findings.runs[0].attempts[0].end_reason == "nan"


def test_a_spike_is_a_mean_over_the_interval_only_where_the_format_says_so() -> None:
    """Issikul/russian_asr logs one batch's loss every 50 steps (Lightning through TensorBoard): a spike there was
    said to be "a mean over 50 iterations, so a short spike shows diluted". mlx-lm's report is such a mean."""
    runs = _findings(REAL / "tensorboard" / "Issikul_russian_asr").runs
    assert [a for run in runs for a in run.anomalies if a.averaged_over] == []
    mlx, _ = _chronicle(REAL / "mlx_lm" / "mlx-examples_issue620_loss_quadruples_excerpt.txt")
    assert [a.averaged_over for a in mlx.anomalies if a.kind == "loss_spike"] == [25]


def test_ranks_of_one_torchrun_launch_are_one_attempt_and_its_stack_dumps_a_hang() -> None:
    """elena-lyulina/Megatron-LM-Attention-Benchmark job 1861140: torchrun's `<run id>/attempt_0/<rank>/stdout.log` of
    rank 0 (arguments, checkpoint saves) and of the last pipeline stage (iterations 1-344 of 500) read as two launches
    ("a launch with no training step"), and every rank's stderr ends in faulthandler's `Stack (most recent call
    first):` inside the same all-reduce: not read ("no metrics lines"), so no hang."""
    run, lines = _chronicle(REAL / "megatron" / "elena-lyulina_Megatron-LM-Attention-Benchmark_job1861140")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.end_reason, attempt.end_kind) == (1, 344, "hung", "stack_dump")
    assert lines[4] == ("- **What went wrong:** attempt 1 hung in its console, after its last logged step (344): “Stack "
                        "(most recent call first):”.")


def test_a_validation_loss_that_rises_for_23_epochs_with_a_dip_is_overfitting() -> None:
    """Nuist-XZX/QWen mask_loss.txt: the eval loss lowest at epoch 7 (1.788) and 2.112 at epoch 30 while the training
    loss falls, one dip at epoch 29 (2.0844 -> 2.0743 -> 2.1119): "no anomalies" and nothing about overfitting (the
    rule wanted a rise at every evaluation to the end)."""
    run, lines = _chronicle(REAL / "hf_trainer" / "nuist-xzx_qwen05b_lora_30_epochs_mask_loss.txt")
    up = run.learning["val_rising"]
    assert (round(up["from"], 6), round(up["to"], 6), up["evaluations"], up["rises"]) == (1.788033, 2.111901, 24, 19)
    assert ("- **Validation loss rising:** from its lowest, 1.788033 at step 65, it rose over the 23 evaluations after "
            "(above the one before at 19 of them), to 2.111901 at step 282, while the training loss fell over the same "
            "steps (1.4485 to 0.6491, the medians of the first and last three points): the usual sign of "
            "overfitting.") in lines


def test_dataparallels_wrapper_is_not_the_error_it_wraps() -> None:
    """1azybug/ReCMLLM run 0n6mbuza: "failed at start-up: RuntimeError: Caught RuntimeError in replica 0 on device 0."
    (torch DataParallel's wrapper) while the error after its "Original Traceback" names the device mismatch; and a
    launch that logged no step is not known to have failed at start-up rather than in its first steps."""
    run, lines = _chronicle(REAL / "wandb" / "1azybug__ReCMLLM" / "wandb" / "run-20241125_114239-0n6mbuza")
    [attempt] = run.attempts
    assert attempt.end_detail.startswith("RuntimeError: Expected all tensors to be on the same device, but found at "
                                         "least two devices, cuda:1 and cuda:0!")
    assert not any("in replica 0 on device 0" in line or "at start-up" in line for line in lines)


def test_a_crashs_own_stack_dump_as_it_exits_is_not_a_hang() -> None:
    """elena-lyulina/Megatron-LM-Attention-Benchmark job 1856681: an AssertionError at start-up, then faulthandler's
    `Stack (most recent call first):` as the process exits: read as "hang at step 0" beside the crash."""
    run, _ = _chronicle(REAL / "console_errors" / "elena-lyulina_megatron_job1856681_assert_then_exit_stack.log")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_detail) == ("crashed", "[rank4]: AssertionError")
    assert not [a for a in run.anomalies if a.kind == "hang"]


OLMO_SIGTERM = REAL / "olmo" / "AntonioLopardo_OLMo_training_continue_sigterm.log"


def test_a_launcher_that_received_sigterm_stopped_the_run_and_a_logged_checkpoint_load_is_not_from_scratch() -> None:
    """AntonioLopardo/OLMo training.log: torchrun's "Received 15 death signal, shutting down workers" (line 9253)
    read "crashed after step 1010" and "an error in the program or its configuration (0.50)"; the run loads its
    checkpoint (line 43 "Loading checkpoint from .../latest-unsharded...", the step count starting again at 1) and
    read "from the start of training"; its checkpoint saves ("Unsharded checkpoint saved to .../step1000-unsharded")
    were not read ("no checkpoint save appears in the logs"), nor its printed parameter count, nor the times of its
    step headers (only the header line is stamped)."""
    run, lines = _chronicle(OLMO_SIGTERM)
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_at_step) == ("stopped", "sigterm", 1010)
    assert attempt.end_detail.endswith("Received 15 death signal, shutting down workers")
    assert attempt.loaded_weights and attempt.resumed_from_step is None
    [cause] = run.suspected_causes
    assert (cause.kind, cause.check_next) == ("stopped", "nothing failed here; the last checkpoint saved in the logs "
                                                         "is at step 1000")
    assert run.model.parameters_logged == 1_279_787_008  # line 12: "Total number of parameters: 1,279,787,008"
    assert attempt.last_step_at is not None and round(attempt.ran_for_s) == 4062  # 11:03:43.336 to 12:11:25.670
    assert not any("error in the program" in line for line in lines)


def test_olmo_and_torchtitan_say_their_training_is_complete() -> None:
    """AntonioLopardo/OLMo train_1B.log (its last 16 steps): "INFO Training complete" read "the log ends with no end
    printed: still running, cut off, or stopped without a word". AICrossSim/NewComputeBench's torchtitan console
    ("step: 640/644 = 99.3789%" lines, not read) says "Training completed" and then aborts in teardown: "crashed
    before any iteration read from its logs" and "an error in the program or its configuration"."""
    olmo, _ = _chronicle(REAL / "olmo" / "AntonioLopardo_OLMo_train_1B_last_steps.log")
    assert [(a.end_reason, a.end_kind, a.end_step) for a in olmo.attempts] == [("completed", "training_done", 7640)]
    titan, lines = _chronicle(REAL / "torchtitan" / "NewComputeBench_completed_then_abort_in_teardown.txt")
    [attempt] = titan.attempts
    assert (attempt.start_step, attempt.end_reason, attempt.failed_after_training) == (
        640, "completed", "[rank0]:Fatal Python error: Aborted")
    assert titan.config["train_iters"] == 644 and titan.suspected_causes == []
    assert not any("error in the program" in line for line in lines)


MILITARY_SLLM = REAL / "wandb" / "yerinNam__Your-Military-Expert-SLLM" / "wandb" / "run-20240804_231327-uojy8xhg"


def test_a_lone_grad_norm_900x_its_neighbours_at_the_start_is_an_incident_and_a_trainer_summary_ends_training() -> None:
    """yerinNam's Llama-3 LoRA W&B run: train/grad_norm 406.04 at step 150 between 0.484 (step 120) and 0.362 (step
    180), the Trainer logging every 30 steps: "Anomalies: none found" (its fifth point, inside the burn-in of 10 points,
    where a grad norm had no check at all, and nothing said so). Its wandb-summary.json holds the Trainer's
    train_runtime (1727.749): "the log ends with no end printed: still running, cut off, or stopped without a word"."""
    run, lines = _chronicle(MILITARY_SLLM)
    spikes = [a for a in run.anomalies if a.kind == "grad_norm_spike"]
    assert [(a.step, a.end_step) for a in spikes] == [(150, 150)]
    assert spikes[0].detail.endswith("back to its level by step 180 (30 steps)")
    assert "First anomaly:** grad norm spike at step 150" in lines[5]
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_step) == ("completed", "training_ended", 804)
    [limits] = [line for line in lines if line.startswith("- **Grad norm spike thresholds**")]
    assert limits.endswith("; 9 more with too little history before them (the first of the attempt or after a gap), the "
                           "absolute checks only; 1 with no point before it in its stretch of the log, not judged).")


RWKV_RM = REAL / "wandb" / "Ourboros-Alignment-Team__RWKV-RM-Copilot" / "wandb" / "run-20250409_201643-8641imk4"


def test_an_error_in_a_console_that_prints_no_steps_is_not_before_any_iteration_and_scattered_zeros_are_batches() -> None:
    """RWKV-RM-Copilot's W&B run: the OOM printed to output.log (no steps there) after the history's step 3727 was
    "attempt 1, before any iteration read from its logs" in the cause's evidence. Its margin loss is exactly 0 at 160
    scattered batches (pos 1.0, neg ~0): "a loss of 0 is no training signal: every label masked or ignored, a loss
    that underflowed", sending the engineer after a masking bug."""
    run, lines = _chronicle(RWKV_RM)
    [memory] = [c for c in run.suspected_causes if c.kind == "memory"]
    assert memory.evidence[0].startswith("attempt 1, in files/output.log, where no step was read (the attempt's steps "
                                         "end at 3727): torch.cuda.OutOfMemoryError: CUDA out of memory.")
    assert not any("before any iteration" in line for line in lines)
    [zero] = [a for a in run.anomalies if a.kind == "zero_loss"]
    assert (zero.step, zero.end_step) == (750, 3717)
    assert zero.detail.startswith("loss logged as 0 at 160 of the 2968 points from step 750 to 3717, among ordinary "
                                  "values (their median 0.34765625), after 0.34765625 at step 749: single batches gave "
                                  "a loss of 0")
    assert "no training signal" not in zero.detail


def test_skipped_steps_with_no_overflow_line_or_loss_scale_are_not_said_to_be_overflows() -> None:
    """RWKV-RM-Copilot run lv15l27e: DeepSpeed's "step=150, skipped=150" and not one overflow line or loss scale:
    "150 iterations skipped (fp16 overflow)", a cause stated as a fact that the log does not show."""
    run, _ = _chronicle(RWKV_RM.parent / "run-20250409_024854-lv15l27e")
    [skipped] = [a for a in run.anomalies if a.kind == "skipped_iterations"]
    assert skipped.detail == ("150 iterations skipped (no overflow line or loss scale in the log says why; an fp16 "
                              "overflow is the usual one) by step 150 (DeepSpeed's running count: skipped=150 at "
                              "step=150, 100% of its steps)")


def test_a_run_that_logged_nothing_before_its_summary_completed_at_its_step() -> None:
    """aa-n/Qwen3_Lora: logging_steps 996 > max_steps 768, so the log history is only the Trainer's summary at step
    768: "completed before any iteration read from its logs", listed under the short attempts."""
    run, lines = _chronicle(REAL / "hf_trainer_state" / "aa-n_Qwen3_Lora")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_at_step, attempt.short) == ("completed", 768, False)
    assert lines.count("- **How it ended:** completed at step 768, with no metric logged before it: training "
                       "finished: the Trainer's summary (train\\_runtime 5980.6912 s, train\\_loss "
                       "0.9732094605763754).") == 1
    assert not any("before any iteration" in line or "Short attempts" in line for line in lines)
    assert "| 1 | none logged | no iteration logged | - | step 768 as its log printed | completed |" in lines
    # nothing was logged per step (not: logged and not recognised), and the file says why
    assert run.warnings == ["trainer_state.json: its log_history holds no entry per logging step, only the Trainer's "
                            "closing summary at step 768: its logging_steps 996 is more than its 768 steps; no metric "
                            "was logged during training, so nothing in it could be checked"]
    assert "- trainer\\_state.json (hf-trainer-state): no metric logged." in lines
    assert "- **No metric logged** by any source: nothing could be checked, NaN/Inf included." in lines
    assert lines.count("- **What went wrong:** not checked: no metric logged (see *What was read and checked*); no "
                       "attempt ended on an error.") == 1


def test_deepspeeds_hysteresis_line_is_read_as_a_kept_scale() -> None:
    """DeepSpeed #931's first overflow line, "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but
    hysteresis is 2. Reducing hysteresis to 1", is a skip that kept the scale (the reader's overflow_scale_kept, with
    no scale set), the three after it skips that halved it: forensics counts them by kind, never by the words
    "Skipping step" (issue 17)."""
    events = parsers.load_run(REAL / "console_errors" / "deepspeed_issue931_overflow_cascade_excerpt.txt").events
    assert events.select("line", "kind", "value").rows() == [
        (2, schema.EV_OVERFLOW_SCALE_KEPT, None), (3, schema.EV_OVERFLOW, 32768.0), (4, schema.EV_OVERFLOW, 16384.0),
        (5, schema.EV_OVERFLOW, 8192.0)]


def test_a_deepspeed_console_of_overflow_lines_only_is_read_for_them() -> None:
    """DeepSpeed #931's paste (four "OVERFLOW! Rank 0 Skipping step" lines) and DeepSpeedExamples' random-LTD
    console (DeepSpeed's count to step=262, overflows) were refused: "not a recognised training log", though a log
    of one OOM is read for it."""
    run, lines = _chronicle(REAL / "console_errors" / "deepspeed_issue931_overflow_cascade_excerpt.txt")
    # (its first line, "Beginning of Epoch 1/16, Total Micro Batches 1840", is DeepSpeed-Chat step 1's: that reader's)
    assert [src["format"] for src in run.sources] == ["deepspeed-chat-sft-rm"]
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_detail) == ("running", "no metric logged, but 4 fp16 overflows, each a "
                                                        "step skipped (the loss scale reduced to 32768, and at last "
                                                        "to 8192)")
    assert not any("no training step, error or stop" in line for line in lines)
    # ("Not found: loss scale" beside lines that print it, audits J and Q)
    assert not any(line.startswith("- **Not found:** loss scale") for line in lines)
    assert ("- **Loss scale:** no series of it, but 3 fp16 overflow lines print the scale they reduced it to (32768, "
            "at last 8192); where it rose again between them is not in the log, so a collapse of the scale over the "
            "run could not be checked.") in lines
    # each skip printed twice ("Grad overflow on iteration: 0", then "... Skipping step ... reducing to 32768.0"); the
    # first three are the start-up search for a scale (DeepSpeed's "step=0, skipped=0" is before any step), the
    # fourth a lone skip: no anomaly, no overflow storm
    # (its "step=N, skipped=M, lr=[...]" lines are its LR series since audit Z2's Z1: a metric is logged, to step 262;
    # and step 262 is the end its script planned: "Total optimization steps = 524" of 1 batch, DeepSpeed's steps of 2)
    run, lines = _chronicle(REAL / "console_errors" / "DeepSpeedExamples_random_ltd_train_my_implementation_fp16.log")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_step, attempt.target_step) == ("completed", 262, 262)
    assert ("- **Loss scale:** no series of it, but 4 fp16 overflow lines print the scale they reduced it to (32768, "
            "at last 4096); where it rose again between them is not in the log, so a collapse of the scale over the "
            "run could not be checked.") in lines
    assert run.anomalies == [] and run.suspected_causes == []


DS_DATA_EFFICIENCY = REAL / "console_errors" / "DeepSpeedExamples_data_efficiency_gpt_finetuning_check_base_training.log"


def test_the_lr_of_deepspeeds_step_lines_is_read_where_the_log_prints_no_other() -> None:
    """DeepSpeedExamples data-efficiency GPT-2 fine-tune (audit Z2, Z1): 263 lines "[Rank 0] step=N, skipped=0,
    lr=[..., ...], mom=[...]" (step=0 to 524, every 2) were read for the ending only: "Not found: lr, so the warm-up
    and the learning-rate schedule could not be checked". The first param group's LR is read, at DeepSpeed's step."""
    run, lines = _chronicle(DS_DATA_EFFICIENCY)
    lr = parsers.load_run(DS_DATA_EFFICIENCY).metrics.filter(pl.col("metric") == "lr").sort("step")
    assert (lr.height, lr["step"].min(), lr["step"].max()) == (263, 0, 524)
    assert lr.select("step", "value").head(3).rows() == [(0, 0.0), (2, 1.0000000000000002e-06),
                                                         (4, 2.0000000000000003e-06)]
    assert lr.filter(pl.col("step") == 524)["value"].to_list() == [5e-05]
    assert not any(line.startswith("- **Not found:** lr") for line in lines)
    assert any(line.endswith("(text (errors only)): lr 263 points (steps 0–524).") for line in lines)
    assert "- **Schedule:** LR peaks at 5e-05 (step 100); warm-up ends between steps 98 and 100 (the logged points)." \
        in lines
    assert any(w.endswith("no metrics lines of a text format it knows; read for its errors, stops and fp16 overflow "
                          "lines, and the learning rate of DeepSpeed's step=N lines, only") for w in run.warnings)


def test_a_56_minute_deepspeed_run_is_not_a_short_attempt_and_its_clock_is_read() -> None:
    """The same log: with no metric read, its steps were counted as none, so a 56-minute run whose own count reached
    step=524 was listed under "Short attempts (at most 3 steps logged)" as "no step read", and its timeline said
    "ended –, ran for –" though every DeepSpeed line is stamped (00:51:19 to 01:47:17). Its steps are DeepSpeed's."""
    run, lines = _chronicle(DS_DATA_EFFICIENCY)
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.short) == (0, 524, False)
    assert not any("Short attempts" in line for line in lines)
    assert attempt.last_step_at == pytest.approx(1669254437.985)  # 2022-11-24 01:47:17,985, the step=524 line
    assert attempt.ran_for_s == pytest.approx(1669254437.985 - 1669251079.037)
    row = next(line for line in lines if line.startswith("| 1 | 0–524 |"))
    assert row.startswith("| 1 | 0–524 | 2022-11-24 00:51:19 | last step 2022-11-24 01:47:17 | 56 min |")


def test_a_deepspeed_run_that_reached_the_steps_its_script_planned_completed() -> None:
    """The same log prints its plan ("Total optimization steps = 1048", "Gradient Accumulation steps = 1", L35-36;
    DeepSpeed's "gradient_accumulation_steps .. 2", L124) and reaches it (step=524 at L1215, timer "0/1048", the
    final evaluation, "saving model ..."): "the log ends with no end printed", never that it reached its planned end.
    The script's 1048 steps of one batch are 524 of DeepSpeed's steps of two (its step=N lines count those)."""
    run, lines = _chronicle(DS_DATA_EFFICIENCY)
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.target_step, attempt.end_reason) == (524, 524, "completed")
    assert "- **How it ended:** completed: reached the last iteration (step 524 of 524)." in lines
    assert any(w.endswith("attempt 1: planned to end at DeepSpeed's step 524: the 1048 \"Total optimization steps\" it "
                          "printed, of 1 batch(es) each (\"Gradient Accumulation steps = 1\"), are 524 of DeepSpeed's "
                          "steps, of 2 batches each (its gradient_accumulation_steps)") for w in run.warnings)
    assert not any("ends before the planned length" in line or "no end printed" in line for line in lines)


def test_a_traceback_logged_as_a_python_list_is_quoted_by_its_error() -> None:
    """elena-lyulina job 2340723: at the last iteration every rank logs its traceback as a Python list on one line
    ("['Traceback (most recent call last):\\n', ..., 'StopIteration\\n']"): "crashed: a traceback with no error line
    after it in the log", and "nothing in the logs points at a cause"; its checkpoint at 15549, saved just before,
    was not said."""
    run, _ = _chronicle(REAL / "megatron" / "elena-lyulina_Megatron-LM-Attention-Benchmark_2340723_last_lines.out")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_detail) == ("crashed", "error", "StopIteration")
    [cause] = run.suspected_causes
    assert cause.check_next == ("the error's traceback and the arguments of the attempt that raised it; the last "
                                "checkpoint saved in the logs is at step 15549")


def test_a_run_that_recovered_and_was_cancelled_did_not_blow_up() -> None:
    """bigscience gpt2-meg job 1809620: the loss jumps to 50.28 at iteration 30 (the first full-LR step after the
    loss-scale search) and is back by 60; a person cancels the job at 120. The chronicle said "Most likely why: learning
    rate too high for the model size" under "Why it blew up", for a run whose only ending was the cancel."""
    name = "bigscience-workshop+bigscience__experiments_gpt2-meg_meg_gpt2_base_n32_dp1_tp4_pp32-1809620.out"
    run, lines = _chronicle(REAL / "megatron" / name)
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind) == ("stopped", "cancelled")
    assert "## What may have caused its anomalies (suspected causes)" in lines
    assert not any(line.startswith(("- **Most likely why", "## Why it blew up")) for line in lines)
    assert any(line.startswith("- **Most likely cause of its anomalies (suspected):** ") for line in lines)


WHISPER_STATE = REAL / "hf_trainer_state" / "P4P4N1CK_whisper-large-v2-japanese" / "trainer_state.json"


def test_overfitting_quotes_the_training_loss_over_the_same_steps_and_needs_no_twenty_points(tmp_path: Path) -> None:
    """Whisper large-v2: eval_loss rises from 0.321 (step 1000) at each of four evaluations; "while the training loss
    fell (0.1491 to 0.0001)" quoted the first tenth of the run (steps 25-500), before the rise. And a run of fewer
    than 20 loss points (druidowm's nanoGPT: 11 evaluations, val loss 1.61 to 4.27) was not judged, silently."""
    import json

    _, lines = _chronicle(WHISPER_STATE)
    assert ("- **Validation loss rising:** from its lowest, 0.320998 at step 1000, it rose at each of the 4 evaluations "
            "after, to 0.420015 at step 5000, while the training loss fell over the same steps (0.01 to 0.0001, the "
            "medians of the first and last three points): the usual sign of overfitting.") in lines
    state = json.loads(WHISPER_STATE.read_text())
    kept = [e for e in state["log_history"] if "loss" not in e or e["step"] % 500 == 0]  # 10 of its 200 losses
    (tmp_path / "trainer_state.json").write_text(json.dumps({**state, "log_history": kept}))
    _, lines = _chronicle(tmp_path / "trainer_state.json")
    assert any(line.startswith("- **Validation loss rising:** from its lowest, 0.320998 at step 1000") for line in lines)


def test_hang_up_signals_uncaught_thread_errors_and_ms_swifts_global_step_are_read() -> None:
    """ms-swift #64: "'global_step': 2900" in the dict (steps were numbered 1, 2, ... and the run called "scratch"), then
    torchrun's "Received 1 death signal" glued behind the progress bar: "still running, cut off". OLMo #552: "CRITICAL
    [olmo.util:158, rank=0] Uncaught OLMoThreadError: ..." after step 75: "no crash"."""
    run, _ = _chronicle(REAL / "hf_trainer" / "msswift_issue64_sighup_global_step.txt")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_reason) == (2900, "killed")
    assert attempt.end_detail == ("WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, "
                                  "shutting down workers")  # (the progress bar it was printed behind left out)
    run, _ = _chronicle(REAL / "olmo" / "issue552_uncaught_thread_error_excerpt.txt")
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_reason, attempt.end_kind) == (75, "crashed", "error")
    assert attempt.end_detail.endswith("Uncaught OLMoThreadError: generator thread data thread 3 failed")


def test_a_trainer_run_whose_grad_norm_went_nan_says_so_where_it_says_what_went_wrong() -> None:
    """Wdamm-FLOB2's TinyLlama run: the loss prints 0.0 wherever grad_norm is nan (the Trainer's NaN filter), then the
    run completes: "What went wrong: attempt 1 completed after step 5" and "a loss of 0 is no training signal: every
    label masked..."."""
    run, lines = _chronicle(REAL / "hf_trainer" / "Wdamm-FLOB2_lacia_loss0_gradnan.txt")
    [went] = [line for line in lines if line.startswith("- **What went wrong:**")]
    assert went.endswith("; NaN in the grad norm from step 2.")
    [zero] = [a for a in run.anomalies if a.kind == "zero_loss"]
    assert "the loss was most likely NaN too, logged as 0" in zero.detail and "label" not in zero.detail


def test_a_console_that_prints_no_step_is_put_on_steps_by_its_runs_logging_interval() -> None:
    """Jskyu/KorQuAD2.0 run za1r6og7 (no .wandb, so its output.log's 618 Trainer dicts, which print no step): "how far
    it got: step 618" for a run stopped at 15450 of 23260 (its config.yaml: logging_steps 25; its summary:
    train/global_step 15450)."""
    run, _ = _chronicle(REAL / "wandb" / "Jskyu__KorQuAD2.0-dev-training" / "wandb" / "run-20240430_111132-za1r6og7")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step) == (25, 15450)
    assert any(w.endswith("files/output.log: it prints no step: steps here are its printed metrics lines times the "
                          "logging interval its run's config sets (25)") for w in run.warnings)


def test_a_ctrl_c_echoed_as_a_line_is_an_interrupt() -> None:
    """auroraGPT-ANL/torchtitan's Aurora console: step 105 of 1000, then the terminal's "^C" and the shell's report:
    "the log ends with no end printed: still running, cut off, or stopped without a word"."""
    run, _ = _chronicle(REAL / "torchtitan" / "auroraGPT_blendcorpus_aurora_ctrl_c.log")
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_reason, attempt.end_detail) == (105, "interrupted", "^C")


def test_a_wandb_history_cut_short_of_its_summary_ends_where_the_summary_says() -> None:
    """aorvieto/VerySimpleTransformer run ovrxxego: its .wandb (copied while the run was writing) ends at step 3901;
    its summary says step 62509 after 3369 s. The chronicle read "how far it got: step 3901", "ran for 3 min" and
    "still running, cut off, or stopped without a word"."""
    run, lines = _chronicle(REAL / "wandb" / "aorvieto__VerySimpleTransformer" / "wandb" / "run-20230329_040152-ovrxxego")
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_at_step, attempt.end_reason) == (3901, 62509, "running")
    assert attempt.end_detail == ("the log leaves out what followed its last step (its history stops at step 3901; the "
                                  "run's summary says it reached step 62509 after 56 min)")
    assert round(attempt.ran_for_s) == 3369
    assert "| 1 | 0–3901 | from the start of training | - | step 62509 as its log printed (3901 in its metrics) | the log " \
           "ends with no end printed |" in lines


def test_an_evaluation_logged_before_the_first_loss_is_no_sign_of_a_mid_run_start() -> None:
    """befawzy/Decision-transformers: the Trainer state's first entry is an evaluation at step 391 (epoch 1.0), its
    first loss at step 500: "the log begins mid-run, at step 391; what came before is not in it"."""
    run, lines = _chronicle(REAL / "hf_trainer_state" / "befawzy_Decision-transformers_POMDP")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.begins_mid_run, attempt.resumed_from_step) == (391, False, None)
    assert not any("mid-run" in line for line in lines)


def test_a_per_step_dpo_loss_that_swings_from_batch_to_batch_has_no_spike() -> None:
    """SeanGormann/llm_recovery: a DPO loss over 3 pairs a batch, calm near 0.3 for 30 steps, then swinging between
    0.07 and 0.5 from step to step (and 0.001 to 1.0 later). The chronicle called 0.5892 at step 30 (below step 19's
    0.6269) and 0.4324/0.5064 at steps 49-51 "loss spikes", and built on them "instability shortly after the
    learning-rate warm-up ended". A 2x jump is a spike only where it is beyond the noise the attempt shows and clears
    the highest recent point by more than the usual step-to-step move."""
    run, lines = _chronicle(REAL / "hf_trainer_state" / "SeanGormann_llm_recovery_dpo")
    assert not [a for a in run.anomalies if a.kind == "loss_spike"]
    assert not [c for c in run.suspected_causes if c.kind == "warmup"]
    assert not any("loss spike" in line for line in lines)
    assert run.coverage["spike_checks"]["loss"]["1"]["largest_rise"]["step"] == 177


def test_an_llmc_run_that_reached_its_last_step_completed() -> None:
    """HectorFCardenas/llm.c job 11685414 reaches `step 19560/19560` with the LR at 0 and runs its final evaluations:
    "the log ends with no end printed: still running, cut off, or stopped without a word". The step line's `/19560`
    is the run's planned length."""
    run, lines = _chronicle(REAL / "llmc" / "HectorFCardenas_gpt2_train.11685414_from_step19000.log")
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.target_step, attempt.end_reason) == (19560, 19560, "completed")
    assert "- **How it ended:** completed: reached the last iteration (step 19560 of 19560)." in lines


def test_a_planned_stop_at_a_time_budget_after_a_later_evaluation_is_the_end() -> None:
    """lolrazh/parameter-golf: the last train line is step 6100, the evaluation at step 6130, then `stopping_early:
    wallclock_cap ... step:6130/20000`: "Stopped short, with no end in the log: attempt 1 at step 6130 of 20000". A
    line printed after an evaluation at a later step is after that step, not before it."""
    run, lines = _chronicle(REAL / "modded_nanogpt" / "lolrazh_parameter-golf_checkpoints_train.log")
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_reason, attempt.end_at_step) == (6130, "exited", 6130)
    assert attempt.end_detail.startswith("stopping_early: wallclock_cap train_time:599635ms step:6130/20000")
    assert not any("ends before the planned length" in line for line in lines)


def test_a_loss_scale_set_below_1_by_overflow_lines_is_a_collapse() -> None:
    """fairseq #1895: `train_inner` at update 700 prints `loss_scale=0`, then "NOTE: overflow detected, setting loss
    scale to: 0.00048828125" and "... 0.000244140625" (fairseq stops at 1e-4). The chronicle said the loss-scale check
    "found nothing": the overflow lines' scales were not read as the scale, and a scale below 1 from the first point
    seen had no higher point before it to fall from."""
    run, lines = _chronicle(REAL / "fairseq" / "fairseq_issue1895_scale_below_1_excerpt.txt")
    [collapse] = [a for a in run.anomalies if a.kind == "loss_scale_collapse"]
    assert (collapse.step, collapse.value, collapse.baseline) == (701, 0.000244140625, None)
    assert "- **First anomaly:** loss scale collapse at step 701 (attempt 1)." in lines
    assert not any("loss scale, hangs) found nothing" in line for line in lines)


def test_a_cosine_tail_printed_to_three_digits_is_no_lr_jump() -> None:
    """HectorFCardenas/llm.c job 11685414 prints its LR to 3 significant digits: 1.01e-06, 1.00e-06, 9.99e-07 at
    steps 19069-19071. "Discontinuities ... in one jump between consecutive points at steps 19069 and 19070: lr
    1.01e-06 -> 1e-06": the change is one printed digit, next to a change of one digit ten times smaller."""
    run, lines = _chronicle(REAL / "llmc" / "HectorFCardenas_gpt2_train.11685414_from_step19000.log")
    assert run.discontinuities == []
    assert not any("Discontinuities" in line for line in lines)


def test_a_nan_ending_names_the_last_checkpoint_saved_before_it() -> None:
    """nanoGPT saves after each evaluation ("saving checkpoint to out"); where the loss turns NaN, the checkpoint to
    roll back to is the last one saved before it. ChenZihua-cn/nanoGPT: NaN from iter 425, saved after the evaluation
    at 400; karpathy/nanoGPT#215: NaN from 3010, saved after the evaluation at 3000 (printed after "step 3000: train
    loss ...", before "iter 3000": it was placed at step 2990)."""
    for name, ending in (("ChenZihua-cn_nanoGPT_train.log", "ended in NaN/Inf: NaN from step 425 to the end of its log "
                          "(step 450); the last checkpoint saved before it: step 400."),
                         ("karpathy_nanoGPT_issue215_excerpt.txt", "ended in NaN/Inf: NaN from step 3010 to the end of its "
                          "log (step 3060); the last checkpoint saved before it: step 3000.")):
        _, lines = _chronicle(REAL / "nanogpt" / name)
        assert f"- **How it ended:** {ending}" in lines


def test_mlx_lm_adapter_saves_are_checkpoint_saves() -> None:
    """MLX LM prints "Iter 100: Saved adapter weights to adapters.npz." at each save: the chronicle said "no checkpoint
    save appears in the logs" of a run that saved every 100 iterations."""
    run = parsers.load_run(REAL / "mlx_lm" / "neoneye_mlx_examples_lora_v6.txt")
    saves = run.events.filter(kind="checkpoint_save")
    assert saves["step"].to_list() == [100, 200, 300, 400, 500, 600]


def test_the_parameter_counts_consoles_print_are_read() -> None:
    """nanoGPT's "number of parameters: 10.65M", llm.c's settings table row "| num_parameters | 124475904 |" and
    parameter-golf's "model_params:26041425" read "printed by the program: n/a"."""
    for path, count in ((REAL / "nanogpt" / "ChenZihua-cn_nanoGPT_train.log", 10.65e6),
                        (REAL / "llmc" / "HectorFCardenas_gpt2_train.11672114.log", 124475904),
                        (REAL / "modded_nanogpt" / "lolrazh_parameter-golf_checkpoints_train.log", 26041425)):
        run, _ = _chronicle(path)
        assert run.model.parameters_logged == count, path.name


def test_a_start_time_taken_from_the_first_step_or_event_says_so() -> None:
    """fairseq #1895's first line (its epoch summary, 11:38:13) is no step or event: the timeline's "first line
    2020-03-23 11:38:31" named the validation line's time as the log's first line."""
    _, lines = _chronicle(REAL / "fairseq" / "fairseq_issue1895_scale_below_1_excerpt.txt")
    [row] = [line for line in lines if line.startswith("| 1 | 695–700 | first")]
    assert "| first step or event 2020-03-23 11:38:31 |" in row


def test_a_wandb_run_without_its_output_log_is_read_for_the_console_its_wandb_file_recorded() -> None:
    """2038prob/pretraining-with-human-feedback-custom x1ohfka4: no files/output.log, but the .wandb file holds the
    program's console records, ending in a ValueError. The chronicle read "crashed ... W&B run exited with code 1;
    no error in what the program printed" and "nothing in the logs points at a cause"."""
    run, lines = _chronicle(REAL / "wandb" / "2038prob__pretraining-with-human-feedback-custom" / "wandb"
                            / "run-20240219_130616-x1ohfka4")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind) == ("failed_startup", "error")
    assert attempt.end_detail.startswith("ValueError: Mixed precision training with AMP or APEX")
    assert not any("no error in what the program printed" in line for line in lines)


def test_a_tensorboard_file_on_utc_beside_a_console_on_local_time_is_one_clock_and_an_exit_dump_is_no_hang() -> None:
    """elena-lyulina correctness job 1728401: TensorBoard stamps steps 1-15 at 13:43-13:46 UTC, the console prints
    them at 14:43-14:46 local time, then "[after training is done]", and faulthandler's "Stack (most recent call
    first): <no Python frame>" as the process exits. The chronicle read "hung ... nothing logged for 60 min after
    step 15" and "ran for 64 min" for a run that completed in 4 minutes."""
    run, lines = _chronicle(REAL / "megatron" / "elena-lyulina_Megatron-LM-Attention-Benchmark_correctness_1728401")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_step) == ("completed", "training_done", 15)
    assert round(attempt.ran_for_s) == 220
    assert not [a for a in run.anomalies if a.kind == "hang"]
    assert any("its times are 1 h behind those the text log prints at the same steps" in w for w in run.warnings)
    assert not any("hung" in line or "60 min" in line for line in lines)


def test_a_quantised_per_batch_loss_staying_on_a_high_level_for_a_few_batches_is_noise() -> None:
    """aorvieto/VerySimpleTransformer ovrxxego: a batch-of-4 classification loss at chance sits on a few levels
    (0.58, 0.64, 0.70, 0.76 ...) and stays on a high one for 3-5 batches now and then, its body uncorrelated. The
    runs of 3-5 points were judged as independent points and called 11 "loss spikes" of 1.2-1.8x. Consecutive
    points beyond the 95th percentile come 2.8x as often as independent points would give: the run thresholds
    allow for it."""
    run, _ = _chronicle(REAL / "wandb" / "aorvieto__VerySimpleTransformer" / "wandb" / "run-20230329_040152-ovrxxego")
    assert [(a.step, a.end_step) for a in run.anomalies if a.kind == "loss_spike"] == [(5, 10)]  # back by step 11
    assert run.coverage["spike_checks"]["loss"]["1"]["two_in_a_row_sigma"] == 13.38


def test_a_grad_norm_jump_to_a_new_high_in_the_burn_in_is_a_spike() -> None:
    """unsloth #5207: nine dicts, the grad norm 14.98, 9.78, 7.64, 92.10, 29.00, ..., 7.79, 11140.00. All nine fall
    in the burn-in, where a grad norm swinging as training starts is no spike unless 10x both points beside it; 92.10
    is not 10x the 29.00 after it and 11140 has none after it: "Anomalies: none found", while the coverage line said
    a grad norm 10x the point before it was checked for. A jump 10x the point before and above every point before it
    is no start-up swing."""
    run, _ = _chronicle(REAL / "hf_trainer" / "unsloth_issue5207_gradnorm_spike_excerpt.txt")
    assert [(a.kind, a.step, a.value) for a in run.anomalies] == [("grad_norm_spike", 4, 92.1),
                                                                 ("grad_norm_spike", 9, 11140.0)]


def test_a_grad_norm_nan_at_two_separate_points_is_not_said_as_one_stretch() -> None:
    """Time-MoE #71: the grad norm is NaN at the first and fourth dicts only, finite between and after: "NaN/Inf at
    steps 1-4" read as NaN from step 1 on."""
    run, _ = _chronicle(REAL / "hf_trainer" / "timemoe_issue71_intermittent_gradnorm_nan_excerpt.txt")
    [nan] = [a for a in run.anomalies if a.kind == "nan"]
    assert (nan.metric, nan.step, nan.end_step) == ("grad_norm", 1, 4)
    assert nan.detail == "NaN/Inf at 2 of the 4 logged steps from 1 to 4: grad_norm NaN; grad norm finite again from step 5"
    assert run.attempts[0].end_reason == "running"


def test_a_constant_lr_is_said_as_constant_not_as_a_peak() -> None:
    """Time-MoE #71 logs 'learning_rate': 0.0001 at all nine dicts: "LR peaks at 0.0001 (step 1); no warm-up seen"
    (audit U5; LLaVA #367's LR frozen at 9.0e-08 read the same)."""
    _, lines = _chronicle(REAL / "hf_trainer" / "timemoe_issue71_intermittent_gradnorm_nan_excerpt.txt")
    assert ("- **Schedule:** LR 0.0001 at every logged point (from step 1): no warm-up or decay in the logs."
            in lines)


def test_three_ranks_copies_of_one_overflow_are_one_skipped_step() -> None:
    """DeepSpeed #697: "Grad overflow on iteration 8" printed by three ranks, apart from one another, then the skip
    line "Attempted loss scale: 1, reducing to 1": "3 fp16 overflows, each a step skipped"."""
    run, _ = _chronicle(REAL / "console_errors" / "deepspeed_issue697_overflow_copies_excerpt.txt")
    assert run.attempts[0].end_detail == ("no metric logged, but 1 fp16 overflow, a step skipped (the loss scale "
                                          "reduced to 1)")


def test_an_error_where_no_step_was_read_is_not_said_to_come_before_any_step() -> None:
    """F5-TTS #346: an accelerate progress bar at `step=8569` (a form no reader takes), then two ranks' NCCL watchdog
    timeouts: "crashed before any iteration read from its logs" read as a start-up crash of a run 8,569 steps in."""
    run, lines = _chronicle(REAL / "console_errors" / "f5tts_issue346_nccl_watchdog_mid_run_excerpt.txt")
    assert run.attempts[0].end_reason == "crashed"
    assert any(line.startswith("- **What went wrong:** attempt 1 crashed with no step read from its logs: ")
               for line in lines)
    assert not any("before any iteration" in line for line in lines)


def test_a_spike_in_an_excerpt_starts_at_its_jump_not_at_an_ordinary_move_before_it() -> None:
    """LLaVA #918: the loss 0.6623, 0.8022, 4.2653, 0.77: "loss spike at step 2 ... steps 2-3: rose to 4.2653 (6.4x
    0.6623, the point before it)". A 21% move from the excerpt's first point, with no moves before it to say how the
    loss usually moves, was taken as the onset: it has the absolute checks only."""
    run, _ = _chronicle(REAL / "hf_trainer" / "llava_issue918_loss_spike_excerpt.txt")
    [spike] = [a for a in run.anomalies if a.kind == "loss_spike"]
    assert (spike.step, spike.end_step, spike.value) == (3, 3, 4.2653)


def test_event_files_of_launches_that_logged_nothing_are_launches_not_the_next_ones_start() -> None:
    """elena-lyulina llama3-1b-fineweb160B-test: three event files holding only their header (launches on other hosts
    and pids, at 18:12, 18:16 and 21:34) and the next morning's file that trained steps 1-344 from 09:18. The three
    were folded into that launch's start: "| 1 | 1-344 | 2026-04-14 18:12:49 | ... | 15.3 h |" for 14 minutes."""
    run, lines = _chronicle(REAL / "tensorboard" / "elena-lyulina_llama3-1b-fineweb160B-test")
    assert [(a.index, a.end_reason, a.start_step) for a in run.attempts] == [
        (1, "no_training", None), (2, "no_training", None), (3, "no_training", None), (4, "running", 1)]
    assert round(run.attempts[3].ran_for_s / 60) == 14
    assert any(line.startswith("- **Launches with no training step, error or stop in the logs:** attempt 1 "
                               "(2026-04-14 18:12:49), attempt 2") for line in lines)


def test_the_burn_in_new_high_rule_leaves_ordinary_start_up_swings_alone() -> None:
    """The burn-in rule (a grad norm 10x the point before it and twice every point before it) is read from a stretch's
    third point, with a margin: at the second point "above every point before it" holds of any rise. Without them,
    auroraGPT's torchtitan start ("none found") got a spike at step 2, and an ms-swift GRPO run's one-point spike at
    step 3 became "steps 3-5, not back" (review)."""
    aurora, _ = _chronicle(REAL / "torchtitan" / "auroraGPT_blendcorpus_aurora_ctrl_c.log")
    assert not aurora.anomalies
    grpo, _ = _chronicle(REAL / "hf_trainer" / "mswift_logging_jsonl" / "stage3_qwen3_17b_grpo")
    assert [(a.kind, a.step, a.end_step, a.recovered_step) for a in grpo.anomalies if a.kind.endswith("spike")] == [
        ("grad_norm_spike", 3, 3, 4)]


def test_a_spike_is_said_with_one_ratio_over_one_baseline() -> None:
    """The thresholds line's "largest rise" was over the median of the 8 points before (the mean of the middle two),
    the incident's over their lower median: one spike, two ratios (elena-lyulina's grad norm 85.79 at step 30:
    "51.8x" and "53.8x"; audit V1, V4, V6). Both are over the lower median now."""
    run, lines = _chronicle(REAL / "tensorboard" / "elena-lyulina_llama3-1b-fineweb160B-test")
    assert run.coverage["spike_checks"]["grad_norm"]["4"]["largest_rise"]["ratio"] == pytest.approx(53.7841, abs=1e-4)
    [spike] = [a for a in run.anomalies if a.kind == "grad_norm_spike"]
    assert "(53.8x the trailing median 1.595059871673584)" in spike.detail
    assert any("its largest rise: 53.8x the lower median of the 8 points before, to 85.78880310058594 at step 30"
               in line for line in lines)


def test_overflows_at_a_loss_scale_already_at_its_minimum_are_a_collapse() -> None:
    """liguodongiot/llm-action's Megatron-DeepSpeed note: after its "..." the loss scale is 1.0 and DeepSpeed prints
    "Overflow detected. Skipping step. Attempted loss scale: 1, reducing to 1" at the last iterations, the loss above
    chance: the scale could go no lower and its overflows were not named (DeepSpeed #697's "from 1 to 1"; audit U8)."""
    run, _ = _chronicle(REAL / "megatron" / "liguodongiot__megatron-deepspeed_llama-note_overflow.log.txt")
    [floor] = [a for a in run.anomalies if a.kind == "loss_scale_collapse"]
    assert (floor.step, floor.end_step, floor.value) == (2499, 2500, 1.0)
    assert floor.detail.startswith('fp16 overflows at a loss scale already at its minimum (1: "Attempted loss scale: 1, '
                                   'reducing to 1") at 2 steps from step 2499')


def test_an_overflow_that_kept_a_large_scale_is_deepspeeds_hysteresis_not_a_floor(tmp_path: Path) -> None:
    """tr8b-104B's chronicle, cut after its first overflow: "Attempted loss scale: 1048576.0, reducing to 1048576.0"
    is DeepSpeed's hysteresis holding the scale for one overflow (the next halves it). It was read as "fp16 overflows
    at a loss scale already at its minimum (1048576)": only a kept scale of 1 (the scalers' floor) is one."""
    log = REAL / "megatron" / "bigscience-workshop+bigscience__train_tr8b-104B_chronicles.md.log-snippets.txt"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    assert "reducing to 1048576.0" in lines[27] and lines[28].startswith(" iteration    17062/")
    (tmp_path / "tr8b.log").write_text("".join(lines[:29]), encoding="utf-8")
    run, _ = _chronicle(tmp_path / "tr8b.log")
    assert [a for a in run.anomalies if a.kind == "loss_scale_collapse"] == []
    assert [(b.metric, b.steps) for b in run.blips] == [("loss", [17062])]  # (its loss jump: one point, the last)


def test_an_out_of_memory_the_program_caught_is_not_a_crash() -> None:
    """fairseq #103: 'THCudaCheck FAIL ... out of memory' glued to the bar at 315/72115, then 'WARNING: ran out of
    memory on GPU #2, skipping batch' and the bar at 318: fairseq caught it and trained on. The chronicle said
    "crashed ... out of memory" (confidence 0.70); the lines are caught out-of-memory events, and with no metrics
    line of a format it reads the file is refused rather than told as a crash."""
    from parsers.megatron import PDSH_CMD, parse_megatron
    from parsers.textfile import inspect_text
    path = REAL / "fairseq" / "issue103_oom_skipping_batch.txt"
    log = parse_megatron(inspect_text(path, path.name, head_patterns={"pdsh": PDSH_CMD}), run="r", source=path.name)
    assert log.events.select("line", "kind").rows() == [
        (4, "out_of_memory_recovered"), (5, "out_of_memory_recovered"), (8, "out_of_memory_recovered")]
    with pytest.raises(parsers.InputError, match="no metrics lines of a text format it knows"):
        parsers.load_run(path)


def test_a_lone_nan_the_run_got_past_is_not_said_to_last() -> None:
    """ChatGLM-Efficient-Tuning #49: one PPO dict with 'loss': nan between finite ones (0.3290, nan, 0.2527, 0.1512).
    The summary said "NaN in the loss from step 2", read as a loss that stayed NaN, and the anomaly had no recovery."""
    run, lines = _chronicle(REAL / "hf_trainer" / "chatglm_efficient_tuning_issue49_ppo_one_nan.txt")
    [nan] = run.anomalies
    assert (nan.kind, nan.step, nan.end_step, nan.recovered_step) == ("nan", 2, 2, 3)
    assert lines[4].endswith("NaN in the loss at step 2, finite again from step 3.")


def test_stack_dumps_at_a_planned_exit_are_no_hang_and_the_exit_is_no_stop_from_outside() -> None:
    """elena-lyulina/Megatron-LM-Attention-Benchmark 2624605.out, the end of its first pass: '[exiting program after
    consuming all available data at iteration 300]', then every rank's faulthandler 'Stack (most recent call
    first): <no Python frame>' as it exits. The chronicle said "First anomaly: hang at step 300" and "stopped by the
    scheduler or a person (confidence 0.30)" for the program's own planned exit."""
    run, lines = _chronicle(REAL / "console_errors"
                            / "elena-lyulina_Megatron-LM-Attention-Benchmark_2624605_pass1_end.out")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.end_reason) == (200, 300, "exited")
    assert run.anomalies == []
    [cause] = run.suspected_causes
    assert (cause.kind, cause.cause, cause.confidence) == (
        "planned_exit", "a planned exit: the program stopped itself, as its own line says", 0.9)
    assert not any("hang" in line and "First anomaly" in line for line in lines)


def test_bloom_176b_first_spike_grad_norm_climb_and_an_indented_iteration_line() -> None:
    """BLOOM-176B's chronicles.md log blocks: (1) iteration 12695 pasted with one space before '[default7]:' was
    dropped: "crashed with no step read from its logs"; (2) the grad norm 0.242, 0.947, 2.390, 15.886, 145.1, 960.4
    over 31214-31219 rose at most 9.1x a step, under the 10x-the-point-before check: no grad-norm spike anywhere;
    (3) a hard wrap that took the space between two words of a label."""
    run, _ = _chronicle(REAL / "megatron"
                        / "bigscience-workshop+bigscience__train_tr11-176B-ml_chronicles.md.log-snippets.txt")
    first, second = run.attempts
    assert (first.start_step, first.end_step, first.end_reason) == (12695, 12695, "crashed")
    assert second.start_step == 31214
    assert [(a.kind, a.step, a.end_step, a.value) for a in run.anomalies] == [
        ("loss_spike", 31216, 31221, 5.098124), ("grad_norm_spike", 31217, 31219, 960.351)]
    # (3) '| number of nan' + 'iterations:  0 |' wrapped at 42780-84 was joined as "number_of_naniterations"
    assert run.coverage["metrics"]["nan_iterations"]["points"] == 18
    assert "number_of_naniterations" not in run.coverage["metrics"]


def test_a_grad_norm_far_above_a_new_level_is_named_in_the_level_shift() -> None:
    """Megatron-LM-Attention-Benchmark 2765350.out: the grad norm 14.554 at step 1830 (its median about 0.4) was told
    only as "grad norm rose to a new level: median ... 2.02x": a point many times the new level inside a rise is
    named, not hidden in the median."""
    run, _ = _chronicle(REAL / "console_errors"
                        / "elena-lyulina_Megatron-LM-Attention-Benchmark_2765350_iterations_1500-2092.out")
    shifts = {a.step: a.detail for a in run.anomalies if a.kind == "changepoint"}
    assert shifts[1824].endswith("; its highest 14.55 at step 1830 (9.1x it)")
    assert shifts[1597].endswith("; its highest 21.53 at step 1602 (10.0x it)")
    assert "highest" not in shifts[1735]


def _points(path: Path, metric: str) -> list[tuple[int, float | str]]:
    """The metric's (step, value) points read from the log, a NaN as "nan" (so that lists of them compare)."""
    rows = parsers.load_run(path).metrics.filter(metric=metric).sort("step").select("step", "value").rows()
    return [(step, "nan" if value != value else value) for step, value in rows]


def test_a_keras_fit_console_is_read_at_its_epochs_with_its_nan() -> None:
    """CNN-for-Sentence-Classification-in-Keras #7 (Keras 1: "9595/9595 [====] - 1s - loss: nan - acc: ... -
    val_loss: nan") and ReLERNN #26 (Keras 2: "100/100 [====] - 332s 3s/step - loss: nan - val_loss: nan") were
    refused as "not a recognised training log", and the NaN from epoch 2 (309) with them (audit X1, X2). Keras prints
    no global step: the steps are the epochs, each the end-of-epoch line's values; the bar's updates during an epoch
    (" 99/100 [====>.] - ETA: 3s - loss: nanEpoch 1/1000", a nested "Epoch 1/1000" glued to it) are no points and no
    restart."""
    keras1 = REAL / "keras" / "cnn_sentence_issue7_nan_from_epoch2.txt"
    assert _points(keras1, "loss") == [(1, 0.6242), *((epoch, "nan") for epoch in range(2, 8))]
    assert _points(keras1, "val_loss") == [(1, 0.5265), *((epoch, "nan") for epoch in range(2, 8))]
    assert _points(keras1, "acc")[:2] == [(1, 0.6295), (2, 0.4117)]
    assert _points(keras1, "val_acc")[:2] == [(1, 0.747), (2, 0.0)]
    run, lines = _chronicle(keras1)
    assert [(a.kind, a.metric, a.step, a.end_step) for a in run.anomalies] == [
        ("nan", "loss", 2, 7), ("non_finite", "val_loss", 2, 7)]
    assert run.warnings == [f"{keras1}: it prints no global step: the steps here are epochs (each point the "
                            "end-of-epoch value)"]
    assert "- **What went wrong:** attempt 1 ended in NaN/Inf: NaN from step 2 to the end of its log (step 7)." in lines

    keras2 = REAL / "keras" / "relernn_issue26_nan_epoch309.txt"
    assert _points(keras2, "loss") == [(308, 0.2445), (309, "nan"), (310, "nan")]
    assert _points(keras2, "val_loss") == [(308, 0.2342), (309, "nan"), (310, "nan")]
    run, _ = _chronicle(keras2)
    assert [(a.start_step, a.end_step, a.begins_mid_run) for a in run.attempts] == [(308, 310, True)]
    assert [(a.kind, a.metric, a.step) for a in run.anomalies] == [("nan", "loss", 309), ("non_finite", "val_loss", 309)]


def test_an_mmcv_1x_log_is_read_with_its_intermittent_nan() -> None:
    """iterdet #3 (mmdet 2.x on mmcv 1.x): "Epoch [1][50/1084]\\tlr: 0.01000, eta: ..., time: 0.953, ...,
    loss_bbox: nan, loss: nan" was refused as "not a recognised training log" (only MMEngine's "Epoch(train)" form
    was read), and its NaN at iterations 50 and 100 with it (audit X4). The step counts iterations over the epochs, as
    MMEngine's does; the loss term that is NaN is read under its own name."""
    path = REAL / "mmcv" / "iterdet_issue3_intermittent_nan.txt"
    assert [src.format for src in parsers.load_run(path).sources] == ["mmcv"]
    assert _points(path, "loss") == [(50, "nan"), (100, "nan"), (150, 1.1586)]
    assert _points(path, "loss_bbox") == [(50, "nan"), (100, "nan"), (150, 0.4434)]
    assert _points(path, "loss_rpn_cls") == [(50, 0.5577), (100, 0.3339), (150, 0.2372)]
    assert _points(path, "lr") == [(50, 0.01), (100, 0.01), (150, 0.01)]
    assert _points(path, "iteration_time_ms") == [(50, 953.0), (100, 965.0), (150, 929.0)]
    run, lines = _chronicle(path)
    assert [(a.kind, a.metric, a.step, a.end_step, a.recovered_step) for a in run.anomalies] == [
        ("nan", "loss", 50, 100, 150), ("non_finite", "loss_bbox", 50, 100, 150)]
    assert lines[4].endswith("NaN in the loss at steps 50-100, finite again from step 150.")


def test_a_detectron2_events_line_is_read_at_its_iteration() -> None:
    """detectron2 #214: "[11/01 20:14:15 d2.utils.events]: eta: 5:41:49  iter: 379  total_loss: 1.707  loss_cls:
    1.184 ... time: 0.2293 ... lr: 0.003796  max_mem: 3782M" was refused as "not a recognised training log" (audit
    X15). The step is ``iter``, the loss ``total_loss``; ``time`` (the mean since the start) is no iteration time."""
    path = REAL / "detectron2" / "issue214_events_calm.txt"
    assert _points(path, "loss") == [(379, 1.707), (399, 1.679), (419, 1.674), (439, 1.686), (459, 1.718),
                                     (479, 1.675), (499, 1.733)]
    assert _points(path, "lr")[::6] == [(379, 0.003796), (499, 0.004995)]
    assert _points(path, "loss_box_reg")[:2] == [(379, 0.475), (399, 0.478)]
    assert _points(path, "iteration_time_ms") == []
    run, _ = _chronicle(path)
    assert run.anomalies == []
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.begins_mid_run, attempt.end_reason) == (
        379, 499, True, "running")


def test_start_up_clipping_through_a_long_warm_up_is_no_onset_of_sustained_clipping() -> None:
    """elena-lyulina/Megatron-LM-Attention-Benchmark 2765350.out (1.2B from scratch, clip_grad 1.0, lr_warmup_iters
    2000): the grad norm is above 1 at every step to 500 and falls through the threshold until about step 1100. The
    chronicle's "First anomaly: clipping at step 938" ("65% of logged steps from step 938 to step 1054 (against 75%
    before)") and its top suspected cause were that start-up clipping, less than the share before it. The rise at
    1302-1418, after 200 steps clipped at most 20%, is the onset (audit W1)."""
    run, lines = _chronicle(REAL / "megatron"
                            / "elena-lyulina_Megatron-LM-Attention-Benchmark_2765350_args_and_iterations.out")
    assert [(a.metric, a.step, a.end_step, a.value, a.baseline) for a in run.anomalies if a.kind == "clipping"] == [
        ("clipped_share", 1302, 1418, 0.5385, 0.0376), ("grad_norm", 1597, 1830, 21.533, 1.0)]
    assert "- **First anomaly:** clipping at step 1302 (attempt 1)." in lines
    [cause] = run.suspected_causes
    assert cause.evidence == [
        "attempt 1: grad norm above the clip threshold 1 at 54% of logged steps from step 1302 to step 1418 (against 4% "
        "from step 1089; rolling share over 100 points); it began 300 steps before the loss spike at step 1602"]
    assert not any("step 938" in line for line in lines)


def test_clipping_just_after_the_start_up_clipping_of_a_short_run_is_no_onset() -> None:
    """elena-lyulina/Megatron-LM-Attention-Benchmark 2624605.out, its fourth pass (300 iterations from scratch, clip_grad
    1.0): 35 of steps 1-36 clipped, none of 37-50, then 9 of 51-65 (grad norms 0.72-1.67; the other passes clip 65-81%
    of steps 20-50).
    The chronicle's "First anomaly: clipping at step 51" ("60% ... (against 25% before)") was that start-up clipping's
    last swing (audit W2, attempt 4)."""
    run, lines = _chronicle(REAL / "megatron"
                            / "elena-lyulina_Megatron-LM-Attention-Benchmark_2624605_pass4_iterations.out")
    assert run.anomalies == []
    assert "- **Anomalies:** none found." in lines
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.end_reason) == (1, 300, "completed")


def test_a_save_begun_then_failed_is_no_checkpoint_and_the_program_failed_after_its_training() -> None:
    """stark-sim md_v100_static1410: iterations 1-20 of 20, "[after training is done]", "saving checkpoint at iteration
    20", then every rank's write fails (a full disk). The chronicle said "the last checkpoint saved in the logs is at
    step 20" (the save that failed) and "completed", nothing gone wrong (audit Z2). A destructor's error after the end
    of training ("Exception ignored in: ...") is no failure (generated log)."""
    from forensics.saves import saved_steps

    path = REAL / "megatron" / ("stark-sim+megatron-deepspeed-lock-clock__experiments__screen_boot_md_v100_static1410_"
                                "20260311_1.log")
    events = parsers.load_run(path).events
    assert events.filter(kind="checkpoint_saving")["value"].to_list() == [20.0]
    assert saved_steps(events).to_list() == []
    run, lines = _chronicle(path)
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.failed_after_training) == ("completed", (
        "[rank0]: RuntimeError: [enforce fail at inline_container.cc:858] . PytorchStreamWriter failed writing file "
        "data/5: file write failed"))
    [cause] = run.suspected_causes
    assert (cause.kind, cause.confidence) == ("storage", 0.8)
    assert not any("last checkpoint saved" in line for line in lines)
    done, _ = _chronicle(GENERATED / "megatron_done_then_exception_ignored.txt")
    assert [(a.end_reason, a.end_step, a.failed_after_training) for a in done.attempts] == [("completed", 3, None)]


def test_a_final_checkpoint_write_that_failed_after_the_last_step_is_storage_after_training() -> None:
    """AntonioLopardo/OLMo OLMo-1B-tied-out0.5-1000 train.log: `[step=1000/1000,epoch=0]`, "Saving unsharded
    checkpoint...", then "RuntimeError: ... PytorchStreamWriter failed writing file data/19: file write failed" and
    torchrun's exitcode 1. The chronicle said "crashed after step 1000", never that 1000 was its last planned step
    (`target_step` null), and blamed "an error in the program or its configuration" (0.50) for a file write that
    failed (audit W5)."""
    run, lines = _chronicle(REAL / "olmo" / "AntonioLopardo_OLMo_1B_tied_out0.5_1000_checkpoint_write_failed.log")
    error = ("RuntimeError: [enforce fail at inline_container.cc:858] . PytorchStreamWriter failed writing file "
             "data/19: file write failed")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.target_step) == (10, 1000, 1000)
    assert (attempt.end_reason, attempt.end_detail, attempt.failed_after_training) == (
        "completed", "reached its last step (1000 of 1000)", error)
    [cause] = run.suspected_causes
    assert (cause.kind, cause.confidence, cause.evidence) == ("storage", 0.8, [f"attempt 1, after step 1000: {error}"])
    assert cause.cause == ("storage: writing (or reading) a file failed: a full disk or shared memory, a quota, an I/O "
                           "error or a lost mount")
    assert cause.check_next.endswith("; the last checkpoint saved in the logs is at step 500")
    assert "- **What went wrong:** attempt 1 completed: reached its last step (1000 of 1000); then the program failed " \
           "after its training: “RuntimeError: \\[enforce fail at inline\\_container.cc:858\\] . PytorchStreamWriter " \
           "failed writing file data/19: file write failed”; exit code 1, the last status its log printed." in lines
    assert not any("error in the program" in line for line in lines)


def test_processes_that_printed_their_shutdown_lines_exited_and_are_not_still_running() -> None:
    """AntonioLopardo/OLMo OLMo-1B-0724-reproduce train_20251211_002555.log ends after `[step=2003/2500,epoch=1]` with
    eight "UserWarning: resource_tracker: There appear to be 56 leaked semaphore objects to clean up at shutdown"
    lines, one per rank's process as it exits, and no error. The chronicle offered "still running, cut off, or stopped
    without a word"; the processes exited, and nothing says why (audit W9)."""
    run, lines = _chronicle(REAL / "olmo" / "AntonioLopardo_OLMo_1B_0724_reproduce_last_steps_shutdown.log")
    shutdown = ("/usr/lib/python3.12/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There "
                "appear to be 56 leaked semaphore objects to clean up at shutdown")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.target_step) == (1990, 2003, 2500)
    assert (attempt.end_reason, attempt.end_kind, attempt.end_detail) == ("silent_exit", "shutdown", shutdown)
    assert [(e.kind, e.step, e.count) for e in run.log_entries] == [("shutdown", 2003, 8)]
    assert run.suspected_causes == [] and run.anomalies == []
    assert "- **Exited, with no reason printed:** attempt 1 after step 2003 of 2500: its processes shut down " \
           "(“/usr/lib/python3.12/multiprocessing/resource\\_tracker.py:254: UserWarning: resource\\_tracker: There " \
           "appear to be 56 leaked semaphore objects to clean up at shutdown”) with no error, stop or end of training " \
           "printed." in lines
    assert not any("still running" in line for line in lines)


def test_a_long_setting_printed_cut_off_at_two_lengths_is_no_change() -> None:
    """Megatron-LM-Attention-Benchmark 2624605.out: each pass prints data_path (a list of some 40 paths) cut off by
    the log, at 846 characters in one and 972 in the next, the shorter a beginning of the longer: the chronicle said
    "What changed: data_path: [...] -> [...]" in multi-kilobyte cells. The settings that truly changed stay."""
    run, _ = _chronicle(REAL / "console_errors"
                        / "elena-lyulina_Megatron-LM-Attention-Benchmark_2624605_two_argument_blocks.out")
    assert run.attempts[1].config_changes == {"gdn_state_carry_ratio": [0.0, 1.0],
                                              "moe_router_bias_update_rate": [0.0, 0.001]}
    assert sorted(run.config_diffs) == ["gdn_state_carry_ratio", "moe_router_bias_update_rate"]


def test_an_lr_decaying_through_a_hole_in_one_process_is_no_changed_setting() -> None:
    """BLOOM-176B's chronicles.md blocks: between steps 31251 and 42780 of one attempt the LR went 5.277e-05 ->
    4.475e-05, 11,500 steps of its cosine decay, listed under "Discontinuities (settings that changed ...)"."""
    run, _ = _chronicle(REAL / "megatron"
                        / "bigscience-workshop+bigscience__train_tr11-176B-ml_chronicles.md.log-snippets.txt")
    assert [(d.metric, d.step_before, d.step_after, d.across) for d in run.discontinuities] == [
        ("lr", 12695, 31214, "gap")]


def test_a_nanogpt_fine_tune_from_gpt2_weights_is_not_told_as_from_scratch() -> None:
    """nanoGPT #210: 'Initializing from OpenAI GPT-2 weights: gpt2' (init_from = 'gpt2'), then iter 0 and a NaN at
    iter 1: the chronicle said "from the start of training" for a fine-tune of pretrained weights."""
    run, lines = _chronicle(REAL / "nanogpt" / "nanogpt_issue210_finetune_gpt2_nan_iter1.txt")
    [attempt] = run.attempts
    assert attempt.loaded_weights and attempt.resumed_from_step is None
    assert (attempt.start_step, attempt.end_step, attempt.end_reason) == (0, 1, "nan")
    assert any("| from weights loaded from a checkpoint, its steps counted from the start" in line for line in lines)


def test_a_run_that_did_not_end_has_no_why_it_ended() -> None:
    """fairseq #311: updates 371-441, the grad norm 0.79 then 11.481 and 13.519, no end printed: the causes section
    was headed "Why it ended (suspected causes)" for a run that had not ended."""
    run, lines = _chronicle(REAL / "fairseq" / "issue311_gnorm_jump_14x.txt")
    assert [(a.kind, a.step) for a in run.anomalies] == [("grad_norm_spike", 431)]
    assert run.attempts[0].end_reason == "running"
    assert "## What may have caused its anomalies (suspected causes)" in lines
    assert not any(line.startswith("## Why it ended") for line in lines)


def test_the_lr_peak_is_where_the_printed_peak_is_reached() -> None:
    """Megatron-LM-Attention-Benchmark 2765350.out: 'learning rate: 3.996000E-04' at 1998, 4.000000E-04 first at
    2000: "LR peaks at 0.0004 (step 1998)" (3.996e-4 is within 0.1% of the peak, but four printed digits below it)."""
    run, _ = _chronicle(REAL / "console_errors"
                        / "elena-lyulina_Megatron-LM-Attention-Benchmark_2765350_iterations_1500-2092.out")
    assert (run.schedule.lr_peak, run.schedule.lr_peak_step) == (4e-4, 2000)


def test_a_stop_on_a_nan_loss_check_ends_in_nan_not_in_a_program_error() -> None:
    """uoais #16 (detectron2): 'FloatingPointError: Loss became infinite or NaN at iteration=0!' read "crashed" with
    "an error in the program or its configuration (0.50)"; the traceback's source line quoting the message
    ('f"Loss became infinite or NaN at iteration={storage.iter}!\\n"') is no NaN check."""
    run, _ = _chronicle(REAL / "detectron2" / "uoais_issue16_floatingpointerror_iter0.txt")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_detail) == ("nan", "FloatingPointError: Loss became infinite or NaN at "
                                                                "iteration=0!")
    assert not any(c.kind == "program_error" for c in run.suspected_causes)
    # (scikit-learn's "Input contains NaN", which ends dream-ml-d's Keras 3 run after 21 epochs of NaN loss, is not
    # one: bad input data says it too; it is the error after the fit's early stopping)
    run, _ = _chronicle(REAL / "keras" / "dream-ml-d_keras3_lstm_nan_earlystop_valueerror.log")
    assert [(a.end_reason, a.failed_after_training) for a in run.attempts] == [
        ("exited", "ValueError: Input contains NaN.")]


def test_a_keras_3_fit_is_read_from_its_epochs_ends() -> None:
    """dream-ml-d's Keras 3 console (``2/2 ━━━━ 0s 23ms/step - loss: nan ...``): 21 epochs of NaN loss, early stopping,
    then scikit-learn's ``ValueError: Input contains NaN.`` It was read for its errors only: "no loss metric", "crashed
    with no step read". A generated log checks that a bar's updates (``1/4``, ``3/4``) are not an epoch's value."""
    path = REAL / "keras" / "dream-ml-d_keras3_lstm_nan_earlystop_valueerror.log"
    assert _points(path, "loss") == [(epoch, "nan") for epoch in range(1, 22)]
    assert _points(path, "lr")[:12] == [(epoch, 0.001) for epoch in range(1, 12)] + [(12, 0.0005)]
    run, lines = _chronicle(path)
    assert [(a.kind, a.step) for a in run.anomalies][:1] == [("nan", 1)]
    assert not any("values printed after an epoch's end" in w for w in run.warnings)  # the NaN updates gave way
    assert "- **What went wrong:** attempt 1 exited as planned after step 21: “Epoch 21: early stopping”; then the " \
           "program failed after its training: “ValueError: Input contains NaN.”; NaN in the loss from step 1." in lines
    updates = GENERATED / "keras3_bar_updates_on_their_own_lines.log"
    assert _points(updates, "loss") == [(1, 1.912), (2, 1.3527), (3, "nan")]
    assert _points(updates, "val_loss") == [(1, 1.6011), (2, 1.295), (3, "nan")]
    run, _ = _chronicle(updates)
    assert [w.split(": ", 1)[1] for w in run.warnings][1:] == [
        "2 values printed after an epoch's end at the same epoch (model.evaluate or predict output after the fit): "
        "not read"]


def test_a_keras_nan_in_the_bar_of_the_epoch_the_paste_stops_in_is_found() -> None:
    """SimCLRv1-keras-tensorflow #14: epochs 1-3 end at loss 581.4498, 420.4594, 277.1834; epoch 4's bar shows
    'loss: nan' and the paste ends inside it. The bar's updates were not read: "no attempt ended in NaN" and "the
    other checks (NaN) found nothing"."""
    run, _ = _chronicle(REAL / "keras" / "simclr_issue14_nan_in_epoch4_bar.txt")
    assert _points(REAL / "keras" / "simclr_issue14_nan_in_epoch4_bar.txt", "loss") == [
        (1, 581.4498), (2, 420.4594), (3, 277.1834), (4, "nan")]
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_reason) == (4, "nan")
    assert [(a.kind, a.step) for a in run.anomalies] == [("nan", 4)]


def test_a_detectron2_log_is_read_to_its_end() -> None:
    """tx2dl's detectron2 log.txt: iterations 19-299, calm, the LR still warming up; 'Overall training speed: 298
    iterations' is not taken as the end of training (detectron2 prints it in a finally block, before the traceback
    of a crash or a Ctrl-C too)."""
    run, _ = _chronicle(REAL / "detectron2" / "tx2dl_balloon_R50-FPN_log.txt")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.end_reason) == (19, 299, "running")
    assert run.anomalies == [] and run.schedule.still_warming_up


def test_an_iteration_counter_that_starts_again_each_epoch_misses_no_point() -> None:
    """fenghuo-project-of-mmdet mm.md: mmcv logs iterations 50, 100, ..., 900 of each 930-iteration epoch, so the
    steps go 900 -> 980 at every epoch's end: "Points not logged: 11 points of the regular logging", none missing."""
    run, lines = _chronicle(REAL / "mmcv" / "fenghuo_mmdet2_maskrcnn_12ep_mm.md")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step) == (50, 11130)
    assert run.coverage.get("short_holes") is None
    assert not any(line.startswith("- **Points not logged:**") for line in lines)


def test_keras_epochs_with_a_callback_line_before_the_bar_are_read() -> None:
    """EIP4-coursework Session-2: each epoch prints 'Epoch 1/20', a blank line, 'Epoch 00001: LearningRateScheduler
    setting learning rate to 0.003.', then its end-of-epoch line: the file was refused as not a training log. Four
    fit() calls of epochs 1-20 (Keras prints no end: the last 'still running' or cut off, as the log can tell)."""
    path = REAL / "keras" / "eip4_session2_four_fits_README.md"
    run, _ = _chronicle(path)
    assert [(a.start_step, a.end_step) for a in run.attempts] == [(1, 20)] * 4
    first = parsers.load_run(path).metrics.filter(attempt=1).sort("step")
    assert first.filter(metric="loss").select("step", "value").rows()[:2] == [(1, 0.5289), (2, 0.2575)]


def test_torchvision_metric_logger_lines_are_read() -> None:
    """Stable-Pix2Seq #14: torchvision's MetricLogger ('Epoch: [0]  [1280/3696]  eta: ...  lr: 0.000100  loss: 5.1132
    (5.4946) ...'), the logger of DETR, DeiT, MAE and their kin, then a traceback: refused as not a training log,
    which hid that the program died."""
    path = REAL / "metric_logger" / "stable_pix2seq_issue14_traceback.txt"
    run, _ = _chronicle(path)
    assert _points(path, "loss") == [(1280, 5.1132), (1290, 5.1292), (1300, 5.1292), (1310, 5.1232), (1320, 5.1016),
                                     (1330, 5.0905)]
    assert _points(path, "iteration_time_ms")[0] == (1280, 790.6)
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_reason, attempt.end_detail) == (
        1330, "crashed", "a traceback with no error line after it in the log")


def test_keras_early_stopping_is_a_planned_exit_and_evaluate_is_no_epoch() -> None:
    """keras-io's timeseries classification example: 'Epoch 287: early stopping' ends a fit of 500 planned epochs,
    then model.evaluate prints '42/42 [====] - 0s 5ms/step - loss: 0.0942 - ...', a line like an epoch's end: read
    as a second loss at epoch 287, and the fit as "still running, cut off"."""
    path = REAL / "keras" / "keras-io_timeseries_classification_early_stopping_tail.md"
    run, _ = _chronicle(path)
    assert _points(path, "loss")[-2:] == [(286, 0.0498), (287, 0.0499)]
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_reason, attempt.end_detail) == (287, "exited", "Epoch 287: early stopping")
    assert any("1 value printed after an epoch's end at the same epoch" in w for w in run.warnings)


def test_a_raised_out_of_memory_next_to_a_caught_one_still_ends_the_run(tmp_path: Path) -> None:
    """Review of the caught-OOM rule: one rank's 'WARNING: ran out of memory ..., skipping batch' next to another
    rank's 'RuntimeError: CUDA out of memory' made the raised error 'recovered' and the run "still running" (a
    generated log in fairseq's simple format)."""
    lines = [f"| epoch 001:    {n:3d} / 614 loss=10.4, nll_loss=10.4, ppl=1092.29, wps=1334, ups=3.0, wpb=439, "
             f"bsz=18, num_updates={n}, lr=0.05, gnorm=0.81, clip=0%" for n in range(10, 110, 10)]
    lines += ["| WARNING: ran out of memory on GPU #2, skipping batch",
              "RuntimeError: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 11.17 GiB total capacity)"]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    [attempt] = forensics.analyze_path(log).findings.runs[0].attempts
    assert (attempt.end_step, attempt.end_reason, attempt.end_kind) == (100, "crashed", "out_of_memory")


def test_a_keras_fit_that_died_inside_its_last_epoch_did_not_complete() -> None:
    """Review: with 'Epoch K/K' read as the planned length, a point inside the last epoch (a NaN in its bar) read
    "completed: reached its last step (2 of 2)" for a fit that died there; TensorFlow's 'OOM when allocating tensor'
    was "an error in the program" (generated logs after the review's inputs)."""
    nan = forensics.analyze_path(GENERATED / "keras_nan_in_last_epoch_then_tf_error.txt").findings.runs[0]
    assert [(a.end_step, a.end_reason, a.target_step) for a in nan.attempts] == [(2, "crashed", None)]
    oom = forensics.analyze_path(GENERATED / "keras_oom_inside_last_epoch.txt").findings.runs[0]
    assert [(a.end_reason, a.end_kind) for a in oom.attempts] == [("crashed", "out_of_memory")]


def test_megatron_kill_switch_is_a_stop_by_a_person_not_a_planned_exit() -> None:
    """Review: 'Detected kill switch' (a file a person creates to stop the job) read "a planned exit: the program
    stopped itself" (0.90) once planned exits had a cause of their own (generated log)."""
    run = forensics.analyze_path(GENERATED / "megatron_kill_switch.txt").findings.runs[0]
    assert [a.end_reason for a in run.attempts] == ["stopped"]
    assert [c.kind for c in run.suspected_causes] == ["stopped"]


def test_an_lr_cut_across_a_hole_is_still_said() -> None:
    """Review: 'an LR lower after a hole, already decaying' hid an LR cut to a third across a hole (a relaunch the
    hole hides); the decay must be the one its slope before the hole gives (generated log)."""
    run = forensics.analyze_path(GENERATED / "megatron_lr_cut_by_hand_across_hole.txt").findings.runs[0]
    assert [(d.metric, d.step_before, d.step_after, d.across) for d in run.discontinuities] == [
        ("lr", 21000, 23000, "gap")]


def test_a_silent_exit_is_neither_a_stop_on_purpose_nor_declared_before_more_work(tmp_path: Path) -> None:
    """Review: the OLMo run whose ranks printed their shutdown warnings at step 2003 of 2500 was "stopped at 2003" in
    compare and survived in a sweep; and a shutdown line followed by a save (more work) was taken as the exit."""
    import shutil

    shutil.copy(REAL / "olmo" / "AntonioLopardo_OLMo_1B_0724_reproduce_last_steps_shutdown.log", tmp_path / "olmo.log")
    [row] = forensics.compare_runs([tmp_path / "olmo.log"], jobs=1, cache=False).comparison.rows
    assert (row.outcome, row.outcome_step) == ("exited", 2003)
    run = forensics.analyze_path(GENERATED / "megatron_shutdown_line_then_more_work.txt").findings.runs[0]
    assert [a.end_reason for a in run.attempts] == ["running"]


def test_a_full_shared_memory_is_not_sent_to_the_checkpoint_disk() -> None:
    """Review: a DataLoader worker's 'unable to write to file </torch_...>: No space left on device' (/dev/shm full)
    read "check ... its checkpoint directory first" (generated log)."""
    run = forensics.analyze_path(GENERATED / "megatron_dev_shm_full.txt").findings.runs[0]
    [cause] = run.suspected_causes
    assert cause.kind == "storage" and cause.check_next.startswith("the shared memory /dev/shm")
    # the parser says where the file failed (the analysis matches no text): the shared memory
    kinds = parsers.load_run(GENERATED / "megatron_dev_shm_full.txt").events["kind"].to_list()
    assert "shared_memory_error" in kinds and "storage_error" not in kinds


def test_lightning_launches_that_logged_only_the_hp_metric_placeholder_logged_no_training_step() -> None:
    """Anpopaicoconat/persona lightning_logs/version_0..11 (audit Z1, Z3): each event file holds only Lightning's
    ``hp_metric = -1`` at step 0 (version_6 twice, version_9 three times), written with the hyperparameters when the
    logger starts. The placeholder was read as a logged step: "attempt 2: step 0 (a replay of steps logged before)" and
    the same for attempts 3-11, and version_1 (the folder with an hparams.yaml) split off as a run of its own."""
    root = REAL / "tensorboard" / "Anpopaicoconat_persona"
    analysis = forensics.analyze_path(root)
    [run] = analysis.findings.runs
    lines = reports.render(analysis.findings, "markdown").splitlines()
    assert [(a.index, a.start_step, a.end_reason) for a in run.attempts] == [(n, None, "no_training") for n in range(1, 13)]
    assert "- **Launches with no training step, error or stop in the logs:** attempt 1 (2022-11-11 19:02:53), attempt 2 " \
           "(2022-11-11 19:04:41), attempt 3 (2022-11-11 19:13:44), attempt 4 (2022-11-11 19:19:32), attempt 5 " \
           "(2022-11-11 19:21:42), attempt 6 (2022-11-11 19:22:09), attempt 7 (2022-11-11 19:23:25), attempt 8 " \
           "(2022-11-11 19:24:56), attempt 9 (2022-11-11 19:25:17), attempt 10 (2022-11-11 19:26:08), attempt 11 " \
           "(2022-11-11 19:37:38), attempt 12 (2022-11-11 20:07:15)." in lines
    assert not any("a replay of steps" in line or "step 0" in line for line in lines if not line.startswith("> - "))
    assert "- attempt 2: no training step, error or stop in the logs" in lines
    assert "hp_metric" not in run.coverage["other_scalars"]
    assert [w.split(": ", 1)[1] for w in run.warnings] == [HP_METRIC_PLACEHOLDER] * 6 + [
        HP_METRIC_PLACEHOLDER.replace("(1 record)", "(2 records)"), HP_METRIC_PLACEHOLDER,
        HP_METRIC_PLACEHOLDER, HP_METRIC_PLACEHOLDER.replace("(1 record)", "(3 records)"), HP_METRIC_PLACEHOLDER,
        HP_METRIC_PLACEHOLDER]
    # version_1's hparams.yaml is the settings of version_1's launch (attempt 2), not of the last one
    [loaded] = parsers.load_runs(root)
    yaml = loaded.configs.filter(pl.col("source") == "lightning_logs/version_1/hparams.yaml")
    assert yaml["attempt"].unique().to_list() == [2]


L1TRIGGER = REAL / "tensorboard" / "Francesco-Proietti_Tokenization-techniques-for-L1-Trigger-data" / "version_10"


def test_the_hp_metric_placeholder_of_an_evaluation_file_is_no_replay_from_step_0() -> None:
    """Francesco-Proietti/Tokenization-techniques-for-L1-Trigger-data version_10 (audit Z1, Z7): the fit's file and
    the three evaluation files after it each hold Lightning's ``hp_metric = -1`` at step 0, so each evaluation file
    began at step 0 and was read as "attempt 2-4: steps 0–54200 (a replay of steps logged before)"."""
    run, lines = _chronicle(L1TRIGGER)
    assert [(a.index, a.start_step, a.end_step) for a in run.attempts] == [(1, 9, 54200)]
    assert not any("a replay of steps" in line for line in lines)
    assert run.coverage["metrics"]["loss"]["first_step"] == 9


def test_evaluation_files_after_a_lightning_fit_are_evaluation_passes_and_the_fit_completed() -> None:
    """Francesco-Proietti/Tokenization-techniques-for-L1-Trigger-data version_10 (audit Z1, Z7): after the 50-epoch
    fit (file .0, steps 9-54199), the same process (pid 15283) ran trainer.validate(), test() and validate(), each
    writing a file of its own with one evaluation at step 54200. They were "attempts 2-4", the last "still running,
    cut off, or stopped without a word", and the fit "diverged" although it had returned to run them."""
    run, lines = _chronicle(L1TRIGGER)
    name = "events.out.tfevents.{}.francesco-Inspiron.15283.{}"
    [fit] = run.attempts
    assert (fit.start_step, fit.end_step, fit.end_reason, fit.end_at_step) == (9, 54200, "completed", 54200)
    said = (f"training finished: the same process (pid 15283) then ran an evaluation pass ({name.format(1776246909, 1)}: "
            "evaluation scalars only, at step 54200)")
    assert fit.end_detail == said
    assert (f"- **What went wrong:** attempt 1 completed after step 54200: {said}; divergence in the loss from step "
            "3189.") in lines
    assert run.coverage["evaluation_passes"] == [name.format(1776246909, 1), name.format(1776246999, 2),
                                                 name.format(1776247018, 3)]
    assert (f"- {name.format(1776246999, 2)} (tensorboard, an evaluation pass: evaluation scalars only, no training "
            "step): test commit loss 1 points (step 54200); test loss 1 points (step 54200); test recon loss 1 points "
            "(step 54200).").replace("_", "\\_") in lines
    assert [(e.kind, e.step, e.count, e.text) for e in run.log_entries if e.kind == "evaluation_pass"] == [
        ("evaluation_pass", 54200, 2, "evaluation scalars only, no training step: val_commit_loss=0, val_loss=0.141872, "
                                      "val_recon_loss=0.141872 at step 54200"),
        ("evaluation_pass", 54200, 1, "evaluation scalars only, no training step: test_commit_loss=0, test_loss=0.139702, "
                                      "test_recon_loss=0.139702 at step 54200")]
    # the fit's end by the clock is its last training step (09:49:26), not the evaluations after it
    assert any(line.startswith("| 1 | 9–54200 | 2026-04-15 09:07:10 | 2026-04-15 09:49:26 | 42 min | – | completed after "
                               "step 54200: training finished") for line in lines)
    # their values are read: the last validation (and the fit's own at 54199) and the test loss
    assert (run.coverage["metrics"]["val_loss"]["points"], run.coverage["metrics"]["val_loss"]["last_step"]) == (52, 54200)
    assert (run.coverage["metrics"]["test_loss"]["points"], run.coverage["metrics"]["test_loss"]["first_step"]) == (1, 54200)


def test_nccl_errors_after_an_out_of_memory_are_its_consequence_not_the_hardware() -> None:
    """Audit Z4 (stark-sim/megatron-deepspeed-lock-clock, .context/dual8_tp4pp1dp2_smoke_nohup_20260331_r2.log): the
    four local ranks' 'NCCL WARN Cuda failure 2 'out of memory'' (L2175-2214), in new_group before any step, then
    their 'unhandled cuda error' / ncclUnhandledCudaError (L2247-2323) read as a second cause, "hardware or
    infrastructure failure (0.30) ... check node health (ECC, Xid)", with nothing against it; and the advice was the
    micro-batch and activation checkpointing, for a failure before any batch."""
    run, lines = _chronicle(
        REAL / "console_errors" / "stark-sim+megatron-deepspeed-lock-clock__.context_smoke_nohup_20260331_r2_nccl_oom.log")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_step) == ("failed_startup", "out_of_memory", None)
    [memory] = run.suspected_causes
    assert (memory.kind, memory.confidence) == ("memory", 0.7)
    assert memory.evidence[4] == (
        "attempt 1: the 12 NCCL or CUDA error lines printed after it in the same log (first: localhost: [rank1]: "
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:230, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5) follow from it, not from the "
        "hardware: a process out of memory fails its next CUDA calls, and the ranks it talked to see it exit")
    assert memory.check_next.startswith(
        "other processes on the node first (a previous launch still holding the GPUs: nvidia-smi): NCCL's own "
        "allocation ran out of memory before any step was logged")
    assert not any("hardware or infrastructure failure" in line or "ECC, Xid" in line for line in lines)


def test_a_grad_norm_and_loss_scale_printed_as_placeholders_on_every_line_are_not_logged() -> None:
    """Audit Z7 (bigscience-workshop/bigscience, experiments/gpt2-meg-ds-3d/meg_ds_3d_gpt2_perf_n16-ds-on.out): every
    iteration line (L901-1044) prints "loss scale: -1.0 | grad norm: 0.000" (DeepSpeed owns the fp16 optimizer), read
    as "grad norm 49 points ... loss scale 49 points", so grad-norm spikes and loss-scale collapse were never said to
    be unchecked. A grad norm of 0 at one step of a run that logs it is a value (llama-note: iteration 1, LR 0)."""
    path = REAL / "megatron" / "bigscience-workshop+bigscience__experiments_gpt2-meg-ds-3d_meg_ds_3d_gpt2_perf_n16-ds-on.out"
    run, lines = _chronicle(path)
    assert [w.removeprefix(f"{path}: ") for w in run.warnings] == [
        "loss scale printed as -1 on 49 line(s): a loss scale is above 0; a placeholder, not read as a loss scale",
        "grad norm printed as 0 on all 49 lines of attempt 1, with a loss above 0 (which has a gradient): a "
        "placeholder, no grad norm was logged"]
    assert "grad_norm" not in run.coverage["metrics"] and "loss_scale" not in run.coverage["metrics"]
    assert run.coverage["metrics"]["loss"]["points"] == 49
    assert "- **Not found:** grad norm, so grad-norm spikes and the grad norm as a precursor could not be checked." in lines
    assert ("- **Not found:** loss scale, so fp16 loss-scale collapse (bf16 and fp32 runs log no loss scale) could not be "
            "checked.") in lines
    real_zero = parsers.load_run(REAL / "megatron" / "liguodongiot__megatron-deepspeed_llama-note_overflow.log.txt")
    grad = real_zero.metrics.filter(metric="grad_norm").sort("step")
    assert grad["value"].to_list()[:3] == [0.0, 14.113, 14.74] and not real_zero.warnings


def test_a_log_that_ends_inside_a_divergence_says_it_stopped_short() -> None:
    """bigscience gpt2-meg-ds-3d perf_n16-ds-off: iterations 1-62 of 1000, the loss climbing from 11.65 at 31 to 20.44
    at 62, and the file ends on iteration 62's timer line. "How it ended: diverged" read as if the divergence had ended
    the run; the summary never said that the log stops mid-run, as it does for a log that stops on a calm loss
    (audit Z2, Z6)."""
    path = REAL / "megatron" / ("bigscience-workshop+bigscience__experiments_gpt2-meg-ds-3d_meg_ds_3d_gpt2_perf_"
                                "n16-ds-off.out")
    run, lines = _chronicle(path)
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_step, attempt.target_step) == ("diverged", None, 62, 1000)
    assert "- **The log ends before the planned length, with no end printed:** attempt 1 at step 62 of 1000." in lines


def test_clipping_says_what_its_before_covers() -> None:
    """vi-poem-generation's W&B run (audit Z1, Z8): the grad norm is above the clip threshold 1 at 100% of the steps
    14500-26500, "against 0% before", though it was above 1 at its first 10 points (71.8 at step 500 down to 1.035 at
    5000): the share before is counted from the end of the start-up's clipping, and says so."""
    run, _ = _chronicle(REAL / "wandb" / "duydatnguyen11__vi-poem-generation")
    [clipping] = [a for a in run.anomalies if a.kind == "clipping"]
    assert (clipping.attempt, clipping.step, clipping.end_step) == (2, 14500, 26500)
    assert clipping.detail == ("grad norm above the clip threshold 1 at 100% of logged steps from step 14500 to step "
                               "26500 (against 0% from step 8000; rolling share over 10 points)")


def test_a_trainer_console_that_prints_no_step_takes_its_steps_and_its_end_from_its_progress_bar() -> None:
    """hiyouga/LlamaFactory #2902 (audit Z8): the Trainer's dict carries no step, so it was counted as step 1 and the
    chronicle said "crashed after step 1", while the tqdm bars printed after it show 10/620 ... 13/620."""
    run, lines = _chronicle(REAL / "hf_trainer" / "llamafactory_issue2902_trainer_desync_watchdog_excerpt.txt")
    assert (run.coverage["metrics"]["loss"]["points"], run.coverage["metrics"]["loss"]["first_step"]) == (1, 10)
    assert any(w.endswith("it prints no step: each metrics line's step is the count of the progress bar printed "
                          "after it (its N of N/M)") for w in run.warnings)
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_at_step, attempt.bar_step, attempt.bar_total) == (10, 10, 13, 620)
    assert (attempt.end_reason, attempt.end_kind) == ("crashed", "collective_timeout")
    assert lines[4].startswith("- **What went wrong:** attempt 1 crashed after step 10 (its progress bar at 13 of "
                               "620): “ProcessGroupNCCL.cpp:607\\] \\[Rank 0\\] Watchdog caught collective operation "
                               "timeout: WorkNCCL(SeqNum=1516")


def test_an_errors_only_log_says_how_far_its_progress_bar_got() -> None:
    """deepspeedai/DeepSpeed #6705 (audit Z9): a console whose metrics lines are not recognised said "crashed with no
    step read" although the bar on the error line itself says 23054/23316 (99%)."""
    path = REAL / "console_errors" / "deepspeed_issue6705_bert_tqdm_watchdog_excerpt.txt"
    [read] = parsers.load_runs(path)
    bars = read.events.filter(pl.col("kind") == "progress_bar")
    assert bars.select("line", "step", "value").rows() == [(1, 23054, 23316.0)]
    run, lines = _chronicle(path)
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_at_step, attempt.bar_step, attempt.bar_total) == (None, None, 23054, 23316)
    assert (attempt.end_reason, attempt.end_kind) == ("crashed", "collective_timeout")
    assert lines[4].startswith("- **What went wrong:** attempt 1 crashed with no step read from its logs (its progress "
                               "bar at 23054 of 23316): “\\[rank1\\]:\\[E1101 17:03:05.823968890 "
                               "ProcessGroupNCCL.cpp:607\\]")


def test_a_wandb_run_with_no_end_says_the_planned_length_its_progress_bar_shows() -> None:
    """0-KaiKai-0/stanford_alpaca run 372eaod9 (audit Z6): a W&B run with no end record stops at step 390; its console
    records hold the Trainer's bar at 390/1218, and the chronicle never said of how many."""
    run, lines = _chronicle(REAL / "wandb" / "0-KaiKai-0__stanford_alpaca" / "wandb" / "run-20231122_093222-372eaod9")
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.target_step, attempt.target_from_bar, attempt.bar_step) == (390, 1218, True, None)
    assert attempt.end_reason == "running"
    assert ("- **The log ends before the planned length, with no end printed:** attempt 1 at step 390 of 1218 (its "
            "progress bar's total).") \
        in lines


def test_a_ctrl_c_in_a_later_hydra_sweep_job_is_not_the_end_of_the_run_that_finished_before_it() -> None:
    """Tarun-AK/scaling (audit Z1): a W&B run whose model finished its 10 epochs and its test evaluation at step 46510
    read "interrupted by hand", from a KeyboardInterrupt printed 20 minutes later, during the Hydra sweep's job
    "#3 : hidden_dim=1028" (output.log L20-68), which re-used the run and logged nothing."""
    run, lines = _chronicle(REAL / "wandb" / "Tarun-AK__scaling")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.end_step) == ("completed", None, 46510)
    assert attempt.end_detail == (
        "its test evaluation at its last logged step (46510) was done; then the sweep launched its next job in the "
        "same process (Hydra's #1 (hidden_dim=256), #2 (hidden_dim=512), #3 (hidden_dim=1028)); the "
        "“KeyboardInterrupt” printed later came during #3 (hidden_dim=1028), not in this job")
    # its end by the clock is its last step (01:23:41 UTC), not the exit record of the later job (01:44:21)
    assert (attempt.ended_at, attempt.ran_for_s) == (None, attempt.last_step_at - attempt.started_at)
    assert round(attempt.ran_for_s) == 4731
    assert not any("interrupted by hand" in line for line in lines)


def test_a_history_written_all_at_once_gives_no_training_duration() -> None:
    """mdarshad1000/Fine-Tuning-GPTs (audit Z2): `openai wandb sync` uploaded a finished curie fine-tune, its 551
    history rows all stamped within a second (06:21:29.69-06:21:30.02), and the chronicle said "ran for 1 s"; the job
    ran 05:46-05:52 by the config the tool read."""
    run, lines = _chronicle(REAL / "wandb" / "mdarshad1000__Fine-Tuning-GPTs")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.end_reason, attempt.ran_for_s) == (1, 551, "completed", None)
    assert attempt.clock_note == (
        "its 551 logged steps were all stamped within 0.3 s: written at once (an upload or a sync after the fact, or a "
        "generated log), not as it trained, so how long it ran is not known from them; its config gives the job's own "
        "times: created_at 2022-12-20T05:46:05, updated_at 1671515549 (2022-12-20 05:52:29 UTC)")
    row = lines[lines.index("## Timeline") + 4]  # (the timeline's row of attempt 1: its "ran for" cell)
    assert row.split(" | ")[:5] == ["| 1", "1–551", "2022-12-20 06:21:29", "2022-12-20 06:21:30", "not known"]
    assert "**Clock of attempt 1:** its 551 logged steps were all stamped within 0.3 s" in "\n".join(lines)


def test_a_job_ends_at_its_processes_last_stamped_line_not_at_its_first_failure() -> None:
    """stark-sim/megatron-deepspeed-lock-clock (audit Z3): node 2's ranks fail with FileNotFoundError at 17:15:54 and
    its launcher kills them at 17:16:00, but node 1's ranks wait in an ALLREDUCE until the NCCL watchdog (17:25:53)
    and abort at 17:26:53 (L1717, a glog stamp "[E410 17:26:53.863524657"): "ran for 72 s" was the first failure."""
    run, lines = _chronicle(REAL / "console_errors" / ("stark-sim+megatron-deepspeed-lock-clock__.context_ib_dual16_"
                                                       "smoke_1080_driver_20260410.log"))
    [attempt] = run.attempts
    assert attempt.ended_at == pytest.approx(datetime(2026, 4, 10, 17, 26, 53, 863524, tzinfo=UTC).timestamp(), abs=0.01)
    assert round(attempt.ran_for_s) == 725  # 17:14:48.8 to 17:26:53.9
    assert (attempt.end_reason, attempt.exit_code) == ("failed_startup", None)  # (node 2's launcher's code is not it)
    assert any(line.startswith("| 1 | none logged | 2026-04-10 17:14:48 | 2026-04-10 17:26:53 | 12 min |")
               for line in lines)


def test_a_wrappers_final_rc_line_is_the_jobs_exit_code_and_its_last_stamp_its_end() -> None:
    """stark-sim/megatron-deepspeed-lock-clock (audit Z4): the local ranks' NCCL out-of-memory at 15:32:44, the
    launchers' kills at 15:32:49 and 15:32:51, the remote rank's last glog line at 15:32:59 (L2977), then pdsh's "ssh
    exited with exit code 1" and the script's "RC=1 RUN_ID=..." (L2980-2981): the timeline ended at 15:32:44 ("ran
    for 35 s") and never gave the exit code."""
    run, lines = _chronicle(REAL / "console_errors" / ("stark-sim+megatron-deepspeed-lock-clock__.context_smoke_nohup_"
                                                       "20260331_r2_nccl_oom.log"))
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind, attempt.exit_code) == ("failed_startup", "out_of_memory", 1)
    assert round(attempt.ran_for_s) == 51  # 15:32:09.2 to 15:32:59.98
    [row] = [line for line in lines if line.startswith("| 1 | none logged | 2026-03-31 15:32:09 | 2026-03-31 15:32:59 |")]
    assert row.endswith("'out of memory'”; exit code 1, the last status its log printed |")


def test_the_reviews_inputs_against_the_new_ending_and_reading_rules() -> None:
    """Generated inputs of the review of this change (each says what a new rule must not say)."""
    run, _ = _chronicle(GENERATED / "review_save_done_then_error_before_next_log.log")
    [cause] = [c for c in run.suspected_causes if c.kind == "program_error"]
    assert cause.check_next.endswith("; the last checkpoint saved in the logs is at step 500; a save begun at step "
                                     "1000 was followed by an error before the log shows a later step: it may not "
                                     "have finished")
    for name in ("review_planned_exit_teardown_rc0.log", "review_done_then_atexit_error.log"):
        run, _ = _chronicle(GENERATED / name)
        assert [a.failed_after_training for a in run.attempts] == [None], name  # exit 0, or an atexit error
    run, _ = _chronicle(GENERATED / "review_fast_debug_run.log")
    assert [a.clock_note for a in run.attempts] == [None]  # whole-second stamps say nothing of an upload
    run, _ = _chronicle(GENERATED / "review_late_unrelated_line.log")
    assert [(a.end_reason, a.ran_for_s) for a in run.attempts] == [("completed", 70 * 60 - 1)]  # not 17.6 h
    # a bar's total is no planned length where the steps count printed lines (llava #918: 6 dicts, a bar of 10485)
    run, lines = _chronicle(REAL / "hf_trainer" / "llava_issue918_loss_spike_excerpt.txt")
    assert [(a.end_step, a.target_step, a.bar_step, a.bar_total) for a in run.attempts] == [(6, None, 2569, 10485)]
    assert not any(line.startswith("- **The log ends before the planned length") for line in lines)
    run, _ = _chronicle(GENERATED / "review_recovered_oom_then_ib_failure.log")
    assert run.suspected_causes[0].kind == "hardware"  # an NCCL failure 280 iterations after an OOM is not its echo
    run, _ = _chronicle(GENERATED / "review_frozen_model_grad_norm_zero.log")
    assert run.coverage["metrics"]["grad_norm"]["points"] > 0  # a frozen model's zeros are values
    assert not any("placeholder" in w for w in run.warnings)


def test_evaluation_scalars_at_several_steps_are_a_training_not_an_evaluation_pass() -> None:
    """Review: a file of evaluation scalars only was "an evaluation pass" at any number of steps. A launch that
    resumed a fit and logged only val_loss per epoch (steps 1099-2999) was folded into the attempt before it, whose
    last step 950 became "First anomaly: hang at step 950"; a training of 20 epochs logging only val_* was "an
    evaluation pass: evaluation scalars only, no training step". A pass (validate(), test(), evaluate()) evaluates
    at one step (generated folders)."""
    run, lines = _chronicle(GENERATED / "review_resumed_val_only")
    assert [(a.start_step, a.end_step) for a in run.attempts] == [(0, 950), (1099, 2999)]
    assert [a for a in run.anomalies if a.kind == "hang"] == []
    assert not any("evaluation pass" in line for line in lines)
    run, lines = _chronicle(GENERATED / "review_val_only_training")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step) == (99, 1999)
    assert not any("evaluation pass" in line for line in lines)
    assert parsers.load_run(GENERATED / "review_val_only_training").events.filter(
        pl.col("kind") == "evaluation_pass").height == 0
    # a validate() that logs its val_loss per batch (steps 0-49, no epoch rising): still an evaluation pass
    assert parsers.load_run(GENERATED / "review_validate_on_step").events.filter(
        pl.col("kind") == "evaluation_pass").height == 1


def test_an_evaluation_bar_after_the_training_bar_is_not_the_trainings_progress() -> None:
    """Review: a Trainer console that crashed during an evaluation, no step read: its last bar (the evaluation's,
    50 of 125 batches) was told as the training's progress and 125 became the planned length. The training's bar is
    the one of the planned length (or of the most steps)."""
    run, lines = _chronicle(GENERATED / "review_eval_bar_then_crash.log")
    [attempt] = run.attempts
    assert (attempt.bar_step, attempt.bar_total, attempt.target_step) == (1500, 11250, 11250)
    assert "crashed with no step read from its logs (its progress bar at 1500 of 11250)" in lines[4]


def test_an_hparams_file_beside_a_writer_whose_file_names_carry_no_pid_is_its_launch() -> None:
    """wtwong316/alpaca-bitcoin-tweets-sentiment (audit Z3 §Z1): one Trainer launch's event file
    ``events.out.tfevents.1682480667.dsrc-server`` and its add_hparams file in the sub-folder ``1682480667.134984/``
    (tensorboardX's names: no pid) read as two launches: "Launches with no training step, error or stop in the logs:
    attempt 2 (2023-04-26 03:44:27)", and a config table comparing the launch with its own hparams."""
    run, lines = _chronicle(REAL / "tensorboard" / "wtwong316_alpaca-bitcoin-tweets-sentiment")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.end_reason) == (10, 300, "completed")
    assert not any(line.startswith("- **Launches with no training step") for line in lines)
    assert not any(line.startswith("## Config differences between attempts") for line in lines)


def test_a_console_printing_no_step_takes_the_logging_interval_its_checkpoint_saves_show() -> None:
    """LzZzZx328/finetune_LLM (audit Z3 §Z9): LLaMA-Factory's running_log.txt prints its 421 dicts without a step, but
    "Saving model checkpoint to .../checkpoint-100" after the 20th (L239) ... checkpoint-2100 after the 420th (L1959):
    one dict every 5 steps. The chronicle said "steps 1–421", "LR peaks at 5e-05 (step 20); warm-up ends at step 20"
    and "completed after step 421", while its own checkpoint events stood at steps 100-2100."""
    run, lines = _chronicle(REAL / "hf_trainer" / "LzZzZx328_finetune_LLM.running_log.txt")
    assert run.coverage["metrics"]["loss"] == {"points": 421, "first_step": 5, "last_step": 2105,
                                               "source_tags": ["loss"]}
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.end_kind) == (5, 2105, "training_done")
    assert [w.rsplit("/", 1)[-1] for w in run.warnings] == [
        "LzZzZx328_finetune_LLM.running_log.txt: it prints no step: steps here are its printed metrics lines times the "
        "logging interval its step-named checkpoint saves show: 5 (checkpoint-100 saved after its metrics line 20)"]
    assert "- **Schedule:** LR peaks at 5e-05 (step 100); warm-up ends between steps 95 and 100 (the logged points)." \
        in lines
    # its header planned 17,000 steps ("[INFO|...] trainer.py:2321 >>   Total optimization steps = 17,000", L188)
    assert attempt.target_step == 17000
    assert ("- **Completed before its planned length:** attempt 1 printed that its training completed at step 2105 of "
            "the 17000 planned (an early-stopping rule, a stop asked of the trainer or a time budget ends training that "
            "way).") in lines
    # one step line (640/644) measures no logging interval: a run that went on to its last step is not said short
    _, torchtitan = _chronicle(REAL / "torchtitan" / "NewComputeBench_completed_then_abort_in_teardown.txt")
    assert not any("Completed before its planned length" in line for line in torchtitan)


def test_checkpoint_saves_off_the_logging_steps_give_no_logging_interval() -> None:
    """Review: a Trainer console logging every 500 steps and saving every 600 prints checkpoint-600 ... -2400 after
    its metrics lines 1-4: "every 600" fits them, and the steps were read as 600-3000 (truly 500-2500). Saves one
    line apart (or fewer than five) give no interval: the lines are counted, and the reading note says so."""
    run, _ = _chronicle(GENERATED / "review_hf_log500_save600.log")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step) == (1, 5)
    assert any("it prints no step: steps here count its printed metrics lines" in w for w in run.warnings)


def test_a_planned_length_in_steps_is_not_set_against_counted_lines(tmp_path: Path) -> None:
    """A Trainer console that prints no step and no step-named save: its steps count its printed dicts, so the
    header's "Total optimization steps = 17,000" is on another axis and is no target (else "stopped short at step 3
    of 17000")."""
    (tmp_path / "train.log").write_text("  Total optimization steps = 17,000\n" + "".join(
        f"{{'loss': {2.5 - k / 10}, 'learning_rate': 1e-05, 'epoch': {k / 10}}}\n" for k in range(1, 4)))
    run, lines = _chronicle(tmp_path / "train.log")
    assert run.attempts[0].target_step is None
    assert not any("17000" in line for line in lines)


NEOX_EXPERTS2 = REAL / "megatron" / "zainsarwar865+gpt-neox__exps_GPT_experts-2-topk-1_gpub019_logs"
NEOX_STDOUT = NEOX_EXPERTS2 / "gpub019.delta.ncsa.illinois.edu_gpub019.delta.ncsa.illinois.edu_stdout.txt"


def test_gpt_neox_no_weight_tying_is_an_untied_output_layer() -> None:
    """zainsarwar865/gpt-neox (audit s38 A1): its arguments print ``no_weight_tying ... True`` (L36), GPT-NeoX's
    switch for an output layer of its own; the chronicle said ``tied_embeddings=True`` and counted 183.5M from the
    shape, one 128256 x 768 matrix (98.5M) short."""
    run, lines = _chronicle(NEOX_STDOUT)
    assert run.model.shape["tied_embeddings"] is False
    assert run.model.parameters_from_shape == 183473664 + 128256 * 768
    assert any(line.startswith("- **Parameters** from its shape: 282.0M; printed by the program: 338.7M")
               for line in lines)


def test_gpt_neox_arguments_keep_no_updated_or_default_tag() -> None:
    """zainsarwar865/gpt-neox (audit s38 A2): GPT-NeoX ends each argument with "updated" or "default", after dots
    when the value is short (``num_layers ....... 12......updated``) and glued to it when the value fills the column
    (L26 ``log_dir ... /u/.../logsupdated``): the config table compared ``.../logsupdated`` between attempts."""
    configs = parsers.load_run(NEOX_STDOUT).configs
    value = dict(zip(configs["key"].to_list(), configs["value"].to_list(), strict=True))
    assert value["log_dir"] == ("/u/zsarwar/gpt-neox/gpt-neox/exps/GPT_experts-2-topk-1-layers12-heads-12/"
                                "gpub019.delta.ncsa.illinois.edu-e04c37c57b9ff2489dc0cee864f882af/logs")
    assert value["vocab_file"] == "/u/zsarwar/data/tokenizers/llama3_tokenizer.json"
    assert value["expr_name"] == "GPT_experts-2-topk-1-layers12-heads-12"
    assert value["save_iters"] == "[1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000]"
    assert (value["num_layers"], value["lr_decay_style"], value["fp16"]) == ("12", "infinite_cosine", "None")
    assert not any(v.endswith(("updated", "default")) for v in value.values())


def test_a_stderr_capture_that_holds_a_run_s_end_is_not_skipped_in_silence() -> None:
    """zainsarwar865/gpt-neox (audit s38 A3): GPT-NeoX's log_dir holds ``<host>_<host>_stdout.txt`` and
    ``_stderr.txt``; the stderr was skipped as "no metrics lines" while it holds the end of the run: rank 0's
    ``KeyboardInterrupt`` in ``model.step()`` (L62) and the launcher's (L79), after a launch that died on
    ``KeyError: 'WORLD_SIZE'`` (L20). Not read (the launches cannot be told apart without times), but said."""
    run, lines = _chronicle(NEOX_EXPERTS2)
    stderr = "gpub019.delta.ncsa.illinois.edu_gpub019.delta.ncsa.illinois.edu_stderr.txt"
    assert (f"{stderr}: not read (no metrics lines; a text file beside the logs may hold another launch's output), "
            "though it holds lines that end runs: “KeyError: 'WORLD_SIZE'” (line 20), “[rank0]: KeyboardInterrupt” "
            "(line 62), “KeyboardInterrupt” (line 79); how the run ended may be there") in run.warnings
    assert any("KeyboardInterrupt" in line and line.startswith("> - gpub019") for line in lines)
    # the ending is not read from it: still the stdout's own
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_reason) == (270, "running")


def test_rank_zeros_copy_of_a_line_and_the_launchers_are_one_entry() -> None:
    """zainsarwar865/gpt-neox's stderr: rank 0's ``[rank0]: KeyboardInterrupt`` (L62) and the launcher's bare
    ``KeyboardInterrupt`` (L79) are one line without torch's rank prefix, which the parsers strip
    (:func:`parsers.ranks.same_line`; it was forensics.log_entries' own regex, issue 17): one entry, counted twice."""
    from parsers.ranks import same_line

    stderr = NEOX_EXPERTS2 / "gpub019.delta.ncsa.illinois.edu_gpub019.delta.ncsa.illinois.edu_stderr.txt"
    lines = stderr.read_text(encoding="utf-8").splitlines()
    said = pl.DataFrame({"text": [lines[61], lines[78]]}).select(same_line(pl.col("text"))).to_series().to_list()
    assert said == ["KeyboardInterrupt", "KeyboardInterrupt"] and lines[61] == "[rank0]: KeyboardInterrupt"
    run, _ = _chronicle(stderr)
    assert [(e.kind, e.line, e.count, e.text) for e in run.log_entries if e.kind == "keyboard_interrupt"] == [
        ("keyboard_interrupt", 62, 2, "[rank0]: KeyboardInterrupt")]


def test_argonne_megatron_deepspeed_key_value_iteration_lines_are_read() -> None:
    """saforem2/personal_site's AuroraGPT page (audit s38 A4): argonne-lcf's Megatron-DeepSpeed prints its iteration
    line as key=value behind its logger's tags (``[2024-09-16 22:59:19.287338][INFO][training_log:661] -
    iteration=       1/  635782 | consumed_samples=         768 | ... | lm loss=11.167250 | loss_scale=1.0 |
    grad_norm=6.363 | ...``); the file was refused as "not a recognised training log"."""
    path = REAL / "megatron" / "saforem2+personal_site__docs_posts_AuroraGPT_spike-skipper_index.md.log-snippets.txt"
    run, _ = _chronicle(path)
    assert [(a.start_step, a.end_step) for a in run.attempts] == [(1, 4), (1, 3)]
    metrics = parsers.load_run(path).metrics

    def series(metric: str, attempt: int) -> list[tuple[int, float]]:
        rows = metrics.filter((pl.col("metric") == metric) & (pl.col("attempt") == attempt)).sort("step")
        return list(zip(rows["step"].to_list(), rows["value"].to_list(), strict=True))

    assert series("loss", 1) == [(1, 11.16725), (2, 11.164009), (3, 11.164038), (4, 11.171233)]
    # the second launch skipped iterations 2 and 3 (--train-range-to-skip): no loss there, and the counter says so
    assert series("loss", 2) == [(1, 11.16725)]
    assert series("skipped_iterations", 2) == [(1, 0.0), (2, 1.0), (3, 1.0)]
    assert series("grad_norm", 1)[1] == (2, 6.271) and series("lr", 2)[-1] == (3, 2.83116e-08)
    assert series("iteration_time_ms", 1)[0] == (1, 29570.0)
    assert run.attempts[0].first_seen_at == pytest.approx(datetime(2024, 9, 16, 22, 59, 19, 287338, tzinfo=UTC).timestamp())
    assert run.attempts[1].last_step_at == pytest.approx(datetime(2024, 9, 16, 23, 9, 9, 135651, tzinfo=UTC).timestamp())


def test_gpt_neox_warmup_is_a_fraction_of_the_decay_iterations() -> None:
    """zainsarwar865/gpt-neox (audit s38 A5): GPT-NeoX's ``warmup ... 0.001`` (L66) is the fraction of
    ``lr_decay_iters`` (11000) it warms up over, 11 steps; the LR logged at step 10 (2.727E-04, L369) is below the
    3.000E-04 of step 20 (L372). The chronicle said "no warm-up seen"."""
    _, lines = _chronicle(NEOX_STDOUT)
    assert "- **Schedule:** LR peaks at 0.0003 (step 20); warm-up ends at step 11 (configured: step 11)." in lines
    assert not any("no warm-up seen" in line for line in lines)


def test_skipped_iterations_too_few_for_a_burst_are_said() -> None:
    """saforem2/personal_site's AuroraGPT page (audit s38 A6): the second launch skipped iterations 2 and 3
    (``number_of_skipped_iterations=  1`` on both lines, no loss; ``Caught 3 in 'ranges_to_skip', skipping!``), and
    the summary said "the other checks (NaN, loss scale, skipped iterations, hangs) found nothing"."""
    path = REAL / "megatron" / "saforem2+personal_site__docs_posts_AuroraGPT_spike-skipper_index.md.log-snippets.txt"
    run, lines = _chronicle(path)
    assert run.coverage["lone_skips"] == [{"attempt": 2, "start": 2, "end": 3, "total": 2.0}]
    assert ("- **Skipped iterations, too few for a burst:** attempt 2: 2, counted at steps 2–3 (not a burst: fewer "
            "than 3 together).") in lines
    assert not any("skipped iterations, hangs) found nothing" in line for line in lines)
    assert any(line.endswith("the other checks (NaN, loss scale, hangs) found nothing.") for line in lines)


def test_one_nccl_warning_printed_by_every_rank_is_one_entry() -> None:
    """NVIDIA-NeMo/Megatron-Bridge #771 (audit s38 A7): six ranks print NCCL's ``Cuda failure 2 'out of memory'``
    in the same second, each behind NCCL's own ``host:pid:tid [rank]`` (L10-20); the chronicle listed six entries and
    four evidence lines of the same failure."""
    run, lines = _chronicle(REAL / "console_errors" / "megatron_bridge_issue771_nccl_oom_six_ranks_excerpt.txt")
    [entry] = [e for e in run.log_entries if e.kind == "out_of_memory"]
    assert entry.count == 6 and entry.line == 10
    [memory] = [c for c in run.suspected_causes if c.kind == "memory"]
    assert memory.evidence == ["attempt 1, with no step read from its logs: [2025-09-24 16:15:28] "
                               "cw-dfw-h100-001-132-026:2999605:3004403 [0] include/alloc.h:228 NCCL WARN Cuda "
                               "failure 2 'out of memory'"]
    listed = [line for line in lines if line.startswith("- attempt 1, with no step read from its logs, 2025-09-24 "
                                                         "16:15:28: out of memory:")]
    assert len(listed) == 1 and "(×6" in listed[0]


def test_an_err_file_holding_only_a_ctrl_c_ends_its_attempt(tmp_path: Path) -> None:
    """zainsarwar865/gpt-neox's stdout as a job's ``.out`` and the training launch's stderr lines (L21-79: rank 0's
    ``KeyboardInterrupt`` in ``model.step()``, then the launcher's) as its ``.err`` (audit s38 A8): the ``.err`` was
    skipped ("no metrics lines of a text format it knows") because a Ctrl-C was not among the lines that make a file
    of errors worth reading, and the attempt read "running"."""
    (tmp_path / "job.out").write_bytes(NEOX_STDOUT.read_bytes())
    stderr = NEOX_EXPERTS2 / "gpub019.delta.ncsa.illinois.edu_gpub019.delta.ncsa.illinois.edu_stderr.txt"
    (tmp_path / "job.err").write_text("".join(stderr.read_text().splitlines(keepends=True)[20:79]))
    run, _ = _chronicle(tmp_path)
    [attempt] = run.attempts
    assert (attempt.end_step, attempt.end_reason, attempt.end_detail) == (270, "interrupted", "[rank0]: KeyboardInterrupt")
def test_a_console_says_which_printed_fields_it_did_not_read() -> None:
    """tyler-romero/nanogpt-speedrun 14fcdb07 (audit s38 B §B2): every step line prints train_time, step_avg,
    tokens_seen and tokens/sec beside train_loss, and the chronicle named only the loss and val loss it read: nothing
    said that the run's timing and throughput were printed but never looked at (so no hang or slowdown could be
    seen). Its train_time also starts again at step 11 (27758ms, then 2206ms: the compile warm-up is not timed)."""
    run, lines = _chronicle(REAL / "modded_nanogpt" / "tyler-romero_nanogpt-speedrun_14fcdb07_steps_0-13_and_end.txt")
    name = "tyler-romero_nanogpt-speedrun_14fcdb07_steps_0-13_and_end.txt"
    said = [w.split(f"{name}: ", 1) for w in run.warnings if "also print" in w]
    assert [said[0][1]] == [
        "its metrics lines also print step_avg, tokens/sec, tokens_seen, train_time: not read, so nothing here checks "
        "them or rests on them"]
    assert any("step\\_avg, tokens/sec, tokens\\_seen, train\\_time: not read" in line for line in lines)
    assert run.coverage["metrics"]["loss"]["points"] == 15
    # a format whose printed fields are all read says nothing of the kind (llm.c's main.log: s:N trl:... lr:... norm:...)
    llmc, _ = _chronicle(REAL / "llmc" / "SiddanthEmani_log124M_main.log")
    assert not any("also print" in w for w in llmc.warnings)


def test_a_loss_below_0_is_not_said_to_be_an_rl_objective_nor_to_have_not_fallen() -> None:
    """AIRI-Institute/genrisk lightning_logs/version_13 (audit s38 B §B5): a GAN's critic loss (train_disc_loss,
    -0.0538 at step 0, -0.3918 at step 3, 0.3284 at step 10, -0.0446 at step 79) read as "the loss" was said to be "a
    policy or preference objective (RL, DPO)", and the summary said "The loss did not fall over steps 0-79 (median
    -0.22831 over its first tenth of points, 0.006355 over its last)" of a loss it says it cannot judge."""
    run, lines = _chronicle(REAL / "lightning" / "AIRI-Institute_genrisk" / "version_13")
    assert run.learning is not None and run.learning["fell"] is None
    assert not any("did not fall" in line for line in lines)
    assert not any("RL, DPO" in line for line in lines)
    assert ("- **Not judged for loss spikes or divergence:** attempt 1: its loss goes below 0 (-0.39182889461517334 at "
            "step 3): not a cross-entropy (a policy, preference or adversarial objective), whose rises are not "
            "ratios.") in lines
    # a cross-entropy that stays at chance is still said not to fall (yuanhuanghuang/quality: ln 4 = 1.386 throughout)
    flat, _ = _chronicle(REAL / "hf_trainer_state" / "quality_lrqa" / "trainer_state.json")
    assert flat.learning is not None and flat.learning["fell"] is False


def test_the_trainers_own_runtime_is_how_long_an_untimed_run_ran() -> None:
    """NealKapadia/text-summarizer (audit s38 B §B6): a trainer_state.json whose summary entry says 'train_runtime':
    542.8804 (and prints no train_loss, an older Trainer) read "ran for –" and "the Trainer's summary (train_runtime
    542.8804 s, train_loss None)": a None the file never wrote."""
    run, lines = _chronicle(REAL / "hf_output_dir" / "NealKapadia_text-summarizer")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_at_step, attempt.ran_for_s) == ("completed", 693, 542.8804)
    assert attempt.end_detail == "training finished: the Trainer's summary (train_runtime 542.8804 s)"
    assert not any("train_loss None" in line for line in lines)
    assert any(line.startswith("| 1 | 500 | – | – | 9 min (its summary's count) | – | completed after step 693")
               for line in lines)


def test_a_trainer_console_says_which_dict_keys_it_did_not_read() -> None:
    """saforem2/ezpz docs/examples/hf-trainer/index.md (audit s38 B §B9): each of its dicts prints
    'num_input_tokens_seen', 'train_runtime' and 'train_tokens_per_second' (a running mean: 7201.711 at the first
    log, 50512.468 at the hundredth, no throughput of its own) beside the loss, and "Other scalars read: epoch" was
    all the chronicle said: nothing told that they were printed and never looked at."""
    run, _ = _chronicle(REAL / "hf_trainer" / "ezpz_hf_trainer_aurora_llama32_1b_100_steps.log")
    assert [w.split(": ", 1)[1] for w in run.warnings if "also print" in w] == [
        "its metrics lines also print num_input_tokens_seen, train_runtime, train_tokens_per_second: not read, so "
        "nothing here checks them or rests on them"]
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_at_step, attempt.target_step) == ("completed", 100, 100)
    # its summary dict ({'train_runtime': 425.4295, ...}) gives the time train() ran
    assert attempt.ran_for_s == 425.4295


def test_a_completed_run_logged_once_is_no_short_launch() -> None:
    """NealKapadia/text-summarizer (audit s38 B §B6): logging every 500 steps over 693, its one loss entry (step 500)
    and its summary at step 693 were listed under "Short attempts (at most 3 steps logged) and replays" as
    "attempt 1: step 500 (new steps)", and the whole, completed run had no Attempts section."""
    run, lines = _chronicle(REAL / "hf_output_dir" / "NealKapadia_text-summarizer")
    [attempt] = run.attempts
    assert not attempt.short
    assert not any(line.startswith("**Short attempts") for line in lines)
    assert "## Attempts" in lines and any(line.startswith("## Attempt 1:") for line in lines)


def test_an_older_trainer_state_without_logging_steps_begins_at_its_first_log() -> None:
    """NealKapadia/text-summarizer (audit s38 B §B6): its trainer_state.json, written by a Trainer that did not store
    logging_steps, holds one loss entry at step 500 (epoch 2.16 of 3 over 693 steps: the first log of the default
    interval, 500): the attempt was read as resumed from step 499 (inferred) and beginning mid-run, "what came before
    is not in it"."""
    run, lines = _chronicle(REAL / "hf_output_dir" / "NealKapadia_text-summarizer")
    [attempt] = run.attempts
    assert (attempt.begins_mid_run, attempt.resumed_from_step) == (False, None)
    assert not any("mid-run" in line for line in lines)


def test_nanogpt_says_its_mfu_is_not_read(tmp_path: Path) -> None:
    """nanoGPT's 'iter 0: loss 4.2709, time 10268.08ms, mfu -100.00%' (ChenZihua-cn/nanoGPT) and llama2.c's '490 |
    loss 5.7543 | lr ... | 8060.78ms | mfu 0.21%' print their MFU on every line; the chronicle read the loss and the
    time and said nothing of it (audit s38 B, the class of §B2)."""
    for path in (REAL / "nanogpt" / "ChenZihua-cn_nanoGPT_train.log", REAL / "llama2c" / "issue461_excerpt.txt"):
        run, _ = _chronicle(path)
        assert [w.split(": ", 1)[1] for w in run.warnings if "also print" in w] == [
            "its metrics lines also print mfu: not read, so nothing here checks them or rests on them"]
    # a long log's names are read off a sample of its lines (a regex pass over every line cost a second a million):
    # the real file's first lines repeated past the sample's threshold still name it, once
    lines = (REAL / "nanogpt" / "ChenZihua-cn_nanoGPT_train.log").read_text().splitlines()
    iters = [line for line in lines if line.startswith("iter ")]
    big = tmp_path / "train.log"
    big.write_text("\n".join(f"iter {k}: {line.split(': ', 1)[1]}" for k, line in enumerate((iters * 30_000)[:30_000]))
                   + "\n")
    assert [w.split(": ", 1)[1] for w in parsers.load_run(big).warnings if "also print" in w] == [
        "its metrics lines also print mfu: not read, so nothing here checks them or rests on them"]
    # build-nanogpt's "step 0 | loss: 10.9677 | dt: ... | tok/sec: ... | norm: ... | lr: ..." is read whole
    run, _ = _chronicle(REAL / "build_nanogpt" / "dhairyag_ShakespeareGPT-Forge_log.md")
    assert not any("also print" in w for w in run.warnings)


def test_llamafactory_log_beside_its_trainer_state_is_said_and_read_when_given_alone() -> None:
    """hsc748NLP/NSLLM commits LLaMA-Factory's trainer_log.jsonl (436 lines, steps 5-2178) beside the Trainer's
    trainer_state.json (the same history). Read as a folder, the log was left out in silence (neither in the inputs
    nor among the skipped files); given alone, it was refused as 'not a recognised training log: unreadable'."""
    import parsers
    folder = REAL / "llamafactory" / "hsc748NLP_NSLLM"
    run = parsers.load_run(folder)
    assert [src.path for src in run.sources] == ["trainer_state.json"]
    assert run.skipped == ["trainer_log.jsonl: LLaMA-Factory's log of the history that the trainer_state.json beside "
                           "it holds: read from there, not twice"]
    alone = parsers.load_run(folder / "trainer_log.jsonl")
    assert [src.format for src in alone.sources] == ["llamafactory"]
    loss = alone.metrics.filter(metric="loss")
    assert (loss.height, loss["step"].min(), loss["step"].max()) == (435, 5, 2175)
    run, _ = _chronicle(folder / "trainer_log.jsonl")
    assert [(str(a.end_kind), a.end_reason) for a in run.attempts] == [("training_ended", "completed")]


def test_a_ctrl_c_in_another_programs_log_does_not_end_the_training(tmp_path: Path) -> None:
    """A TensorBoard log beside a nanoGPT console, holding only TensorBoard's own Ctrl-C (review s38): with a
    KeyboardInterrupt among the lines that make a file of errors worth reading, it was read and the training's attempt
    said "interrupted by hand"; a Ctrl-C alone ends a job only in that job's own stream (job.err beside job.out)."""
    (tmp_path / "train.log").write_text("".join(f"iter {i}: loss {4 - i / 1000:.4f}, time 118.20ms, mfu 37.9%\n"
                                                for i in range(0, 2001, 10)))
    (tmp_path / "tensorboard.log").write_text(
        "TensorBoard 2.15.1 at http://localhost:6006/ (Press CTRL+C to quit)\n^CTraceback (most recent call last):\n"
        '  File "/usr/bin/tensorboard", line 8, in <module>\n    sys.exit(run_main())\nKeyboardInterrupt\n')
    run, _ = _chronicle(tmp_path)
    [attempt] = run.attempts
    assert attempt.end_reason != "interrupted"


def test_a_llamafactory_log_past_its_trainer_state_is_not_said_to_be_the_same_history(tmp_path: Path) -> None:
    """hsc748NLP/NSLLM's trainer_log.jsonl (steps 5-2178, training done) beside a trainer_state.json that ends at step
    1000 (an older one: the Trainer writes it at a save): the skipped inputs said the log was 'the history that the
    trainer_state.json beside it holds' while the chronicle ended at step 1000, 'no end printed' (review s38)."""
    import json

    import parsers
    folder = REAL / "llamafactory" / "hsc748NLP_NSLLM"
    state = json.loads((folder / "trainer_state.json").read_text())
    state["log_history"] = [e for e in state["log_history"] if e.get("step", 0) <= 1000]
    state["global_step"] = 1000
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    (tmp_path / "trainer_log.jsonl").write_bytes((folder / "trainer_log.jsonl").read_bytes())
    run = parsers.load_run(tmp_path)
    assert not any("the history that the trainer_state.json beside it holds" in line for line in run.skipped)
    assert any("goes on to step 2178, past the trainer_state.json's last step (1000)" in line for line in run.skipped)


def test_event_files_of_nothing_read_join_the_attempt_of_the_process_that_wrote_them() -> None:
    """Dipeshtamboli/tensorboard-logs: pid 10148 logs its training loss (steps 999-14999, 02:10:53-02:11:20), then
    writes nine files holding one PR curve each (02:11:21); pid 11363 opens a writer 10.6 h later (12:46:45) and logs
    images only. The nine files went to the last attempt, pid 11363's: "attempt 2 (2022-09-21 02:11:21)" launched 2 s
    after attempt 1 ended."""
    run, lines = _chronicle(REAL / "tensorboard" / "Dipeshtamboli_tensorboard-logs" / "fashion_mnist_experiment_1")
    first, second = run.attempts
    assert (first.start_step, first.end_step, second.end_step) == (999, 14999, None)
    assert datetime.fromtimestamp(second.started_at, UTC).isoformat() == "2022-09-21T12:46:45.661051+00:00"
    assert "- **Launches with no training step, error or stop in the logs:** attempt 2 (2022-09-21 12:46:45)." in lines
    assert "| 1 | 999–14999 | 2022-09-21 02:10:53 | last step 2022-09-21 02:11:20 | 26 s | 10.6 h | no end in the log: " \
           "attempt 2 started next |" in lines


def test_what_an_event_file_holds_beside_its_scalars_is_named_as_not_read() -> None:
    """Dipeshtamboli/tensorboard-logs: beside its `training loss`, pid 10148's file holds the model's graph
    (`graph_def`, `tagged_run_metadata`) and a PR curve, nine more files a PR curve each, pid 11363's images and a
    graph: the chronicle said of them only "no training metric recognised", as if the files held nothing else."""
    run, lines = _chronicle(REAL / "tensorboard" / "Dipeshtamboli_tensorboard-logs" / "fashion_mnist_experiment_1")
    prefix = "events.out.tfevents.16637"
    assert run.warnings[0] == (f"{prefix}26253.Dipeshs-MacBook-Pro.local.10148.0: it also holds records that are no "
                               "scalar, not read (graphs: graph_def, tagged_run_metadata; pr_curves: T-shirt/top)")
    assert run.warnings[10] == (f"{prefix}64405.Dipeshs-MacBook-Pro.local.11363.0: it also holds records that are no "
                                "scalar, not read (images: four_fashion_mnist_images; graphs: graph_def, "
                                "tagged_run_metadata)")
    assert len(run.warnings) == 11
    assert "> - events.out.tfevents.1663726281.Dipeshs-MacBook-Pro.local.10148.9: it also holds records that are no " \
           "scalar, not read (pr\\_curves: Ankle Boot)" in lines


def test_a_checkpoints_trainer_state_joins_the_tensorboard_run_whose_history_it_holds() -> None:
    """lucamiletto/MediQAlpaca lora-alpaca/: runs/ holds a Trainer launch of 9 steps that ended with its summary
    (train_runtime 2689.7 s, 2024-04-07) and two 470-step trainings two weeks later; checkpoint-400/trainer_state.json
    (max_steps 471) is the history of the last (loss 1.9519 at step 10). It was put on the first launch: "Stopped
    short, with no end in the log: attempt 1 at step 400 of 471", attempt 1 "9–400 ... no end in the log", and
    "config micro_batch_size differs between sources: 16 (checkpoint-400/trainer_state.json), 1 (runs/Apr07_...)"."""
    run, lines = _chronicle(REAL / "hf_output_dir" / "lucamiletto_MediQAlpaca_lora-alpaca")
    first, second, third = run.attempts
    assert (first.start_step, first.end_step, first.end_reason) == (9, 9, "completed")
    assert (second.start_step, second.end_step, third.end_step, third.end_reason) == (10, 470, 471, "completed")
    assert not any("ends before the planned length" in line or "micro\\_batch\\_size differs" in line for line in lines)
    assert "| 1 | 9 | 2024-04-07 10:55:43 | 2024-04-07 11:40:33 | 45 min | 14.4 days | completed after step 9: " \
           "training finished: the Trainer's summary (train\\_runtime 2689.697998046875 s) |" in lines


def test_the_trainers_max_steps_of_minus_one_plans_no_length() -> None:
    """lucamiletto/MediQAlpaca lora-alpaca/: the Trainer's args in each event file say `"max_steps": -1` (the epochs
    decide), its checkpoint's trainer_state.json `"max_steps": 471`. The chronicle warned "config train_iters differs
    between sources: 471 (checkpoint-400/trainer_state.json), -1 (runs/Apr22_...)" and said of the last launch "what
    changed: train_iters: -1 → 471", a change no launch made."""
    run, lines = _chronicle(REAL / "hf_output_dir" / "lucamiletto_MediQAlpaca_lora-alpaca")
    assert not [w for w in run.warnings if "train_iters" in w]
    assert run.attempts[2].config_changes == {}
    assert "| 3 | 10–471 | from the start of training | nothing | step 471 | completed |" in lines


def test_a_cpp_frame_of_the_watchdogs_backtrace_is_no_collective_timeout() -> None:
    """OpenRLHF #1126: rank 3's watchdog lines (L1, L3) and its C++ backtrace, whose frame #1 is
    `c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<...>)` (L6). That frame was a third "collective
    timeout" in the list of errors and a third piece of evidence for "a rank stopped answering in a collective"."""
    run, lines = _chronicle(REAL / "console_errors" / "openrlhf_issue1126_save_model_nccl_timeout_excerpt.txt")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind) == ("crashed", "collective_timeout")
    assert [line.split(": ", 2)[1] for line in lines if line.startswith("- attempt 1, with no step read from its logs: ")
            ] == ["collective timeout", "collective timeout"]
    assert not any("checkTimeout(std::optional" in line for line in lines)
    [cause] = run.suspected_causes
    assert len(cause.evidence) == 2


def test_a_divergence_with_the_grad_norm_nan_does_not_say_the_loss_ended_in_nan() -> None:
    """VG-LLM #45: "{'loss': 8195.7664, 'grad_norm': nan, ...}" after 14.3597: the loss is finite, its grad norm NaN.
    The divergence read "loss left 14.3597 at step 3 ...; ends in NaN at step 3", and "was not back at any later logged
    point" of the log's last point, with no later one."""
    run, _ = _chronicle(REAL / "hf_trainer" / "vgllm_issue45_loss_spike_gradnorm_nan.txt")
    [div] = [a for a in run.anomalies if a.kind == "divergence"]
    assert div.detail == ("loss left its trailing median 14.3597 at step 3 and no loss was logged after it to show "
                          "whether it came back; "
                          "its grad norm NaN at step 3, the loss itself still finite at its last point")


def test_a_divergence_on_the_last_point_of_a_console_that_prints_no_step_says_what_its_steps_are() -> None:
    """VG-LLM #45: its three Trainer dicts are counted steps 1-3 (the console prints no step), and its progress bar
    reached 70 of 4967 before the last. The ending read "diverged (its progress bar at 70 of 4967): from step 3, not
    back by the end of its log (step 3)": steps of two counts in one sentence, and "not back" of the last point."""
    run, lines = _chronicle(REAL / "hf_trainer" / "vgllm_issue45_loss_spike_gradnorm_nan.txt")
    [attempt] = run.attempts
    assert (attempt.steps_counted, attempt.bar_step, attempt.bar_total) == (True, 70, 4967)
    said = ("diverged (its progress bar at 70 of 4967, in training steps; its steps here count its printed metrics "
            "lines): at its last logged point (step 3), with no point after it to show whether the loss came back; its "
            "grad norm NaN there")
    assert f"- **What went wrong:** attempt 1 {said}." in lines
    assert f"- **How it ended:** {said}." in lines
    assert not any("not back by the end of its log" in line for line in lines)


def test_a_megatron_log_whose_every_iteration_was_skipped_says_no_loss_was_printed() -> None:
    """okoge-kaz/megatron-deepspeed-turing-techblog's 13B fp16 benchmark: its 10 iteration lines each count
    "number of skipped iterations:   1" (the loss scale halving from 4294967296 down to 8388608) and print no lm loss,
    as Megatron does for a skipped interval. The chronicle said "not checked: no loss metric recognised" and "No loss
    metric recognised; scalar tags present: ...", as if the tool could not read a loss the log printed."""
    run, lines = _chronicle(REAL / "megatron" / ("okoge-kaz+megatron-deepspeed-turing-techblog__logs_20230712_gpt2_13b_"
                                                 "pp8_141406_iterations.log"))
    assert run.coverage["loss_unprinted"] == {"lines": 10, "first_step": 1, "last_step": 10, "all_skipped": 10}
    assert ("- **What went wrong:** not checked: no loss printed in its iteration lines (see *What was read and "
            "checked*); no attempt ended on an error.") in lines
    assert ("- **No loss printed:** none of its 10 iteration lines (steps 1–10) print a loss: every one of them counts "
            "all the iterations of its interval as skipped (fp16 overflow), and Megatron prints no loss for such an "
            "interval. Still checked: NaN/Inf in every scalar.") in lines
    assert not any("No loss metric recognised" in line or "no loss metric recognised" in line for line in lines)


def test_nccls_duplicate_gpu_is_the_setup_error_that_ended_the_launch_not_hardware() -> None:
    """okoge-kaz/megatron-deepspeed-turing-techblog, a 13B launch by mpirun: "NCCL WARN Duplicate GPU detected : rank 0
    and rank 7 both on CUDA device 3000", then every rank's "DistBackendError: NCCL error in: ... internal error" with
    NCCL's "Last error: Duplicate GPU detected ...". It read "hardware or infrastructure failure" (check "node health
    (ECC, Xid, NCCL timeouts)"), of two ranks the launch put on one GPU."""
    run, _ = _chronicle(REAL / "console_errors" / ("okoge-kaz+megatron-deepspeed-turing-techblog__logs_20230712_gpt2_"
                                                   "13b_pp8_134628_duplicate_gpu.log"))
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind) == ("crashed", "error")
    assert attempt.end_detail == ("hpc-work0-gpu8:9647:10879 [0] init.cc:525 NCCL WARN Duplicate GPU detected : rank 0 "
                                  "and rank 7 both on CUDA device 3000")
    assert [c.kind for c in run.suspected_causes] == ["program_error"]


def test_a_hugging_face_configs_head_dim_is_the_width_of_its_attention_heads() -> None:
    """YYT-t/xyzo's W&B run of google/gemma-2-2b-it: "head_dim: 256" with "hidden_size: 2304" and 8 heads. The size
    from its shape took each head as 2304 / 8 = 288 wide: 2.66B ("this is a ~2.7B model"); Google's count is
    2,614,341,888."""
    run, _ = _chronicle(REAL / "wandb" / "YYT-t__xyzo" / "wandb" / "run-20241122_131234-lmk9uhbu")
    assert run.model.shape["kv_channels"] == 256
    assert round(run.model.parameters_from_shape / 1e6) == 2614


def test_a_spike_back_within_its_noise_is_not_said_to_be_back_at_its_level():
    """druidowm/nanoGPT's W&B export, run gpt2_char_to_token1729491541: the loss spike of steps 37-47 (7.381 over
    the trailing median 3.789) was "back to its level by step 48", where the export's loss is 4.906114 (1.29x): inside
    3 sigmas of that noisy run's level, not at it. It is now said as it is."""
    runs = parsers.load_runs(REAL / "wandb" / "druidowm__nanoGPT" / "wandb_export.csv")
    run = next(r for r in runs if r.name.startswith("gpt2_char_to_token1729491541"))
    spike = next(a for a in forensics.analyze(run).runs[0].anomalies if a.kind == "loss_spike" and a.step == 37)
    assert spike.recovered_step == 48
    assert "back within its noise of its level by step 48 (11 steps; 4.906114101409912 there, 1.3x the baseline)" in (
        spike.detail)


def test_a_name_that_counts_the_model_without_its_embedding_is_not_a_setup_finding() -> None:
    """YYT-t/xyzo's W&B run of google/gemma-2-2b-it: 2.61B from its shape against 2B in its name read as the Summary's
    first line, "Model (setup finding): this is a ~2.6B model, not 2.0B". Google names Gemma by its parameters outside
    the 256,000 x 2,304 word embedding: 2.02B."""
    run, lines = _chronicle(REAL / "wandb" / "YYT-t__xyzo" / "wandb" / "run-20241122_131234-lmk9uhbu")
    model = run.model
    assert (model.size_mismatch, model.size_headline, model.notes, model.name_matches) == (
        False, "", [], "non_embedding")
    # (its shape gives 2,614,222,080: Gemma 2's extra norms around each MLP, 119,808, are not counted)
    assert model.parameters_non_embedding == 2614222080 - 256000 * 2304
    assert not any("Model (setup finding)" in line or "model, not" in line for line in lines)
    assert ("- **Parameters** from its shape: 2.61B; printed by the program: n/a; stated in its name: 2.00B (its count "
            "without the embeddings, 2.02B: without the 589.8M of its 256,000 x 2,304 word embedding).") in lines


def test_a_run_stopped_by_hand_after_its_training_says_both() -> None:
    """YYT-t/xyzo's W&B run of google/gemma-1.1-7b-it: the Trainer's summary ({'train_runtime': 1055.5406, ...}),
    its checkpoint list, then a traceback in the script's next stage (subprocess.run) ending in KeyboardInterrupt, and
    W&B's exit code 255. The chronicle said only "completed", the interrupt among the notices."""
    run, lines = _chronicle(REAL / "wandb" / "YYT-t__xyzo" / "wandb" / "run-20241124_210928-rgmypxh4")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.failed_after_training) == ("completed", None)
    assert (attempt.stopped_after_how, attempt.stopped_after_training) == ("interrupted", "KeyboardInterrupt")
    assert ("- **Stopped on purpose or from outside:** attempt 1 completed its training, then was interrupted by hand "
            "in what the program did next: “KeyboardInterrupt”.") in lines
    [row] = [line for line in lines if line.startswith("| 1 | 3 |")]
    assert row.endswith("'epoch': 3.0}”; then the program was interrupted by hand after its training: "
                        "“KeyboardInterrupt” |")
    # Gemma 7B: 8.54B from its shape, 7.75B without its 256,000 x 3,072 embedding: "7b" is nearer the second
    assert (run.model.size_mismatch, run.model.name_matches) == (False, "non_embedding")


def test_a_run_whose_every_iteration_was_skipped_does_not_read_as_all_clear() -> None:
    """okoge-kaz/megatron-deepspeed-turing-techblog's 13B fp16 benchmark: each of its 10 iteration lines says
    "number of skipped iterations:   1" (log interval 1), the loss scale halving from 4294967296 to 8388608 and the LR
    0: no step changed the weights. The attempt read "What happened: no anomalies"."""
    run, lines = _chronicle(REAL / "megatron" / ("okoge-kaz+megatron-deepspeed-turing-techblog__logs_20230712_gpt2_13b_"
                                                 "pp8_141406_iterations.log"))
    [attempt] = run.attempts
    assert attempt.all_skipped == {"iterations": 10, "first_step": 1, "last_step": 10, "overflow": True}
    said = "all 10 of its iterations (steps 1–10) were skipped (fp16 overflow), so no step changed the weights"
    assert f"- **No step taken:** attempt 1: {said}." in lines
    assert f"- **What happened:** {said}; nothing else found." in lines
    assert "- **What happened:** no anomalies." not in lines


def test_a_connection_the_rendezvous_could_not_make_names_the_network_as_well_as_the_configuration() -> None:
    """okoge-kaz/megatron-deepspeed-turing-techblog, a 13B launch by mpirun: every rank's "The client socket has failed
    to connect to 10.2.76.66:16500 (errno: 113 - No route to host)" in torch's TCP rendezvous, then its RuntimeError.
    The chronicle blamed only "an error in the program or its configuration"; a host down or unreachable fits too."""
    run, lines = _chronicle(REAL / "console_errors" / ("okoge-kaz+megatron-deepspeed-turing-techblog__logs_20230712_"
                                                       "gpt2_13b_pp8_134251_no_route_to_host.log"))
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_kind) == ("failed_startup", "error")
    [cause] = run.suspected_causes
    assert (cause.kind, cause.confidence) == ("unreachable", 0.5)
    assert cause.cause == ("a connection the program could not make: a wrong address or port in its configuration, or "
                           "the network (that host down, or no route to it); the log does not tell which")
    assert cause.evidence == ["attempt 1 ended with no step read from its logs: RuntimeError: The client socket has "
                              "failed to connect to any network address of (10.2.76.66, 16500). The client socket has "
                              "failed to connect to 10.2.76.66:16500 (errno: 113 - No route to host)."]
    assert not any("an error in the program or its configuration" in line for line in lines)


# --- unseen-log trial s43 ------------------------------------------------------------------------------------------


def test_a_second_trainer_run_after_the_first_ones_summary_counts_its_steps_from_one():
    """Clemens66666/Trainer-New's README console prints no step: its dicts are counted. After the first run's summary
    (``{'train_runtime': 2296.7065, ...}``) a second ``trainer.train()`` starts from scratch (its epoch back at 0.06):
    its lines count from 1 again, and the chronicle says it started from the start of training, not "resumed from
    step 13" (what it said when the count ran on across the summary)."""
    run = parsers.load_run(REAL / "hf_trainer" / "clemens_trainer-new_README_55b224b.log")
    loss = run.metrics.filter(metric=schema.LOSS).sort("attempt", "step")
    spans = loss.group_by("attempt", maintain_order=True).agg(first=pl.col("step").min(), last=pl.col("step").max(),
                                                              n=pl.len())
    assert spans.rows() == [(1, 1, 13, 13), (2, 1, 17, 17)]
    assert loss.filter(attempt=2)["value"][0] == 0.1525  # its first dict: {'loss': 0.1525, ..., 'epoch': 0.06}
    findings = forensics.analyze(run)
    assert [a.resumed_from_step for a in findings.runs[0].attempts] == [None, None, None]
    text = reports.render(findings)
    assert "| 2 | 1–17 | from the start of training |" in text and "resumed" not in text


def test_a_third_trainer_run_that_fails_before_its_first_step_is_an_attempt():
    """After the second run's summary the same program starts a third ``trainer.train()`` (its bar at 0/132) whose data
    collator raises ``KeyError: 'preds'`` before any step (the traceback runs through the Trainer's
    ``_inner_training_loop``): attempt 3, with no step, ended by that error; attempts 1 and 2 completed. (It was said
    as attempt 2's program failing after its training.)"""
    findings = forensics.analyze(parsers.load_run(REAL / "hf_trainer" / "clemens_trainer-new_README_55b224b.log"))
    attempts = findings.runs[0].attempts
    assert [(a.start_step, a.end_step, a.end_reason) for a in attempts] == [
        (1, 13, EndReason.COMPLETED), (1, 17, EndReason.COMPLETED), (None, None, EndReason.CRASHED)]
    assert attempts[2].end_detail.endswith("KeyError: 'preds'")
    lines = reports.render(findings).splitlines()
    assert "- **What went wrong:** attempt 3 crashed with no step read from its logs: “KeyError: 'preds'”." in lines
    assert not any("failed after its training" in line for line in lines)


def test_a_crash_inside_the_trainers_loop_mid_training_is_the_running_attempts_end(tmp_path):
    """The frame ``in _inner_training_loop`` starts an attempt only after a training's summary: an error raised in the
    middle of a training (its traceback runs through the same loop) ends the attempt that was running."""
    dicts = [f"{{'loss': {2.0 - i / 100:.4f}, 'grad_norm': 1.5, 'learning_rate': 1e-05, 'epoch': {i / 100:.2f}}}"
             for i in range(1, 21)]
    log = tmp_path / "train.log"
    log.write_text("\n".join([*dicts, "Traceback (most recent call last):",
                              '  File "/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2206, in train',
                              '  File "/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2502, '
                              "in _inner_training_loop",
                              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]) + "\n")
    [attempt] = forensics.analyze(parsers.load_run(log)).runs[0].attempts
    assert (attempt.start_step, attempt.end_step, attempt.end_reason) == (1, 20, EndReason.CRASHED)


def test_a_wandb_run_that_logs_its_update_step_is_placed_by_it():
    """AuroraEchos/TinyLM logs ``train/update_step`` beside W&B's ``_step`` (a log call every 50 micro-batches, 8 to an
    update): its points are at their update steps (0-13390, not _step's 0-107123), and its LR peaks at update step
    2000, where its config's warm-up ends (read on _step, the peak at 16000 was "a warm-up that does not match")."""
    analysis = forensics.analyze_path(REAL / "wandb" / "AuroraEchos__TinyLM" / "wandb" / "run-20260211_121423-kj3gdsjx")
    [metrics] = analysis.metrics.values()
    loss = metrics.filter(metric=schema.LOSS)
    assert (loss.height, loss["step"].min(), loss["step"].max()) == (2144, 0, 13390)
    lr = metrics.filter(metric=schema.LR)
    assert lr.filter(pl.col("value") == lr["value"].max())["step"].min() == 2000
    text = reports.render(analysis)
    assert "LR peaks at 0.0005 (step 2000)" in text and "(configured: step 2000)" in text
    # its exit record's end (the start plus a runtime of 1563 s) is a second before its last point: it ended after
    [attempt] = analysis.findings.runs[0].attempts
    assert attempt.ended_at == attempt.last_step_at == metrics["wall_time"].max()


def test_the_points_not_judged_are_those_with_none_before_them_not_the_zero_losses():
    """alpaca-lora #418's loss falls to 0.0 at steps 16-20: those are the zero-loss check's, not spike points without
    a point before them (the count said 6 where one point, the first, has none before it)."""
    run, lines = _chronicle(REAL / "hf_trainer" / "alpaca-lora_issue418_spike_then_loss0_evalnan.txt")
    assert run.coverage["spike_checks"]["loss"]["1"]["not_judged"] == 1
    [limits] = [line for line in lines if line.startswith("- **Loss spike thresholds**")]
    assert "; 1 with no point before it in its stretch of the log, not judged)" in limits


# --- unseen-log trial s44 ------------------------------------------------------------------------------------------


def test_dicts_of_equal_values_that_the_progress_bar_counts_as_steps_are_not_copies():
    """FPT-VVU/ViVidBot's fp16 run prints 16 dicts of loss, grad norm and LR 0.0 (every step overflowed), their epochs
    rounded alike in pairs and threes; its bar reads 8/300 right after the first 8: each dict is a step, 1-16 (they
    were read as copies printed by several ranks, 6 steps), and the run crashed after step 16. Its zero losses are
    the overflows' (it said "every label masked or ignored ..."), and its loss scale is no series but a stop line."""
    run = parsers.load_run(REAL / "hf_trainer" / "vividbot_run-x304inuv_output.log")
    loss = run.metrics.filter(metric=schema.LOSS)
    assert loss["step"].to_list() == list(range(1, 17)) and set(loss["value"]) == {0.0}
    assert not any("printed again as it was" in w for w in run.warnings)
    findings = forensics.analyze(run)
    [attempt] = findings.runs[0].attempts
    assert (attempt.end_step, attempt.end_reason) == (16, EndReason.CRASHED)
    # its zeros are the overflows' (it stopped on them), and no "loss scale not found, so a collapse could not be
    # checked" beside the collapse its stop line shows
    [zero] = [a for a in findings.runs[0].anomalies if a.kind == Kind.ZERO_LOSS]
    assert zero.detail.endswith("(16 points): the program stopped on fp16 overflows right after them: its steps "
                                "overflowed, their loss most likely Inf or NaN, logged as 0 (the Hugging Face Trainer, "
                                "for one, leaves NaN and Inf losses out of the mean it logs, its "
                                "logging_nan_inf_filter on by default, and logs 0 for a window with nothing else)")
    lines = reports.render(findings).splitlines()
    assert ("- **Loss scale:** no series of it; the program's own line says it stopped on fp16 overflows (“Exception: "
            "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.”), which is the "
            "collapse's evidence here, not a curve of the scale.") in lines
    assert not any(line.startswith("- **Not found:** loss scale") for line in lines)


def test_a_progress_bar_ahead_of_every_line_printed_says_lines_are_missing():
    """ViVidBot's W&B capture lost the dict after some bar redraws: 169 dicts while the bar reads 200/1963 when the
    save of checkpoint-200 fails. Its steps count the lines, and the reading warning says the bar ran 31 ahead of
    every line the training printed (it said only that the counted lines are the training steps)."""
    run = parsers.load_run(REAL / "hf_trainer" / "vividbot_run-8amig5dm_output.log")
    assert run.metrics.filter(metric=schema.LOSS)["step"].max() == 169
    [note] = [w for w in run.warnings if "prints no step" in w]
    assert note.endswith("; but its progress bar reached 200/1963 (line 240) where its training printed 169 metrics "
                         "lines in all: at least 31 are missing (a capture that lost lines), so its counted steps fall "
                         "behind the training's")


def test_a_last_dict_without_a_newline_is_whole():
    """ViVidBot's latest-run capture ends with a complete dict and no newline after it: its values are read (loss
    10.75, grad norm 8.778548240661621 at the last counted step, 270), and no warning says its line was cut."""
    run = parsers.load_run(REAL / "hf_trainer" / "vividbot_latest-run_output.log")
    last = run.metrics.filter(pl.col("step") == 270).select("metric", "value").sort("metric").rows()
    assert (schema.GRAD_NORM, 8.778548240661621) in last and (schema.LOSS, 10.75) in last
    assert not any("cut short" in w for w in run.warnings)
    [note] = [w for w in run.warnings if "prints no step" in w]
    assert "reached 311/1963 (line 358) where its training printed 270 metrics lines in all: at least 41" in note


def test_iteration_lines_of_another_length_are_another_launch():
    """DeepLink-org/AIChipBenchmark's README pastes a 10-iteration run (iterations 5-10 of 10, its LR falling to
    6e-06) and one line of the real run (iteration 2400 of 8247, LR 5.498e-05): two attempts, each with its own
    train_iters, and no warm-up "still rising at the last logged point" read across the hole between them."""
    findings = forensics.analyze(parsers.load_run(REAL / "megatron" / "DeepLink-org+AIChipBenchmark__llm_GPT3_README.md"
                                                  ".log-blocks.txt"))
    run = findings.runs[0]
    assert [(a.start_step, a.end_step, a.end_reason) for a in run.attempts] == [
        (5, 10, EndReason.COMPLETED), (2400, 2400, EndReason.RUNNING)]
    lines = reports.render(findings).splitlines()
    assert "| train\\_iters | 10 | 8247 |" in lines
    [said] = [line for line in lines if line.startswith("- **Schedule:**")]
    assert "still rising" not in said and "warm-up" not in said.split(";")[0]


def test_a_value_at_a_pasted_cut_is_not_read():
    """FZJ-JSC/jubench-megatron-lm's README cuts its last iteration line at "lm loss: 8." (a 13B run's 8.x): the
    loss at step 50 is not read as 8; the warning names the field it cut, and the last loss said is step 40's."""
    run = parsers.load_run(REAL / "megatron" / "FZJ-JSC+jubench-megatron-lm__README.md_13B_iterations10-50.txt")
    loss = run.metrics.filter(metric=schema.LOSS)
    assert loss["step"].to_list() == [10, 20, 30, 40] and loss["value"][-1] == 8.486469
    assert any(w.endswith("line 5: iteration line cut short; the field it cut ('lm loss: 8.') and those after it "
                          "are missing") for w in run.warnings)


def test_a_start_from_scratch_over_logged_steps_is_not_called_a_replay():
    """gpt-neox #947: a bf16 launch logs iterations 1-2 (loss 2.275809, then 11.05449), then an fp16 launch starts at
    iteration 1 again (loss 2.276005, 2.175701). The second is a new training, whose values are not compared: not "a
    replay of steps logged before", which promised the differing steps it then did not list."""
    findings = forensics.analyze(parsers.load_run(REAL / "megatron" / "issue__EleutherAI+gpt-neox__issue947_excerpts.txt"))
    assert [(a.start_step, a.resumed_from_step) for a in findings.runs[0].attempts] == [(1, None), (1, None)]
    lines = reports.render(findings).splitlines()
    assert ("- attempt 2: steps 1–2 (steps logged before, started over from the start of training); the log ends with "
            "no end printed: still running, cut off, or stopped without a word") in lines
    assert not any("replay of steps" in line for line in lines)


def test_a_grad_norm_of_0_at_every_point_beside_a_loss_is_a_finding():
    """DeepLink-org/AIChipBenchmark's GPT-3 lines print "grad norm: 0.000" on every line beside a real loss scale
    (4294967296) and a loss of 11.0: no gradient was measured (a placeholder, or a frozen model). The grad norm was
    read and "checked" with nothing found; now attempt 1 (6 points) has that finding, which says the grad-norm checks
    rest on nothing (attempt 2's one point is too few to say)."""
    run = forensics.analyze(parsers.load_run(REAL / "megatron" / "DeepLink-org+AIChipBenchmark__llm_GPT3_README.md"
                                             ".log-blocks.txt")).runs[0]
    [zero] = [a for a in run.anomalies if a.kind == Kind.ZERO_GRAD_NORM]
    assert (zero.attempt, zero.step, zero.end_step) == (1, 5, 10)
    assert zero.detail.startswith("grad norm logged as 0 at every one of its 6 points (steps 5–10) while the loss was "
                                  "above 0 (11.00078 to 10.99972): no gradient was measured")
    # said in the summary, though not as what went wrong first (tr1-13B's placeholders sit beside its real spikes)
    lines = reports.render(forensics.analyze(parsers.load_run(
        REAL / "megatron" / "DeepLink-org+AIChipBenchmark__llm_GPT3_README.md.log-blocks.txt"))).splitlines()
    assert ("- **Grad norm not measured:** attempt 1 logged it as 0 at every point beside a loss above 0 (a placeholder, "
            "or a model that got no gradient: see the attempt); the grad-norm checks rest on nothing there.") in lines
    assert not any(line.startswith("- **First anomaly:**") for line in lines)


def test_lower_steps_never_logged_are_no_replay_and_an_inferred_resume_is_no_step_said():
    """nanoGPT PR #225 pastes iters 220-240 of one run, then 150-170 of another. The second was "back at step 140"
    (a resume point inferred from its first step, said as if logged) and "a replay of steps logged before" (none of
    150-170 was): the step is said as inferred, as the rollbacks line says it, and its steps are new."""
    lines = reports.render(forensics.analyze(parsers.load_run(
        REAL / "nanogpt" / "issue__karpathy+nanoGPT__pr225_two_runs.txt"))).splitlines()
    [went] = [line for line in lines if line.startswith("- **What went wrong:**")]
    assert went.endswith("how attempt 1 ended is not in the log (attempt 2 started next, back at step 140 "
                         "(inferred)).")
    assert ("- attempt 2: steps 150–170 (new steps); the log ends with no end printed: still running, cut off, or "
            "stopped without a word") in lines
    assert not any("a replay of steps" in line for line in lines)


def test_a_loss_that_went_inf_is_said_as_inf_and_the_step_shift_is_said():
    """DeepSpeedExamples #444: the PPO losses print "act_loss: inf|cri_loss: inf" from printed step 3184 (3185 here:
    the batches done, the printed step + 1). The ending said "NaN from step 3185", and nothing said why the steps are
    one above the printed ones."""
    run = parsers.load_run(REAL / "deepspeed_chat" / "issue__deepspeedai+DeepSpeedExamples__issue444_step3_inf.txt")
    assert any("its printed step counts each epoch's prompt batches from 0: a step here is the batches done, the "
               "printed step + 1" in w for w in run.warnings)
    findings = forensics.analyze(run)
    [attempt] = findings.runs[0].attempts
    assert attempt.end_detail == "Inf from step 3185 to the end of its log (step 3199)"
    [nan] = [a for a in findings.runs[0].anomalies if a.kind == Kind.NAN]
    assert nan.value == float("inf")
    assert ("- **What went wrong:** attempt 1 ended in NaN/Inf: Inf from step 3185 to the end of its log (step 3199)."
            in reports.render(findings).splitlines())


def test_a_torchtitan_resume_its_size_and_the_root_cause_under_torchruns_wrapper():
    """QIU023/torchtitan_attention_residual: "Loading the checkpoint from .../checkpoint/step-12500." then steps
    12510-12960; rank 1's data loader fails, and torchrun prints its ChildFailedError, then the root cause. It was
    "the log begins mid-run ... (an excerpt, or a resume whose checkpoint load was not logged)", "crashed after step
    12960: 'torch.distributed.elastic.multiprocessing.errors.ChildFailedError:'" and "printed by the program: n/a"
    beside "size: 1,201,640,636 total parameters" and "total steps 30000"."""
    findings = forensics.analyze(parsers.load_run(REAL / "torchtitan"
                                                  / "QIU023_attention_residual_resume_break3_hf_fail.log"))
    [attempt] = findings.runs[0].attempts
    assert (attempt.resumed_from_step, attempt.resumed_from_inferred, attempt.end_reason) == (
        12500, False, EndReason.CRASHED)
    assert attempt.end_detail == "RuntimeError: Cannot send a request, as the client has been closed."
    assert (attempt.target_step, findings.runs[0].model.parameters_logged) == (30000, 1_201_640_636)


def test_a_lightning_version_folder_read_directly_takes_its_hparams_as_config():
    """BvoJa/GPTTT's lightning_logs/version_0 analysed as the folder itself: its hparams.yaml (vocab_size 65, the
    model and trainer under cfg) is the run's config, not "skipped 1 file(s): hparams.yaml: no metrics lines of a text
    format it knows" (the reader took an hparams.yaml only where its folder's name showed version_N)."""
    folder = REAL / "lightning" / "BvoJa_GPTTT_version_0"
    run = parsers.load_run(folder)
    assert run.configs.filter(pl.col("key") == "cfg.trainer.max_steps")["value"].to_list() == ["500"]
    lines = reports.render(forensics.analyze_path(folder).findings).splitlines()
    assert not any("skipped" in line and "hparams.yaml" in line for line in lines)


def test_a_rotary_dim_model_has_no_learned_position_table():
    """vedovati-matteo/SmalltalkCodeGen fine-tunes codegen-350M-mono, whose config has rotary_dim 32 (rotary positions,
    as GPT-J's) and n_positions 2048: its shape gave 358.9M, a learned 2048 x 1024 position table that CodeGen does not
    have. Its count from the HF implementation is 356,712,448 (word embeddings, 20 blocks, final norm, an untied head
    with a bias); the shape's, which takes Megatron's biases, is within 0.05% of it."""
    analysis = forensics.analyze_path(REAL / "tensorboard" / "vedovati-matteo_SmalltalkCodeGen_logs")
    assert abs(analysis.findings.runs[0].model.parameters_from_shape / 356_712_448 - 1) < 5e-4


def test_three_trainings_in_one_event_file_are_three_attempts_with_their_own_times():
    """yongshuaiy/LLMs-final: one process's three trainer.train() calls wrote one event file, each beginning with the
    Trainer's args text (06:05:33, 06:16:00, 06:19:20), the last two stopped at step 20. They were two attempts, the
    second "20, first step or event 06:06:19" (the first training's time) with both step-20 losses, and "eval/loss
    logged 3 times at step 20" though each training logged it once."""
    run = parsers.load_run(REAL / "tensorboard" / "yongshuaiy_LLMs-final_three_trainings")
    loss = run.metrics.filter(metric=schema.LOSS).sort("attempt", "step")
    assert loss.group_by("attempt", maintain_order=True).agg(first=pl.col("step").min(), last=pl.col("step").max(),
                                                            n=pl.len()).rows() == [(1, 20, 180, 9), (2, 20, 20, 1),
                                                                                   (3, 20, 20, 1)]
    assert loss.filter(attempt=2)["value"].to_list() != loss.filter(attempt=3)["value"].to_list()
    assert not run.events.filter(pl.col("kind") == schema.EV_DUPLICATE_STEP, pl.col("step") == 20,
                                 pl.col("text").str.starts_with("eval/loss")).height


# --- review s44: inputs written to break this stop's changes --------------------------------------------------------


def test_review_s44_inputs_are_told_truly():
    """Each input the review wrote against this stop's changes, and what its chronicle must (not) say."""
    def findings(name: str):
        return forensics.analyze(parsers.load_run(GENERATED / f"review_s44_{name}"))

    # one crash printed by two ranks (each traceback through the Trainer's loop) is one attempt's end
    [attempt] = findings("hf_two_ranks.log").runs[0].attempts
    assert (attempt.end_step, attempt.end_reason) == (20, EndReason.CRASHED)
    # an on_train_end failure after the summary is the same training's: completed, then the program failed
    [attempt] = findings("hf_train_end.log").runs[0].attempts
    assert attempt.end_reason == EndReason.COMPLETED and attempt.failed_after_training is not None
    # an evaluation bar after the training's dicts is no proof that lines were lost
    assert not any("missing" in w for w in parsers.load_run(GENERATED / "review_s44_hf_evalbar.log").warnings)
    # a flat, noisy loss beside a zero grad norm does not show that the weights were trained
    [zero] = [a for a in findings("hf_frozen.log").runs[0].anomalies if a.kind == Kind.ZERO_GRAD_NORM]
    assert "the log does not tell which" in zero.detail and "fell meanwhile" not in zero.detail
    # a root cause with no Python error under it leaves torchrun's own line, not another rank's error
    [attempt] = findings("cf_noerrfile.log").runs[0].attempts
    assert "ChildFailedError" in attempt.end_detail
    # another run's checkpoint loaded, then steps from 1: weights loaded, not a resume from step 5000
    [attempt] = findings("tt_ft.log").runs[0].attempts
    assert (attempt.resumed_from_step, attempt.loaded_weights) == (None, True)
    # no warm-up "still rising" across the hole after two points
    lines = reports.render(findings("meg_hole.txt")).splitlines()
    assert not any("still rising" in line for line in lines)
    # steps 200-220 after 0-50 and (past a hole) 500-550 were never logged: new steps, not a replay
    lines = reports.render(findings("nano_hole.txt")).splitlines()
    assert ("- attempt 2: steps 200–220 (new steps); the log ends with no end printed: still running, cut off, or "
            "stopped without a word") in lines


def test_an_hparams_yaml_beside_a_csv_that_is_not_lightnings_is_said_not_dropped(tmp_path):
    """Review s44: the Lightning reader claims an hparams.yaml read with the metrics.csv beside it; one beside a CSV
    it does not take (no step column) was neither read nor listed among the files it could not read."""
    (tmp_path / "metrics.csv").write_text("epoch,acc\n0,0.5\n")
    (tmp_path / "hparams.yaml").write_text("lr: 0.1\n")
    with pytest.raises(parsers.InputError, match=r"hparams\.yaml: an hparams\.yaml with no Lightning metrics\.csv beside "
                                                 r"it \(one with a step column\), not in a version_N folder"):
        parsers.load_run(tmp_path)
