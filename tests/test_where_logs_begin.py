"""What a chronicle says of where a log begins and of its LR schedule, on real logs that begin mid-run or end as
the warm-up does (found by reading their chronicles against the raw lines; see fixtures/real/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import forensics
import reports

REAL = Path(__file__).parent / "fixtures" / "real"
NO_MOE = REAL / "megatron" / "HaibaraAiChan+megatron-deepspeed-moe-bak__log_gpt-0.125B-gpus-4-no-MoE.log"
MOE = REAL / "megatron" / "HaibaraAiChan+megatron-deepspeed-moe-bak__log_gpt-0.125B-gpus-4-MoE-64.log"


def _chronicle(path: Path) -> tuple[forensics.RunFindings, list[str]]:
    analysis = forensics.analyze_path(path)
    return analysis.findings.runs[0], reports.render(analysis.findings, "markdown").splitlines()


def test_a_mid_epoch_excerpt_is_not_the_start_of_training() -> None:
    """'Towards end of first run:' then dict lines from epoch 0.6623 with the LR falling: neither the start of
    training nor the LR's peak is in the log (the console prints no step: its steps count lines)."""
    run, lines = _chronicle(REAL / "hf_trainer" / "sentence-transformers_issue3756_mid_epoch_excerpt.txt")
    first = run.attempts[0]
    assert (first.begins_mid_run, first.first_epoch, first.resumed_from_step) == (True, 0.6623, None)
    assert ("- **Start:** the log begins mid-run, at epoch 0.6623 (its first logged point); what came before is not in "
            "it (an excerpt, or a resume whose checkpoint load was not logged).") in lines
    assert ("- **Schedule:** LR is highest at the log's first point, 3.094e-07 (step 1); the log begins mid-run, so a "
            "warm-up before it would not show.") in lines
    assert not any("from the start of training" in line or "no warm-up seen" in line for line in lines)


def test_an_excerpt_from_mid_warm_up_is_not_the_start_of_training(tmp_path: Path) -> None:
    """SY-Xuan/Pink #6: every dict line's LR rises by 7.142857e-06 and the first is 0.00012142857142857143, 17 of
    those rises: a warm-up from 0 logged 16 lines before the excerpt (the console prints no step, so only the LR can
    tell); one from above 0 (torch's LinearLR starts at a third) could start there, and the chronicle says both."""
    run, lines = _chronicle(REAL / "hf_trainer" / "pink_issue6_gradnorm_nan_padded_excerpt.txt")
    first = run.attempts[0]
    assert (first.warmup_logs_before, first.resumed_from_step) == (16, None)
    assert ("- **Start:** not known: the LR at its first point is 17 times the rise between its points, so a linear "
            "warm-up from 0 logged 16 points before it (an excerpt); a warm-up that starts above 0 (torch's LinearLR "
            "starts at a third) may start here.") in lines
    assert not any("from the start of training" in line for line in lines)
    # the same lines one rise up at the first (as CUT #2's 4e-06, 8e-06, ...) are the start; so is a warm-up from a
    # non-zero LR (not a whole number of rises up)
    rise = 0.00012857142857142855 - 0.00012142857142857143
    for first in (1, 1.5):
        moved = tmp_path / f"from_{first}.txt"
        moved.write_text("".join(line.replace(f"{lr!r}", f"{(first + k) * rise!r}") for k, (line, lr) in enumerate(
            (line, float(line.split("'learning_rate': ")[1].split(",")[0])) for line in
            (REAL / "hf_trainer" / "pink_issue6_gradnorm_nan_padded_excerpt.txt").read_text().splitlines(True))))
        run, lines = _chronicle(moved)
        assert run.attempts[0].warmup_logs_before is None and "- **Start:** from the start of training." in lines


def test_a_megatron_excerpt_from_iteration_122_is_not_called_a_resume() -> None:
    run, lines = _chronicle(REAL / "megatron" / "issue__epfLLM+Megatron-LLM__issue11.txt")
    assert run.attempts[0].begins_mid_run and run.attempts[0].start_step == 122
    assert ("- **Start:** the log begins mid-run, at step 122; what came before is not in it (an excerpt, or a resume "
            "whose checkpoint load was not logged).") in lines
    assert not any("resumed from step" in line for line in lines)


