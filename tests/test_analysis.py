"""Attempts, rollbacks, config changes, detectors and the model check on real logs and the bundled samples."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import SAMPLES, real

import forensics
import reports
from forensics.detectors import RunFrames, SpikeDetector
from forensics.model_shape import parameters_from_shape, stated_parameters
from parsers import load_run


@pytest.fixture(scope="module")
def tr8_sample():
    return forensics.analyze(load_run(SAMPLES / "tr8-104B-sample")).runs[0]


def kinds_at(run, attempt: int) -> dict[str, int]:
    return {a.kind: a.step for a in run.anomalies if a.attempt == attempt}


def test_sample_attempts_rollbacks_and_config_changes(tr8_sample):
    a = tr8_sample.attempts
    assert [x.index for x in a] == [1, 2, 3]
    assert [x.resumed_from_step for x in a] == [None, 6210, 3000]
    assert [x.rollback for x in a] == [False, True, True]
    assert a[1].config_changes == {"seed": [42, 43]}
    assert a[2].config_changes == {"adam_beta2": [0.999, 0.95]}
    assert [x.end_reason for x in a] == ["nan", "nan", "diverged"]
    # their overflows skipped some iterations, not every one: each took steps
    assert [x.all_skipped for x in a] == [None, None, None]


def test_sample_anomalies_at_the_right_steps(tr8_sample):
    first = kinds_at(tr8_sample, 1)
    assert first["loss_spike"] == 7010 and first["grad_norm_spike"] == 7010
    assert first["nan"] == 7320 and first["divergence"] == 7010
    assert kinds_at(tr8_sample, 2)["loss_spike"] == 6930
    assert kinds_at(tr8_sample, 3)["divergence"] == 4960


def test_sample_model_is_called_out(tr8_sample):
    m = tr8_sample.model
    assert m.parameters_stated == 104e9
    # PP=32 with tied embeddings: the last stage holds a second copy of the 0.83B word embeddings
    assert m.parameters_from_shape == pytest.approx(57_534_480_384)
    assert m.shape["parameters_unique"] == pytest.approx(56_704_008_192)
    assert m.notes[0] == ("this is a ~58B model, not 104B: ffn_hidden_size 20480 is 1.25x hidden (expected 65536)")
    # without its word and position embeddings it is 55.84B: the name matches neither count
    assert m.parameters_non_embedding == 56_704_008_192 - (50688 + 2048) * 16384
    assert (m.size_mismatch, m.name_matches) == (True, "")
    assert m.notes[1] == ("init_method_std 0.02 is 4.0x the small-init value sqrt(2/(5·hidden)) = 0.0049 for hidden 16384")
    # a setup finding with its own section and headline, never ranked as the cause of a NaN
    assert tr8_sample.setup[0] == m.notes[0]
    assert not [c for c in tr8_sample.suspected_causes if "shape" in c.cause or "init" in c.cause]


def test_clean_sample_has_no_anomalies():
    run = forensics.analyze(load_run(SAMPLES / "clean-1.3B")).runs[0]
    assert run.anomalies == []
    assert [a.end_reason for a in run.attempts] == ["completed"]
    assert run.suspected_causes == []
    assert run.model.parameters_from_shape == pytest.approx(run.model.parameters_logged, rel=0.01)


def test_real_clean_qwen_run_has_one_grad_norm_doubling_and_matching_size():
    run = forensics.analyze(load_run(real("qwen7b_baseline"))).runs[0]
    # its one anomaly: the grad norm doubled for two iterations in a series calm to 3% (20.466, 44.296, 43.256, 18.727
    # at iterations 17-20), below the 3x a lone point needs, and a grad norm that doubles and stays is material
    assert [(a.kind, a.step, a.end_step, a.value) for a in run.anomalies] == [("grad_norm_spike", 18, 19, 44.296)]
    assert run.attempts[0].end_reason == "completed"
    assert run.model.parameters_from_shape == pytest.approx(7616100352, rel=0.001)  # GQA, SwiGLU, untied, RoPE


def test_tr8_chronicle_spikes_and_experiment_12_nan():
    run = forensics.analyze(load_run(real("tr8-104B-wide_chronicles"))).runs[0]
    assert kinds_at(run, 1)["loss_spike"] == 7010
    assert kinds_at(run, 1)["divergence"] == 7010  # 7220 is still 7.16, above the 6.44 before the spike
    third = kinds_at(run, 3)
    # 65536 at 8743, then a hole in the log, 16384 at 9026 and 8192 at 9027: no overflows "in a row" to speak of
    assert third["nan"] == 9027 and "loss_scale_collapse" not in third
    assert run.attempts[2].end_reason == "nan"
    assert [a.rollback for a in run.attempts] == [False, True, True]


def test_tr8_experiment_12_grad_norm_spike_leads_the_loss():
    run = load_run(real("tr8-104B-wide_chronicles"))
    frames = RunFrames(run.metrics, run.events)
    gn = {a.step: a.value for a in SpikeDetector("grad_norm").detect(frames) if a.attempt == 3}
    loss = {a.step: a.value for a in SpikeDetector("loss").detect(frames) if a.attempt == 3}
    assert gn == {8740: pytest.approx(3273877.676)}  # onset 8740, peak 8741
    assert min(loss) == 8741


def test_tr8_experiment_12_lead_and_warning_quote_the_logged_grad_norm():
    """Iteration 8740 logs "grad norm: 1490753.218", 8741 "lm loss: 7.267764E+00 | ... | grad norm: 3273877.676": the
    grad norm's lead quoted the peak (8741's) as step 8740's value, and the warning was missing (the spike still up
    at the blow-up) or read "1 steps ahead"."""
    run = forensics.analyze(load_run(real("tr8-104B-wide_chronicles"))).runs[0]
    [spike] = [a for a in run.anomalies if a.attempt == 3 and a.kind == "loss_spike"]
    assert "a grad-norm spike led it by 1 step (step 8740: 1490753.218, from 89608.482; its peak 3273877.676)" in (
        spike.precursors)
    [div] = [a for a in run.anomalies if a.attempt == 3 and a.kind == "divergence"]
    assert div.step == 8741 and (div.warning["step"], div.warning["lead_steps"]) == (8740, 1)
    assert div.warning["signals"] == [{"kind": "unrecovered_grad_norm_spike", "step": 8740, "detail": (
        "a grad-norm spike at step 8740 (1490753.218, from 89608.482) not back to its level before the blow-up")}]
    assert ("  - **warning 1 step ahead:** a grad-norm spike at step 8740 (1490753.218, from 89608.482) not back to "
            "its level before the blow-up") in reports.markdown._anomaly_line(div)


def test_tr1_13b_spike_and_loss_scale_collapse():
    run = forensics.analyze(load_run(real("tr1-13B"))).runs[0]
    spikes = [a for a in run.anomalies if a.kind == "loss_spike"]
    assert spikes[0].step == 29050 and spikes[0].value == pytest.approx(8.715872)
    collapse = next(a for a in run.anomalies if a.kind == "loss_scale_collapse")
    assert (collapse.step, collapse.value, collapse.baseline) == (29050, 4096.0, 65536.0)


@pytest.mark.parametrize(("name", "nan_steps", "last_step"), [
    ("issue396", (5426, 5428), 5429),   # 5426-5428 print "grad norm: nan" and no lm loss; 5429 is cut short
    ("pr434", (9, 9), 9),               # the one line, iteration 9, has no lm loss
    ("pr34", (3633, 3634), 3634),       # 3633 has no lm loss; "Bad grad_norm", printed after it, is about 3634
                                        # (the skipped step), not 3633, whose grad norm was 0.794
    ("issue33", (3385, 3385), 3385),    # 3383 and 3384 log a loss, 3385 none
])
def test_bf16_nan_excerpts_end_in_nan(name, nan_steps, last_step):
    run = forensics.analyze(load_run(real(name))).runs[0]
    assert [(a.end_reason, a.end_at_step) for a in run.attempts] == [("nan", last_step)]
    assert [(a.kind, a.metric, a.attempt, a.step, a.end_step) for a in run.anomalies] == [("nan", "loss", 1, *nan_steps)]


def test_fp16_startup_skips_are_not_nan():
    run = forensics.analyze(load_run(real("meg_gpt2_base_n4"))).runs[0]
    assert not [a for a in run.anomalies if a.kind == "nan"]
    ended = run.attempts[0]  # the job was cancelled: the first decisive line after the last iteration, quoted
    assert (ended.end_reason, ended.end_kind) == ("stopped", "cancelled")
    assert ended.end_detail == "srun: Job step aborted: Waiting up to 62 seconds for job step to finish."


def test_config_diff_leaves_out_bookkeeping():
    from forensics.configs import config_changes

    assert config_changes({"seed": 1, "save": "/a", "load": "/a"}, {"seed": 2, "save": "/b", "load": "/b"}) == {
        "seed": [1, 2]
    }


def test_stated_parameters():
    assert stated_parameters("tr8-104B-wide") == 104e9
    assert stated_parameters("runs/qwen-7b_baseline") == 7e9
    assert stated_parameters("runs/qwen7b_baseline") is None  # "7b" inside a word is not a size
    assert stated_parameters("bigscience__train_tr8b-104B_chronicles") == 104e9  # not the 8b of "tr8b"
    assert stated_parameters("gpt-350m") == 350e6
    assert stated_parameters("meg_gpt2_base_n4_dp1") is None


def test_parameters_from_shape_gpt3_175b():
    cfg = {"num_layers": 96, "hidden_size": 12288, "num_attention_heads": 96, "max_position_embeddings": 2048}
    total, _ = parameters_from_shape(cfg, vocab=50257)
    assert total == pytest.approx(175e9, rel=0.01)


def test_metrics_frame_is_long_form_and_canonical():
    run = load_run(SAMPLES / "clean-1.3B")
    assert run.metrics.columns == ["run", "source", "attempt", "step", "metric", "value", "wall_time"]
    assert {"loss", "grad_norm", "lr", "loss_scale", "iteration_time_ms", "batch_size"} <= set(
        run.metrics["metric"].unique().to_list()
    )
    assert run.metrics.filter(pl.col("metric") == "loss").height == 3000
