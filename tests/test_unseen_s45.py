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


def test_a_loss_logged_less_often_than_the_validation_metrics_is_judged_for_spikes() -> None:
    """FAST-GNN-SAT version_57 logs val_loss and val_acc_epoch at every step, train_loss every 50: each loss point
    was "the first of a stretch" (measured against the run's spacing of 1), so no point was judged for spikes, and
    the chronicle said every point "has no point before it in its stretch of the log"."""
    lines = _lines(REAL / "lightning" / "Jan21_FAST-GNN-SAT" / "version_57")
    assert not any(line.startswith(("- **Not judged", "- **Not judged for loss spikes")) for line in lines)
    [thresholds] = [line for line in lines if line.startswith("- **Loss spike thresholds**")]
    assert "attempt 1: 14.4 / 3.3 (16 points, too few for a tail fit" in thresholds
    assert "9 more with too little history before them (the first of the attempt or after a gap)" in thresholds


MEG_1809577 = REAL / "megatron" / ("bigscience-workshop+bigscience__experiments_gpt2-meg_"
                                   "meg_gpt2_base_n16_dp1_tp4_pp16-1809577.out")


def test_a_fresh_models_loss_above_chance_is_not_an_anomaly_but_a_rise_past_it_is() -> None:
    """bigscience meg_gpt2_base 1809577: "First anomaly: loss above chance at step 20" for lm loss 12.49 (ln(50688) =
    10.83), the mean of two updates of a fresh 66B model at init std 0.02 and hidden 9216: logits spread 1.92 put a
    fresh model's loss near 10.83 + 1.84. The spike to 32.83 at step 30 stays one."""
    run = _analysis(MEG_1809577).findings.runs[0]
    [chance] = [a for a in run.anomalies if a.kind == "loss_above_chance"]
    assert (chance.step, chance.end_step, chance.value) == (30, 40, 32.82511)
    assert chance.detail.endswith("above ln(50688) + 1.84 + 1 = 13.68 nats: worse than a freshly initialised model of "
                                  "its shape (its logits' spread 1.92 puts its loss near ln(vocabulary) + 1.84), "
                                  "before the loss had first come within chance")
    assert "- **First anomaly:** loss above chance at step 30 (attempt 1)." in _lines(MEG_1809577)


def test_gpt3s_learning_rate_for_a_size_it_did_not_train_is_said_to_be_interpolated() -> None:
    """Same log: "peak LR 0.00015 is 2.1x the 7.3e-05 GPT-3 used at 66B parameters": GPT-3 had no 66B model."""
    [cause] = [c for c in _analysis(MEG_1809577).findings.runs[0].suspected_causes
               if c.cause == "learning rate too high for the model size"]
    assert cause.evidence == ["peak LR 0.00015 is 2.1x about 7.3e-05, between the 0.0001 GPT-3 used at 13B parameters "
                              "and the 6e-05 at 175B (interpolated in log-log), for a model of 66.2B parameters"]


def test_trainer_test_metrics_named_with_a_slash_end_the_training() -> None:
    """EKProgrammer/FJSPT_RL4CO version_1: rl4co logs `test/reward` at step 8000 after fit() returned; the test_*
    rule did not take it, and a finished run was "still running, cut off, or stopped without a word"."""
    [attempt] = _analysis(REAL / "lightning" / "EKProgrammer_FJSPT_RL4CO" / "version_1").findings.runs[0].attempts
    assert (attempt.end_reason, attempt.end_step) == ("completed", 8000)
    assert attempt.end_detail == ("test metrics logged after training (trainer.test() after fit() returned): "
                                  "test/reward=-101.34559631347656")


def test_an_out_of_memory_whose_message_says_the_process_held_the_memory_does_not_point_at_other_processes() -> None:
    """NotDevinLe/preference-decoding run 48t0xlhd: "GPU 0 has a total capacity of 79.25 GiB of which 98.75 MiB is free.
    Including non-PyTorch memory, this process has 79.15 GiB memory in use"; what to check next named "other processes
    on the node"."""
    run = _analysis(REAL / "wandb" / "NotDevinLe__preference-decoding" / "utils" / "wandb"
                    / "run-20250715_032755-48t0xlhd").findings.runs[0]
    [cause] = [c for c in run.suspected_causes if c.cause == "out of memory"]
    assert cause.check_next == ("memory per GPU (micro-batch, activation checkpointing, sequence length, the model's "
                                "size per GPU): the process that failed held 79.15 GiB of the GPU's 79.25 GiB itself "
                                "(its own message), so no other process took it")


