"""Detection engine: labelled curves, precursors, spike score, regime shifts, and the real spikes of the BigScience
chronicles pinned at their steps."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import forensics
from forensics.analysis import detect
from forensics.detectors import LossPlateauDetector, RegimeShiftDetector, RunFrames, SpikeDetector
from forensics.evaluation import evaluate, generate
from forensics.evaluation.metrics import Score, score
from forensics.findings import Anomaly
from forensics.spike_score import spike_scores
from parsers import load_run
from parsers import schema as s

REAL = Path(__file__).parent / "fixtures" / "real" / "megatron"


def real(part: str) -> Path:
    return next(p for p in REAL.iterdir() if part in p.name)


def frame(rows: dict[str, np.ndarray], steps: np.ndarray, attempt: int = 1) -> pl.DataFrame:
    parts = [pl.DataFrame({"step": steps, "value": v}).with_columns(metric=pl.lit(m)) for m, v in rows.items()]
    return s.conform(pl.concat(parts).with_columns(run=pl.lit("t"), source=pl.lit("t"), attempt=pl.lit(attempt)),
                     s.METRICS_SCHEMA)


def run_frames(metrics: pl.DataFrame) -> RunFrames:
    return RunFrames(metrics, s.empty(s.EVENTS_SCHEMA))


# --- the harness ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 10])
def test_clean_curves_have_no_anomalies(k: int) -> None:
    (row,) = evaluate(["clean"], seeds=range(4), intervals=[k])
    assert (row.curves, row.anomalies_on_clean, row.clean_runs_with_incidents) == (4, 0, 0)
    for kind, got in row.scores.items():   # nothing to find and nothing found: no recall to claim, precision 0
        assert (got.truths, got.detections, got.precision) == (0, 0, 0.0)
        with pytest.raises(ValueError, match=rf"^no {kind} truths: recall is undefined"):
            got.recall  # noqa: B018


def test_spikes_divergences_and_collapses_are_found() -> None:
    rows = {(r.scenario, r.log_interval): r for r in evaluate(
        ["spikes", "divergence_nan", "fp16_collapse", "regime_shift"], seeds=range(3), intervals=[1, 10])}
    for k, spike_truths in ((1, 7), (10, 8)):   # required spikes the generator injects over the three seeds
        spikes = rows["spikes", k].scores["loss_spike"]
        assert spikes.truths == spike_truths and spikes.recall >= 0.9 and spikes.precision >= 0.9
        for scenario, kind in (("divergence_nan", "divergence"), ("divergence_nan", "nan"),
                               ("fp16_collapse", "loss_scale_collapse"), ("regime_shift", "changepoint")):
            got = rows[scenario, k].scores[kind]
            assert (got.truths, got.found) == (3, 3), (scenario, kind, k)   # one truth per curve, every one found


def test_generator_is_deterministic_and_labels_at_logged_steps() -> None:
    a, b = generate("spikes", seed=5, log_interval=10), generate("spikes", seed=5, log_interval=10)
    assert a.metrics.equals(b.metrics) and a.truths == b.truths
    assert all(t.step % 10 == 0 for t in a.truths)
    with pytest.raises(ValueError, match="unknown scenario"):
        generate("nope", seed=0)


def test_score_with_margin() -> None:
    from forensics.evaluation.datasets import Truth

    truths = [Truth("loss_spike", 1000, 1010), Truth("loss_spike", 5000, 5005), Truth("divergence", 9000, 9500)]
    found = [Anomaly("loss_spike", "loss", 1, 1004, 1004, 9.0, 3.0), Anomaly("loss_spike", "loss", 1, 3000, 3000, 9, 3),
             Anomaly("loss_spike", "loss", 1, 9001, 9001, 9.0, 3.0)]
    got = score("loss_spike", found, truths, margin=5)
    assert (got.truths, got.found, got.detections, got.false) == (2, 1, 3, 1)  # 9001 belongs to the divergence
    assert (got.recall, got.precision) == (0.5, 2 / 3)


def _changepoints(*steps: int) -> list[Anomaly]:
    return [Anomaly("changepoint", "loss", 1, st, st, None, None) for st in steps]


def test_no_truths_and_no_detections_are_scored_as_ruptures_scores_them() -> None:
    from ruptures.metrics import precision_recall
    from ruptures.metrics.sanity_check import BadPartitions

    from forensics.evaluation.datasets import Truth

    truths = [Truth("changepoint", 1000, 1000), Truth("changepoint", 3000, 3000)]
    # where both are defined, the same numbers as ruptures (its breakpoint lists end with the signal's length)
    got = score("changepoint", _changepoints(1003, 5000), truths, margin=10)
    assert (got.precision, got.recall) == precision_recall([1000, 3000, 9000], [1003, 5000, 9000], margin=10) == (0.5, 0.5)
    # nothing detected: precision 0 and recall 0, not 1.0
    missed = score("changepoint", [], truths, margin=10)
    assert (missed.truths, missed.detections) == (2, 0)
    assert (missed.precision, missed.recall) == precision_recall([1000, 3000, 9000], [9000], margin=10) == (0, 0)
    # no truths: ruptures refuses (an empty partition is a BadPartitions, a recall over no breakpoints divides by
    # zero), and so does the recall here; precision is defined: every detection is a false alarm
    with pytest.raises(BadPartitions):
        precision_recall([], [1003, 9000])
    with pytest.raises(ZeroDivisionError):
        precision_recall([9000], [1003, 9000])
    nothing = score("changepoint", _changepoints(1003), [], margin=10)
    assert (nothing.truths, nothing.detections, nothing.false, nothing.precision) == (0, 1, 1, 0.0)
    with pytest.raises(ValueError, match=r"^no changepoint truths: recall is undefined"):
        nothing.recall  # noqa: B018
    empty = score("changepoint", [], [], margin=10)   # nothing to find, nothing found: still no recall to claim
    assert empty.precision == 0.0
    with pytest.raises(ValueError, match=r"^no changepoint truths"):
        empty.recall  # noqa: B018
    with pytest.raises(ValueError, match="margin -1: must be 0 or more steps"):
        score("changepoint", [], truths, margin=-1)


def test_scores_add_up_over_curves_of_one_kind() -> None:
    total = Score("nan")
    total.add(Score("nan", truths=2, found=1, detections=3, false=1))
    total.add(Score("nan", truths=1, found=1, detections=1))
    assert (total.truths, total.found, total.detections, total.false) == (3, 2, 4, 1)
    with pytest.raises(ValueError, match="cannot add loss_spike counts to nan counts"):
        total.add(Score("loss_spike"))


# --- precursors -----------------------------------------------------------------------------------------------------
def test_grad_norm_lead_is_measured() -> None:
    curve = generate("spikes_grad_lead", seed=2, log_interval=1)
    found = detect(run_frames(curve.metrics))
    checked = 0
    for truth in (t for t in curve.truths if t.kind == "loss_spike" and not t.optional):
        spike = next(a for a in found if a.kind == "loss_spike" and abs(a.step - truth.step) <= 5)
        assert spike.grad_norm_lead is not None and abs(spike.grad_norm_lead - truth.lead) <= 2
        assert any("grad-norm spike led it by" in p for p in spike.precursors)
        checked += 1
    assert checked >= 1


def test_loss_scale_collapse_before_divergence() -> None:
    curve = generate("fp16_collapse", seed=1, log_interval=1)
    found = detect(run_frames(curve.metrics))
    div = next(a for a in found if a.kind == "divergence")
    collapse = next(a for a in found if a.kind == "loss_scale_collapse")
    assert 0 < div.step - collapse.step < 30
    assert f"fp16 loss scale collapsed to 8 at step {collapse.step}, {div.step - collapse.step} steps before" \
        in div.precursors


def test_slow_grad_norm_drift_and_logit_growth_before_a_spike() -> None:
    rng = np.random.default_rng(0)
    steps = np.arange(1, 2001)
    loss = 3.0 * np.exp(rng.normal(0, 0.005, steps.size))
    loss[1500:1503] *= 1.5
    grad = np.exp(np.linspace(0.0, math.log(2.5), steps.size) + rng.normal(0, 0.05, steps.size))
    logit = np.linspace(50, 400, steps.size)
    found = detect(run_frames(frame({"loss": loss, "grad_norm": grad, "max_attention_logit": logit}, steps)))
    spike = next(a for a in found if a.kind == "loss_spike")
    assert spike.step == 1501
    assert any(p.startswith("grad norm had been drifting up before this: +") for p in spike.precursors)
    assert any(p.startswith("max_attention_logit grew") for p in spike.precursors)


def test_interval_averaged_spike_is_marked() -> None:
    """A spike is said to be a mean over the log interval only where the format says its losses are such means."""
    curve = generate("spikes", seed=0, log_interval=10)
    means = frozenset(curve.metrics["source"].unique().to_list())
    frames = RunFrames(curve.metrics, s.empty(s.EVENTS_SCHEMA), interval_means=means)
    spikes = [a for a in detect(frames) if a.kind == "loss_spike"]
    assert spikes and all(a.averaged_over == 10 for a in spikes)
    unknown = [a for a in detect(run_frames(curve.metrics)) if a.kind == "loss_spike"]
    assert unknown and all(a.averaged_over is None for a in unknown)


def test_opt_in_plateau_detector() -> None:
    curve = generate("plateau", seed=0, log_interval=1)
    truth = curve.truths[0]
    found = LossPlateauDetector().detect(run_frames(curve.metrics))
    assert len(found) == 1 and abs(found[0].step - truth.step) <= truth.margin
    assert found[0].detail.startswith("the loss stopped improving from step ")
    assert LossPlateauDetector().detect(run_frames(generate("clean", seed=0).metrics)) == []


# --- spike score and regimes ----------------------------------------------------------------------------------------
def test_olmo_spike_score() -> None:
    steps = np.arange(1, 3001)
    rng = np.random.default_rng(1)
    loss = 2.5 + rng.normal(0, 0.01, steps.size)
    loss[[1000, 2000, 2500]] = 5.0  # three 250-sigma spikes among 2,900 scored points
    scores = spike_scores(frame({"loss": loss}, steps), "loss")
    assert scores["run"] == pytest.approx(100 * 3 / 2900, abs=1e-4)
    assert scores["attempts"] == {"1": scores["run"]}
    assert spike_scores(frame({"loss": loss[:150]}, steps[:150]), "loss")["run"] is None  # 50 scored points: none


def test_throughput_drop_is_a_changepoint() -> None:
    steps = np.arange(1, 5001)
    rng = np.random.default_rng(2)
    ms = 900 * np.exp(rng.normal(0, 0.02, steps.size))
    ms[3200:] *= 1.6
    found = RegimeShiftDetector("iteration_time_ms").detect(run_frames(frame({"iteration_time_ms": ms}, steps)))
    assert len(found) == 1 and abs(found[0].step - 3201) <= 5
    assert found[0].detail.startswith("iterations got slower (throughput drop): ")
    faster = RegimeShiftDetector("iteration_time_ms").detect(run_frames(frame({"iteration_time_ms": ms[::-1]}, steps)))
    assert faster == []  # getting faster is not an anomaly


# --- real spikes ----------------------------------------------------------------------------------------------------
def test_real_tr8_spikes_pinned() -> None:
    run = forensics.analyze(load_run(real("tr8-104B-wide_chronicles"))).runs[0]
    got = {(a.attempt, a.kind, a.step) for a in run.anomalies}
    # iterations 7000-7010: the loss jumps from 6.44 to 11.42 and stays up
    assert {(1, "loss_spike", 7010), (1, "divergence", 7010)} <= got
    # iterations 11446-11448: grad norm 12952 -> 262623 at 11447, loss 3.11 -> 7.71 one step later
    assert {(2, "grad_norm_spike", 11447), (2, "loss_spike", 11448)} <= got
    lead = next(a for a in run.anomalies if (a.attempt, a.kind, a.step) == (2, "loss_spike", 11448))
    assert lead.grad_norm_lead == 1
    # Experiment 12, 8738-8743: grad norm spikes at 8740, loss at 8741; it diverges into NaN at 9027
    assert {(3, "grad_norm_spike", 8740), (3, "loss_spike", 8741), (3, "nan", 9027)} <= got
    div = next(a for a in run.anomalies if a.kind == "divergence" and a.attempt == 3)
    assert div.end_step == 9027 and "ends in NaN at step 9027" in div.detail
    assert next(a for a in run.anomalies if (a.attempt, a.kind) == (3, "loss_spike")).grad_norm_lead == 1


def test_real_tr1_13b_spike_around_29050() -> None:
    run = forensics.analyze(load_run(real("tr1-13B"))).runs[0]
    spike = next(a for a in run.anomalies if a.kind == "loss_spike")
    assert (spike.step, spike.end_step, spike.averaged_over) == (29050, 29090, 10)  # still 2.5x its level at 29090
    # the excerpt stops at 29090 still high; the next one, at 33240, shows 2.72: what happened in between is not
    # in the log, so neither a recovery nor a divergence is claimed
    assert spike.recovered_step is None
    assert spike.detail.endswith("not seen again until step 33240, after a gap (no data between steps 29090 and "
                                 "33240), where it was at its level")
    assert not any(a.kind == "divergence" for a in run.anomalies)


def test_rollback_recurrence_is_evidence() -> None:
    run = forensics.analyze(load_run(Path(__file__).parents[1] / "sample_logs" / "tr8-104B-sample")).runs[0]
    causes = [c for c in run.suspected_causes if c.cause.startswith("optimizer or model state")]
    assert causes[0].cause.endswith("the trouble came sooner (step 6930 vs 7010)")
    assert "attempt 2 rolled back to step 6210 with a new seed (42 → 43) and hit loss spike at step 6930" \
        in causes[0].evidence


def test_judged_counts_belong_to_their_settings() -> None:
    """A tuned detector run beside the default one does not add its counts to the default's."""
    steps = np.arange(1, 401)
    rng = np.random.default_rng(0)
    values = 2 + 0.01 * rng.standard_normal(400)
    frames = RunFrames(frame({s.LOSS: values}, steps), s.empty(s.EVENTS_SCHEMA))
    assert SpikeDetector("loss").judged(frames) == {1: 390}   # 400 points, the first 10 are the burn-in
    SpikeDetector("loss", threshold=5.0).detect(frames)
    assert SpikeDetector("loss").judged(frames) == {1: 390}


