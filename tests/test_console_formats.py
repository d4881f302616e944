"""Console logs of nanoGPT, llm.c, torchtitan, nanotron, OLMo and fairseq/metaseq: real files from public
repositories (see fixtures/real/SOURCES.md) with values pinned from their lines, and generated edge cases."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import forensics
import reports
from parsers import load_run
from parsers.textfile import InputError

REAL = Path(__file__).parent / "fixtures" / "real"


@pytest.mark.parametrize(("path", "fmt", "metric", "first", "last", "n"), [
    # "iter 0: loss 4.2709, time 10268.08ms, mfu -100.00%" ... "iter 450: loss nan, ..."
    ("nanogpt/ChenZihua-cn_nanoGPT_train.log", "nanogpt", "loss", (0, 4.2709), (450, float("nan")), 91),
    ("nanogpt/ChenZihua-cn_nanoGPT_train.log", "nanogpt", "val_loss", (0, 4.2475), (400, 3.3687), 5),
    # "step    1/19560 | loss 11.010252 (+nanz)| norm 15.3874 (+nanz)| lr 8.57e-07 | ..."
    ("llmc/HectorFCardenas_gpt2_train.11672114.log", "llm.c", "loss", (1, 11.010252), (750, 4.763922), 750),
    ("llmc/SiddanthEmani_log124M_main.log", "llm.c", "loss", (0, 11.0116), (19551, 3.2813), 19552),
    ("llmc/SiddanthEmani_log124M_main.log", "llm.c", "val_loss", (0, 11.0095), (19552, 3.2731), 80),
    # "step:  1  loss: 12.54527  grad_norm: 20.6250 ..." with ANSI colours around every field
    ("torchtitan/autoresearch_run214_ansi_color.log", "torchtitan", "loss", (1, 12.54527), (10, 6.73165), 10),
    ("torchtitan/autoresearch_run214_ansi_color.log", "torchtitan", "grad_norm", (1, 20.625), None, 10),
    # "iteration: 1 / 120000 | ... elapsed_time_per_iteration_ms: 13.8K | ... | lm_loss: 14.5 | lr: 5e-08 | ..."
    ("nanotron/exp6b1_console.log", "nanotron", "loss", (1, 14.5), (51, 13.9), 51),
    ("nanotron/exp6b1_console.log", "nanotron", "iteration_time_ms", (1, 13800.0), None, 51),
    ("nanotron/exp6b1_console.log", "nanotron", "consumed_tokens", (1, 16400.0), None, 51),
    # "[step=2/739328,epoch=0]" then "    train/CrossEntropyLoss=1.7872662283480167e-06"; the loss reaches 0.0
    ("olmo/issue692_ce_loss_zero_excerpt.txt", "olmo", "loss", (1, 12.18), (3, 0.0), 3),
    ("olmo/issue692_ce_loss_zero_excerpt.txt", "olmo", "grad_norm", (1, 231.7), None, 3),
    # train_inner {... "loss": "25.22", ..., "num_updates": "3", "lr": "6e-05", "gnorm": "131.281", "loss_scale": "1"}
    ("fairseq/fairseq_fsdp_README.md", "fairseq", "grad_norm", (1, 20.751), None, 20),
    ("fairseq/metaseq_issue419_restart_excerpt.txt", "fairseq", "loss", (46001, 3.269), None, 1),
    # llama2.c: "490 | loss 5.7543 | lr 4.900000e-05 | 8060.78ms | mfu 0.21%" ... "650 | loss 5.3185 | ..."
    ("llama2c/issue461_excerpt.txt", "nanogpt", "loss", (490, 5.7543), (650, 5.3185), 17),
    ("llama2c/issue461_excerpt.txt", "nanogpt", "iteration_time_ms", (490, 8060.78), None, 17),
    ("llama2c/issue461_excerpt.txt", "nanogpt", "val_loss", (500, 5.9544), (600, 5.8008), 2),
    # modded-nanogpt: "step:1/20000 train_loss:6.9370 train_time:41ms ..." and "step:0/20000 val_loss:6.9357 ..."
    ("modded_nanogpt/parameter-golf_issue839_start.txt", "modded-nanogpt", "loss", (1, 6.937), (50, 4.1046), 11),
    ("modded_nanogpt/parameter-golf_issue839_start.txt", "modded-nanogpt", "val_loss", (0, 6.9357), None, 1),
    ("modded_nanogpt/parameter-golf_issue839_mid.txt", "modded-nanogpt", "val_loss", (5200, 2.1501), (5600, 2.1455), 3),
    # MMEngine (XTuner): "Epoch(train) [1][240/735]  lr: 1.9813e-04 ... time: 2.8874 ... loss: 2.5128  grad_norm: nan"
    ("mmengine/xtuner_issue187_gradnorm_nan.txt", "mmengine", "grad_norm", (200, 3.0608), (250, float("nan")), 6),
    ("mmengine/xtuner_issue187_gradnorm_nan.txt", "mmengine", "loss", (200, 2.7522), (250, 2.4566), 6),
    ("mmengine/xtuner_issue187_gradnorm_nan.txt", "mmengine", "iteration_time_ms", (200, 2890.6), None, 6),
    # MaxText: "completed step: 15107, seconds: 2.167, TFLOP/s: 36.722, loss: 2.191" (2023; was refused as "CSV with
    # columns `completed step: 15107`, ..."), "completed step: 0, seconds: 1.353, TFLOP/s/device: 1674.038,
    # Tokens/s/device: 36325.072, total_weights: 1572864, loss: 10.874" and the same behind absl's "I0811 ...
    # metric_logger.py:226] " (all three were "not a recognised training log"; audit s39 E)
    ("maxtext/maxtext_issue8_v3-8_steps15107-15109.txt", "maxtext", "loss", (15107, 2.191), (15109, 2.191), 3),
    ("maxtext/maxtext_issue8_v3-8_steps15107-15109.txt", "maxtext", "tflops_per_gpu", (15107, 36.722), None, 3),
    ("maxtext/maxtext_pr2041_maxtest_getting_started.txt", "maxtext", "loss", (0, 10.874), (3, 9.774), 4),
    ("maxtext/maxtext_pr2041_maxtest_getting_started.txt", "maxtext", "tokens_per_gpu_per_second", (0, 36325.072),
     (3, 4195.595), 4),
    ("maxtext/maxtext_pr4847_gemma_steps1-3.txt", "maxtext", "loss", (1, 12.979), (3, 12.979), 3),
    ("maxtext/maxtext_pr4847_gemma_steps1-3.txt", "maxtext", "iteration_time_ms", (1, 631.0), (3, 10344.0), 3),
    # torchtune: "Step 1 | loss:2.085338592529297 lr:2e-05 tokens_per_second_per_gpu:57.828881833956174" and the bar's
    # "[trainer0|0]:1|54|Loss: 1.0960569381713867:  54%|█████▍    | 55/101 [...]", each description printed twice
    # (all three were "not a recognised training log"; audit s39 E)
    ("torchtune/torchtune_pr1358_codellama_steps1-12.txt", "torchtune", "loss", (1, 2.085338592529297),
     (12, 1.1174635887145996), 12),
    ("torchtune/torchtune_pr1358_codellama_steps1-12.txt", "torchtune", "tokens_per_gpu_per_second",
     (1, 57.828881833956174), None, 12),
    ("torchtune/torchtune_pr640_single_device_full_steps0-17.txt", "torchtune", "lr", (0, 2e-05), (17, 2e-05), 18),
    ("torchtune/torchtune_pr2620_multinode_bar_steps54-60.txt", "torchtune", "loss", (54, 1.0960569381713867),
     (60, 1.010416030883789), 7),
])
def test_real_console_values(path: str, fmt: str, metric: str, first: tuple, last: tuple | None, n: int) -> None:
    run = load_run(REAL / path)
    assert [src.format for src in run.sources] == [fmt]
    rows = run.metrics.filter(metric=metric).select("step", "value").rows()
    assert len(rows) == n and rows[0] == first
    if last is not None:
        assert rows[-1][0] == last[0] and (rows[-1][1] == last[1] or (rows[-1][1] != rows[-1][1] and last[1] != last[1]))


def test_nanogpt_nan_is_found_at_the_step_it_began() -> None:
    """nanoGPT prints "iter 425: loss nan"; the chronicle says NaN from step 425."""
    run = forensics.analyze(load_run(REAL / "nanogpt" / "ChenZihua-cn_nanoGPT_train.log")).runs[0]
    nan = [a for a in run.anomalies if a.kind == "nan"]
    assert [(a.step, a.end_step) for a in nan] == [(425, 450)]
    assert [(a.start_step, a.end_step, a.end_reason) for a in run.attempts] == [(0, 450, "nan")]


def test_torchtitan_oom_before_step_one_is_a_start_up_failure() -> None:
    run = load_run(REAL / "torchtitan" / "autoresearch_run111_oom.log")
    assert run.metrics.height == 0
    oom = run.events.filter(kind="out_of_memory")
    assert oom.height == 9 and "CUDA out of memory. Tried to allocate 1.45 GiB" in oom["text"][0]


def test_one_step_printed_by_several_ranks_is_one_point_not_seven_attempts(tmp_path: Path) -> None:
    run = load_run(REAL / "torchtitan" / "issue_pr2389_ranks_print_one_step.txt")
    assert run.attempts == [1]
    assert run.metrics.filter(metric="loss").select("step", "value").rows() == [(4, 7.62585), (5, 7.07623)]
    assert any("6 metrics lines repeat the step, loss and time of the line before (first: step 4, line 1): the same "
               "line printed again as it was (by several ranks, or a console redraw kept in a paste), each step read "
               "once" in w for w in run.warnings), run.warnings
    # the same step again at another time, with nothing between: a relaunch whose start-up was not logged
    lines = (REAL / "torchtitan" / "issue_pr2389_ranks_print_one_step.txt").read_text().splitlines()
    log = tmp_path / "relaunch.log"
    log.write_text("\n".join([lines[0], lines[7], lines[7].replace("19:46:19,145", "19:52:03,001")]) + "\n")
    assert load_run(log).attempts == [1, 2]


def test_llmc_cublas_error_is_a_program_error_not_hardware() -> None:
    run = load_run(REAL / "llmc" / "HectorFCardenas_gpt2_train.11679004.log")
    assert run.events.filter(kind="error").select("kind", "text").rows() == [
        ("error", "[cuBLAS ERROR]: 13 llmc/matmul.cuh 216")]
    assert run.events["kind"].to_list() == ["parameter_count", "error"]


def test_olmo_concatenated_runs_are_attempts_and_metaseq_checkpoint_saves_are_events() -> None:
    assert load_run(REAL / "olmo" / "ai_on_aks_olmo1b_results.md").attempts == list(range(1, 10))
    saved = load_run(REAL / "fairseq" / "metaseq_pr499_checkpoint_save_excerpt.txt").events.filter(kind="checkpoint_save")
    assert saved.select("step", "value").rows() == [(10, 10.0)]


def test_a_cut_that_falls_in_a_field_not_read_keeps_the_values_before_it(tmp_path: Path) -> None:
    """nanotron cut by the end of the file inside "model_tflops_per_gpu": the loss and lr before it are whole."""
    text = (REAL / "nanotron" / "exp6b1_console.log").read_text()
    at = text.index("iteration: 30 /")
    log = tmp_path / "cut.log"
    log.write_text(text[: text.index("model_tflops", at) + len("model_tflops")])
    run = load_run(log)
    assert run.metrics.filter(step=30, metric="loss")["value"].to_list() == [14.4]
    assert run.metrics.filter(step=30, metric="grad_norm").height == 0  # printed after the cut


def test_a_console_without_metrics_says_what_it_is() -> None:
    with pytest.raises(InputError, match="torchtitan log without metrics lines, errors or stops"):
        load_run(REAL / "torchtitan" / "issue_pr3393_resume_excerpt_part2.txt")


# --- generated edge cases ---------------------------------------------------------------------------------------------
def _nanogpt(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def test_restart_cut_line_nan_and_empty(tmp_path: Path) -> None:
    iters = [f"iter {i}: loss {4 - i / 100:.4f}, time 100.00ms, mfu 1.00%" for i in range(0, 50, 10)]
    again = [f"iter {i}: loss {4 - i / 100:.4f}, time 100.00ms, mfu 1.00%" for i in range(30, 60, 10)]
    log = tmp_path / "train.log"
    log.write_text(_nanogpt([*iters, "Resuming training from out", *again, "iter 60: loss nan, time 1.00ms, mfu 1%"])
                   + "iter 70: loss 2")  # cut by the end of the file: "2" is not the value
    run = load_run(log)
    loss = run.metrics.filter(metric="loss")
    assert run.attempts == [1, 2]
    assert loss.filter(attempt=2).select("step").to_series().to_list() == [30, 40, 50, 60]
    assert 70 not in loss["step"].to_list() and loss.filter(step=60)["value"].is_nan().all()
    assert "train.log: the last line is cut short (line 11); what the end of the file cut ('2') was not used" in [
        w.replace(str(tmp_path) + "/", "") for w in run.warnings]
    assert run.events.filter(kind="checkpoint_load").height == 1
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(InputError, match="empty file"):
        load_run(empty)


def test_a_console_whose_first_metrics_line_is_past_the_head_is_still_read(tmp_path: Path) -> None:
    """A long start-up (warnings, a model summary) pushes nanoGPT's first iter line past the 64 KB every reader is
    shown first; the last-resort text reader finds it in its one pass and hands the file to the nanoGPT reader."""
    log = tmp_path / "train.log"
    log.write_text("".join(f"UserWarning: a noisy start-up line number {i} of the model summary\n" for i in range(2000))
                   + "".join(f"iter {i}: loss {4 - i / 1000:.4f}, time 100.00ms, mfu 1.00%\n" for i in range(0, 100, 10)))
    run = load_run(log)
    assert [src.format for src in run.sources] == ["nanogpt"]
    assert run.metrics.filter(metric="loss").select("step", "value").row(-1) == (90, 3.91)


def test_a_cancel_glued_to_progress_output_is_quoted_from_where_it_begins() -> None:
    """llm.c's HellaSwag progress redraws its line with carriage returns; slurm's cancel notice lands at the end of
    the last redraw (a carriage return ends a line, so the quote is that redraw, not the whole progress output)."""
    run = load_run(REAL / "llmc" / "HectorFCardenas_gpt2_train.11672114.log")
    cancelled = run.events.filter(kind="time_limit")
    quote = ("evaluating HellaSwagslurmstepd: error: *** JOB 11672114 ON g093 CANCELLED AT 2024-10-10T00:43:56 DUE TO "
             "TIME LIMIT ***")
    assert cancelled.select("step", "text").rows() == [(750, quote)]


def test_mmengine_epoch_steps_count_every_epoch_before() -> None:
    """``Epoch(train) [2][10/735]`` is step 745: iterations count across epochs."""
    from parsers.console import mmengine

    lines = pl.DataFrame({"t": ["x Epoch(train) [2][10/735]  lr: 1e-4  loss: 1.0",
                                "x Epoch(train)  [1][ 735/735]  lr: 1e-4  loss: 1.0"]})
    assert lines.select(mmengine.epoch_step(pl.col("t")))["t"].to_list() == [745, 735]


def test_mmcv_epoch_steps_count_every_epoch_before_and_an_evaluation_takes_the_step_before_it(tmp_path: Path) -> None:
    """mmcv 1.x: ``Epoch [2][50/962]`` is step 962 + 50; ``Epoch(val) [1][200]`` (200: the size of the validation set,
    no step) is put at the step of the training line before it, its ``loss`` the validation loss."""
    stamp = "2022-11-12 18:58:57,266 - mmdet - INFO - "
    log = tmp_path / "20221112.log"
    log.write_text(
        f"{stamp}Epoch [1][950/962]\tlr: 2.000e-02, eta: 2:38:29, time: 0.905, data_time: 0.008, memory: 5062, "
        "loss_rpn_cls: 0.0246, loss: 0.7182\n"
        f"{stamp}Epoch(val) [1][200]\tbbox_mAP: 0.0210, bbox_mAP_50: 0.0940, bbox_mAP_copypaste: 0.021 0.094\n"
        f"{stamp}Epoch(val) [1][200]\tloss_rpn_cls: 0.0300, loss: 0.8000\n"
        f"{stamp}Epoch [2][50/962]\tlr: 2.000e-02, eta: 2:36:19, time: 0.969, data_time: 0.061, memory: 5062, "
        "loss_rpn_cls: 0.0290, loss: 0.6508\n")
    run = load_run(log)
    assert [src.format for src in run.sources] == ["mmcv"]
    assert run.metrics.filter(metric="loss").select("step", "value").rows() == [(950, 0.7182), (1012, 0.6508)]
    assert run.metrics.filter(metric="bbox_mAP").select("step", "value").rows() == [(950, 0.021)]
    assert run.metrics.filter(metric="val_loss").select("step", "value").rows() == [(950, 0.8)]
    # an iteration-based runner (MMSegmentation 0.x): the step is printed
    log = tmp_path / "iter.log"
    log.write_text(f"{stamp}Iter [100/160000]\tlr: 9.997e-03, eta: 1 day, 0:00:00, time: 0.600, data_time: 0.010, "
                   "memory: 3774, decode.loss_ce: 2.3000, loss: 3.2000\n")
    assert load_run(log).metrics.filter(metric="loss").select("step", "value").rows() == [(100, 3.2)]


def test_a_grad_norm_nan_with_the_loss_still_finite_is_what_went_wrong_not_how_it_ended() -> None:
    """xtuner #187: the grad norm NaN at 240 and 250, the loss finite at both (the updates skipped, or trouble to
    come: the log does not tell). It read "ended in NaN"; the excerpt ends with the run still logging losses."""
    findings = forensics.analyze(load_run(REAL / "mmengine" / "xtuner_issue187_gradnorm_nan.txt"))
    run = findings.runs[0]
    assert (run.attempts[0].end_reason, run.attempts[0].end_step) == ("running", 250)
    assert [(a.kind, a.metric, a.step) for a in run.anomalies if a.kind == "nan"] == [("nan", "grad_norm", 240)]
    assert ("- **What went wrong:** attempt 1: the log ends with no end printed: still running, cut off, or stopped "
            "without a word; NaN in the grad norm from step 240.") in reports.render(findings).splitlines()


def test_olmo_core_metrics_it_does_not_read_are_named() -> None:
    """allenai/OLMo-core issue #173: the `[step=1/7,epoch=1]` block prints nine `name=value` lines (L9-L17); the loss,
    the grad norm and the LR of group 0 were read and the other six dropped with no word, so the chronicle listed
    three metrics as all the block held. They are said, with their names."""
    run = load_run(REAL / "olmo" / "olmo_core_issue173_step1_excerpt.txt")
    assert sorted(run.metrics["metric"].unique().to_list()) == ["grad_norm", "loss", "lr"]
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "6 lines of other metrics (OLMo's name=value lines beyond the loss, Z loss, grad norm, the LR of group 0 and "
        "the total tokens): not read (optim/LR (group 1), system/GPU active mem (%), system/GPU active mem (GiB), "
        "system/GPU reserved mem (%), system/GPU reserved mem (GiB), throughput/device/data loading (s))"]


def test_an_indented_assignment_in_a_traceback_is_no_olmo_metric(tmp_path: Path) -> None:
    """A traceback's source line ("    warmup_steps = 2000") was counted among "other metrics ... not read
    (warmup_steps)": OLMo's metric names are "<group>/<name>" (review s38)."""
    text = (REAL / "olmo" / "olmo_core_issue173_step1_excerpt.txt").read_text()
    (tmp_path / "train.log").write_text(text + 'Traceback (most recent call last):\n  File "train.py", line 9, in '
                                        "<module>\n    warmup_steps = 2000\nValueError: bad warm-up\n")
    [note] = [w.split(": ", 1)[1] for w in load_run(tmp_path / "train.log").warnings if "other metrics" in w]
    assert note.startswith("6 lines of other metrics") and "warmup_steps" not in note