def test_a_launch_that_resumed_at_its_last_iteration_says_it_trained_nothing(tmp_path: Path) -> None:
    """A Megatron-LM tutorial's output (unseen-log trial s45): "loading checkpoint ... at iteration 5000" with
    train_iters 5000, then "[after training is done]" in the same second and the end-of-training evaluations: it was
    "completed with no step read from its logs" (as if steps had run unlogged), and its evaluations were "(step None)"."""
    log = tmp_path / "train.log"
    log.write_text(
        "------------------------ arguments ------------------------\n"
        "  train_iters ..................................... 5000\n"
        "-------------------- end of arguments ---------------------\n"
        "[after megatron is initialized] datetime: 2023-07-16 10:56:55 \n"
        " loading checkpoint from /workspace/model/megatron-models/345m at iteration 5000\n"
        "  successfully loaded checkpoint from /workspace/model/megatron-models/345m at iteration 5000\n"
        "training ...\n"
        "[before the start of training step] datetime: 2023-07-16 10:57:01 \n"
        "[after training is done] datetime: 2023-07-16 10:57:01 \n"
        " validation loss at the end of training for val data | lm loss value: 5.741563E+00 | lm loss PPL: "
        "3.115511E+02 | \n"
        "saving checkpoint at iteration    5000 to /workspace/model/megatron-models/345m\n")
    lines = _lines(log)
    assert any(line.startswith("| 1 | none logged | 2023-07-16 10:56:55 | 2023-07-16 10:57:01 | 6 s | – | completed "
                               "without training a step: it resumed at step 5000, its last planned iteration, so "
                               "nothing was left to train") for line in lines)
    assert any("val loss 1 points (at no step the log names)" in line for line in lines)
    # (its events, too: not "with no step read from its logs", as if steps had run unlogged; review s45)
    assert ("- attempt 1, with no step to train (it resumed at 5000, its last planned iteration), 2023-07-16 10:57:01: "
            "training done: \\[after training is done\\] datetime: 2023-07-16 10:57:01") in lines


def test_deepspeeds_unique_parameter_count_is_the_one_printed_by_the_program() -> None:
    """bigscience meg_ds_3d_gpt2_perf_n16: "TOTAL_PARAMS=52453507072 (52453.507M) UNIQUE_PARAMS=52004716544": the
    chronicle gave the total (the tied embedding counted in the first and the last stage) as the model's size."""
    path = REAL / "megatron" / "bigscience-workshop+bigscience__experiments_gpt2-meg-ds-3d_meg_ds_3d_gpt2_perf_n16-ds-on.out"
    assert _analysis(path).findings.runs[0].model.parameters_logged == 52_004_716_544


def test_nanogpts_printed_config_file_is_read_as_its_config() -> None:
    """nanoGPT prints the config file it reads ("Overriding config with config/finetune_shakespeare.py:" and its
    lines); the chronicle had no config of it, so no shape and no planned length (unseen-log trial s45: a nanoGPT
    run printing n_layer = 6, n_embd = 384 had "Parameters from its shape: n/a")."""
    path = REAL / "nanogpt" / "nanogpt_issue210_finetune_gpt2_nan_iter1.txt"
    import parsers

    configs = dict(parsers.load_run(path).configs.select("key", "value").rows())
    assert {k: configs[k] for k in ("train_iters", "lr", "batch_size", "gradient_accumulation_steps", "init_from",
                                    "wandb_run_name")} == {
        "train_iters": "20", "lr": "3e-05", "batch_size": "1", "gradient_accumulation_steps": "32", "init_from": "gpt2",
        "wandb_run_name": "'ft-' + str(time.time())"}  # (an expression: its text, never run)
    assert "import time" not in configs and "time" not in configs
    lines = _lines(path)
    assert "- **The log ends before the planned length, with no end printed:** attempt 1 at step 1 of 20." in lines


def test_a_checkpoint_saved_after_the_last_logged_step_is_the_attempts_last_trace() -> None:
    """Goreg12345/nlp2-probing-lms version_0: metrics.csv logs every 50 steps to 1399; checkpoints/epoch=19-step=
    1440.ckpt was saved 41 steps later, the end of epoch 19. The chronicle said only "the log ends with no end
    printed" at step 1399, and nothing of the save."""
    [attempt] = _analysis(REAL / "lightning" / "Goreg12345_nlp2-probing-lms" / "version_0").findings.runs[0].attempts
    assert (attempt.end_reason, attempt.end_step) == ("running", 1399)
    assert attempt.end_detail == ("still running, cut off, or stopped without a word; its last trace: a checkpoint "
                                  "saved at step 1440, after its last logged step")


