"""Issue 21's report-side parts: predicting instability across an LR x size sweep (``forensics compare``'s
``sweep``), the perplexity panel of the loss plot (``forensics analyze --perplexity``), and the precursor notes
on logit growth restating the logit-growth detector (one judge of growth)."""

from __future__ import annotations

import numpy as np
import polars as pl
from typer.testing import CliRunner

import forensics
import parsers
from forensics.analysis import analyze_run
from forensics.cli import app
from forensics.findings import Kind
from parsers import schema as s
from parsers.run import Run
from reports import plots
from reports.files import write


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