def test_maxtext_fields_it_does_not_read_are_named() -> None:
    """AI-Hypercomputer/maxtext PR #4847: each step line prints `total_weights: 1572864, loss: 12.979, lm_loss: 12.979,
    perplexity: 433358.281` after the throughput; the loss is read, the other three are named as not read."""
    run = load_run(REAL / "maxtext" / "maxtext_pr4847_gemma_steps1-3.txt")
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "its metrics lines also print lm_loss, perplexity, total_weights: not read, so nothing here checks them or "
        "rests on them"]


def test_torchtune_fields_it_does_not_read_are_named() -> None:
    """meta-pytorch/torchtune PR #640: each `Step N | loss:... lr:2e-05 gpu_resources:40627453440 ` line prints the
    GPU memory in use after the LR: named as not read."""
    run = load_run(REAL / "torchtune" / "torchtune_pr640_single_device_full_steps0-17.txt")
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "its metrics lines also print gpu_resources: not read, so nothing here checks them or rests on them"]


def test_colossalai_nan_loss_on_its_progress_bar_is_found() -> None:
    """hpcaitech/ColossalAI #1375: the legacy Trainer's bar `[Epoch 0 / Train]:   0% 431/788222 [29:28<796:09:33,
    3.64s/it, loss=nan, lr=2.5e-5, ...]` (L3, L8) between "found inf during ShardedOptimV2 step" warnings was "not a
    recognised training log", so the NaN loss went unseen (audit s39 E)."""
    path = REAL / "console_errors" / "colossalai_issue1375_found_inf_loss_nan_excerpt.txt"
    run = load_run(path)
    assert [src.format for src in run.sources] == ["colossalai"]
    # (the bar at count 431 is printed by set_postfix in the body of iteration 432: its values are iteration 432's)
    assert run.metrics.filter(metric="lr").select("step", "value").rows() == [(432, 2.5e-05), (433, 2.5e-05)]
    loss = run.metrics.filter(metric="loss")
    assert loss["step"].to_list() == [432, 433] and loss["value"].is_nan().all()
    lines = reports.render(forensics.analyze_path(path).findings).splitlines()
    assert "- **What went wrong:** attempt 1 ended in NaN/Inf: NaN from step 432 to the end of its log (step 433)." in lines