def test_launches_refused_by_argparse_are_failed_launches_not_an_unrecognised_file() -> None:
    """112292454/ChatGLM-Efficient-Tuning-main's nohup.out: six launches, each dying in argparse ("train_bash.py:
    error: argument --finetuning_type: invalid choice: 'p-tuning' ..."): refused as "not a recognised training log"
    (exit 2), though the README promises launches that died at start-up are reported."""
    run = _analysis(REAL / "console_errors" / "112292454_ChatGLM-Efficient-Tuning-main_nohup.out").findings.runs[0]
    first = run.attempts[0]
    assert (first.end_reason, first.start_step) == ("crashed", None)  # (its usage text is no start-up: review s45)
    assert first.end_detail.startswith("train_bash.py: error: argument --finetuning_type: invalid choice: 'p-tuning'")
    lines = _lines(REAL / "console_errors" / "112292454_ChatGLM-Efficient-Tuning-main_nohup.out")
    # (each of the five later launches has its own: a relaunch after argparse's error, stop 46)
    assert [line.split(",")[0] for line in lines if line.startswith("- attempt ") and ": error: train\\_bash.py: "
            "error: argument --fp16: Truthy value expected" in line] == [f"- attempt {n}" for n in range(2, 7)]


GENERATED = Path(__file__).parent / "fixtures" / "generated"


def test_the_reviews_inputs_against_this_stops_rules() -> None:
    """Review s45: inputs written to break this stop's rules; each line here was false before its mend."""
    def analysed(name: str) -> forensics.RunFindings:
        return _analysis(GENERATED / f"review_s45_{name}").findings.runs[0]

    # argparse's usage and error printed mid-run (a helper script) do not split the training
    run = analysed("a1_usage_mid_run.txt")
    assert [(a.start_step, a.end_step, a.end_reason) for a in run.attempts] == [(10, 200, "completed")]
    # a loss of 15 nats on 50688 tokens for a whole run, no hidden size known: above chance from the first point
    assert any(a.kind == "loss_above_chance" and a.step == 10 for a in analysed("m1_above_chance_whole_run.txt").anomalies)
    # a resumed run (its first logged step 60, a log every 10) is not the start of training
    assert any(a.kind == "loss_above_chance" and a.step == 60 for a in analysed("m3_resumed_above_chance.txt").anomalies)
    # an init std of 0.9 is no small-init value: nothing assumed of the fresh model
    assert any(a.kind == "loss_above_chance" and a.step == 0 for a in analysed("c2_absurd_std.log").anomalies)
    # a loss stuck at 4.1744, printed 4.1743 at the end, did not fall (not "barely fell: 0.0%")
    assert analysed("p1_stuck_quantum.log").learning["fell"] is False
    # a 2% drop within the noise: not judged either way (not "did not fall")
    assert analysed("p2_two_percent_noise.log").learning["fell"] is None
    # a fall inside the first tenth (10 -> 2, or 30 -> 3, then flat) is no "did not fall"
    assert [analysed(f"{name}.log").learning["fell"] for name in ("p3_steep_then_flat", "p4_steep_fall_then_flat")] \
        == [None, None]
    # attempt 1 stopped short before attempt 2; the log itself does not end there
    lines = _lines(GENERATED / "review_s45_e1_two_launches_first_cut.txt")
    assert "- **Stopped short, with no end in the log, before the next attempt:** attempt 1 at step 100 of 300." in lines
    assert not any(line.startswith("- **The log ends before the planned length") for line in lines)
    # a save begun and never said to be done is not "a checkpoint saved"
    first = analysed("s1_unfinished_save_then_relaunch.txt").attempts[0]
    assert first.end_detail.endswith("its last trace: a checkpoint save begun at step 150, after its last logged step "
                                      "(no line says it finished)")
    # one OOM message naming another process: the advice keeps "other processes on the node"
    [cause] = [c for c in analysed("o1_two_ooms_second_other_process.txt").suspected_causes if c.cause == "out of memory"]
    assert "other processes on the node" in cause.check_next and "no other process took it" not in cause.check_next
    # a '#' inside a string is the string's
    import parsers

    configs = dict(parsers.load_run(GENERATED / "review_s45_n1_hash_in_string.log").configs.select("key", "value").rows())
    assert configs["wandb_run_name"] == "mini-gpt#2"