def test_attempts_are_judged_alone_when_scored_together() -> None:
    """The spike detector scores every attempt in one pass (a log that restarts every few lines has thousands):
    each attempt's incidents, blips and counts are those it gets when it is the only one, whatever the attempts
    before it (a jump at the end of one attempt does not carry into the next one's absolute checks)."""
    rng = np.random.default_rng(7)
    parts, steps0 = [], 0
    for attempt in range(1, 81):  # more stretches than are computed one by one
        n = 300 if attempt % 10 == 0 else 12  # long ones get a tail fit, short ones the absolute checks
        loss = 3.0 * np.exp(rng.standard_t(4, n) * 0.01)
        if attempt % 10 == 0:
            loss[200:203] *= 1.5
        if attempt % 7 == 0:
            loss[-2:] *= 3.0  # a jump at the very end of a short attempt, just before the next one begins
        if attempt % 7 == 1 and attempt > 1:  # and a 2x rise soon after in the next, to no new high: no onset
            loss[:6] = [3.0, 3.0, 3.0, 3.0, 1.4, 2.9]
        parts.append(frame({"loss": loss}, np.arange(steps0, steps0 + n), attempt))
        steps0 += n - 5  # each attempt rolls back a few steps
    together = run_frames(pl.concat(parts))
    det = SpikeDetector("loss")
    found = det.incidents(together)
    assert {i.attempt for i in found} >= {10, 20, 30, 7, 14}
    for attempt in range(1, 81):
        alone = run_frames(parts[attempt - 1])
        assert [i for i in found if i.attempt == attempt] == det.incidents(alone), attempt
        assert [b for b in det.blips(together) if b.attempt == attempt] == det.blips(alone), attempt
        for what in (det.judged, det.unknown, det.largest_rises):
            assert what(together).get(attempt) == what(alone).get(attempt), (attempt, what.__name__)