def test_a_log_that_starts_at_its_first_interval_begins_at_the_start() -> None:
    run, lines = _chronicle(NO_MOE)
    assert not run.attempts[0].begins_mid_run and "- **Start:** from scratch." in lines


def test_a_last_point_at_the_configured_peak_lr_ends_the_warm_up() -> None:
    """lr 0.00045 and lr_warmup_tokens 375000000 configured; step 720 logs 'consumed tokens: 377487360 | learning
    rate: 4.500E-04' as the last line: the warm-up has just ended, the log does not end during it."""
    run, lines = _chronicle(NO_MOE)
    assert (run.schedule.lr_peak, run.schedule.lr_peak_step, run.schedule.still_warming_up) == (0.00045, 720, False)
    assert ("- **Schedule:** LR peaks at 0.00045 (step 720); warm-up ends between steps 710 and 720 (the logged "
            "points).") in lines


def test_a_missing_line_in_regular_logging_is_said_though_too_small_to_be_a_hole() -> None:
    """Iteration 130's line is followed by 150's (the log has no line for 140): one point not logged."""
    run, lines = _chronicle(NO_MOE)
    assert run.gaps == [] and run.coverage["short_holes"] == {"places": 1, "points_missing": 1,
                                                              "examples": [(1, 130, 150)]}
    assert ("- **Points not logged:** 1 point of the regular logging with no number read (not logged, or only "
            "non-numeric values there), after step 130 (next: 150); too few to be a hole, so the checks read across "
            "it.") in lines
    clean, lines = _chronicle(REAL / "megatron" / "issue__epfLLM+Megatron-LLM__issue11.txt")
    assert clean.coverage["short_holes"] is None and not any("Points not logged" in line for line in lines)


def test_a_run_that_learned_nothing_says_so() -> None:
    """QuALITY's LRQA baseline: 20 epochs of 4-way multiple choice with the train and eval loss at ln 4 = 1.3863
    throughout (eval_loss 1.3863019943237305 at step 50, 1.3862943649291992 at 3100): completed, no anomaly, and
    nothing learned."""
    run, lines = _chronicle(REAL / "hf_trainer_state" / "quality_lrqa")
    assert run.learning is not None and not run.learning["fell"]
    assert ("- **The loss did not fall** over steps 50–3100 (median 1.3883 over its first tenth of points, 1.38835 "
            "over its last); the validation loss went from 1.386302 to 1.386294.") in lines
    learned, lines = _chronicle(NO_MOE)
    assert learned.learning["fell"] and not any("did not fall" in line for line in lines)
    excerpt, _ = _chronicle(REAL / "megatron" / "issue__epfLLM+Megatron-LLM__issue11.txt")
    assert excerpt.learning is None  # four points of a mid-run excerpt: not judged


def test_a_mixture_of_experts_says_its_counts_leave_experts_out() -> None:
    """num_experts [64], moe_expert_parallel_size 4; '> number of parameters on (tensor, pipeline) model parallel rank
    (0, 0): 550576128' is one rank's share with its 16 experts; the shape's 125.3M is the dense model."""
    run, lines = _chronicle(MOE)
    assert ("- a mixture of experts (64 experts, 4-way expert parallel): the count from its shape is the dense model "
            "without the experts, and a count printed per model-parallel rank holds only that rank's experts.") in lines
    assert not run.model.size_mismatch and run.model.size_headline in (None, "")


def test_a_noisy_per_batch_loss_over_few_points_is_not_said_to_have_not_fallen() -> None:
    """50 single-batch losses (sd 0.42): the first tenth's median 2.229, the last's 2.412, a difference well within the
    noise of five points each; nothing is said either way."""
    run, lines = _chronicle(REAL / "lightning_turngpt")
    assert run.learning["fell"] is None and round(run.learning["start"], 6) == 2.229457
    assert not any("did not fall" in line for line in lines)


