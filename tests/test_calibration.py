"""Calibrated detection: thresholds from the run's own noise tail, blips, absolute checks on short logs, fp16's
start-up search, warnings before a blow-up, and the contract every detector keeps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import forensics
import reports
from forensics.analysis import blips, detect
from forensics.detectors import DEFAULT_DETECTORS, EXPERIMENTAL_DETECTORS, RunFrames, SpikeDetector
from forensics.detectors.chance import LossAboveChanceDetector
from forensics.detectors.noise_tail import noise_tail
from forensics.evaluation import KINDS, Score, generate, margin_for, score
from forensics.findings import ANOMALY_KINDS, Anomaly
from forensics.warning import warning_before
from parsers import load_run
from parsers import schema as s
from tests.conftest import real


def frames_of(values: dict[str, np.ndarray], steps: np.ndarray) -> RunFrames:
    parts = [pl.DataFrame({"step": steps, "value": v}).with_columns(metric=pl.lit(m)) for m, v in values.items()]
    metrics = s.conform(pl.concat(parts).with_columns(run=pl.lit("t"), source=pl.lit("t"), attempt=pl.lit(1)),
                        s.METRICS_SCHEMA)
    return RunFrames(metrics, s.empty(s.EVENTS_SCHEMA))


# --- thresholds ----------------------------------------------------------------------------------------------------
def test_thresholds_grow_with_the_run_and_with_the_tail() -> None:
    rng = np.random.default_rng(7)
    t3 = rng.standard_t(3, 200_000) / 1.134
    gauss = rng.normal(size=200_000)
    short, long = noise_tail(t3[:10_000]), noise_tail(t3)
    assert short.fitted and long.fitted
    assert long.thresholds[0] > short.thresholds[0] > 20     # family-wise: a longer run needs a larger excursion
    assert noise_tail(gauss).thresholds[0] < 10              # a light tail lets a lone 10-sigma point through
    assert long.thresholds[1] < long.thresholds[0] / 3       # persistence: two in a row need far less
    # too few points for a tail fit: the heaviest Student-t the body of the residuals allows
    small, light = noise_tail(t3[:300]), noise_tail(gauss[:300])
    assert not small.fitted and small.df == 3.0 and small.rule == "t(3)"
    assert not light.fitted and light.df >= 6 and light.thresholds[0] < small.thresholds[0] / 2


def test_a_divergence_does_not_inflate_the_tail_it_is_judged_against() -> None:
    """A sample run (generated Megatron log): attempt 1 ends in a long divergence; without leaving it out of the
    fit, a lone point had to be 1,120 robust sigmas out."""
    run = forensics.analyze(load_run(Path(__file__).parents[1] / "sample_logs" / "tr8-104B-sample")).runs[0]
    loss = run.coverage["spike_checks"]["loss"]["1"]
    assert loss["tail"] == "fitted" and loss["lone_point_sigma"] < 20
    assert [a.step for a in run.anomalies if a.kind == "loss_spike" and a.attempt == 1] == [7010]


def test_a_spike_several_points_wide_is_read_against_the_level_it_left() -> None:
    """Generated Gaussian run: a loss spike at steps 13921-13926 (peak 1.25x) drags the median of the 8 points before
    each point up behind it, so point by point only 13924 passes the screen, a lone point inside the noise tail. Read
    against the level at its onset, three points in a row stand 6.6 sigmas out: an incident."""
    curve = generate("spikes", 0, 1, noise="gaussian")
    found = [a for a in detect(RunFrames(curve.metrics, curve.events)) if a.kind == "loss_spike"]
    assert [a.step for a in found if 13900 <= a.step <= 13940] == [13923]


def test_a_spike_is_not_judged_against_a_tail_it_lifts_itself() -> None:
    """Generated t(6) run logged every 10 steps (seed 3): three faint spikes among 4,300 points made the fitted
    lone-point threshold 31 sigma, so the one at step 29810 (18.9 sigma) was a blip; judged against the tail fitted
    without its own points, it is the incident it was injected as, and the tail quoted is that one."""
    curve = generate("spikes", 3, 10, noise="t6")
    frames = RunFrames(curve.metrics, curve.events)
    found = [(a.step, a.end_step) for a in detect(frames) if a.kind == "loss_spike"]
    assert (29810, 29820) in found
    assert 29810 not in [b.step for b in SpikeDetector("loss").blips(frames)]
    assert SpikeDetector("loss").tails(frames)[1].thresholds[0] < 20


def test_a_spike_spans_its_points_until_it_is_back() -> None:
    """t(3) noise: the loss at 2x for steps 12001-12020 is flagged for its first points only (the trailing median
    catches up), and was "steps 12001-12006 ... back to its level by step 12021 (20 steps)": the span ends at 12020,
    its peak is the highest of the 20 points (12017 here), not of the first six."""
    rng = np.random.default_rng(7)
    steps = np.arange(1, 20_001)
    loss = (2.0 + 6 * (1 + steps / 500) ** -0.6) * np.exp(rng.standard_t(3, steps.size) * 0.01)
    loss[12_000:12_020] *= 2.0
    loss[12_016] *= 1.2
    found = [a for a in detect(frames_of({"loss": loss}, steps)) if a.kind == "loss_spike"]
    assert [(a.step, a.end_step, a.recovered_step, a.value) for a in found] == [(12001, 12020, 12021, loss[12_016])]
    assert found[0].detail.endswith("back to its level by step 12021 (20 steps)")


@pytest.mark.parametrize(("noise", "incident"), [("gaussian", True), ("t3", False)])
def test_a_short_series_is_judged_by_the_tail_its_body_shows(noise: str, incident: bool) -> None:
    """300 points logged every 100 steps, too few for a tail fit, and one point 12 robust sigmas out: with a light
    body it is an incident, with a t(3) body it may be that noise's own tail (a blip)."""
    rng = np.random.default_rng(3)
    draw = rng.normal(size=300) if noise == "gaussian" else rng.standard_t(3, 300) / 1.134
    x = 0.004 * draw
    x[200] = 0.004 * 12
    steps = np.arange(1, 301) * 100 + 5_000
    frames = frames_of({"loss": np.exp(1.0 + x)}, steps)
    tail = SpikeDetector("loss").tails(frames)[1]
    assert not tail.fitted and (tail.df >= 6) == incident
    assert [a.step for a in detect(frames) if a.kind == "loss_spike"] == ([int(steps[200])] if incident else [])