def test_deepspeeds_overflow_lines_and_its_running_count_are_the_same_skips() -> None:
    """DeepSpeed prints an `OVERFLOW! ... Skipping step` line and counts the skip in its next `step=N, skipped=M`
    line: five skips at steps 2401-2405 are five, not ten."""
    rows = [{"kind": s.EV_SKIPPED_COUNT, "step": 2400, "value": 0.0}, {"kind": s.EV_SKIPPED_COUNT, "step": 2500,
                                                                        "value": 5.0}]
    rows += [{"kind": s.EV_OVERFLOW, "step": step, "value": 2.0 ** (10 - step + 2400)} for step in range(2401, 2406)]
    events = s.conform(pl.DataFrame(rows).with_columns(run=pl.lit("t"), source=pl.lit("t"), attempt=pl.lit(1)),
                       s.EVENTS_SCHEMA)
    metrics = frame({"loss": np.full(200, 2.0)}, np.arange(2350, 2550))
    [found] = [a for a in detect(RunFrames(metrics, events)) if a.kind == "skipped_iterations"]
    assert (found.value, found.detail) == (
        5, "5 iterations skipped (fp16 overflow) between steps 2401 and 2500 (DeepSpeed's running count: skipped=5 at "
           "step=2500)")


def test_loss_above_chance_waits_for_the_fresh_models_spread_only_at_the_start_of_training() -> None:
    """bigscience meg_ds_3d_gpt2_perf_n16 (hidden 8192, std 0.02, vocab 50688) logged 12.79 and 12.80 at steps 1-2, a
    fresh model's loss (10.83 + 1.64): no anomaly; the same values at steps 5001-5002 (not the start of training) are
    one, and so are they where the spread is not known."""
    from forensics.detectors.chance import LossAboveChanceDetector
    from forensics.model_shape import init_spread

    spread = init_spread({"hidden_size": 8192, "init_method_std": 0.02})
    detector = LossAboveChanceDetector(50688, init_spread=spread)

    def frames(steps: list[int], values: tuple[float, float] = (12.79022, 12.80042)) -> RunFrames:
        m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": steps, "metric": "loss",
                                    "value": list(values), "wall_time": None}), s.METRICS_SCHEMA)
        return RunFrames(m, s.empty(s.EVENTS_SCHEMA))

    assert detector.detect(frames([1, 2])) == []
    # a point past the fresh model's spread is one, even at the start (ln(50688) + 1.64 + 1 = 13.47)
    [jump] = detector.detect(frames([1, 2], (12.79022, 41.03157)))
    assert (jump.step, jump.value) == (2, 41.03157) and "freshly initialised model" in jump.detail
    [late] = detector.detect(frames([5001, 5002]))
    assert (late.step, late.end_step) == (5001, 5002) and "worse than guessing every token uniformly" in late.detail
    # with no hidden size known (or an init std that is no small-init value), nothing is assumed of a fresh model
    [unknown] = LossAboveChanceDetector(50688).detect(frames([1, 2]))
    assert (unknown.step, unknown.end_step) == (1, 2)
    assert init_spread({"hidden_size": 8192, "init_method_std": 0.9}) is None