def test_colossalai_bar_printed_twice_an_iteration_is_one_attempt(tmp_path: Path) -> None:
    """The legacy Trainer calls `progress.set_postfix(**step_metrics)` in its loop body (a print at the count so far,
    with this iteration's loss), then tqdm's own update prints the count one higher with the same postfix: in a log
    written to a file (tqdm's '\\r's kept) each count is printed twice with two losses. Review s39: 60 iterations
    were 60 attempts, each 'restarted'."""
    losses = [3 - k * 0.01 + (k % 7) * 0.003 for k in range(60)]
    bars = "".join(f"\r[Epoch 0 / Train]:   0%|          | {n}/788222 [00:{i:02d}<796:09:33,  3.64s/it, "
                   f"loss={losses[i]:.5f}, lr=2.5e-5, throughput=0.2{i:02d} sample_per_sec, 2.3376 Tflops]"
                   for i in range(60) for n in (i, i + 1))
    path = tmp_path / "train.log"
    path.write_text(bars + "\n")
    run = load_run(path)
    assert run.attempts == [1]
    loss = run.metrics.filter(metric="loss").sort("step")
    # (each iteration's loss at the count its update prints: iteration 1's loss at 1)
    assert loss["step"].to_list() == list(range(1, 61))
    assert loss["value"].to_list() == [round(v, 5) for v in losses]