def test_run_thresholds_allow_for_serial_correlation_only_where_the_residuals_show_it() -> None:
    """Real Hugging Face SFT run: independent, very heavy-tailed grad norms (lone blips up to 2,507x), and a grad norm
    36x its level for three steps (1562-1564): capped at what three independent t(3) points reach, that is an
    incident. A clean run with AR(1) noise (lag-1 correlation 0.5-0.95) stays up for several points by itself: its run
    thresholds are its own, and it raises nothing."""
    run = load_run(Path(__file__).parent / "fixtures" / "real" / "tensorboard" / "fyh2001_megatron-sft-recipes_fsdp2")
    frames = RunFrames(run.metrics, run.events)
    grad = [(a.step, a.end_step) for a in detect(frames) if a.kind == "grad_norm_spike"]
    assert grad == [(1562, 1564)]
    for seed in (0, 1, 2):
        curve = generate("clean", seed, 1, noise="ar1")
        assert detect(RunFrames(curve.metrics, curve.events)) == []


# --- incidents and blips -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1000, 1001])
def test_heavy_tailed_clean_run_raises_no_incident(seed: int) -> None:
    curve = generate("clean", seed, 1, noise="t3", steps=100_000)
    assert detect(RunFrames(curve.metrics, curve.events)) == []