def test_a_trainer_output_dir_with_last_checkpoint_is_one_run_to_its_last_step() -> None:
    """trainer_state.json: '"loss": 0.0002, ... "step": 5000' and '"eval_loss": 0.42..., "step": 5000', then the
    summary entry at step 5000; last-checkpoint/trainer_state.json is the same history (the Hub's copy)."""
    from forensics.fleet import find_runs
    from parsers import load_run

    path = REAL / "hf_trainer_state" / "P4P4N1CK_whisper-large-v2-japanese"
    loaded = load_run(path)
    assert [src.path.rsplit("/", 1)[-1] for src in loaded.sources if src.format == "hf-trainer-state"] == [
        "trainer_state.json"]
    loss = loaded.metrics.filter(metric="loss").sort("step")
    val = loaded.metrics.filter(metric="val_loss").sort("step")
    assert (loss.height, loss["step"][-1], loss["value"][-1]) == (200, 5000, 0.0002)
    assert (val.height, val["step"][-1], round(val["value"][-1], 4)) == (5, 5000, 0.42)
    run, _ = _chronicle(path)
    assert [(a.index, a.start_step, a.end_step, a.end_reason) for a in run.attempts] == [(1, 25, 5000, "completed")]
    assert [name for name, _ in find_runs(path)] == ["P4P4N1CK_whisper-large-v2-japanese"]


def test_the_final_evaluations_event_file_of_the_same_process_is_not_a_relaunch() -> None:
    """events.out.tfevents.1742826235.DESKTOP-41L2EO3.107869.0 trains to step 215337; ...1742884204...107869.1 (the
    same host and pid) holds only eval/* at step 215337, eval/runtime 3255.52 s: the final evaluation, 54 min later."""
    path = REAL / "hf_output_dir" / "10844110_t5-summarization-demo"
    run, _ = _chronicle(path)
    assert [(a.index, a.end_step, a.end_reason) for a in run.attempts] == [(1, 215337, "completed")]
    events_only, _ = _chronicle(path / "runs")
    assert [(a.index, a.end_step) for a in events_only.attempts] == [(1, 215337)]


def test_resumes_in_one_trainer_state_show_as_the_epoch_going_back() -> None:
    """'"epoch": 0.05 ... "step": 5000' then '"epoch": 0.0 ... "step": 5050' (and after 52000 and 66000): four launches
    in one history; the last step's loss (0.8333) and eval loss (0.5128) at 100000 beside the summary entry."""
    run, _ = _chronicle(REAL / "hf_trainer_state" / "CoralReefFish_whisper-tiny-nbaiLab")
    assert [(a.start_step, a.end_step, a.resumed_from_step) for a in run.attempts] == [
        (50, 5000, None), (5050, 52000, 5000), (52050, 66000, 52000), (66050, 100000, 66000)]
    assert run.attempts[-1].end_reason == "completed" and not any(a.rollback for a in run.attempts)
    assert any("its epoch counter goes back 3 time(s) while the steps go on" in w for w in run.warnings)
    assert run.coverage["metrics"]["loss"]["last_step"] == 100000 and run.coverage["metrics"]["val_loss"]["points"] == 100


def test_a_loss_scale_that_fell_before_the_nan_is_evidence_not_counter_evidence() -> None:
    """'loss scale 64.0' (400), '8.0' (500), '4.0' (600), 'lm loss NAN | loss scale 4.0' (700), '0.1' (800): the
    overflows began before the NaN; the chronicle once said the NaN 'came before the first overflow'."""
    run, _ = _chronicle(REAL / "megatron" / "issue__THUDM+Chinese-Transformer-XL__issue7.txt")
    [cause] = [c for c in run.suspected_causes if c.kind == "loss_scale"]
    assert cause.evidence[0] == ("attempt 1: the loss scale had already fallen before the nan at step 700: 64 (step "
                                 "400) to 4 (step 600)")
    assert cause.counter_evidence == [] and cause.confidence == 0.6


def test_a_checkpoints_trainer_state_ends_at_its_save_not_stopped_short() -> None:
    """'"global_step": 2800', '"max_steps": 2808', '"should_save": true' and no summary entry: the copy saved with
    checkpoint-2800, which says nothing of what came after."""
    _, lines = _chronicle(REAL / "hf_trainer_state" / "Dheena731_tinyLlama-finetune")
    assert ("- **History ends at a checkpoint:** attempt 1's trainer_state.json ends at step 2800 of 2808, written "
            "when that checkpoint was saved; steps after it, if any ran, are not in it.") in lines
    assert not any("ends before the planned length" in line for line in lines)


