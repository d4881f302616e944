"""MosaicML Composer's console (llm-foundry and the programs built on Composer's Trainer): real files and excerpts
from public repositories and threads (see fixtures/real/SOURCES.md) with values pinned from their lines, and
generated edge cases built from lines as Composer prints them."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import forensics
from parsers import load_run

REAL = Path(__file__).parent / "fixtures" / "real" / "composer"
PROFILE = REAL / "Helios113+dyna__profile"
GLUED = REAL / "Helios113+dyna__SomeFile.txt_blocks.txt"


def _series(run, metric: str) -> list[tuple[int, float]]:
    return run.metrics.filter(metric=metric).select("step", "value").rows()


def _said(run) -> list[str]:
    return [w.split(": ", 1)[1] for w in run.warnings]


def test_dyna_profile_blocks_of_batches_1_10_and_20_of_20() -> None:
    """'[batch=10/20]:' then '\\t Train loss/train/total: 0.0053', '\\t Train l2_norm/grad/global: 0.0022', ...; the
    LR printed '0.0000', '0.0000', '0.0001' (four decimals of a warm-up LR) is not read."""
    run = load_run(PROFILE)
    assert [src.format for src in run.sources] == ["composer"]
    assert _series(run, "loss") == [(1, 0.0053), (10, 0.0053), (20, 0.0051)]
    assert _series(run, "grad_norm") == [(10, 0.0022), (20, 0.0015)]
    assert _series(run, "lr") == []
    assert _series(run, "samples_per_second") == [(20, 0.217)]
    assert _series(run, "tokens_per_gpu_per_second") == [(20, 222.2194)]
    assert run.configs.filter(key="train_iters").select("attempt", "value").rows() == [(1, "20")]
    said = _said(run)
    assert said[:3] == ["lr printed under 0.001 on 3 line(s): four decimal places leave an LR under 0.001 one "
                        "significant digit at most (0.0001 is anything from 5e-05 to 1.5e-04, 0.0000 anything under "
                        "5e-05), too few to follow its schedule; not read",
                        "its grad norm (the OptimizerMonitor's l2_norm/grad/global) is taken after the optimizer step, "
                        "from the gradients as any clipping left them: under gradient clipping it stays at or below the "
                        "threshold, and a spike above it does not show",
                        "Composer prints every value to four decimal places"]
    unread = next(w for w in said if w.startswith("its metrics lines also print "))
    for name in ("memory/peak_reserved_mem", "metrics/train/LanguageCrossEntropy", "expert_selection/ffn_layer",
                 "time/batch_in_epoch"):
        assert name in unread
    # the OptimizerMonitor's per-parameter norms, a family of 26 names each, said as one
    assert "l2_norm/grad/* (26 names: model.embedding.weight ... model.transformer.layers.1.ffn_pre.weight)" in unread
    assert "loss/train/total" not in unread.split(": not read")[0].split(", ")
    # "[composer.trainer.trainer][INFO] - Run name: 1754470968-umber-owl" (line 3), its "Config:" block's
    # "composer_version: 0.31.0" (line 15)
    assert run.events.select("kind", "line").rows() == [("startup", 3), ("startup", 15)]


def test_dyna_profile_chronicle_says_the_run_reached_its_planned_length() -> None:
    run = forensics.analyze(load_run(PROFILE)).runs[0]
    assert [(a.start_step, a.end_step, a.end_reason) for a in run.attempts] == [(1, 20, "completed")]


def test_headers_glued_to_a_program_print_are_read() -> None:
    """SomeFile.txt prints tensors before each header: "       device='cuda:0', requires_grad=True)[batch=1/40]:"."""
    run = load_run(GLUED)
    assert _series(run, "loss") == [(1, 0.0054), (10, 0.0053), (20, 0.005), (30, 0.0047), (40, 0.0046)]
    assert _series(run, "grad_norm") == [(10, 0.0027), (20, 0.002), (30, 0.0015), (40, 0.0014)]
    assert run.configs.filter(key="train_iters")["value"].to_list() == ["40"]
    attempts = forensics.analyze(run).runs[0].attempts
    assert [(a.start_step, a.end_step, a.end_reason) for a in attempts] == [(1, 40, "completed")]


def test_llm_foundry_issue117_the_last_of_ten_batches() -> None:
    """'[batch=10/10]:' ... '         Train loss/train/total: 10.9654' ... 'Train lr-DecoupledAdamW/group0: 0.0001'
    (GitHub's copy: the tab as nine spaces; an LR printed with one digit is not read)."""
    run = load_run(REAL / "issue__mosaicml+llm-foundry__issue117_batch10.txt")
    assert _series(run, "loss") == [(10, 10.9654)]
    assert _series(run, "lr") == []
    assert run.configs.filter(key="train_iters")["value"].to_list() == ["10"]
    assert ("its metrics lines also print memory/active_mem, memory/alloc_retries, memory/allocated_mem, "
            "memory/inactive_mem, memory/reserved_mem, metrics/train/LanguageCrossEntropy, "
            "metrics/train/LanguagePerplexity, time/batch_in_epoch, time/remaining_estimate, time/sample, "
            "time/sample_in_epoch, time/token, time/token_in_epoch, time/total, time/train, time/val, "
            "trainer/device_train_microbatch_size: not read, so nothing here checks them or rests on them") in _said(run)


def test_llm_foundry_issue244_an_excerpt_that_begins_inside_a_block() -> None:
    """The excerpt begins with batch 7's last lines (its loss 10.1905, no header) and is cut in batch 8's LR line."""
    run = load_run(REAL / "issue__mosaicml+llm-foundry__issue244_batches7-8.txt")
    assert _series(run, "loss") == [(8, 10.0649)]
    assert run.metrics.filter(metric="lr").height == 0
    assert ("2 lines of values it reads (loss, lr) printed before the first line that gives a step (line 13): no "
            "step, not read") in _said(run)


def test_examples_pr262_older_names_and_throughput() -> None:
    """'[batch=17/30]:' of a 30B MPT: 'Train throughput/samples_per_sec: 50.6453', '.../device/tokens_per_sec:
    810.3245', and the older 'trainer/batch_idx', 'wall_clock/train' names, said to be not read."""
    run = load_run(REAL / "issue__mosaicml+examples__pr262_batch17.txt")
    assert _series(run, "loss") == [(17, 11.863)]
    assert _series(run, "samples_per_second") == [(17, 50.6453)]
    assert _series(run, "tokens_per_gpu_per_second") == [(17, 810.3245)]
    assert run.metrics.filter(metric="lr").height == 0  # "Train lr-DecoupledAdamW/group0: 0.0000"
    unread = next(w for w in _said(run) if w.startswith("its metrics lines also print "))
    assert "trainer/batch_idx" in unread and "wall_clock/train" in unread and "throughput/device/mfu" in unread


# --- generated from lines as Composer prints them -----------------------------------------------------------------


def _block(header: str, loss: str, prefix: str = "", before: int | None = None) -> str:
    """A training block: its header, 'Train time/batch' (the batches before it: one less than a header's count of
    batches, ``before`` where the header counts within an epoch) and the loss."""
    if before is None:
        before = int(header.split("batch=")[1].split("/")[0]) - 1
    return f"{prefix}{header}\n{prefix}\t Train time/batch: {before}\n{prefix}\t Train loss/train/total: {loss}\n"


def test_epoch_headers_count_batches_over_epochs(tmp_path: Path) -> None:
    """'[epoch=2][batch=3/5]:' is the 8th batch; '/5' is the epoch's batches, not the run's planned length. An LR of
    0.001 or more has digits enough to be read."""
    log = tmp_path / "train.log"
    log.write_text(_block("[epoch=1][batch=5/5]:", "8.4213", before=4) + "\t Train lr-DecoupledSGDW/group0: 0.0060\n"
                   + _block("[epoch=2][batch=3/5]:", "8.3177", before=7) + "\t Train lr-DecoupledSGDW/group0: 0.0055\n")
    run = load_run(log)
    assert [src.format for src in run.sources] == ["composer"]
    assert _series(run, "loss") == [(5, 8.4213), (8, 8.3177)]
    assert _series(run, "lr") == [(5, 0.006), (8, 0.0055)]
    assert run.configs.filter(key="train_iters").height == 0


def test_rank_labels_and_evaluation_blocks(tmp_path: Path) -> None:
    """A multi-node launcher's '0: ' before every line; an evaluation's block after the batch's."""
    log = tmp_path / "train.log"
    log.write_text(_block("[batch=1/300000000]:", "12.0000", prefix="0: ")
                   + "0: [Eval batch=3/3] Eval on eval data:\n"
                   + "0: \t Eval metrics/eval/LanguageCrossEntropy: 11.9000\n"
                   + "0: \t Eval metrics/eval/LanguagePerplexity: 147266.6250\n")
    run = load_run(log)
    assert _series(run, "loss") == [(1, 12.0)]
    assert _series(run, "val_loss") == [(1, 11.9)]
    assert _series(run, "val_ppl") == [(1, 147266.625)]
    assert run.configs.filter(key="train_iters")["value"].to_list() == ["300000000"]


def test_automatic_microbatching_catching_an_oom_is_no_crash(tmp_path: Path) -> None:
    """'device_train_microbatch_size: auto': Composer halves the microbatch and trains the batch again (its warning,
    as a real run printed it); the run goes on."""
    log = tmp_path / "train.log"
    log.write_text(_block("[batch=1/3]:", "2.9341")
                   + "/usr/local/lib/python3.9/dist-packages/composer/trainer/trainer.py:240: RuntimeWarning: CUDA out "
                     "of memory detected. Train microbatch size will be decreased from 1024 -> 512.\n"
                   + "  warnings.warn(\n"
                   + _block("[batch=2/3]:", "2.9261") + _block("[batch=3/3]:", "2.8784"))
    run = load_run(log)
    assert run.events.select("kind", "line").rows() == [("out_of_memory_recovered", 4)]
    attempts = forensics.analyze(run).runs[0].attempts
    assert [(a.start_step, a.end_step, a.end_reason) for a in attempts] == [(1, 3, "completed")]


def test_an_autoresume_is_a_second_launch_that_replays_a_batch(tmp_path: Path) -> None:
    """The Trainer's own lines (as llm-foundry's logger prints them): 'Run name: ...' opens each launch; the second
    says 'Autoresuming training from checkpoint' and 'Loading checkpoint from ./ckpt/ep0-ba2-rank0.pt', then trains
    batch 3 again: a replay after the resume, not a copy printed by another rank."""
    who = "rank0[11406][MainThread]: {} composer.{}: {}\n"
    config = "******************************\nConfig:\ncomposer_commit_hash: None\ncomposer_version: 0.21.3\n"
    log = tmp_path / "train.log"
    log.write_text("2024-01-19 15:51:44,402: " + who.format("INFO:", "trainer.trainer", "Run name: interactive-il0GeA")
                   + "2024-01-19 15:51:45,566: " + who.format("INFO:", "trainer.trainer",
                                                              "No previous autoresume checkpoint found")
                   + config + _block("[batch=1/4]:", "10.9736") + _block("[batch=2/4]:", "10.9724")
                   + "2024-01-19 15:53:01,112: " + who.format("DEBUG:", "callbacks.checkpoint_saver",
                                                              "Checkpoint locally saved to ./ckpt/ep0-ba2-rank0.pt")
                   + _block("[batch=3/4]:", "10.9745")
                   + "2024-01-19 16:10:01,001: " + who.format("INFO:", "trainer.trainer", "Run name: interactive-il0GeA")
                   + "2024-01-19 16:10:02,001: " + who.format("INFO:", "trainer.trainer",
                                                              "Autoresuming training from checkpoint")
                   + "2024-01-19 16:10:02,002: " + who.format("INFO:", "trainer.trainer",
                                                              "Loading checkpoint from ./ckpt/ep0-ba2-rank0.pt")
                   + config + _block("[batch=3/4]:", "10.9745") + _block("[batch=4/4]:", "10.6459"))
    run = load_run(log)
    assert run.attempts == [1, 2]
    assert run.metrics.filter(metric="loss").select("attempt", "step").rows() == [(1, 1), (1, 2), (1, 3), (2, 3), (2, 4)]
    assert run.events.filter(pl.col("kind").is_in(["checkpoint_save", "checkpoint_load", "no_checkpoint"])).select(
        "kind", "step", "attempt").rows() == [("no_checkpoint", None, 1), ("checkpoint_save", 2, 1),
                                              ("checkpoint_load", 2, 2)]
    assert not any("repeat the step" in w for w in run.warnings)
    attempts = forensics.analyze(run).runs[0].attempts
    assert [(a.start_step, a.end_step, a.end_reason) for a in attempts] == [(1, 3, "unknown"), (3, 4, "completed")]


def test_llm_foundry_pbs_job_stopped_by_sigterm_at_batch_29_of_30() -> None:
    """An MPT run under nsys on PBS ('max_duration: 30ba', 'n_params: 95761536' in its logged config) ends after
    '[batch=29/30]:' with the launcher's traceback through Composer's 'sigterm_handler' and 'SystemExit: 143'."""
    run = load_run(REAL / "mosaicml+llm-foundry__pbs_scripts_out.txt_batches_1-2_27-29.txt")
    assert _series(run, "loss") == [(1, 11.8748), (2, 11.8747), (27, 9.0522), (28, 8.9537), (29, 8.8686)]
    assert _series(run, "tokens_per_gpu_per_second")[0] == (27, 413188.8315)
    assert run.configs.filter(key="train_iters")["value"].to_list() == ["30"]
    assert run.events.select("kind", "step", "value", "line").rows() == [
        ("startup", None, None, 52), ("startup", None, None, 68), ("startup", None, None, 86),
        ("parameter_count", None, 95761536.0, 135), ("traceback", 29, None, 368), ("sigterm", 29, None, 375)]
    # "Train lr-DecoupledAdamW/group0: 0.0000" at 1 and 2, "0.0001" at 27-29 of a warm-up to 3e-04 over 100 batches
    assert _series(run, "lr") == []
    assert not any("grad norm" in w for w in run.warnings)  # (no OptimizerMonitor: no grad norm, nothing said of it)
    attempts = forensics.analyze(run).runs[0].attempts
    assert [(a.start_step, a.end_step, a.end_reason) for a in attempts] == [(1, 29, "stopped")]


def test_a_run_planned_in_tokens_takes_its_steps_from_time_batch(tmp_path: Path) -> None:
    """'max_duration: 100000000tok': the header counts tokens ('[token=1048576/100000000]:'); each block's
    'Train time/batch' (the batches before it) gives its step; the headers' counts are said not read."""
    log = tmp_path / "train.log"
    log.write_text(_block("[token=1048576/100000000]:", "10.9736", before=0)
                   + _block("[token=2097152/100000000]:", "10.9724", before=1))
    run = load_run(log)
    assert _series(run, "loss") == [(1, 10.9736), (2, 10.9724)]
    assert run.configs.filter(key="train_iters").height == 0
    assert ("2 lines of headers counting tokens, samples or time, not batches (a run planned in those; the steps are "
            "its blocks' time/batch + 1): not read (token)") in _said(run)


def test_llm_foundry_config_block_is_read_as_the_runs_config() -> None:
    """The NUS PBS job's console prints Composer's `Config:` block (L71-183: `model:` with `d_model: 1024`,
    `n_heads: 16`, `n_layers: 1`, `vocab_size: 50368`, `attn_type: multiquery_attention`, `max_seq_len: 32768`;
    `optimizer:` with `lr: 0.0003` and `betas: [0.9, 0.95]`; `n_params: 95761536`). It was not read: the model's
    shape was unknown ("from its shape: n/a"). Read with llm-foundry's MPT defaults (learned positions over
    max_seq_len, biases, LayerNorm, tied embeddings, one key-value head), its shape counts 95,761,536 parameters,
    exactly the printed n_params."""
    path = REAL / "mosaicml+llm-foundry__pbs_scripts_out.txt_batches_1-2_27-29.txt"
    run = load_run(path)
    config = dict(run.configs.filter(attempt=1).select("key", "value").rows())
    assert {k: config[k] for k in ("hidden_size", "num_layers", "num_attention_heads", "vocab_size", "lr",
                                   "adam_beta1", "adam_beta2", "seed", "train_iters")} == {
        "hidden_size": "1024", "num_layers": "1", "num_attention_heads": "16", "vocab_size": "50368",
        "lr": "0.0003", "adam_beta1": "0.9", "adam_beta2": "0.95", "seed": "17", "train_iters": "30"}
    assert config["model.attn_config.attn_type"] == "multiquery_attention"
    model = forensics.analyze(run).runs[0].model
    assert model.parameters_logged == 95_761_536
    assert model.parameters_from_shape == 95_761_536
    assert model.shape["num_query_groups"] == 1 and model.shape["max_position_embeddings"] == 32768
