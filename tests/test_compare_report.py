"""The comparison report reads at a glance and quotes only what the data holds: the stability settings in the
table and the full diff in its own section, "no config" once, runs still running counted healthy and named so,
logged losses with their logged digits, computed numbers named as computed, one trailing newline everywhere."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from forensics.analysis import analyze_run
from forensics.cli import app
from forensics.compare import compare_runs
from forensics.comparison import (
    STABILITY_GROUPS,
    STABILITY_KEYS,
    Comparison,
    RunRow,
    compare_rows,
    is_stability_key,
    lr_sensitivity,
    summarize,
)
from forensics.evaluation.experiments import BASE_ARGS, Trajectory, write_lr_sweep, write_run
from forensics.findings import shown
from parsers import load_runs
from parsers.config_names import ALIASES, canonical_key
from reports.compare_report import cells, differs, render_compare_json, render_compare_markdown

runner = CliRunner()
HERE = Path(__file__).resolve().parent
REAL_WANDB = HERE / "fixtures" / "real" / "wandb"
NANOGPT_TABLE = REAL_WANDB / "Lucas-longxutang__Comp3242_Group_Project_nanoGPT" / "wandb_export.csv"
TEXT_AUG_TABLE = REAL_WANDB / "kingb12__text_aug_experiments" / "wandb_export.csv"
LOSS = re.compile(r"lm loss: (\S+) \|")


def _one_newline(text: str) -> bool:
    return text.endswith("\n") and not text.endswith("\n\n")


def _section(markdown: str, title: str) -> list[str]:
    lines = markdown.splitlines()
    start = lines.index(f"## {title}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end][:-1] if end < len(lines) else lines[start:end]   # without the blank line before the next


def _cell_keys(cell: str) -> list[str]:
    """The config keys a "differs from baseline" cell names (``k=v``, ``k not set``)."""
    return [m.group(1) for part in cell.split(", ") if (m := re.match(r"(\w+)(=| not set$)", part))]


@pytest.fixture(scope="module")
def odd_sweep(tmp_path_factory) -> Path:
    """The LR sweep with lr-0.0001's arguments block removed (no config) and lr-0.0002 cut off at step 1200 with no
    end line (still running)."""
    root = tmp_path_factory.mktemp("odd-sweep")
    write_lr_sweep(root)
    log = root / "lr-0.0001" / "train.log"
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[lines.index("-------------------- end of arguments ---------------------") + 1:])
                   + "\n")
    log = root / "lr-0.0002" / "train.log"
    kept = [line for line in log.read_text().splitlines() if "after training is done" not in line and not (
        (m := re.search(r"iteration\s+(\d+)/", line)) and int(m.group(1)) > 1200)]
    log.write_text("\n".join(kept) + "\n")
    return root


@pytest.fixture(scope="module")
def odd(odd_sweep) -> Comparison:
    comparison, _ = compare_runs([odd_sweep], cache=False, jobs=1)
    return comparison


@pytest.fixture(scope="module")
def unrelated_keys(tmp_path_factory) -> Path:
    """Two short runs: the other one differs in LR and data (stability), in vision/dino options and a W&B project
    (unrelated), in paths (bookkeeping), and does not set adam_eps."""
    root = tmp_path_factory.mktemp("unrelated")
    base = {**BASE_ARGS, "vision_patch_size": 14, "dino_teacher_temp": 0.04, "data_path": "/data/a",
            "tensorboard_dir": "/tb/base"}
    other = {**base, "vision_patch_size": 16, "dino_teacher_temp": 0.07, "data_path": "/data/b",
             "tensorboard_dir": "/tb/other", "save": "/ckpt/other", "wandb_project": "x"}
    del other["adam_eps"]
    write_run(root / "base", base, Trajectory(lr=2e-4), steps=300, seed=1)
    write_run(root / "other", other, Trajectory(lr=3e-4), steps=300, seed=2)
    return root


def _rows(path: Path) -> list[RunRow]:
    """Fresh rows (compare_rows fills their diffs in place) from findings analysed once per test process."""
    return [summarize(findings, run.metrics) for run, findings in _analysed(path)]


@cache
def _analysed(path: Path) -> list[tuple]:
    return [(run, analyze_run(run)) for run in load_runs(path)]


# --- the stability keys ---------------------------------------------------------------------------------------------
def test_stability_keys_cover_the_settings_that_bear_on_stability():
    named = {"lr", "min_lr", "lr_decay_style", "lr_warmup_iters", "lr_warmup_fraction", "lr_warmup_samples",
             "global_batch_size", "micro_batch_size", "rampup_batch_size", "adam_beta1", "adam_beta2", "adam_eps",
             "clip_grad", "init_method_std", "fp16", "bf16", "params_dtype", "num_layers", "hidden_size",
             "ffn_hidden_size", "num_attention_heads", "seq_length", "seed", "data_path", "weight_decay"}
    assert named <= STABILITY_KEYS
    assert list(STABILITY_GROUPS) == ["LR and schedule", "batch", "warm-up", "optimizer", "clipping", "init",
                                      "precision", "model shape", "seed", "data"]
    unrelated = {"save", "load", "tensorboard_dir", "output_dir", "log_interval", "vision_patch_size",
                 "dino_teacher_temp", "wandb_project", "device", "tensor_model_parallel_size"}
    assert not any(is_stability_key(k) for k in unrelated)
    # spellings of other tools that canonicalise to a stability key are stability keys too
    assert all(is_stability_key(canonical_key(a)) for a, c in ALIASES.items() if c in STABILITY_KEYS)
    assert is_stability_key(canonical_key("optimizer.betas.1")) and is_stability_key("Batch-Size")
    # a W&B LR sweep's only variable (CS336-style configs): it is the LR, not "+1 other key"
    assert [canonical_key(k) for k in ("max_learning_rate", "peak_learning_rate", "Max-Learning-Rate")] == ["lr"] * 3


# --- the "differs from baseline" cell and the full diff ----------------------------------------------------------
def test_cell_shows_only_stability_keys_and_the_full_diff_has_every_key(unrelated_keys):
    comparison, _ = compare_runs([unrelated_keys], baseline="base", cache=False, jobs=1)
    other = next(r for r in comparison.rows if r.name == "other")
    assert other.config_diff == {"adam_eps": None, "data_path": "/data/b", "dino_teacher_temp": 0.07, "lr": 3e-4,
                                 "vision_patch_size": 16, "wandb_project": "x"}   # paths are bookkeeping
    assert other.stability_diff == {"adam_eps": None, "data_path": "/data/b", "lr": 3e-4}
    assert differs(other, comparison) == "data_path=/data/b, lr=0.0003, adam_eps not set, +3 other keys"
    text = render_compare_markdown(comparison)
    table = [line for line in text.splitlines() if line.startswith("| other |")]
    assert len(table) == 1 and "vision" not in table[0] and "dino" not in table[0]
    assert _section(text, "Config differences from the baseline") == [
        "", "Every setting that differs from the baseline in some run (– : not set):", "",
        "| key | base (baseline) | other |", "|---|---|---|",
        "| adam\\_eps | 1e-08 | – |", "| data\\_path | /data/a | /data/b |",
        "| dino\\_teacher\\_temp | 0.04 | 0.07 |", "| lr | 0.0002 | 0.0003 |", "| vision\\_patch\\_size | 14 | 16 |",
        "| wandb\\_project | – | x |"]
    doc = json.loads(render_compare_json(comparison))
    [row] = [r for r in doc["runs"] if r["name"] == "other"]
    assert row["config_diff"] == other.config_diff and row["stability_diff"] == other.stability_diff
    assert row["has_config"] is True


def test_many_unset_stability_keys_are_counted_not_listed():
    base = RunRow(name="a", outcome="completed", steps_reached=10, config={**BASE_ARGS})
    partial = RunRow(name="b", outcome="completed", steps_reached=10,
                     config={"lr": 3e-4, "num_layers": 24, "hidden_size": 2048})
    comparison = compare_rows([base, partial], baseline="a")
    cell = differs(partial, comparison)
    assert cell.startswith("lr=0.0003, ") and "not set" in cell and "null" not in cell
    assert re.fullmatch(r"lr=0\.0003, (\d+) stability settings not set, \+3 other keys", cell)
    assert int(cell.split(", ")[1].split()[0]) == sum(v is None for v in partial.stability_diff.values()) > 3


def test_a_run_without_a_config_says_no_config_once(odd):
    rows = {r.name: r for r in odd.rows}
    bare = rows["lr-0.0001"]
    assert not bare.has_config and set(bare.config) <= {"train_iters"}   # read off the iteration lines
    assert odd.baseline == "lr-0.0004"             # the furthest healthy run with a config
    assert bare.config_diff == {} and bare.stability_diff == {}
    assert differs(bare, odd) == "no config"
    text = render_compare_markdown(odd)
    assert "null" not in text and "not set" not in text.split("## Config differences")[0]
    section = _section(text, "Config differences from the baseline")
    assert "| key | lr-0.0004 (baseline) | lr-0.0002 | lr-0.0008 | lr-0.0016 |" in section   # no column for it
    assert section.count("- no config: lr-0.0001") == 1
    assert json.loads(render_compare_json(odd))["runs"][0]["has_config"] is False


def test_a_baseline_without_a_config_is_said_once():
    bare = RunRow(name="bare", outcome="completed", steps_reached=10)
    rows = [bare, RunRow(name="x", outcome="completed", steps_reached=5, config={"lr": 1e-4, "seed": 1}),
            RunRow(name="y", outcome="completed", steps_reached=5, config={"lr": 2e-4, "seed": 2})]
    comparison = compare_rows(rows, baseline="bare")
    assert [differs(r, comparison) for r in rows] == ["(baseline), no config", "baseline has no config",
                                                       "baseline has no config"]
    assert all(r.config_diff == {} for r in rows)
    assert _section(render_compare_markdown(comparison), "Config differences from the baseline") == [
        "", "- the baseline has no config to compare against"]
    assert compare_rows(rows).baseline == "x"      # by default a run with a config is the baseline


# --- runs still running ----------------------------------------------------------------------------------------------
def test_a_run_still_running_counts_healthy_up_to_its_last_step_and_is_named_so(odd):
    rows = {r.name: r for r in odd.rows}
    assert (rows["lr-0.0002"].outcome, rows["lr-0.0002"].outcome_step) == ("running", 1200)
    [sep] = odd.separation
    assert sep.running == {"lr-0.0002": 1200}
    assert sep.statement == ("lr ≥ 0.0008 failed, ≤ 0.0004 healthy (failed: lr-0.0008, lr-0.0016; healthy: "
                             "lr-0.0002 (no end in the log after step 1200), lr-0.0004)")
    text = render_compare_markdown(odd)
    assert "| no end seen after 1200 |" in next(line for line in text.splitlines() if line.startswith("| lr-0.0002 |"))
    assert _section(text, "What separates failures from successes") == [
        "", "- lr ≥ 0.0008 failed, ≤ 0.0004 healthy (failed: lr-0.0008, lr-0.0016; healthy: lr-0.0002 (no end in the "
            "log after step 1200), lr-0.0004)",
        "- a run with no end in its log (still running, cut off, or stopped without a word) counts as healthy up to "
        "its last step.",
        "- left out (no config): lr-0.0001"]
    assert odd.lr_sensitivity["running"] == {"lr-0.0002": 1200}
    assert "- no end in the log (healthy up to its last step; its final loss is its last logged one): lr-0.0002 at " \
           "step 1200." in text


def test_minimum_runs_rule_holds_with_a_run_still_running():
    rows = [RunRow(name="bad", outcome="diverged", outcome_step=50, steps_reached=50, config={"lr": 1e-3}),
            RunRow(name="live", outcome="running", outcome_step=40, steps_reached=40, config={"lr": 1e-4}),
            RunRow(name="unborn", outcome="running", config={"lr": 2e-4})]   # no step logged yet: says nothing
    assert compare_rows(rows).separation == []
    rows.append(RunRow(name="done", outcome="completed", outcome_step=90, steps_reached=90, config={"lr": 2e-4}))
    [sep] = compare_rows(rows).separation
    assert sep.healthy == {"live": 1e-4, "done": 2e-4} and sep.running == {"live": 40}


# --- every number quoted is in the data -----------------------------------------------------------------------------
def test_table_quotes_the_logged_minimum_and_final_loss(odd, odd_sweep):
    text = render_compare_markdown(odd)
    for row in odd.rows:
        printed = [float(x) for x in LOSS.findall((odd_sweep / row.name / "train.log").read_text())]
        assert (row.min_loss, row.final_loss, row.initial_loss) == (min(printed), printed[-1], printed[0])
        line = next(line for line in text.splitlines() if line.startswith(f"| {row.name} |"))
        min_cell, final_cell = line.split(" | ")[7:9]
        assert (float(min_cell), float(final_cell)) == (min(printed), printed[-1])
        assert (min_cell, final_cell) == (shown(min(printed)), shown(printed[-1]))


def test_lr_sensitivity_quotes_logged_losses_and_run_lrs_and_names_the_computed_one(odd, odd_sweep):
    sens = odd.lr_sensitivity
    finals = {r.name: r.final_loss for r in odd.rows if r.outcome not in {"nan", "diverged"} and r.has_config}
    firsts = {r.name: r.initial_loss for r in odd.rows if r.has_config}
    lrs = {0.0002, 0.0004, 0.0008, 0.0016}
    assert sens["best_final_loss"] == min(finals.values()) and sens["best_run"] == "lr-0.0004"
    assert sens["initial_loss"] == max(firsts.values()) == firsts[sens["initial_loss_run"]]
    assert {sens["best_lr"], sens["largest_stable_lr"], sens["smallest_failed_lr"], *sens["lr_range"]} <= lrs
    section = _section(render_compare_markdown(odd), "LR sensitivity")
    assert section[1].startswith(f"- LR sensitivity **≈{sens['sensitivity']:#.4g}** (computed, rounded to 4 "
                                 "significant digits: the mean over the 4 runs of min(final loss, ℓ0) minus ℓ*")
    assert section[2].startswith(f"- ℓ0 = {shown(sens['initial_loss'])}: the highest first logged loss of the sweep "
                                 f"({sens['initial_loss_run']})")
    assert section[3] == f"- best final loss (logged): {shown(min(finals.values()))}, lr-0.0004 at LR 0.0004."
    assert section[4] == "- largest stable LR: **0.0004** (lr-0.0004); smallest LR that failed: 0.0008."


def test_lr_sensitivity_with_every_run_failed_names_no_best_lr():
    rows = [RunRow(name=f"r{i}", outcome="diverged", outcome_step=100, steps_reached=100, initial_loss=10.5 + i,
                   final_loss=12.0, config={"lr": lr}) for i, lr in enumerate((1e-3, 2e-3, 4e-3))]
    sens = lr_sensitivity(rows)
    assert sens is not None and sens["sensitivity"] == 0.0 and sens["initial_loss"] == 12.5
    assert sens["best_final_loss"] is None and sens["best_lr"] is None and sens["largest_stable_lr"] is None
    text = render_compare_markdown(compare_rows(rows))
    assert "best final loss" not in text and "- largest stable LR: none; smallest LR that failed: 0.001." in text


# --- real runs tables ------------------------------------------------------------------------------------------------
def test_real_nanogpt_table_cells_name_only_stability_keys():
    comparison = compare_rows(_rows(NANOGPT_TABLE))
    text = render_compare_markdown(comparison)
    section = "\n".join(_section(text, "Config differences from the baseline"))
    unrelated = {k for r in comparison.rows for k in r.config_diff if not is_stability_key(k)}
    assert unrelated   # the ablations differ in activation, norm, position encoding ...
    for row in comparison.rows:
        cell = cells(row, comparison)[9]
        assert set(_cell_keys(cell)) == set(row.stability_diff) <= STABILITY_KEYS
        others = len(row.config_diff) - len(row.stability_diff)
        assert (f"+{others} other key" in cell) == (others > 0)
    for key in {k for r in comparison.rows for k in r.config_diff}:   # the full diff has every differing key
        assert f"\n| {key.replace('_', chr(92) + '_')} | " in section
    assert "null" not in text


def test_real_table_of_runs_without_settings_says_no_config():
    comparison = compare_rows(_rows(TEXT_AUG_TABLE))
    text = render_compare_markdown(comparison)
    assert "null" not in text and "logging" not in text and "output\\_dir" not in text.split("## Config")[0]
    for row in comparison.rows:
        cell = cells(row, comparison)[9]
        if not row.has_config:
            assert cell in {"no config", "(baseline), no config"}
        assert set(_cell_keys(cell)) <= STABILITY_KEYS
    assert _one_newline(text) and _one_newline(render_compare_json(comparison))


# --- one trailing newline ---------------------------------------------------------------------------------------
def test_every_renderer_ends_with_exactly_one_newline(odd):
    empty = Comparison(rows=[], baseline=None, separation=[], lr_sensitivity=None)
    broken = compare_rows([RunRow(name="x", error="x: no readable training logs\n")])
    for comparison in (odd, empty, broken):
        assert _one_newline(render_compare_markdown(comparison))
        assert _one_newline(render_compare_markdown(comparison, {"loss by step": "f/loss.png"}))
        assert _one_newline(render_compare_json(comparison))


def test_cli_outputs_end_with_exactly_one_newline(tmp_path, odd_sweep):
    runs = tmp_path / "runs"
    shutil.copytree(odd_sweep, runs)
    cache = str(tmp_path / "cache")  # (read once: the three outputs render one comparison)
    for fmt in ("markdown", "json"):
        result = runner.invoke(app, ["compare", str(runs), "--cache-dir", cache, "-j", "1", "-f", fmt])
        assert result.exit_code == 0 and _one_newline(result.output), fmt
    out = tmp_path / "out" / "compare.md"
    result = runner.invoke(app, ["compare", str(runs), "--cache-dir", cache, "-j", "1", "-o", str(out), "--no-plots"])
    assert result.exit_code == 0 and _one_newline(result.output)        # the terminal table and the summary line
    assert "no end seen after 1200" in result.output and "no config" in result.output
    assert _one_newline(out.read_text())


def test_a_run_that_logged_no_loss_is_not_said_to_have_no_anomaly_and_no_spike():
    """bigscience meg_gpt2_perf_n16.out: three iterations, each skipped by fp16's start-up search, "loss scale:
    4294967296.0 | number of skipped iterations:   1" and no "lm loss" at all. The comparison table read "first
    anomaly: none", "spikes: 0", as if its loss had been checked; its chronicle says no loss was recognised."""
    real = HERE / "fixtures" / "real" / "megatron"
    [run] = load_runs(real / "bigscience-workshop+bigscience__experiments_gpt2-meg_meg_gpt2_perf_n16.out")
    analysed = analyze_run(run)
    row = summarize(analysed, run.metrics)
    assert (row.spikes, row.first_anomaly, row.min_loss, row.steps_reached) == (None, None, None, 3)
    table = cells(row, compare_rows([row]))
    assert table[4:6] == ["none found, no loss read", "–"]
    assert json.loads(render_compare_json(compare_rows([row])))["runs"][0]["spikes"] is None
    # a run whose loss was read keeps its count, 0 included
    [ok] = load_runs(real / "bigscience-workshop+bigscience__experiments_gpt2-meg-ds-3d_meg_ds_3d_gpt2_perf_n16-ds-on.out")
    done = summarize(analyze_run(ok), ok.metrics)
    # (12.44 at steps 1-2 is a fresh model's loss at hidden 8192, 10.83 + 1.64: the loss is above chance from 3, at 41.03)
    assert cells(done, compare_rows([done]))[4:6] == ["loss above chance at step 3", "1"]