def test_deepspeed_chat_step3_ppo_losses_are_read_under_their_own_names() -> None:
    """yuguo-Jack/ChatGLM-6B-in-DeepSpeed-Chat's step-3 log (`epoch: 0|step: 0|ppo_ep: 1|act_loss: 0.3017578125|
    cri_loss: 2.357421875|unsuper_loss: 0.0`, then `average reward score: -3.4609375`) was read for DeepSpeed's LR
    lines only, "no loss metric recognised". Its step counts prompt batches from 0 and is printed after the batch's
    optimizer step (DeepSpeed's `step=1` line before `step: 0`): read as step + 1; `Total Generation Batches 113` of
    its one epoch is the plan, and the file ends at batch 111 of 113 with no end printed."""
    path = REAL / "deepspeed_chat" / "yuguo-Jack_chatglm6b_step3_excerpt.log"
    run = load_run(path)
    assert [src.format for src in run.sources] == ["deepspeed-chat"]
    series = {m: run.metrics.filter(metric=m).sort("step").select("step", "value").rows()
              for m in ("actor_loss", "critic_loss", "unsupervised_loss", "reward")}
    assert series["actor_loss"][0] == (1, 0.3017578125) and series["actor_loss"][-1] == (111, 0.01403045654296875)
    assert series["critic_loss"][0] == (1, 2.357421875) and series["critic_loss"][-1] == (111, 0.01100921630859375)
    assert series["reward"][0] == (1, -3.4609375) and series["reward"][-1] == (111, 5.01171875)
    assert [step for step, _ in series["unsupervised_loss"]] == [1, 2, 3, 4, 5, 6, 108, 109, 110, 111]
    assert run.configs.filter(key="train_iters")["value"].to_list() == ["113"]
    assert any("19 lines of DeepSpeed's" in w and "not read" in w for w in run.warnings)
    lines = reports.render(forensics.analyze_path(path).findings).splitlines()
    assert "- **The log ends before the planned length, with no end printed:** attempt 1 at step 111 of 113." in lines


