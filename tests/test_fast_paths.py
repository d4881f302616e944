"""Fast paths taken where a run's frames allow them (rows already in step order, one attempt, no epoch logged) give
what the general path gives: checked on real runs as read, and with their rows shuffled so that the general path is
the one taken."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import polars as pl
import pytest

from parsers import load_runs

ROOT = Path(__file__).resolve().parent.parent
# several attempts with wall times: a W&B export of 9 relaunches, and TensorBoard event files of 3 runs
RUNS = ["tests/fixtures/real/wandb/satishparaddi__Fine-Tuning-LLaMA-for-Medical-QA",
        "tests/fixtures/real/tensorboard/janosh_tensorboard-reducer", "sample_logs/clean-1.3B"]


@cache
def metrics(path: str) -> pl.DataFrame:
    return pl.concat([r.metrics for r in load_runs(ROOT / path)])


@pytest.mark.parametrize("path", RUNS)
def test_each_steps_first_wall_time_in_one_pass_is_the_grouped_one(path):
    from forensics.detectors.hang import first_wall_times

    frame = metrics(path)
    grouped = (frame.filter(pl.all_horizontal(pl.col("wall_time", "step", "attempt").is_not_null()))
               .group_by("attempt", "step").agg(pl.col("wall_time").min()).sort("attempt", "step"))
    assert grouped.height > 300
    assert first_wall_times(frame).equals(grouped)
    assert first_wall_times(frame.sample(fraction=1.0, shuffle=True, seed=1)).equals(grouped)
