"""Issue 21's report-side parts: predicting instability across an LR x size sweep (``forensics compare``'s
``sweep``), the perplexity panel of the loss plot (``forensics analyze --perplexity``), and the precursor notes
on logit growth restating the logit-growth detector (one judge of growth)."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from rich.console import Console
from typer.testing import CliRunner

import forensics
import parsers
from forensics.analysis import analyze_run
from forensics.cli import app
from forensics.compare import compare_runs
from forensics.evaluation.experiments import write_size_lr_sweep
from forensics.findings import Kind, Outcome
from forensics.sweep import sweep
from parsers import schema as s
from parsers.run import Run
from reports import plots
from reports.compare_report import render_compare_json, render_compare_markdown
from reports.files import write
from reports.terminal import print_comparison


def _logit_run(n: int, seed: int, growth: np.ndarray, diverge_at: int) -> Run:
    """Loss diverging at ``diverge_at``, a flat grad norm, and a max attention logit (level 12) times ``growth``."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    loss = 2.5 + 1.5 * np.exp(-steps / 800) + 0.02 * np.clip(rng.standard_t(3, n), -8, 8)
    loss = np.where(steps >= diverge_at, loss + (steps - diverge_at) * 0.02, loss)
    logit = 12.0 * np.exp(0.1 * np.clip(rng.standard_t(3, n), -8, 8)) * growth
    grad = 0.3 * np.exp(0.1 * rng.standard_normal(n))
    metrics = s.conform(pl.concat([
        pl.DataFrame({"step": steps, "value": loss, "metric": s.LOSS}),
        pl.DataFrame({"step": steps, "value": grad, "metric": s.GRAD_NORM}),
        pl.DataFrame({"step": steps, "value": logit, "metric": s.MAX_ATTENTION_LOGIT}),
    ]).with_columns(run=pl.lit("gen"), source=pl.lit("gen"), attempt=1), s.METRICS_SCHEMA)
    return Run("gen", "gen", metrics, s.empty(s.EVENTS_SCHEMA), s.empty(s.CONFIGS_SCHEMA))


def test_logit_precursor_restates_the_detector_and_a_level_shift_is_not_growth():
    steps = np.arange(1, 4001)
    found = analyze_run(_logit_run(4000, 3, np.where(steps > 2000, np.exp((steps - 2000) / 720), 1.0), 3500))
    [growth] = [a for a in found.anomalies if a.kind == Kind.LOGIT_GROWTH]
    first = next(a for a in found.anomalies if a.kind in {Kind.LOSS_SPIKE, Kind.DIVERGENCE})
    notes = [p for p in first.precursors if "logit" in p]
    assert notes == [f"max_attention_logit grew log-linearly from step {growth.step}, {first.step - growth.step} steps "
                     f"before this (the logit-growth finding: usual level {growth.baseline:.4g}, {growth.value:.4g} at "
                     f"its peak at step {growth.end_step}; attention or output logit growth precedes divergence, "
                     "Wortsman et al. 2023)"]
    assert growth.step == 2131 and first.step == 3511
    # a 4x step that then holds: the detector finds no growth, so no precursor note and no logit cause either (the
    # old early-fifth/late-tenth check called it "grew 4.0x")
    found = analyze_run(_logit_run(4000, 9, np.where(steps > 2000, 4.0, 1.0), 3500))
    assert not [a for a in found.anomalies if a.kind == Kind.LOGIT_GROWTH]
    assert not [p for a in found.anomalies for p in a.precursors if "logit" in p]
    assert not [c for c in found.suspected_causes if c.kind == "logits"]


