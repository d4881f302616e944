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
