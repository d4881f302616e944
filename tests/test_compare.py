"""``forensics compare`` on generated experiment sets with known outcomes, mixed formats, a broken run, the cache
and ``forensics export``."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import sys
from pathlib import Path
from unittest import mock

import polars as pl
import pytest
from conftest import SAMPLES
from typer.testing import CliRunner

import forensics.cache as cache_module
import forensics.compare as compare_module
from forensics.cli import app, main
from forensics.compare import compare_runs, discover
from forensics.evaluation.experiments import write_lr_sweep, write_tr8_sequence
from parsers import InputError, load_runs, read_frames

runner = CliRunner()
REAL = Path(__file__).parent / "fixtures" / "real"
HERE = Path(__file__).resolve().parent
WANDB_CLEAN = HERE / "fixtures" / "wandb" / "v0.16.6" / "wandb" / "offline-run-20261129_180304-fxclean01"
TB_REAL = HERE / "fixtures" / "real" / "tensorboard" / "orktes_go-tensorboard"


@pytest.fixture(scope="module")
def lr_sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    write_lr_sweep(root)
    return root


@pytest.fixture(scope="module")
def lr_sweep_compared(lr_sweep):
    """The LR sweep compared in this process (read only): its table and the parallel comparison's reference."""
    return compare_runs([lr_sweep], cache=False, jobs=1)