def test_perplexity_panel_only_with_the_option(tmp_path):
    runs = parsers.load_runs("sample_logs/tr8-104B-sample")
    metrics, run = runs[0].metrics, forensics.analyze(*runs).runs[0]
    labels = [ax.get_ylabel() for ax in plots.run_figures(metrics, run)["attempts"].axes]
    assert labels == ["loss", "grad norm", "loss scale"]
    fig = plots.run_figures(metrics, run, perplexity_panel=True)["attempts"]
    assert [ax.get_ylabel() for ax in fig.axes] == ["loss", "perplexity exp(loss)", "grad norm", "loss scale"]
    ppl, loss = fig.axes[1], fig.axes[0]
    assert ppl.get_yscale() == "log"  # exp(loss) spans 4 decades here
    assert np.allclose(np.exp(loss.get_lines()[0].get_ydata()), ppl.get_lines()[0].get_ydata())
    analysis = forensics.analyze_path("sample_logs/clean-1.3B")
    default = write(analysis, tmp_path / "a" / "r.md")
    same = write(analysis, tmp_path / "b" / "r.md", perplexity=False)
    other = write(analysis, tmp_path / "c" / "r.md", perplexity=True)
    assert [p.read_bytes() for p in default] == [p.read_bytes() for p in same]
    assert default[1].read_bytes() != other[1].read_bytes() and other[1].read_bytes()[:4] == b"\x89PNG"
    assert default[0].read_text() == other[0].read_text()  # the chronicle's text is the same
    result = CliRunner().invoke(app, ["analyze", "sample_logs/clean-1.3B", "--perplexity", "-o", str(tmp_path / "d.md")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "d_files" / "clean-1.3B-attempts.png").read_bytes() == other[1].read_bytes()


# --- predicting instability across an LR x size sweep ---------------------------------------------------------------

@pytest.fixture(scope="module")
def sweep_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sweep-cache")


@pytest.fixture(scope="module")
def swept(tmp_path_factory, sweep_cache):
    """The generated 4 sizes x 4 LRs sweep, compared: the max attention logit and grad norm scale as LR^0.8 N^0.5
    and LR^0.5 N^0.3; runs whose logit level reaches 100 diverge (125M and 356M at 3e-3, 760M and 1.3B from 1e-3)."""
    root = tmp_path_factory.mktemp("sweep")
    paths = write_size_lr_sweep(root)
    # (inline: spawning processes costs more than these 16 small runs; cached, so that a second compare reads back)
    result = compare_runs([root], cache=sweep_cache, jobs=1)
    return paths, result


def _rows(result, keep=lambda r: True):
    return [dataclasses.replace(r, scaling=copy.deepcopy(r.scaling)) for r in result.comparison.rows if keep(r)]


def test_sweep_fits_sensitivity_and_the_prediction_for_the_largest_size(swept):
    paths, result = swept
    sweep = result.comparison.sweep
    failed = {n for n, r in sweep["runs"].items() if r["outcome"] == "diverged"}
    assert failed == {n for n, p in paths.items() if p.break_step is not None} == {
        "s-lr0.003", "m-lr0.003", "l-lr0.001", "l-lr0.003", "xl-lr0.001", "xl-lr0.003"}
    assert sweep["sizes"] == {"125M": 125262336.0, "356M": 355919872.0, "760M": 760372224.0, "1.3B": 1315819520.0}
    assert {r["parameters_from"] for r in sweep["runs"].values()} == {"shape"}
    # Wortsman's LR sensitivity per size: the larger models, failing from a lower LR, are more sensitive
    sens = {k: (round(v["sensitivity"], 4), v["largest_stable_lr"], v["smallest_failed_lr"])
            for k, v in sweep["lr_sensitivity_by_size"].items()}
    assert sens == {"125M": (1.8807, 0.001, 0.003), "356M": (1.8943, 0.001, 0.003), "760M": (3.1392, 3e-4, 1e-3),
                    "1.3B": (3.1348, 3e-4, 1e-3)}
    fits = {k: (round(f["lr_exponent"], 3), round(f["size_exponent"], 3), round(f["r2"], 4), f["runs"])
            for k, f in sweep["fits"].items()}
    assert fits == {"final_loss": (-0.074, -0.037, 0.9974, 10), "grad_norm": (0.501, 0.307, 0.9992, 10),
                    "max_attention_logit": (0.803, 0.498, 0.9999, 10)}
    logit = [p for p in sweep["predictions"] if p["metric"] == "max_attention_logit"]
    assert [(p["size"], p["held_out"], round(p["lr_at_least"], 7), p["agrees"]) for p in logit] == [
        ("125M", False, 0.0024017, True), ("356M", False, 0.001256, True), ("760M", False, 0.0007841, True),
        ("1.3B", False, 0.0005578, True), ("1.3B", True, 0.0005555, True)]
    held = logit[-1]
    assert held["from_sizes"] == ["125M", "356M", "760M"] and held["fit"]["runs"] == 8
    assert (held["highest_survived"], held["lowest_failed"]) == (
        {"level": 78.322, "run": "m-lr0.001"}, {"level": 113.233, "run": "s-lr0.003", "outcome": "diverged"})
    assert held["statement"].startswith("predicted unstable at LR ≥ 0.00056 for 1.3B from the 125M–760M runs: max "
                                        "attention logit (median of the last fifth before the end) ∝ LR^0.80 · N^0.50")
    assert held["statement"].endswith("observed at 1.3B: stable up to LR 0.0003, failed from LR 0.001 (agrees)")
    assert sweep["flagged"] == [] and sweep["no_prediction"] == []
    doc = json.loads(render_compare_json(result.comparison))
    assert doc["schema_version"] == 2 and doc["sweep"]["predictions"][-1]["size"] == "1.3B"
    assert "scaling" not in doc["runs"][0] and doc["lr_sensitivity"] is None  # several sizes: not one LR sweep
    text = render_compare_markdown(result.comparison)
    assert "## Predicting instability across the sweep" in text
    assert "| 1.3B | 125M–760M (1.3B held out), R² 1.000 | 94.2 | **0.00056** | 0.00044–0.0007 | stable up to 0.0003, " \
           "failed from 0.001 | yes |" in text
    assert "| 760M | 0.0001–0.003 | 3.139 | 4.386721 at LR 0.0003 | 0.0003 | 0.001 |" in text


def test_the_terminal_summary_names_each_fits_prediction_for_the_largest_size(swept, tmp_path):
    _, result = swept
    console = Console(record=True, width=300)
    print_comparison(result.comparison, [tmp_path / "compare.md"], console)
    lines = console.export_text().splitlines()
    assert lines[-3:] == [
        "sweep: the grad norm fit predicts instability at LR ≥ 0.00055 for 1.3B (fitted on 125M–760M, R² 0.999); "
        "observed at 1.3B: agrees",
        "sweep: the max attention logit fit predicts instability at LR ≥ 0.00056 for 1.3B (fitted on 125M–760M, "
        "R² 1.000); observed at 1.3B: agrees",
        f"comparison written to {tmp_path / 'compare.md'}"]


def test_a_run_still_running_past_the_level_its_siblings_failed_at_is_flagged(swept):
    _, result = swept
    rows = _rows(result)
    running = next(r for r in rows if r.name == "xl-lr0.001")  # as if it were still running before its divergence
    running.outcome, running.outcome_step = Outcome.RUNNING, 900
    out = sweep(rows)
    flagged = [f for f in out["flagged"] if f["metric"] == "max_attention_logit"]
    assert [(f["run"], round(f["level"], 2)) for f in flagged] == [("xl-lr0.001", 148.45)]
    assert flagged[0]["statement"] == (
        "xl-lr0.001 (running) is predicted unstable: its LR 0.001 is at or above the 0.00056 predicted for 1.3B; its "
        "max attention logit (148.5) has passed the 113.2 at which s-lr0.003 diverged")


def test_no_prediction_with_two_sizes_two_lrs_a_poor_fit_or_other_differences(swept):
    _, result = swept
    two_sizes = sweep(_rows(result, lambda r: r.name.startswith(("s-", "m-"))))
    assert two_sizes["predictions"] == [] and two_sizes["lr_sensitivity_by_size"]["125M"] is not None
    assert two_sizes["no_prediction"] == ["grad norm: fewer than 3 sizes among the runs that did not fail (2)",
                                          "max attention logit: fewer than 3 sizes among the runs that did not fail (2)"]
    two_lrs = sweep(_rows(result, lambda r: r.config["lr"] in (3e-4, 3e-3)))
    assert two_lrs["predictions"] == [] and two_lrs["no_prediction"][0] == \
        "grad norm: fewer than 3 LRs among the runs that did not fail (1)"
    rows = _rows(result)
    noise = np.random.default_rng(0).uniform(0.2, 5.0, len(rows))
    for r, f in zip(rows, noise, strict=True):
        for m in ("grad_norm", "max_attention_logit"):
            r.scaling[m]["level"] *= f
    poor = sweep(rows)
    assert poor["predictions"] == [] and all("the fit is poor (R²" in why for why in poor["no_prediction"])
    rows = _rows(result)
    rows[0].config = {**rows[0].config, "adam_beta2": 0.999}
    assert sweep(rows) is None  # a run that also differs in something bearing on stability: no sweep
    rows = _rows(result)
    for r in rows:  # min_lr following the LR is part of the sweep
        r.config = {**r.config, "min_lr": r.config["lr"] / 10}
    assert sweep(rows)["lr_sensitivity_by_size"] == result.comparison.sweep["lr_sensitivity_by_size"]
    assert sweep(_rows(result, lambda r: r.name.startswith("s-"))) is None  # one size: lr_sensitivity's


def test_the_largest_size_run_once_is_predicted_from_the_smaller_ones(swept):
    _, result = swept
    out = sweep(_rows(result, lambda r: not r.name.startswith("xl-") or r.name == "xl-lr0.0001"))
    held = next(p for p in out["predictions"] if p["metric"] == "max_attention_logit" and p["held_out"])
    assert (held["size"], round(held["lr_at_least"], 7), held["agrees"], held["beyond_lrs_run"]) == \
        ("1.3B", 0.0005555, True, False)
    assert held["statement"].endswith("observed at 1.3B: stable up to LR 0.0001, no run failed (agrees)")
    # without the 3e-3 runs, 125M never failed: its predicted LR lies beyond the LRs run, and says so
    out = sweep(_rows(result, lambda r: r.config["lr"] < 3e-3))
    small = next(p for p in out["predictions"] if p["metric"] == "max_attention_logit" and p["size"] == "125M")
    assert (round(small["lr_at_least"], 5), small["beyond_lrs_run"], small["lowest_failed"]["run"]) == \
        (0.00243, True, "l-lr0.001")
    assert "; outside the LRs run; observed at 125M: stable up to LR 0.001, no run failed (agrees)" in small["statement"]


def test_a_cached_comparison_gives_the_same_sweep(swept, sweep_cache, monkeypatch):
    import forensics.compare as compare_module

    _, result = swept
    root = Path(result.comparison.rows[0].path).parent
    monkeypatch.setattr(compare_module, "ingest", lambda *a, **k: pytest.fail("a run was read again"))
    warm = compare_runs([root], cache=sweep_cache, jobs=1).comparison.to_dict()
    assert warm["sweep"] == result.comparison.to_dict()["sweep"]


def test_sizes_that_read_the_same_are_one_size(swept):
    _, result = swept
    rows = _rows(result)
    for r in rows:
        if r.name.startswith("xl-") and r.config["lr"] >= 1e-3:
            r.scaling["parameters"] += 1e7  # 1.33B: another vocabulary, say
    out = sweep(rows)
    assert out["sizes"] == result.comparison.sweep["sizes"] and out["runs"]["xl-lr0.001"]["parameters"] == 1325819520.0
    assert out["lr_sensitivity_by_size"]["1.3B"] == result.comparison.sweep["lr_sensitivity_by_size"]["1.3B"]


def _sweep_rows(sizes, lrs, level, outcome):
    from forensics.comparison import RunRow

    return [RunRow(name=f"n{n:g}-lr{lr:g}", outcome=outcome(n, lr), final_loss=3.0, config={"lr": lr, "hidden_size": int(n)},
                   scaling={"parameters": float(n), "parameters_from": "shape",
                            "grad_norm": {"level": level(n, lr), "max": level(n, lr), "until_step": 100}})
            for n in sizes for lr in lrs]


def test_a_fit_that_barely_rises_with_lr_predicts_nothing_rather_than_overflowing():
    rows = _sweep_rows([1e8, 3e8, 1e9], [1e-4, 3e-4, 1e-3, 3e-3], lambda n, lr: 0.1 * (n / 1e8) ** 0.5 * lr ** 0.004,
                       lambda n, lr: Outcome.DIVERGED if (n, lr) == (1e8, 3e-3) else Outcome.COMPLETED)
    rows[3].scaling["grad_norm"] = {"level": 50.0, "max": 50.0, "until_step": 100}  # the diverged run: far above
    out = sweep(rows)
    assert out["predictions"] == [] and out["no_prediction"] == [
        "grad norm: the fit reaches the level a run failed at only above LR 10 for 100M: it barely rises with LR"]


def test_models_under_a_million_parameters_keep_their_sizes():
    rows = _sweep_rows([2e5, 4e5, 8e5, 3e6], [1e-3, 3e-3, 1e-2], lambda n, lr: 0.1 * lr ** 0.5 * n ** 0.2,
                       lambda n, lr: Outcome.COMPLETED)
    assert list(sweep(rows)["sizes"]) == ["200k", "400k", "800k", "3.0M"]


def test_a_finished_run_above_its_predicted_lr_is_not_called_predicted_unstable():
    from forensics.comparison import RunRow
    from forensics.sweep import _flagged

    prediction = {"parameters": 1e9, "held_out": False, "lr_at_least": 1e-3, "size": "1.0B",
                  "lowest_failed": {"level": 9.0, "run": "x", "outcome": "diverged"}}
    rows = [RunRow(name=f"1B-{outcome}", outcome=outcome, config={"lr": 3e-3},
                   scaling={"parameters": 1e9, "grad_norm": {"level": 5.0}})
            for outcome in (Outcome.COMPLETED, Outcome.RUNNING)]
    assert [f["statement"] for f in _flagged("grad_norm", rows, [prediction])] == [
        "1B-running (running) is predicted unstable: its LR 0.003 is at or above the 0.001 predicted for 1.0B"]