def test_a_loss_taken_by_its_name_is_the_runs_loss_and_one_below_zero_is_not_counted_for_spikes():
    """AIRI-Institute/genrisk: a GAN's Lightning metrics.csv, its loss the scalar train_disc_loss (taken by its name),
    below 0 from step 3 (-0.39182889461517334): its chronicle reads that loss and does not judge it for spikes. The
    comparison read "none found, no loss read" and no min or final loss."""
    [run] = load_runs(HERE / "fixtures" / "real" / "lightning" / "AIRI-Institute_genrisk")
    row = summarize(analyze_run(run), run.metrics)
    assert (row.loss_read, row.spikes, row.min_loss, row.final_loss) == (
        True, None, -0.39182889461517334, -0.04461405426263809)
    assert cells(row, compare_rows([row]))[4:6] == ["none", "–"]


def test_a_runs_table_row_has_the_state_wandb_recorded_and_its_summary_loss():
    """Lucas-longxutang's runs table: G1_ternary_weights (seed=6242) "finished", its summary train/loss
    1.038091778755188, and no history. The comparison said "running" ("no end seen") and "none found, no loss read":
    the state W&B recorded is its outcome, said as W&B's, and its final loss is its summary's, not checked. kingb12's
    table has no State, but an End Time: "no end seen" was false there too."""
    rows = {r.name: r for r in _rows(NANOGPT_TABLE)}
    row = rows["G1_ternary_weights (seed=6242)"]
    assert (row.outcome, row.outcome_said, row.final_loss, row.min_loss, row.spikes) == (
        "completed", "W&B state: finished", 1.038091778755188, None, None)
    assert cells(row, compare_rows([row]))[3:6] == ["completed (W&B state: finished)",
                                                    "not checked: no history, its summary only", "–"]
    # a table without a State column (kingb12's) but with W&B's End Time: the runs ended, how is not said
    first = _rows(TEXT_AUG_TABLE)[0]
    assert (first.name, first.outcome) == ("bert_substitute_02", "exited")
    assert cells(first, compare_rows([first]))[3] == "exited (W&B end time: 2022-06-10T05:52:35.000Z)"


def test_a_wandb_state_this_does_not_know_is_an_end_said_as_wandb_said_it():
    """The table's State column may hold a state added since ("preempted"): the run ended, how is W&B's word."""
    [row] = [r for r in _rows(NANOGPT_TABLE) if r.name == "G1_ternary_weights (seed=6242)"]
    findings = _analysed(NANOGPT_TABLE)[0][1]
    preempted = dataclasses.replace(findings, summary={**findings.summary, "wandb/State": "preempted"})
    moved = summarize(preempted, _analysed(NANOGPT_TABLE)[0][0].metrics)
    assert (row.outcome, moved.outcome, moved.outcome_said) == ("completed", "exited", "W&B state: preempted")
