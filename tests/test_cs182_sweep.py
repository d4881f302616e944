"""nraultwang/cs182-project's W&B sweep pxrm9xt8 (15 runs of GPT-small at 5 LRs, one history dump with a ``run_id``
column): runs told apart, per-layer attention logits, the Wortsman 1e4 level and LR sensitivity."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from parsers import load_runs

SWEEP = Path(__file__).parent / "fixtures" / "real" / "wandb" / "nraultwang__cs182-project" / "sweep_pxrm9xt8.csv"


@pytest.fixture(scope="module")
def runs():
    return {r.name: r for r in load_runs(SWEEP)}


@pytest.fixture(scope="module")
def analysed(runs):
    from forensics.analysis import analyze_run

    return {name: analyze_run(run) for name, run in runs.items()}


def test_a_history_dump_of_several_runs_is_one_run_per_id(runs) -> None:
    assert len(runs) == 15
    run = runs["wwmr8tw9"]
    loss = run.metrics.filter(metric="loss").sort("step")
    # its own rows only, on its own train/step: 51 losses from 59.021358 at step 160 to 7.586711 at step 8065
    assert (loss.height, loss["step"][0], loss["step"][-1]) == (51, 160, 8065)
    assert (round(loss["value"][0], 6), round(loss["value"][-1], 6)) == (59.021358, 7.586711)
    assert run.metrics.filter(metric="lr")["value"].max() == pytest.approx(0.0768)
    assert runs["6pzcpq0n"].metrics.filter(metric="lr")["value"].max() == pytest.approx(0.0003)
    assert runs["wwmr8tw9"].attempts == [1]
    assert any("15 runs, told apart by its run_id column" in w for w in runs["5awevsbu"].warnings)


def test_json_lines_of_several_runs_split_alike(tmp_path) -> None:
    wide = pl.read_csv(SWEEP, infer_schema=False).filter(pl.col("run_id").is_in(["wwmr8tw9", "6pzcpq0n"]))
    rows = [{k: (float(v) if k != "run_id" else v) for k, v in r.items() if v is not None}
            for r in wide.select("_step", "_timestamp", "train/step", "train/loss", "run_id").iter_rows(named=True)]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = {r.name: r.metrics.filter(metric="loss").sort("step") for r in load_runs(path)}
    assert sorted(got) == ["6pzcpq0n", "wwmr8tw9"]
    assert got["wwmr8tw9"]["value"][-1] == pytest.approx(7.586711, abs=1e-6)
    assert got["6pzcpq0n"]["value"][-1] == pytest.approx(5.334484, abs=1e-6)


def test_attention_logits_past_wortsmans_1e4_with_their_layer(analysed) -> None:
    from forensics.findings import Kind
    from reports.timeline import coverage_section

    found = analysed["wwmr8tw9"]  # LR 0.0768
    [level] = [a for a in found.anomalies if a.kind == Kind.LOGIT_GROWTH]
    # logits/layer11/max_p95 = 18023990.0 at _step 34, logged after train/step 4000
    assert (level.metric, level.step, level.end_step, level.value) == ("max_attention_logit", 800, 8000, 18023990.0)
    assert "at 10 of its 10 logged points, from its first logged point" in level.detail
    assert "at most 18,023,990 at step 4000 (in layer 11)" in level.detail
    assert "max_p95 is a percentile of a layer's attention logits, below their max" in level.detail
    lines = "\n".join(coverage_section(found))
    assert "3 per-layer attention-logit series (logits/layer0/max\\_p95" in lines
    assert "logits/layer11/max\\_p95" not in lines.split("**Other scalars read**")[1]
    assert "**Other scalars named like a logit:** logits/layer0/mean" in lines
    # LR 0.0048: once above 1e4 (10084.47168 at step 2400, 8052 the point before); LR 0.0003: 7.5 at most
    [once] = [a for a in analysed["g6rdipcd"].anomalies if a.kind == Kind.LOGIT_GROWTH]
    assert (once.step, once.value) == (2400, 10084.47168) and "at 1 of its 10 logged points, from step 2400" in once.detail
    assert not [a for a in analysed["6pzcpq0n"].anomalies if a.kind == Kind.LOGIT_GROWTH]


def test_lr_sensitivity_of_the_sweep_from_each_runs_logged_lr_peak(runs, analysed) -> None:
    """No config in a history dump: each run's LR is the largest it logged (train/lr: 0.0003 ... 0.0768).
    Sensitivity = mean of the 15 last train/loss values (none failed, all below l0) minus the smallest, 5.319765
    (2mgacfgs) = 1.0789782; l0 = 64.27433, nnwv2c67's first loss (step 160)."""
    from forensics.comparison import compare_rows, summarize

    rows = [summarize(analysed[name], run.metrics) for name, run in runs.items()]
    sens = compare_rows(rows).lr_sensitivity
    assert sens is not None
    assert sorted(set(sens["runs"].values())) == [0.0003, 0.0012, 0.0048, 0.0192, 0.0768]
    assert sens["sensitivity"] == pytest.approx(1.0789782, abs=1e-6)
    assert (round(sens["initial_loss"], 5), sens["initial_loss_run"]) == (64.27433, "nnwv2c67")
    assert (round(sens["best_final_loss"], 6), sens["best_run"], sens["best_lr"]) == (5.319765, "2mgacfgs", 0.0003)
    assert set(sens["lr_from"].values()) == {"logged peak"} and len(sens["settings_unseen"]) == 15