def test_a_trainer_state_saved_at_its_last_step_is_the_end_of_training() -> None:
    """Ray-Cheng-11/Tau-Bench-Model-Training: '"global_step": 12', '"max_steps": 12', '"should_training_stop": true',
    one log entry at step 10 and no summary entry: the state the Trainer saved with its last checkpoint, once its loop
    had reached max_steps. It read "ends at step 10 of 12 ... steps after it, if any ran, are not in it" and "the log
    ends with no end printed: still running, cut off, or stopped without a word"."""
    run, lines = _chronicle(REAL / "hf_trainer_state" / "Ray-Cheng-11_Tau-Bench-Model-Training")
    [attempt] = run.attempts
    assert (attempt.end_reason, attempt.end_step) == ("completed", 10)
    assert ("| 1 | 10 | – | – | – | – | completed after step 12 (as its log printed; its metrics end at step 10): its "
            "state saved at its last step: global\\_step 12 of max\\_steps 12, its control set to stop training (the "
            "Trainer's closing summary, logged after that save, is not in this copy) |") in lines
    assert not any("History ends at a checkpoint" in line or "still running" in line for line in lines)


def test_a_validation_loss_rising_at_every_evaluation_while_training_falls_is_said() -> None:
    """eval_loss 0.3210 (step 1000), 0.3585, 0.3937, 0.4123, 0.4200 (step 5000) while the training loss falls to
    0.0001: the usual sign of overfitting."""
    run, lines = _chronicle(REAL / "hf_trainer_state" / "P4P4N1CK_whisper-large-v2-japanese")
    assert run.learning["val_rising"] == {"from_step": 1000, "from": 0.320997953414917, "to_step": 5000,
                                          "to": 0.4200145900249481, "evaluations": 5, "rises": 4,
                                          "train_from": 0.01, "train_to": 0.0001, "train_points": 3}
    assert ("- **Validation loss rising:** from its lowest, 0.320998 at step 1000, it rose at each of the 4 "
            "evaluations after, to 0.420015 at step 5000, while the training loss fell over the same steps (0.01 to "
            "0.0001, the medians of the first and last three points): the usual sign of overfitting.") in lines
    # launches pasted one after another: evaluations of different launches are never one trend
    run, _ = _chronicle(REAL / "megatron" / "liguodongiot+llm-action__llm-train_megatron_gpt2_model_train.md")
    assert run.learning is None or run.learning["val_rising"] is None


def test_a_log_with_no_known_metrics_lines_is_read_for_the_errors_that_ended_it(tmp_path: Path) -> None:
    """A progress bar whose one line has no step it could read (NeMo's "global_step=3.2e+4"), then '[E
    ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: ... ran for 25625613
    milliseconds before timing out.': the file is read for its errors; the chronicle says no metric was read and
    that the run crashed."""
    path = REAL / "console_errors" / "pytorch_issue118369_nccl_watchdog.txt"
    run, lines = _chronicle(path)
    assert [src["format"] for src in run.sources] == ["nemo"]
    assert run.attempts[0].end_reason == "crashed" and run.attempts[0].end_kind == "collective_timeout"
    # ranks timing out in an all-reduce say that some rank stopped answering, not that the hardware failed: no ECC,
    # Xid, CUDA or NCCL error is in the log
    assert [c.kind for c in run.suspected_causes] == ["rank_stopped"]
    [stopped] = run.suspected_causes
    assert stopped.confidence == 0.3 and stopped.counter_evidence == []
    assert stopped.evidence[-1] == (
        "attempt 1, with no step read from its logs: [E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=64088, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625251 "
        "milliseconds before timing out.")
    assert "## Why it ended (suspected causes)" in lines
    assert not any("hardware or infrastructure" in line for line in lines)
    assert any("1 line of NeMo's progress bar with global_step printed to 3 significant digits" in w
               for w in run.warnings)
    assert "- **Not found:** loss, so loss spikes, divergence and NaN in the loss could not be checked." in lines
    # a CUDA error that names a bug: the kernel's assertion (a label out of range) ends the run, not the hardware
    run, lines = _chronicle(REAL / "console_errors" / "layumi_issue372_device_side_assert.txt")
    assert (run.attempts[0].end_reason, run.attempts[0].end_kind) == ("crashed", "error")
    assert run.attempts[0].end_detail == ("/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:108: "
                                          "cunn_ClassNLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [0,0,0] "
                                          "Assertion `t >= 0 && t < n_classes` failed.")
    assert [c.kind for c in run.suspected_causes] == ["program_error"]
    assert any(e.text == "RuntimeError: CUDA error: device-side assert triggered" and e.kind == "error"
               for e in run.log_entries)
    # in a directory, a note that quotes a traceback is not this run's ending
    import shutil

    shutil.copy(REAL.parent.parent.parent / "sample_logs" / "clean-1.3B" / "train.log", tmp_path / "train.log")
    (tmp_path / "notes.txt").write_text("Traceback (most recent call last):\n  File \"x.py\"\nRuntimeError: CUDA out "
                                        "of memory. Tried to allocate 2 GiB\n")
    beside, _ = _chronicle(tmp_path)
    assert [a.end_reason for a in beside.attempts] == ["completed"]