@pytest.fixture(scope="module")
def tr8_sequence(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tr8")
    write_tr8_sequence(root)
    return root


def test_lr_sweep_table_separation_and_sensitivity(lr_sweep, lr_sweep_compared):
    comparison, _ = lr_sweep_compared
    rows = {r.name: r for r in comparison.rows}
    assert list(rows) == ["lr-0.0001", "lr-0.0002", "lr-0.0004", "lr-0.0008", "lr-0.0016"]
    assert [(r.outcome, r.outcome_step, r.steps_reached) for r in rows.values()] == [
        ("completed", 3000, 3000), ("completed", 3000, 3000), ("completed", 3000, 3000),
        ("diverged", 910, 3000), ("nan", 660, 3000)]
    assert [r.first_anomaly_step for r in rows.values()] == [None, None, None, 910, 460]
    assert comparison.baseline == "lr-0.0001"   # the first of the healthy runs that got furthest
    assert {n: r.config_diff for n, r in rows.items()} == {
        "lr-0.0001": {}, "lr-0.0002": {"lr": 2e-4}, "lr-0.0004": {"lr": 4e-4}, "lr-0.0008": {"lr": 8e-4},
        "lr-0.0016": {"lr": 1.6e-3}}
    assert rows["lr-0.0008"].top_cause == "learning rate too high for the model size"
    printed = [float(x) for x in re.findall(r"lm loss: (\S+) \|", (lr_sweep / "lr-0.0004" / "train.log").read_text())]
    assert (rows["lr-0.0004"].final_loss, rows["lr-0.0004"].min_loss) == (printed[-1], min(printed))
    [sep] = comparison.separation
    assert sep.statement == ("lr ≥ 0.0008 failed, ≤ 0.0004 healthy (failed: lr-0.0008, lr-0.0016; healthy: "
                             "lr-0.0001, lr-0.0002, lr-0.0004)")
    sens = comparison.lr_sensitivity
    assert sens["largest_stable_lr"] == 4e-4 and sens["smallest_failed_lr"] == 8e-4 and sens["best_lr"] == 4e-4
    finals = [rows[n].final_loss for n in ("lr-0.0001", "lr-0.0002", "lr-0.0004")]
    l0 = max(r.initial_loss for r in rows.values())
    assert sens["sensitivity"] == pytest.approx((sum(finals) + 2 * l0) / 5 - min(finals))
    # every number but the sensitivity is a logged loss or an LR that was run, with the run it comes from
    assert (sens["best_final_loss"], sens["best_run"]) == (min(finals), "lr-0.0004")
    assert sens["initial_loss"] == rows[sens["initial_loss_run"]].initial_loss == l0
    assert sens["largest_stable_run"] == "lr-0.0004" and sens["running"] == {}


def test_tr8_sequence_only_the_fixed_shape_survives(tr8_sequence):
    comparison, _ = compare_runs([tr8_sequence], cache=False, jobs=1)
    rows = {r.name: r for r in comparison.rows}
    assert [(n, r.outcome, r.outcome_step) for n, r in rows.items()] == [
        ("exp1-104B", "diverged", 1510), ("exp2-104B-beta2", "diverged", 2210), ("exp3-104B-ffn-fixed", "completed", 3000)]
    assert comparison.baseline == "exp3-104B-ffn-fixed"
    assert rows["exp1-104B"].config_diff == {"adam_beta2": 0.999, "ffn_hidden_size": 20480, "seed": 42}
    assert rows["exp2-104B-beta2"].config_diff == {"ffn_hidden_size": 20480}
    assert {n: r.stability_diff for n, r in rows.items()} == {n: r.config_diff for n, r in rows.items()}  # all bear
    assert [s.key for s in comparison.separation] == ["ffn_hidden_size"]   # beta2 0.95 is on both sides
    assert rows["exp1-104B"].setup == "this is a ~58B model, not 104B: ffn_hidden_size 20480 is 1.25x hidden " \
                                      "(expected 65536)"
    assert rows["exp3-104B-ffn-fixed"].top_cause is None and rows["exp3-104B-ffn-fixed"].setup is None
    assert comparison.lr_sensitivity is None   # the runs differ in more than the LR


def test_mixed_formats_and_a_broken_run_are_compared(tmp_path, lr_sweep):
    shutil.copytree(lr_sweep / "lr-0.0002", tmp_path / "megatron-run")
    shutil.copytree(WANDB_CLEAN, tmp_path / "wandb-run")
    shutil.copytree(TB_REAL, tmp_path / "tensorboard-run")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "train.log").write_bytes(b"\x00\x01\x02 not a log")
    comparison, overlay = compare_runs([tmp_path], cache=False, jobs=1)
    rows = {r.name: r for r in comparison.rows}
    assert [(n, [src["format"] for src in r.sources], r.outcome) for n, r in rows.items()] == [
        ("broken", [], "unreadable"), ("megatron-run", ["megatron"], "completed"),
        ("tensorboard-run", ["tensorboard"], "running"), ("wandb-run", ["wandb"], "completed")]
    assert rows["broken"].error == f"{tmp_path / 'broken'}: no readable training logs (train.log: binary file, " \
                                   "not a text log)"
    assert rows["wandb-run"].steps_reached == 59 and rows["megatron-run"].steps_reached == 3000
    assert set(overlay["run"].unique()) == {"megatron-run", "wandb-run"}   # the TensorBoard run logs no loss
    result = runner.invoke(app, ["compare", str(tmp_path), "--no-cache", "-f", "json", "-j", "1"])
    assert result.exit_code == 0, result.output          # one unreadable run among readable ones is no failure
    doc = json.loads(result.output)
    assert doc["schema_version"] == 2 and doc["separating_keys"] == []
    assert set(doc["runs"][0]) >= {"name", "sources", "outcome", "outcome_step", "first_anomaly_step", "spikes",
                                   "spike_score", "min_loss", "final_loss", "config_diff", "stability_diff",
                                   "has_config", "top_cause", "error"}
    assert doc["runs"][0]["outcome"] == "unreadable" and doc["runs"][0]["error"] == rows["broken"].error


