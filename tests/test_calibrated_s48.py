"""Grad-norm spikes between 3x and 4.5x: material at 3x (the floor ln 3 / 6), and several points that stay under 3x
are no incident (the materiality a loss incident of several points had, now for the grad norm too)."""

from __future__ import annotations

from pathlib import Path

import pytest

import forensics
from forensics.analysis import detect
from forensics.evaluation import generate
from forensics.findings import Kind

REAL = Path(__file__).parent / "fixtures" / "real"


def _spikes(family: str, scenario: str, seed: int, k: int) -> list[tuple[int, int, str]]:
    curve = generate(scenario, seed, k, noise=family)
    return [(a.step, a.end_step, a.detail) for a in detect(curve.frames()) if a.kind == Kind.GRAD_NORM_SPIKE]


@pytest.mark.parametrize(("family", "seed", "step", "said"), [
    # a log every 10 steps: one grad-norm point 3.8x (4.4x) its level as the loss spike begins (AR(1) noise; mixed)
    ("ar1", 0, 620, "grad norm rose to 4.1529"),
    ("mixed", 0, 13340, "grad norm rose to 4.2563"),
])
def test_a_grad_norm_between_3x_and_4_5x_its_level_is_a_spike(family: str, seed: int, step: int, said: str) -> None:
    found = [(a, b, d) for a, b, d in _spikes(family, "spikes_grad_lead", seed, 10) if a == step]
    assert len(found) == 1 and found[0][1] == step and found[0][2].startswith(said), found


def test_a_few_grad_norm_points_under_3x_their_level_are_no_incident() -> None:
    # a clean run logged every 10 steps: 0.664, 0.598, 0.612 at steps 510-530 over a level of 0.44 (1.5x, 1.4x,
    # 1.4x), three points a little beyond its noise: unusual, too small to tell of
    assert _spikes("mixed", "clean", 2, 10) == []


def test_a_grad_norm_spike_ends_where_it_is_back_at_its_level() -> None:
    # stark-sim dual32: grad norm 16.782, 58.077, 28.274, 16.381 at iterations 10-13 (level 14.789): 28.274 is still
    # 1.9x it, so the spike is iterations 11-12 and back at 13 (it was said back at 12, within a 4.5x floor's noise)
    findings = forensics.analyze_path(
        REAL / "megatron" / "stark-sim+megatron-deepspeed-lock-clock__.context_dual32_run_v2.log").findings
    spikes = [a for run in findings.runs for a in run.anomalies if a.kind == Kind.GRAD_NORM_SPIKE]
    assert [(a.attempt, a.step, a.end_step, a.recovered_step) for a in spikes] == [(1, 11, 12, 13), (2, 11, 12, 13)]
    assert all("back within its noise of its level by step 13 (2 steps; 16.381 there, 1.1x the baseline)" in a.detail
               for a in spikes)


def test_a_grad_norm_blip_before_a_loss_spike_joins_it_only_beyond_what_its_noise_does_in_those_points() -> None:
    # t(3) noise logged every step: a grad norm 3.2x its level (8.2 robust sigma) at step 56546, 15 steps before a
    # loss spike that had no grad-norm part; a t(3) noise puts a point 9.1 sigma out in 21 points 2% of the time
    assert [a for a, _, _ in _spikes("t3", "spikes", 5, 1) if 56000 <= a <= 57000] == []
    # the grad norm that did lead its loss spike (AR(1) noise, 28 sigma) still joins it
    assert [a for a, _, _ in _spikes("ar1", "spikes_grad_lead", 0, 10) if 600 <= a <= 700] == [620]


def test_a_calm_mean_loss_that_drifts_up_half_a_percent_is_no_spike() -> None:
    # fairseq train_inner lines, each a mean over 100 updates: loss=3.017, 3.024, 3.023, 3.033, 3.034, 3.036 at
    # updates 107100-107600, beyond its calm noise but 0.6% over its level: it was "loss spike at step 107400 (1.01x
    # the trailing median 3.017); back to its level by step 107600", where the loss was higher still
    run = forensics.analyze_path(REAL / "fairseq" / "tianxiexiaozhu77_syngec_glat_resumed_excerpt.log").findings.runs[0]
    assert run.coverage["metrics"]["loss"]["points"] == 705 and run.anomalies == []