def test_a_metric_loggers_loss_scale_is_read_and_its_other_fields_named() -> None:
    """935963004/LaBraM #4: BEiT-style MetricLogger lines print 'loss_scale: 65536.0000 (65536.0000)', then 32768 (an
    fp16 overflow in its first ten iterations), beside class_acc, min_lr and weight_decay; the chronicle said 'Not
    found: loss scale, so fp16 loss-scale collapse ... could not be checked' and named none of the fields it left."""

    run = load_run(Path(__file__).parent / "fixtures" / "real" / "metric_logger" / "labram_issue4_loss_scale_excerpt.txt")
    assert run.metrics.filter(metric="loss_scale").select("step", "value").rows() == [
        (0, 65536.0), (10, 32768.0), (20, 32768.0), (30, 32768.0)]
    assert any(w.endswith("its metrics lines also print class_acc, min_lr, weight_decay: not read, so nothing here "
                          "checks them or rests on them") for w in run.warnings)


def test_deepspeed_chat_ppo_over_several_epochs_is_one_attempt(tmp_path: Path) -> None:
    """DeepSpeed-Chat's step 3 counts each epoch's prompt batches from 0 (`Epoch: 1 | Step: 0 | ...`): a second
    epoch read as the step going back, a relaunch. Built from the real log's lines (yuguo-Jack's excerpt, its header
    `Total Generation Batches 113` made 2 and its epochs 2): one attempt, epoch 1's steps after epoch 0's (3, 4)."""
    real = (REAL / "deepspeed_chat" / "yuguo-Jack_chatglm6b_step3_excerpt.log").read_text().splitlines()
    ds_step = next(line for line in real if "step=1, skipped=0" in line)
    lines = ["***** Running training *****"]
    for epoch in (0, 1):
        lines.append(f"Beginning of Epoch {epoch + 1}/2, Total Generation Batches 2")
        for step, (act, reward) in enumerate(((0.3017578125, -3.4609375), (0.380859375, -3.525390625))):
            lines += [ds_step, f"epoch: {epoch}|step: {step}|ppo_ep: 1|act_loss: {act}|cri_loss: 2.357421875|"
                      "unsuper_loss: 0.0", f"average reward score: {reward}", "-" * 85]
    lines.append("saving model ...")
    (tmp_path / "step3.log").write_text("\n".join(lines) + "\n")
    run = load_run(tmp_path / "step3.log")
    assert run.attempts == [1]
    assert run.metrics.filter(metric="actor_loss").sort("step").select("step", "value").rows() == [
        (1, 0.3017578125), (2, 0.380859375), (3, 0.3017578125), (4, 0.380859375)]
    assert run.metrics.filter(metric="reward").sort("step")["step"].to_list() == [1, 2, 3, 4]
    # without the header, the epoch's batches are the largest printed step + 1
    (tmp_path / "cut.log").write_text("\n".join(line for line in lines if "Beginning of Epoch" not in line) + "\n")
    cut = load_run(tmp_path / "cut.log")
    assert cut.attempts == [1] and cut.metrics.filter(metric="actor_loss")["step"].sort().to_list() == [1, 2, 3, 4]


