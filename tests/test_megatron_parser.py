"""Exact values parsed from real Megatron / Megatron-DeepSpeed log lines."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import polars as pl
import pytest
from conftest import REAL, ROOT, real

from parsers import load_run
from parsers.megatron import typed_value
from parsers.textfile import inspect_text, scan_blocks


def value(run, metric: str, step: int, attempt: int | None = None) -> float:
    rows = run.metrics.filter((pl.col("metric") == metric) & (pl.col("step") == step))
    if attempt is not None:
        rows = rows.filter(pl.col("attempt") == attempt)
    assert rows.height == 1, rows
    return rows["value"][0]


def test_tr8_chronicle_iteration_7010(tr8_snippets):
    run = load_run(tr8_snippets)
    assert value(run, "loss", 7010) == pytest.approx(11.42026)
    assert value(run, "grad_norm", 7010) == pytest.approx(219645.978)
    assert value(run, "loss_scale", 7010) == 2048.0
    assert value(run, "iteration_time_ms", 7010) == pytest.approx(19904.0)
    assert value(run, "lr", 7010) == pytest.approx(6.0e-5)
    assert value(run, "batch_size", 7010) == 96
    assert value(run, "consumed_samples", 7010) == 261872
    assert value(run, "val_loss", 7000) == pytest.approx(7.1742)
    assert value(run, "val_ppl", 7000) == pytest.approx(1305.315)


def test_tr8_experiment_12_nan_line_has_no_loss_and_a_stale_grad_norm(tr8_snippets):
    run = load_run(tr8_snippets)
    assert run.metrics.filter((pl.col("step") == 9027) & (pl.col("metric") == "loss")).height == 0
    kinds = run.events.filter(pl.col("step") == 9027)["kind"].to_list()
    assert "loss_missing" in kinds and "stale_grad_norm" in kinds
    assert value(run, "loss_scale", 9027) == 8192.0


def test_attempts_split_where_the_iteration_counter_goes_back(tr8_snippets):
    run = load_run(tr8_snippets)
    firsts = run.metrics.group_by("attempt").agg(pl.col("step").min()).sort("attempt")["step"].to_list()
    assert firsts == [7000, 6900, 8738]


def test_seconds_are_normalised_to_milliseconds_and_torchrun_prefix_stripped():
    run = load_run(real("tr11-176B-ml_reshaping"))
    # "[default7]: iteration    94768/ ... | elapsed time per iteration (s): 215.82 |"
    assert value(run, "iteration_time_ms", 94768, attempt=1) == pytest.approx(215820.0)
    assert value(run, "loss", 94768, attempt=1) == pytest.approx(1.943883)
    assert value(run, "consumed_tokens", 94768, attempt=1) == 364394676224


def test_srun_label_prefix():
    run = load_run(real("awsome-distributed-training"))
    assert value(run, "loss", 25) == pytest.approx(10.86954)
    assert value(run, "loss_scale", 25) == 4294967296.0


def test_early_meg_ds_hyphenated_lm_loss_key():
    run = load_run(real("ds-on.out"))
    losses = run.metrics.filter(pl.col("metric") == "loss")
    assert losses.height == 49
    # "loss scale: -1.0 | grad norm: 0.000" on every line: placeholders, not read (see test_unseen_real_logs)
    assert run.metrics.filter(pl.col("metric").is_in(["loss_scale", "grad_norm"])).height == 0


def test_gpt_neox_underscore_lm_loss_and_leading_fields():
    run = load_run(real("gptneox-format"))
    assert value(run, "loss", 34) == pytest.approx(11.18665)
    assert value(run, "samples_per_second", 34) == pytest.approx(7.799)


def test_new_megatron_line_with_timestamp_and_extra_loss_key():
    run = load_run(real("issue673"))
    assert value(run, "loss", 1) == pytest.approx(6.612992)
    assert value(run, "dummy_loss", 1) == pytest.approx(6.612992)
    assert value(run, "grad_norm", 2) == pytest.approx(110.614)
    # " [2025-02-20 11:18:36] iteration        1/250000000"
    assert run.metrics.filter(pl.col("step") == 1)["wall_time"][0] == pytest.approx(1740050316.0)
    assert any("line 3: iteration line cut short" in w for w in run.warnings)


def test_bf16_nan_grad_norm_and_missing_loss():
    run = load_run(real("issue396"))
    assert math.isnan(value(run, "grad_norm", 5426))
    assert run.metrics.filter(pl.col("metric") == "loss").height == 0
    assert run.events.filter(pl.col("kind") == "loss_missing")["step"].to_list() == [5426, 5427, 5428]


def test_arguments_block_is_typed_config():
    run = load_run(real("meg_gpt2_base_n4"))
    cfg = dict(run.configs.select("key", "typed").iter_rows())
    assert cfg["hidden_size"] == "6144"
    assert cfg["ffn_hidden_size"] == "24576"
    assert cfg["adam_beta2"] == "0.999"
    assert cfg["fp16"] == "true"
    assert run.configs.filter(pl.col("key") == "log_interval")["value"][0] == "10"


def test_typed_values():
    assert typed_value("None") is None
    assert typed_value("1e-08") == 1e-08
    assert typed_value("['/a/b_text_document']") == ["/a/b_text_document"]
    assert typed_value("torch.float16") == "torch.float16"
    assert typed_value("cosine") == "cosine"


def test_fully_skipped_interval_and_log_interval():
    run = load_run(real("meg_gpt2_base_n4"))
    # iteration 10: every one of the 10 iterations skipped (fp16 start-up), so no lm loss
    ev = run.events.filter(pl.col("kind") == "loss_missing")
    assert ev["step"].to_list() == [10] and ev["value"].to_list() == [10.0]
    assert value(run, "log_interval", 20) == 10.0
    assert value(run, "loss", 30) == pytest.approx(22.47505)


def test_parameter_counts_summed_over_model_parallel_ranks():
    run = load_run(real("meg_gpt2_base_n4"))
    total = run.events.filter(pl.col("kind") == "parameter_count_sum")["value"].to_list()
    assert total == [4 * (1217086464 + 1132938240 * 2 + 1210807296)]


def test_rank_counts_printed_without_a_colon_are_summed_too(tmp_path):
    lines = ["------------------------ arguments ------------------------", "  seed ........ 1",
             "-------------------- end of arguments ---------------------",
             " > number of parameters on model parallel rank 0 62631168",
             " > number of parameters on model parallel rank 1 62631168",
             " iteration        1/     100 | lm loss: 1.000000E+01 |"]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    total = load_run(tmp_path / "train.log").events.filter(pl.col("kind") == "parameter_count_sum")["value"].to_list()
    assert total == [2 * 62631168]


def test_deepspeed_overflow_lines_and_wrapped_iteration_line():
    run = load_run(real("tr8b-104B"))
    overflow = run.events.filter(pl.col("kind").is_in(["overflow", "overflow_scale_kept"]))
    assert overflow.height == 6
    # DeepSpeed's hysteresis held the scale at the first ("reducing to 1048576.0"): a fact of the line, no floor
    kept = overflow.filter(pl.col("kind") == "overflow_scale_kept")
    assert kept.select("line", "step", "value").rows() == [(28, 17062, 1048576.0)]
    assert any("wrapped over 3 lines; joined" in w for w in run.warnings)
    assert value(run, "lr", 13251) == pytest.approx(5.996e-05)
    assert value(run, "skipped_iterations", 13251) == 0


def test_errors_become_events_of_the_launch_they_ended():
    run = load_run(real("tr1-13B"))
    ev = run.events.filter(pl.col("kind") != "traceback")

    def where(kind: str, text: str) -> tuple[int, int | None]:
        row = ev.filter((pl.col("kind") == kind) & pl.col("text").str.contains(text, literal=True)).row(0, named=True)
        return row["attempt"], row["step"]

    # four launches: a bus-error crash before the excerpt's first iteration, the stretch that exited as planned,
    # the one that hit the ECC error, and the relaunch that ran out of memory during start-up
    assert where("host_error", "killed by signal: Bus error") == (1, None)
    assert where("exit", "exiting program after 1190.0357275923093 minutes") == (2, 33240)
    assert where("scheduler", "is scheduled to start in 3 days") == (2, 33240)
    assert where("cuda_error", "cudaErrorECCUncorrectable") == (3, 43680)
    assert where("startup", "initializing tensor model parallel with size 2") == (4, None)
    assert where("out_of_memory", "RuntimeError: CUDA error: out of memory") == (4, None)
    loss = run.metrics.filter(pl.col("metric") == "loss")
    assert loss.group_by("attempt").agg(pl.col("step").min()).sort("attempt").rows() == [(2, 29020), (3, 43680)]
    # wall-clock times: a DeepSpeed line's leading stamp and the datetime at the end of Megatron's exit line
    exit_time = ev.filter(pl.col("kind") == "exit")["wall_time"][0]
    assert datetime.fromtimestamp(exit_time, UTC) == datetime(2021, 8, 8, 1, 0, 51, tzinfo=UTC)


def test_an_error_the_run_carried_on_after_does_not_end_the_launch(tmp_path):
    lines = [
        " iteration       10/    1000 | lm loss: 3.000000E+00 | grad norm: 1.000 |",
        "ValueError: a logging callback failed",
        " iteration       20/    1000 | lm loss: 2.900000E+00 | grad norm: 1.000 |",
        "Traceback (most recent call last):",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error",
        " iteration      900/    1000 | lm loss: 2.000000E+00 | grad norm: 1.000 |",
    ]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    run = load_run(tmp_path / "train.log")
    loss = run.metrics.filter(pl.col("metric") == "loss")
    assert loss.select("attempt", "step").rows() == [(1, 10), (1, 20), (2, 900)]


def test_modern_meg_ds_log_reads_every_iteration():
    run = load_run(real("qwen7b_baseline"))
    assert run.metrics.filter(pl.col("metric") == "loss").height == 500
    assert run.events.filter(pl.col("kind") == "training_done").height == 1


@pytest.mark.parametrize("path", sorted(REAL.iterdir()), ids=lambda p: p.name)  # (one test each: spread over workers)
def test_every_real_log_parses_or_is_rejected_cleanly(path):
    """Each folder of real logs read as one run (logs of many runs side by side), or refused in one line."""
    from parsers import InputError

    try:
        run = load_run(path)
    except InputError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)
        return
    assert run.metrics.height > 0
    assert run.metrics["attempt"].null_count() == 0


ITERATION_LINE = (
    " iteration {:8d}/     100 | lm loss: {:.6E} | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
)


def test_pdsh_host_prefix_is_stripped_without_the_launcher_line(tmp_path):
    """A log tail that never names its pdsh hosts (the `cmd = pdsh ... -w` line is cut off)."""
    (tmp_path / "node.log").write_text(
        "sd-2:  iteration        1/      20 | consumed samples:           64 | lm loss: 1.187207E+01 |"
        " loss scale: 1.0 | grad norm: 40.123 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        "sd-2: [2024-03-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: "
        "/ckpt/global_step1/mp_rank_00_model_states.pt\n"
        "WARNING: iteration 2/ 20 | lm loss: 9.0 |\n"
    )
    run = load_run(tmp_path / "node.log")
    assert value(run, "loss", 1) == pytest.approx(11.87207)
    assert value(run, "grad_norm", 1) == pytest.approx(40.123)
    saves = run.events.filter(pl.col("kind") == "checkpoint_saving")
    assert saves["step"].to_list() == [1] and saves["line"].to_list() == [2]
    # "WARNING: " is a word, not a host: that line is not an iteration line
    assert run.metrics.filter(pl.col("step") == 2).height == 0


def test_iteration_lines_behind_escape_codes_or_damaged_bytes_are_read(tmp_path):
    line = ITERATION_LINE
    data = (
        b"\x1b[32m" + line.format(1, 3.0).encode()
        + b"\xff\xfe" + line.format(2, 2.5).encode()
        + line.format(3, 2.25).encode()
    )
    (tmp_path / "colour.log").write_bytes(data)
    run = load_run(tmp_path / "colour.log")
    assert run.metrics.filter(metric="loss")["value"].to_list() == [3.0, 2.5, 2.25]
    assert any("not valid UTF-8 (first at byte" in w for w in run.warnings)


def test_nul_bytes_are_removed_and_line_numbers_stay_right(tmp_path):
    line = ITERATION_LINE
    head = b"".join(line.format(i, 3.0).encode() for i in range(1, 101))  # NULs past the binary sniff
    data = (
        head + b"\x00\x00\x00garbage\n" + line.format(101, 2.5).encode()
        + b"saving checkpoint at iteration     101 to /ckpt\n"
    )
    (tmp_path / "nul.log").write_bytes(data)
    run = load_run(tmp_path / "nul.log")
    assert run.metrics.filter(metric="loss")["step"].to_list() == list(range(1, 102))
    save = run.events.filter(kind="checkpoint_saving")
    assert save["line"].to_list() == [103] and save["step"].to_list() == [101]
    assert any("NUL bytes" in w for w in run.warnings)


def test_metric_names_are_categorical_and_compare_with_plain_strings(tr8_snippets):
    run = load_run(tr8_snippets)
    assert run.metrics.schema["metric"] == pl.Categorical
    assert run.metrics.filter(metric="loss").height == run.metrics.filter(pl.col("metric") == "loss").height > 0


def test_lines_that_leave_the_usual_layout_are_read_field_by_field(tmp_path):
    """Values are read by position on lines shaped like the first ones, and field by field on any other line."""
    usual = " iteration {:8d}/     100 | lm loss: {} | loss scale: 4096.0 | grad norm: {} |\n"
    lines = [usual.format(i, "2.000000E+00", "1.000") for i in range(1, 6)]
    lines += [
        " iteration        6/     100 | loss scale: 2048.0 | grad norm: nan |\n",  # NaN: no loss, the fields shift
        " iteration        7/     100 | lm loss: 1.900000E+00 | loss scale: 2048.0 | grad norm: 0.5 | z_loss: 0.25 |\n",
        " iteration        8/     100 |  lm loss: 1.8 (mean) | loss scale:2048.0 | grad norm: inf |\n",
        usual.format(9, "1.700000E+00", "0.750"),
    ]
    lines += [f" iteration {i:8d}/     100 | loss scale: 1024.0 | grad norm: nan |\n" for i in range(10, 14)]
    lines += [" iteration       14/     100 | lm \ufffd loss: 1.6 | loss scale: 1024.0 | grad norm: 0.5 |\n"]
    (tmp_path / "shapes.log").write_text("".join(lines))
    run = load_run(tmp_path / "shapes.log")
    loss = run.metrics.filter(metric="loss").select("step", "value").rows()
    assert loss == [(1, 2.0), (2, 2.0), (3, 2.0), (4, 2.0), (5, 2.0), (7, 1.9), (8, 1.8), (9, 1.7)]
    assert value(run, "loss_scale", 6) == 2048.0 and math.isnan(value(run, "grad_norm", 6))
    assert value(run, "z_loss", 7) == 0.25 and run.metrics.filter(metric="z_loss").height == 1
    assert value(run, "loss_scale", 8) == 2048.0 and value(run, "grad_norm", 8) == math.inf
    assert value(run, "grad_norm", 9) == 0.75
    # a NaN stretch: lines alike, read by their own layout
    assert [value(run, "loss_scale", step) for step in range(10, 14)] == [1024.0] * 4
    assert all(math.isnan(value(run, "grad_norm", step)) for step in range(10, 14))
    assert run.events.filter(kind="loss_missing")["step"].to_list() == [6, 10, 11, 12, 13, 14]
    assert value(run, "lm_loss", 14) == 1.6  # a key with a non-ASCII character in it is cut at its ':'

    neox = "samples/sec: {:.3f} | iteration {:8d}/  320000 | lm_loss: {:.6E} | number of nan iterations:   0 |\n"
    (tmp_path / "neox.log").write_text("".join(neox.format(7 + i / 10, i, 3 - i / 10) for i in range(1, 5)))
    run = load_run(tmp_path / "neox.log")
    assert run.metrics.filter(metric="samples_per_second")["value"].to_list() == [7.1, 7.2, 7.3, 7.4]
    assert run.metrics.filter(metric="loss")["value"].to_list() == [2.9, 2.8, 2.7, 2.6]


def test_attempts_are_numbered_the_same_way_every_time(tmp_path):
    """An arguments block on the very first line once made the numbering depend on an unstable sort."""
    args = "------------------------ arguments ------------------------\n  seed {} {}\n" \
           "-------------------- end of arguments ---------------------\n"
    text = args.format("." * 20, 42) + ITERATION_LINE.format(1, 3.0) + args.format("." * 20, 43)
    text += ITERATION_LINE.format(1, 2.0)
    (tmp_path / "restart.log").write_text(text)
    for _ in range(20):
        run = load_run(tmp_path / "restart.log")
        assert run.configs.filter(key="seed").sort("attempt").select("attempt", "value").rows() == [
            (1, "42"), (2, "43")
        ]
        assert run.metrics.filter(metric="loss").select("attempt", "value").rows() == [(1, 3.0), (2, 2.0)]


def test_blocks_number_lines_across_their_bounds_and_note_damage_where_it_is(tmp_path):
    data = b"".join(ITERATION_LINE.format(i, 3.0).encode() for i in range(1, 41))
    bad_at = len(data) + len(b"saving checkpoint at ")
    data += b"saving checkpoint at \xff\xfe iteration 40\n" + ITERATION_LINE.format(41, 2.0).encode()[:30]
    (tmp_path / "blocks.log").write_bytes(data)
    info = inspect_text(tmp_path / "blocks.log", "blocks.log")
    assert info.damage() == [] and info.ends_with_newline  # nothing read yet but the head
    lines = pl.concat([frame.collect() for frame in scan_blocks(info, block_bytes=500)])
    assert lines["line"].to_list() == list(range(1, 43))
    assert lines["text"][41] == ITERATION_LINE.format(41, 2.0)[:30]
    assert info.first_bad_utf8 == bad_at and not info.ends_with_newline
    assert info.damage() == [f"blocks.log: bytes that are not valid UTF-8 (first at byte {bad_at}); replaced with U+FFFD"]


def test_training_complete_is_the_end_only_as_a_loggers_whole_message():
    """OLMo's "INFO\tTraining complete", torchtitan's "- INFO - Training completed", the Trainer's "Training completed.
    Do not forget ..." end training; a stage of a pipeline ("Stage 1 of 2: Training complete.") does not."""
    import polars as pl

    from parsers import schema
    from parsers.megatron import with_event_kinds

    lines = ["2025-12-07 23:15:04.702\tgreen:0\ttrain:377\tINFO\tTraining complete",
             "[rank0]:2025-04-01 00:26:01,706 - root - INFO - Training completed",
             "Training completed. Do not forget to share your model on huggingface.co/models =)",
             "Stage 1 of 2: Training complete."]
    frame = pl.DataFrame({"line": range(4), "body": lines, "in_args": False, "is_args_start": False,
                          "is_args_end": False})
    kinds = with_event_kinds(frame)["kind"].to_list()
    assert kinds == [schema.EV_TRAINING_DONE] * 3 + [None]