def test_cache_is_reused_invalidated_by_a_change_and_kept_outside_the_runs(tmp_path, lr_sweep, monkeypatch):
    runs = tmp_path / "runs"
    shutil.copytree(lr_sweep, runs)
    names = ["lr-0.0001", "lr-0.0002", "lr-0.0004", "lr-0.0008", "lr-0.0016"]
    before = sorted(p for p in runs.rglob("*"))
    cache = tmp_path / "cache"
    # count what is parsed (the reader behind the frame cache) and what is analyzed (behind the result cache);
    # jobs=1 keeps every run in this process, so the counts see all of them
    parsed: list[str] = []
    analyzed: list[str] = []
    load_runs_, analyze_run_ = cache_module.load_runs, compare_module.analyze_run

    def counted_load_runs(path, **kwargs):
        parsed.append(Path(path).name)
        return load_runs_(path, **kwargs)

    def counted_analyze_run(run, *args, **kwargs):
        analyzed.append(run.name)
        return analyze_run_(run, *args, **kwargs)

    monkeypatch.setattr(cache_module, "load_runs", counted_load_runs)
    monkeypatch.setattr(compare_module, "analyze_run", counted_analyze_run)

    def compare() -> tuple[dict, pl.DataFrame]:
        parsed.clear()
        analyzed.clear()
        comparison, overlay = compare_runs([runs], cache=cache, jobs=1)
        return comparison.to_dict(), overlay

    cold, cold_overlay = compare()
    assert (parsed, analyzed) == (names, names)
    assert sorted(p for p in runs.rglob("*")) == before            # nothing written next to the inputs
    assert len(list((cache / "compare").iterdir())) == 5 and len(list((cache / "frames").iterdir())) == 5
    warm, warm_overlay = compare()
    assert (parsed, analyzed) == ([], [])                           # every row and curve read back from the cache
    assert warm == cold and warm_overlay.equals(cold_overlay)
    shutil.rmtree(cache / "compare")                                # results gone, frames kept: analyzed, not parsed
    frames_only, _ = compare()
    assert (parsed, analyzed) == ([], names) and frames_only == cold
    log = runs / "lr-0.0001" / "train.log"
    log.write_text(log.read_text().replace("lm loss: ", "lm loss: 9", 1))   # the first loss becomes 9x.xx
    first = float(re.search(r"lm loss: (\S+) \|", log.read_text())[1])
    changed, _ = compare()
    assert (parsed, analyzed) == (["lr-0.0001"], ["lr-0.0001"])     # only the changed run is read again
    assert changed["runs"][0]["initial_loss"] == first and first > 90
    assert changed["runs"][1:] == cold["runs"][1:]
    assert len(list((cache / "compare").iterdir())) == 6 and len(list((cache / "frames").iterdir())) == 6
    assert sorted(p for p in runs.rglob("*")) == before


def test_parallel_processes_give_the_same_comparison(lr_sweep, lr_sweep_compared):
    serial, overlay1 = lr_sweep_compared
    parallel, overlay2 = compare_runs([lr_sweep], cache=False, jobs=2)
    assert parallel.to_dict() == serial.to_dict() and overlay1.equals(overlay2)


def test_cli_compare_writes_markdown_with_overlays_and_checks_the_baseline(tmp_path, tr8_sequence):
    out = tmp_path / "out" / "compare.md"
    result = runner.invoke(app, ["compare", str(tr8_sequence), "-o", str(out), "--cache-dir", str(tmp_path / "c"),
                                 "-j", "1"])  # (in one process: parallel reading has its own test)
    assert result.exit_code == 0, result.output
    text = out.read_text().splitlines()
    assert "- ffn\\_hidden\\_size ≤ 20480 failed, ≥ 65536 healthy (failed: exp1-104B, exp2-104B-beta2; healthy: " \
           "exp3-104B-ffn-fixed)" in text
    assert "| exp2-104B-beta2 | megatron | 3000 | diverged at 2210 | grad norm spike at step 2210 | 1 | 0.00% | " \
           "5.152583 | 10.818 | ffn\\_hidden\\_size=20480 | – | this is a \\~58B model, not 104B: ffn\\_hidden\\_size " \
           "20480 is 1.25x hidden (expected 65536) |" in text
    log = (tr8_sequence / "exp2-104B-beta2" / "train.log").read_text()
    printed = [float(x) for x in re.findall(r"lm loss: (\S+) \|", log)]
    assert (min(printed), printed[-1]) == (5.152583, 10.818)   # the table quotes the logged minimum and last loss
    assert sorted(p.name for p in (out.parent / "compare_files").iterdir()) == [
        "overlay-grad_norm-by-step.png", "overlay-loss-by-samples.png", "overlay-loss-by-step.png"]
    assert result.output.splitlines()[-1] == f"comparison written to {out} (+ 3 plots in {out.parent / 'compare_files'})"
    # the file is the comparison printed to stdout, with the overlays linked at its end
    printed = runner.invoke(app, ["compare", str(tr8_sequence), "--cache-dir", str(tmp_path / "c"), "-j", "1"])
    assert printed.exit_code == 0, printed.output
    assert out.read_text() == printed.output + (
        "\n## Overlays\n\n![loss by step](compare_files/overlay-loss-by-step.png)\n"
        "![grad norm by step](compare_files/overlay-grad_norm-by-step.png)\n"
        "![loss by consumed samples](compare_files/overlay-loss-by-samples.png)\n")
    out, err = io.StringIO(), io.StringIO()  # the entry point in this process: its exit code and one stderr line
    with (mock.patch.object(sys, "argv", ["forensics", "compare", str(tr8_sequence), "--baseline", "nope", "--no-cache"]),
          contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as bad):
        main()
    assert (bad.value.code, out.getvalue(), err.getvalue()) == (
        2, "", "forensics: error: --baseline nope: no such run (runs: exp1-104B, exp2-104B-beta2, exp3-104B-ffn-fixed)\n")