def test_deepspeed_chat_sft_and_reward_model_consoles() -> None:
    """microsoft/DeepSpeedExamples' DeepSpeed-Chat step 1 (SFT of OPT-1.3B, 16 epochs) and step 2 (an OPT-350m reward
    model) logs were read as text with errors only ("no metrics lines of a text format it knows"). Their steps are
    DeepSpeed's `step=N` lines (LR of group 0, CurrSamplesPerSec of the timer line), the evaluations at the last of
    them before (the one before training at 0): perplexity per epoch, the reward model's scores and its epoch's mean
    training loss; `saving ... model ...` ends training. The SFT run's overflows are DeepSpeed's hysteresis each scale
    window (two skipped steps at a time), no burst; the reward model's two real bursts (3 skips between DeepSpeed's
    counts 11 at step 480 and 14 at 490, the scale from 512 to 64; 3 more by 570) are kept."""
    sft = load_run(REAL / "deepspeed_chat" / "DeepSpeedExamples_step1_opt-1.3b_sft.log")
    assert [src.format for src in sft.sources] == ["deepspeed-chat-sft-rm"] and sft.attempts == [1]
    ppl = sft.metrics.filter(metric="val_ppl").sort("step").select("step", "value").rows()
    assert ppl[:2] == [(0, 4998.29638671875), (460, 2.0179834365844727)] and len(ppl) == 17
    assert sft.metrics.filter(metric="lr").sort("step").select("step", "value").row(0) == (10, 9.649992967150629e-06)
    assert sft.metrics.filter(metric="samples_per_second").sort("step").select("step", "value").row(0) == (
        10, 171.97903593624417)
    found = forensics.analyze(sft).runs[0]
    assert [a.kind for a in found.anomalies] == []
    assert (found.attempts[0].end_reason, found.attempts[0].end_detail) == ("completed",
                                                                             "saving the final model ...")
    rm = load_run(REAL / "deepspeed_chat" / "DeepSpeedExamples_step2_opt-350m_reward_model.log")
    assert rm.metrics.filter(metric="val_chosen_score").sort("step").select("step", "value").rows() == [
        (0, 2.8115079402923584), (1840, 2.243525981903076)]
    assert rm.metrics.filter(metric="train_loss_epoch").select("step", "value").rows() == [(1840, 0.5754789632299672)]
    found = forensics.analyze(rm).runs[0]
    assert [(a.kind, a.step, a.end_step, a.value) for a in found.anomalies] == [
        ("skipped_iterations", 490, 490, 3.0), ("skipped_iterations", 560, 570, 3.0)]