def test_a_run_whose_only_alarms_are_blips() -> None:
    rng = np.random.default_rng(3)
    steps = np.arange(1000, 21000)
    loss = 3.0 * np.exp(0.01 * rng.standard_t(3, steps.size))
    loss[14000] *= np.exp(0.15)  # one hard batch: 1.16x, 15 sigma out, well inside t(3)'s reach over 20k steps
    grad = np.exp(0.05 * rng.normal(size=steps.size))
    frames = frames_of({"loss": loss, "grad_norm": grad}, steps)
    assert detect(frames) == []
    [b] = [b for b in blips(frames) if b.metric == "loss"]
    assert 15000 in b.steps and b.largest_step in b.steps and b.count == len(b.steps)


def test_blips_are_in_json_and_one_chronicle_line_not_anomalies(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    lines = []
    loss = 3.0 * np.exp(0.01 * rng.standard_t(3, 6000))
    loss[4000] *= np.exp(0.12)
    for i, v in enumerate(loss, start=1001):
        lines.append(f" iteration {i:8d}/  100000 | consumed samples: {i * 8:12d} | elapsed time per iteration (ms): "
                     f"1000.0 | learning rate: 1.000E-04 | global batch size:     8 | lm loss: {v:.6E} | loss scale: "
                     "1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |")
    log = tmp_path / "blips.log"
    log.write_text("\n".join(lines) + "\n")
    findings = forensics.analyze(load_run(log))
    data = json.loads(reports.render(findings, "json"))["runs"][0]
    assert data["anomalies"] == []
    [b] = data["blips"]
    assert (b["attempt"], b["metric"]) == (1, "loss") and 5001 in b["steps"] and b["count"] == len(b["steps"])
    text = reports.render(findings, "markdown")
    assert text.count("- **Blips:** ") == 1
    assert "single-step loss blip" in text and "within the run's noise tail, so not incidents." in text


# --- fp16 start-up search ------------------------------------------------------------------------------------------
def test_fp16_startup_search_on_a_real_log_is_a_setup_line() -> None:
    """meg_gpt2_perf_n16.out: "loss scale: 4294967296.0 | number of skipped iterations:   1" at iteration 1, then
    2147483648.0 and 1073741824.0, and the log ends: the search for a first scale, not an overflow storm."""
    run = forensics.analyze(load_run(real("meg_gpt2_perf_n16.out"))).runs[0]
    assert not [a for a in run.anomalies if a.kind in ("skipped_iterations", "loss_scale_collapse")]
    assert not [c for c in run.suspected_causes if "fp16" in c.cause]
    assert ("attempt 1: fp16 start-up loss-scale search, the scale fell from 4294967296 to 1073741824 over steps 1–3 "
            "with 3 iterations skipped, and the log of the attempt ends before it settled (normal: dynamic loss "
            "scaling looking for its first scale, not a collapse)") in run.setup


def test_fp16_startup_search_then_a_real_collapse(tmp_path: Path) -> None:
    scale, lines = 2.0**32, []
    for i in range(1, 401):
        skipped = 1 if i <= 6 or 300 <= i < 306 else 0
        loss = "" if skipped else f"lm loss: {6.0 - i / 1000:.6E} | "
        lines.append(f" iteration {i:8d}/    1000 | consumed samples: {i * 8:12d} | elapsed time per iteration (ms): "
                     f"1000.0 | learning rate: 1.000E-04 | global batch size:     8 | {loss}loss scale: {scale:.1f} | "
                     f"grad norm: 1.000 | number of skipped iterations: {skipped:3d} | number of nan iterations:   0 |")
        if skipped:
            scale /= 2
    log = tmp_path / "fp16.log"
    log.write_text("\n".join(lines) + "\n")
    run = forensics.analyze(load_run(log)).runs[0]
    assert [(a.kind, a.step) for a in run.anomalies if a.kind in ("skipped_iterations", "loss_scale_collapse")] == [
        ("skipped_iterations", 300), ("loss_scale_collapse", 303)]
    assert ("attempt 1: fp16 start-up loss-scale search, the scale fell from 4294967296 to 134217728 over steps 1–6 "
            "with 6 iterations skipped, then 6 more skipped later in the attempt (the first at step 300) (normal: "
            "dynamic loss scaling looking for its first scale, not a collapse)") in run.setup


# --- warning before the crash --------------------------------------------------------------------------------------
def test_divergence_with_its_warning_lead_time() -> None:
    curve = generate("divergence_nan", 1, 10, noise="t4")   # the grad norm grows for 1,540 steps before
    assert curve.precursor_from == 33480
    found = detect(RunFrames(curve.metrics, curve.events))
    [div] = [a for a in found if a.kind == "divergence"]
    assert div.step == 35020 and div.warning is not None
    # read from the break of a fitted level-then-rise: 250 steps early in t(4) noise (540 early, at 32940, when it
    # was read as the last point the rolling median stood within 10% of its low)
    assert (div.warning["step"], div.warning["lead_steps"]) == (33230, 1790)
    assert div.warning["signals"][0]["kind"] == "grad_norm_rise"
    assert div.warning["signals"][0]["detail"].startswith("grad norm began rising at step 33230 (")
    line = reports.markdown._anomaly_line(div)
    assert "  - **warning 1790 steps ahead:** grad norm began rising at step 33230" in line


def _grad_norm(curve, lo: int, hi: int) -> dict[int, float]:
    rows = curve.metrics.filter((pl.col("metric") == s.GRAD_NORM) & pl.col("step").is_between(lo, hi))
    return dict(zip(rows["step"].to_list(), rows["value"].to_list(), strict=True))


def test_warning_from_a_grad_norm_spike_not_back_before_the_blow_up() -> None:
    """Logged every 100 steps, the grad norm's rise before the blow-up (4.5x over ~250 steps) spans two points, too
    few for the rolling median; the spike detector's run test finds it beyond the run's noise at step 56400, and it
    is still up when the loss diverges at 56600: a warning 200 steps ahead (none before the fix)."""
    curve = generate("divergence_nan", 3, 100, noise="t4")
    found = detect(RunFrames(curve.metrics, curve.events))
    [div] = [a for a in found if a.kind == "divergence"]
    assert div.step == 56600 and div.warning is not None
    assert (div.warning["step"], div.warning["lead_steps"]) == (56400, 200)
    [signal] = div.warning["signals"]
    assert signal["kind"] == "unrecovered_grad_norm_spike"
    assert signal["detail"] == ("a grad-norm spike at step 56400 (2.567307307771254, from 1.1439584265371392) not back "
                                "to its level before the blow-up (3.85234238087222 at step 56500)")
    # true of the data: the logged values quoted, the level (the lower median of the 8 points before) well below
    grad = _grad_norm(curve, 55600, 56500)
    assert (grad[56400], grad[56500]) == (2.567307307771254, 3.85234238087222)
    assert sorted(grad[x] for x in range(55600, 56400, 100))[3] == 1.1439584265371392


def test_warning_from_a_short_log_whose_grad_norm_climbs() -> None:
    """Seven points before the blow-up (logged every 100 steps): too few for the rolling median, but the grad norm
    rose at each of the last three, 1.8x from its low at step 400 (none before the fix)."""
    curve = generate("divergence", 2, 100, noise="t3")
    found = detect(RunFrames(curve.metrics, curve.events))
    [div] = [a for a in found if a.kind == "divergence"]
    assert div.step == 800 and div.warning is not None
    assert (div.warning["step"], div.warning["lead_steps"]) == (500, 300)
    [signal] = div.warning["signals"]
    grad = _grad_norm(curve, 100, 700)
    # the logged values as printed (the generated floats' last digit follows the NumPy build: compared, not typed in)
    assert signal == {"kind": "grad_norm_rise", "step": 500, "detail": (
        f"grad norm rose at each of its last 3 logged points before the blow-up, from {grad[400]!r} at step 400 "
        f"to {grad[700]!r} at step 700 (1.8x)")}
    assert [round(grad[x], 3) for x in range(100, 800, 100)] == [0.755, 0.443, 0.313, 0.24, 0.302, 0.367, 0.435]
    # and not from two rises in a row, nor from three that end below 1.8x the low
    steps = np.arange(100, 800, 100)
    blowup = Anomaly("divergence", "loss", 1, 800, 800, 9.0, 2.0)
    for values in ([0.9, 0.7, 0.5, 0.4, 0.3, 0.5, 0.9],      # two rises in a row, 3x
                   [0.9, 0.7, 0.5, 0.4, 0.45, 0.5, 0.6]):    # three rises, 1.5x
        frames = frames_of({s.GRAD_NORM: np.array(values), s.LOSS: np.linspace(6.0, 4.0, 7)}, steps)
        assert warning_before(blowup, [blowup], frames) is None


def test_a_chance_cluster_of_blips_is_no_warning() -> None:
    """t(3) noise, an fp16 collapse generated with no precursor: 125 loss blips over 42,600 steps (one per ~340); 3 in
    the 1,500 steps from 41423 against 1 in the 1,500 before (2 since the noise is read about a local level) read
    "spikes came faster", a warning 1,194 steps ahead from noise. At the attempt's own rate about 4 are expected
    there: the warning is the overflows, 14 steps ahead."""
    curve = generate("fp16_collapse", 1, 1, noise="t3")
    frames = RunFrames(curve.metrics, curve.events)
    [div] = [a for a in detect(frames) if a.kind == "divergence"]
    assert curve.precursor_from is None
    assert div.step == 42617 and (div.warning["step"], div.warning["lead_steps"]) == (42603, 14)
    assert [x["kind"] for x in div.warning["signals"]] == ["loss_scale_overflows", "loss_scale_overflows"]
    [loss] = [b for b in blips(frames) if b.metric == s.LOSS]
    assert loss.count == 125 and [x for x in loss.steps if 39617 <= x < 42617] == [39929, 41082, 41423, 41680, 42150]


# --- the contract every detector keeps -----------------------------------------------------------------------------
DETECTORS = (*DEFAULT_DETECTORS, *EXPERIMENTAL_DETECTORS, LossAboveChanceDetector(50304))


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: repr(d)[:60])
def test_detector_contract(detector) -> None:
    empty = RunFrames(s.empty(s.METRICS_SCHEMA), s.empty(s.EVENTS_SCHEMA))
    assert detector.detect(empty) == []
    for scenario in ("spikes_grad_lead", "fp16_collapse", "regime_shift", "divergence_nan", "clean"):
        curve = generate(scenario, 2, 10, noise="t4")
        found = detector.detect(RunFrames(curve.metrics, curve.events))
        assert [(a.attempt, a.step) for a in found] == sorted((a.attempt, a.step) for a in found)
        assert {a.kind for a in found} <= ANOMALY_KINDS
        assert all(a.end_step >= a.step for a in found)
        # scored as the harness scores it: a kind with no truths on the curve has no recall (a sanity failure of
        # the evaluation, never 1.0); nothing detected of a kind is precision 0 (and recall 0 where there are truths)
        for kind in KINDS:
            got = score(kind, found, curve.truths, margin_for(10))
            if got.truths == 0:
                with pytest.raises(ValueError, match=rf"^no {kind} truths: recall is undefined"):
                    got.recall  # noqa: B018
            if got.detections == 0:
                assert got.precision == 0.0 and (got.truths == 0 or got.recall == 0.0), (scenario, kind)
            if not curve.truths:   # the clean curve: every detection is a false alarm
                assert (got.false, got.precision) == (got.detections, 0.0), kind
    assert generate("clean", 2, 10, noise="t4").truths == []


def test_an_evaluation_without_truths_is_a_sanity_failure_not_a_score() -> None:
    with pytest.raises(ValueError, match="no loss_spike truths"):
        Score("loss_spike").recall  # noqa: B018
    assert Score("loss_spike", detections=0).precision == 0.0
    assert (Score("loss_spike", truths=2).recall, Score("loss_spike", truths=2).precision) == (0.0, 0.0)