def test_a_loss_logged_as_zero_is_remarked_never_read_as_a_finite_loss() -> None:
    """'{'loss': 0.0, 'grad_norm': nan, ...}' on every line (SY-Xuan/Pink #6) said only that the grad norm went NaN
    and that "the loss was still finite"; a collapse to 0.0 (ModernBERT #233, OLMo #692) said nothing at all."""
    run, lines = _chronicle(REAL / "hf_trainer" / "pink_issue6_gradnorm_nan_padded_excerpt.txt")
    [zero] = [a for a in run.anomalies if a.kind == "zero_loss"]
    assert (zero.step, zero.end_step, zero.baseline) == (1, 12, None)
    # (with the grad norm NaN at every zero: the Trainer's NaN filter logs 0 for a window of NaN losses)
    assert zero.detail.startswith("loss logged as 0 at every point from step 1 to 12 (12 points): the grad norm was "
                                  "NaN or Inf at these steps: the loss was most likely NaN too, logged as 0")
    assert run.attempts[0].end_detail == ("NaN (grad norm) from step 1 to the end of its log (step 12); the loss was "
                                          "logged as 0 from step 1 to 12")
    assert not any("still finite" in line for line in lines)
    run, _ = _chronicle(REAL / "hf_trainer" / "modernbert_issue233_gradnorm_nan.txt")
    [zero] = [a for a in run.anomalies if a.kind == "zero_loss"]
    assert (zero.step, zero.end_step, zero.baseline) == (2, 3, 0.2051)
    # OLMo: CrossEntropyLoss=12.18 at step 1, 1.7872662283480167e-06 at 2, 0.0 at 3
    run, _ = _chronicle(REAL / "olmo" / "issue692_ce_loss_zero_excerpt.txt")
    [zero] = [a for a in run.anomalies if a.kind == "zero_loss"]
    # (the collapse is at step 2, 12.18 to 1.8e-06 in one step: "First anomaly: zero loss at step 3" was a step late)
    assert (zero.step, zero.end_step, zero.baseline) == (2, 3, 12.18)
    assert zero.detail.startswith("loss logged as 0 at step 3, after the loss fell from 12.18 at step 1 to "
                                  "1.7872662283480167e-06 at step 2, where the collapse began: ")


def test_metrics_logged_from_the_first_epochs_end_are_the_start_of_training() -> None:
    """AnAccountWithoutAName/Deep-Lineary-Gated-Networks lightning_logs/version_58: Lightning logs once an epoch (200
    steps): epoch 0.0, val_loss, val_acc and train_acc at step 199, the first epoch's last, ... up to 9999 (epoch 49);
    train_loss only once, at 9999. The resume point inferred from that one loss (9999 less an interval) is after
    step 199, where the same attempt had already logged: "the log begins mid-run, at step 199; what came before is
    not in it"."""
    run, lines = _chronicle(REAL / "tensorboard" / "AnAccountWithoutAName_Deep-Lineary-Gated-Networks" / "lightning_logs"
                            / "version_58")
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.resumed_from_step, attempt.begins_mid_run) == \
        (199, 9999, None, False)
    assert "- **Start:** from the start of training." in lines
    assert not any("mid-run" in line for line in lines)