def test_discover_names_runs_by_directory(tmp_path):
    for name in ("b", "a", ".hidden"):
        (tmp_path / name).mkdir()
    assert [n for n, _ in discover([tmp_path])] == ["a", "b"]
    assert [n for n, _ in discover([tmp_path / "a", tmp_path / "b"])] == ["a", "b"]
    with pytest.raises(InputError, match="no such file or directory"):
        discover([tmp_path / "missing"])


def test_export_writes_parquet_frames_that_read_back_equal(tmp_path):
    out = tmp_path / "frames"
    result = runner.invoke(app, ["export", str(SAMPLES / "tr8-104B-sample"), "-o", str(out)], env={"COLUMNS": "300"})
    assert (result.exit_code, result.output) == (0, f"1 run(s) exported to {out} (4 files): tr8-104B-sample\n")
    assert sorted(p.name for p in out.iterdir()) == ["0.configs.parquet", "0.events.parquet", "0.metrics.parquet",
                                                     "runs.json"]
    [original], [back] = load_runs(SAMPLES / "tr8-104B-sample"), read_frames(out)
    assert back.name == "tr8-104B-sample" and back.sources == original.sources
    for frame in ("metrics", "events", "configs"):
        assert getattr(back, frame).equals(getattr(original, frame)), frame
    assert pl.read_parquet(out / "0.metrics.parquet").filter(metric="loss", step=7010, attempt=1)["value"][0] == \
        pytest.approx(11.42026)


def test_a_path_that_holds_several_runs_gives_a_row_for_each(tmp_path):
    """druidowm/nanoGPT's wandb_export.csv holds 8 runs' train/loss: compare showed one row, the cleanest run, then
    "no run failed" (three of the eight diverge), with a note "8 runs inside; compared the first"."""
    from forensics.compare import compare_runs

    export = REAL / "wandb" / "druidowm__nanoGPT" / "wandb_export.csv"
    for cache in (False, tmp_path / "cache", tmp_path / "cache"):  # cold, then read back from the result cache
        rows = compare_runs([export], cache=cache, jobs=1).comparison.rows
        assert len(rows) == 8 and all(r.name.startswith("wandb_export/") and r.error is None for r in rows)
        diverged = sorted((r.name.removeprefix("wandb_export/"), r.outcome_step) for r in rows if r.outcome == "diverged")
        # (1729534595's loss: 3.70-3.74 to step 55, 3.83 at 56-57, 4.15 at 58, 4.79 at 60, 8.52 at 61: left at 58)
        assert diverged == [("gpt2_char_to_token1729491541.2756786", 39), ("gpt2_char_to_token1729534595.422701", 58),
                            ("gpt2_last_char_token_to_char1729587337.8266432", 141)]
        [gpt2] = [r for r in rows if r.name == "wandb_export/gpt2"]
        assert (gpt2.min_loss, gpt2.outcome_step) == (3.2631642818450928, 385)