def test_event_kinds_read_in_python_are_polars_kinds_on_the_real_lines():
    """Short logs read their event kinds with Python's ``re``, long ones with Polars (whose regex engine is not
    Python's): both give the same kind and raw value on the real text fixtures' distinct lines, inside the arguments
    block and out: every line Polars finds an event in, and every eighth of the others (all 90,734 lines agreed when
    this was written; the sample keeps the test short)."""

    from parsers.megatron import with_event_kinds

    lines: set[str] = set()
    for path in sorted((ROOT / "tests" / "fixtures" / "real").rglob("*")):
        if path.is_file() and path.suffix in {"", ".log", ".txt", ".out", ".err", ".md"}:
            head = path.read_bytes()[:4096]
            if b"\x00" not in head:
                lines.update(path.read_text(encoding="utf-8", errors="replace").splitlines())
    assert len(lines) > 50_000
    every = pl.DataFrame({"line": range(len(lines)), "body": sorted(lines), "in_args": False, "is_args_start": False,
                          "is_args_end": False})
    found = with_event_kinds(every, in_python=False)["kind"].is_not_null()
    body = every.filter(found | (pl.col("line") % 8 == 0))["body"].to_list()
    frame = pl.DataFrame({"line": range(len(body)), "body": body, "in_args": [n % 3 == 0 for n in range(len(body))],
                          "is_args_start": [n % 7 == 0 for n in range(len(body))], "is_args_end": False})
    in_python, in_polars = (with_event_kinds(frame, in_python=flag) for flag in (True, False))
    assert in_python.equals(in_polars)
    assert in_python["kind"].n_unique() > 30 and in_python["raw"].drop_nulls().len() > 1_000