def test_deepspeed_chat_dpo_console_is_one_launch(tmp_path: Path) -> None:
    """DeepSpeedExamples' step2_dpo_finetuning log (training_log_output/opt-350M_globalBatchSize-32.log): DeepSpeed's
    `step=0, skipped=0` line as the engine starts comes before `***** Running training *****`: not a step, so the
    launch is one attempt; DPO's `chosen: ..., rejected: ..., loss: ...` under their own names; print_throughput's
    lines counted as not read. Built from its lines."""
    stamp = "[2025-01-02 15:47:38,841] [INFO] [logging.py:128:log_dist] [Rank 0] "
    lines = [stamp + "step=0, skipped=0, lr=[5e-05, 5e-05], mom=[(0.9, 0.95), (0.9, 0.95)]",
             "***** Running training *****", "***** Evaluating rewards, Epoch 1/1 *****",
             "chosen: 0.0, rejected: 0.0, loss: 0.693359375", "Beginning of Epoch 1/1, Total Micro Batches 4708",
             "Model Parameters: 0.331 B, Latency: 0.27s, TFLOPs: 1.02, Samples/sec: 7.28, Time/seq 0.14s, Batch Size: "
             "2, Sequence Length: 512",
             stamp + "step=10, skipped=4, lr=[4.999919851200522e-05, 4.999919851200522e-05], mom=[(0.9, 0.95)]",
             stamp.replace("15:47:38", "15:47:45") + "step=20, skipped=4, lr=[4.9e-05, 4.9e-05], mom=[(0.9, 0.95)]",
             "***** Evaluating rewards, Epoch 1/1 *****", "chosen: -31.9375, rejected: -33.96875, loss: "
             "0.6650807857513428", "saving the final model ..."]
    (tmp_path / "dpo.log").write_text("\n".join(lines) + "\n")
    run = load_run(tmp_path / "dpo.log")
    assert run.attempts == [1]
    assert run.metrics.filter(metric="val_dpo_loss").sort("step").select("step", "value").rows() == [
        (0, 0.693359375), (20, 0.6650807857513428)]
    assert run.metrics.filter(metric="val_rejected_reward").sort("step")["value"].to_list() == [0.0, -33.96875]
    assert f"{tmp_path / 'dpo.log'}: 1 line of print_throughput (a micro-batch's latency and TFLOPs, printed " \
           "without a step): not read" in run.warnings