def test_a_runs_own_name_does_not_separate_failures_from_successes():
    """druidowm/nanoGPT's W&B runs: "What separates failures from successes: wandb_run_name =
    gpt2_last_char_token_to_char1729664653.932151 failed, gpt2, ... healthy": a name with a time stamp in it
    separates any one failed run from the rest."""
    from forensics.comparison import Outcome, RunRow, separating_keys

    def row(name, outcome, run_name, lr):
        return RunRow(name=name, outcome=outcome, outcome_step=100, config={"wandb_run_name": run_name, "lr": lr})

    rows = [row("a", Outcome.CRASHED, "gpt2_1729664653.93", 6e-4), row("b", Outcome.COMPLETED, "gpt2", 6e-4),
            row("c", Outcome.COMPLETED, "gpt2_1729664747.26", 6e-4)]
    assert separating_keys(rows) == []


def test_a_setting_with_a_value_of_its_own_in_every_run_can_still_separate_them():
    """Review: a rule that left out text keys differing in every run threw away precision fp16 / bf16 / fp32 over three
    runs (and said "no config key splits the failed runs from the healthy ones")."""
    from forensics.comparison import Outcome, RunRow, separating_keys

    rows = [RunRow(name=n, outcome=o, outcome_step=100, config={"precision": p}) for n, o, p in (
        ("a", Outcome.NAN, "fp16"), ("b", Outcome.COMPLETED, "bf16"), ("c", Outcome.COMPLETED, "fp32"))]
    assert [sep.key for sep in separating_keys(rows)] == ["precision"]


def test_the_baseline_can_be_a_run_inside_a_path_that_holds_several():
    """Review: "--baseline wandb_export" was accepted and left the comparison with no baseline; the export's own runs,
    "wandb_export/gpt2", were refused as "no such run"."""
    export = REAL / "wandb" / "druidowm__nanoGPT" / "wandb_export.csv"
    assert compare_runs([export], baseline="wandb_export/gpt2", cache=False, jobs=1).comparison.baseline == \
        "wandb_export/gpt2"
    with pytest.raises(InputError) as exc:
        compare_runs([export], baseline="wandb_export", cache=False, jobs=1)
    assert str(exc.value).startswith("--baseline wandb_export: no such run (runs: wandb_export/gpt2_last_char_to_char")


def test_a_folder_of_logs_is_compared_log_by_log_not_as_one_run(tmp_path):
    # four unrelated logs in one folder used to be one run of four formats overlaid ("loss spike at step 1")
    real = Path(__file__).parent / "fixtures" / "real"
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(real / "nanogpt" / "ChenZihua-cn_nanoGPT_train.log", logs / "nanogpt.log")
    shutil.copy(real / "torchtitan" / "NewComputeBench_completed_then_abort_in_teardown.txt", logs / "titan.txt")
    (logs / "make_plots.py").write_text("print('code beside the logs is not a run')\n")
    assert [n for n, _ in discover([logs])] == ["nanogpt", "titan"]
    rows = {r.name: r for r in compare_runs([logs], cache=False, jobs=1).comparison.rows}
    assert (rows["nanogpt"].outcome, rows["nanogpt"].outcome_step, rows["titan"].outcome, rows["titan"].outcome_step) \
        == ("nan", 425, "completed", 640)
    # beside run folders, a log is a run too, and a note that is no log says so in its row
    (logs / "run-a").mkdir()
    shutil.copy(Path(__file__).parent.parent / "sample_logs" / "clean-1.3B" / "train.log", logs / "run-a")
    (logs / "notes.txt").write_text("Runs from March.\n")
    assert [n for n, _ in discover([logs])] == ["nanogpt", "notes", "run-a", "titan"]
    notes = next(r for r in compare_runs([logs], cache=False, jobs=1).comparison.rows if r.name == "notes")
    assert notes.outcome == "unreadable" and "notes.txt: not a recognised training log" in notes.error
