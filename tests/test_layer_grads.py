"""Per-layer grad norms (issue 21): recognised in the canonical frames, a layer group's rising share found with its
onset, joined to a divergence's warning and causes, the layer where a spike starts, and silence on clean noise."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

import reports
from forensics.analysis import analyze_run
from forensics.detectors.base import RunFrames
from forensics.detectors.layer_grads import spike_origins
from forensics.findings import Anomaly, Findings, Kind
from parsers import schema as s
from parsers.metric_names import canonical
from parsers.run import Run

LAYERS = 6
PARAMS = {  # OLMo's W&B names (optim/grad/<param>.norm) and their levels
    "transformer.wte.weight": 0.4,
    **{f"transformer.blocks.{i}.att_proj.weight": 0.3 for i in range(LAYERS)},
    **{f"transformer.blocks.{i}.ff_proj.weight": 0.5 for i in range(LAYERS)},
    "transformer.ff_out.weight": 0.6,
}


def _run(n: int, seed: int, embedding: np.ndarray | None = None, spike_at: dict[str, int] | None = None,
         diverge_at: int | None = None) -> Run:
    """A run as a W&B or TensorBoard reader would give it: each tag through ``canonical``; per-layer norms with
    heavy-tailed noise, x exp(0.1 t) for Student-t(3) t clipped at +-8 (up to 2.2x either way: no lone point is a
    grad-norm spike of its own), the global grad norm their sqrt-sum-of-squares."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    columns: dict[str, np.ndarray] = {}
    for param, level in PARAMS.items():
        v = level * np.exp(0.1 * np.clip(rng.standard_t(3, n), -8, 8))
        if embedding is not None and "wte" in param:
            v = v * embedding
        for name, step in (spike_at or {}).items():
            if name in param:
                v[step - 1:step + 2] *= 40.0
        columns[f"optim/grad/{param}.norm"] = v
    columns["optim/total_grad_norm"] = np.sqrt(sum(v ** 2 for v in columns.values()))
    loss = 2.5 + 1.5 * np.exp(-steps / 800) + 0.02 * rng.standard_t(3, n)
    if diverge_at is not None:
        loss = np.where(steps >= diverge_at, loss + (steps - diverge_at) * 0.02, loss)
    columns["train/loss"] = loss
    frames = [pl.DataFrame({"step": steps, "value": v, "metric": canonical(tag)[0]}) for tag, v in columns.items()]
    metrics = s.conform(pl.concat(frames).with_columns(run=pl.lit("gen"), source=pl.lit("gen"), attempt=1),
                        s.METRICS_SCHEMA)
    tags = [{"source": "gen", "tag": t, "metric": canonical(t)[0]} for t in columns]
    return Run("gen", "gen", metrics, s.empty(s.EVENTS_SCHEMA), s.empty(s.CONFIGS_SCHEMA), tags=tags)


def _ratios(findings) -> list:
    return [a for a in findings.anomalies if a.kind == Kind.GRAD_NORM_RATIO]


def test_tags_become_per_layer_series_and_never_the_global_grad_norm():
    assert canonical("optim/grad/transformer.blocks.3.att_proj.weight.norm")[0] == \
        "grad_norm/attention/3/transformer.blocks.3.att_proj.weight"
    assert canonical("grad_norm/layer_3")[0] == "grad_norm/block/3/layer_3"
    assert canonical("grad_norm/embedding")[0] == "grad_norm/embedding/-/embedding"
    assert canonical("grad_norm/model.layers.5.mlp.down_proj.weight")[0].startswith("grad_norm/mlp/5/")
    assert canonical("optim/grad/transformer.ln_f.weight.norm")[0] == "grad_norm/norm/-/transformer.ln_f.weight"
    # the global norm keeps its name; statistics other than the norm are not norms
    assert [canonical(t)[0] for t in ("grad_norm", "train/grad_norm", "grad-norm/grad-norm", "optim/total_grad_norm")] \
        == ["grad_norm"] * 4
    assert canonical("optim/grad/transformer.wte.weight.max")[0] == "optim/grad/transformer.wte.weight.max"
    # with no global grad norm logged, no per-layer one takes its role
    run = _run(600, 1)
    run.metrics = run.metrics.filter(pl.col("metric") != s.GRAD_NORM)
    found = analyze_run(run)
    assert s.GRAD_NORM not in found.coverage["metrics"] and s.GRAD_NORM not in found.coverage["roles"]


def test_embedding_share_rising_before_a_divergence_is_found_and_warns():
    n = 4000
    steps = np.arange(1, n + 1)
    embedding = np.where(steps > 3000, np.exp((steps - 3000) / 150), 1.0)  # 3x by ~3165, 55x by 3600
    found = analyze_run(_run(n, 7, embedding=embedding, diverge_at=3600))
    ratios = _ratios(found)
    drift = [a for a in ratios if a.metric == "grad_norm/embedding/-" and "median of the other" in a.detail]
    assert len(drift) == 1 and drift[0].step == 3024, [(a.metric, a.step, a.detail) for a in ratios]
    divergence = next(a for a in found.anomalies if a.kind == Kind.DIVERGENCE)
    assert divergence.step == 3612
    signal = next(x for x in divergence.warning["signals"] if x["kind"] == "grad_norm_ratio")
    assert signal["step"] == 3024 and divergence.step - signal["step"] == 588
    cause = next(c for c in found.suspected_causes if c.kind == "layer_grads")
    assert "581 steps before the loss spike at step 3605" in cause.evidence[0]


def test_clean_heavy_tailed_run_with_per_layer_norms_has_no_finding():
    for seed in range(3):
        found = analyze_run(_run(10_000, seed))
        assert _ratios(found) == [], [a.detail for a in _ratios(found)]
        assert not [c for c in found.suspected_causes if c.kind == "layer_grads"]


def test_the_layer_where_a_spike_starts():
    # layer 2's MLP spikes 40x at step 1500, two steps before every other group; the global norm spikes with it
    run = _run(3000, 3, spike_at={"blocks.2.ff_proj": 1500})
    found = analyze_run(run)
    origin = [a for a in _ratios(found) if "grad norm spike" in a.detail]
    assert [(a.metric, a.step, a.end_step) for a in origin] == [("grad_norm/mlp/2", 1500, 1500)], \
        [a.detail for a in _ratios(found)]
    assert "only the mlp 2 grad norm departed" in origin[0].detail


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_reports_carry_the_findings(fmt):
    n = 4000
    steps = np.arange(1, n + 1)
    embedding = np.where(steps > 3000, np.exp((steps - 3000) / 150), 1.0)
    found = analyze_run(_run(n, 7, embedding=embedding, diverge_at=3600))
    text = reports.render(Findings([found]), fmt)
    if fmt == "json":
        kinds = [a["kind"] for a in json.loads(text)["runs"][0]["anomalies"]]
        assert "grad_norm_ratio" in kinds
    else:
        assert "## Layer gradients and clipping" in text and "embedding grad norm rose" in text


def test_heatmap_beside_the_chronicle_is_deterministic(tmp_path):
    from forensics.analysis import Analysis

    n = 4000
    steps = np.arange(1, n + 1)
    embedding = np.where(steps > 3000, np.exp((steps - 3000) / 150), 1.0)
    run = _run(n, 7, embedding=embedding, diverge_at=3600)
    analysis = Analysis(Findings([analyze_run(run)]), {run.name: run.metrics})
    first = reports.write(analysis, tmp_path / "a" / "r.md")
    second = reports.write(analysis, tmp_path / "b" / "r.md")
    heat = [p for p in first if p.name.endswith("-layer_grads.png")]
    assert len(heat) == 1 and heat[0].read_bytes()[:4] == b"\x89PNG"
    assert heat[0].read_bytes() == next(p for p in second if p.name.endswith("-layer_grads.png")).read_bytes()
    text = first[0].read_text()
    assert "## Layer gradients and clipping" in text
    assert ("Read 14 per-layer grad-norm series (56,000 points) as 14 layer groups: embedding, attention 0, mlp 0, "
            "attention 1, mlp 1") in text
    assert "grad\\_norm/attention/0/" not in text  # not among the scalars checked for NaN/Inf only
    coverage = analysis.findings.runs[0].coverage
    assert coverage["layer_grad_norms"]["series"] == 14 and coverage["layer_grad_norms"]["units"][-1] == "head"
    assert not [m for m in coverage["other_scalars"] if m.startswith("grad_norm/")]
    assert "![grad norm by layer and step](r_files/gen-layer_grads.png)" in text


def test_a_tensorboard_file_of_per_parameter_norms_is_read_as_layer_series(tmp_path):
    import tb_writer as tb

    import parsers

    tags = ["optim/grad/transformer.wte.weight.norm", "optim/grad/transformer.blocks.0.att_proj.weight.norm",
            "optim/grad/transformer.blocks.0.att_proj.weight.max", "optim/total_grad_norm", "train/loss"]
    records = [tb.scalar(tag, 1.0 + step / 100, step) for step in range(1, 31) for tag in tags]
    tb.write(tmp_path / "events.out.tfevents.1.host", tb.version(), *records)
    run = parsers.load_run(tmp_path)
    names = sorted(run.metrics["metric"].unique().cast(pl.String).to_list())
    assert names == ["grad_norm", "grad_norm/attention/0/transformer.blocks.0.att_proj.weight",
                     "grad_norm/embedding/-/transformer.wte.weight", "loss",
                     "optim/grad/transformer.blocks.0.att_proj.weight.max"]


# --- clipping (issue 21, part 2) -----------------------------------------------------------------------------------


def _clip_run(grad: np.ndarray, clip: float | None, diverge_at: int | None = None, seed: int = 0) -> Run:
    """A run with a global grad norm (no per-layer norms), its loss, and ``clip_grad`` in its config."""
    rng = np.random.default_rng(seed)
    n = grad.size
    steps = np.arange(1, n + 1)
    loss = 2.5 + 1.5 * np.exp(-steps / 800) + 0.02 * np.clip(rng.standard_t(3, n), -8, 8)
    if diverge_at is not None:
        loss = np.where(steps >= diverge_at, loss + (steps - diverge_at) * 0.02, loss)
    metrics = s.conform(pl.concat([
        pl.DataFrame({"step": steps, "value": grad, "metric": s.GRAD_NORM}),
        pl.DataFrame({"step": steps, "value": loss, "metric": s.LOSS}),
    ]).with_columns(run=pl.lit("gen"), source=pl.lit("gen"), attempt=1), s.METRICS_SCHEMA)
    configs = s.empty(s.CONFIGS_SCHEMA) if clip is None else s.conform(pl.DataFrame({
        "run": ["gen"], "source": ["gen"], "attempt": [1], "key": ["clip_grad"], "value": [str(clip)],
        "typed": [json.dumps(clip)]}), s.CONFIGS_SCHEMA)
    return Run("gen", "gen", metrics, s.empty(s.EVENTS_SCHEMA), configs)


def _noise(n: int, seed: int, level: float = 0.3) -> np.ndarray:
    return level * np.exp(0.15 * np.clip(np.random.default_rng(seed).standard_t(3, n), -8, 8))


def _clipping(found) -> list:
    return [a for a in found.anomalies if a.kind == Kind.CLIPPING]


def test_sustained_clipping_before_a_divergence_is_a_precursor_with_its_lead():
    n = 3000
    steps = np.arange(1, n + 1)
    grad = _noise(n, 11) * np.where(steps > 2000, 5.0, 1.0)  # from step 2001 above the threshold 1.0 at most steps
    found = analyze_run(_clip_run(grad, 1.0, diverge_at=2600, seed=11))
    sustained = [a for a in _clipping(found) if a.metric == s.CLIPPED_SHARE]
    assert [(a.step, a.end_step) for a in sustained] == [(2001, 3000)], [a.detail for a in _clipping(found)]
    assert sustained[0].baseline == 0.0 and sustained[0].value > 0.8
    divergence = next(a for a in found.anomalies if a.kind == Kind.DIVERGENCE)
    signal = next(x for x in divergence.warning["signals"] if x["kind"] == "sustained_clipping")
    assert divergence.step == 2605 and signal["step"] == 2001 and divergence.step - signal["step"] == 604
    # the grad-norm rise (forensics.warning) is the earliest signal: the 5x step at 2001 read as rising from step
    # 1997 (from 1888 before the break was fitted: 113 steps before anything happened)
    assert divergence.warning["lead_steps"] == 608
    cause = next(c for c in found.suspected_causes if c.kind == "clipping")
    assert "it began 604 steps before the loss spike at step 2605" in cause.evidence[0]


def test_a_spike_far_through_the_threshold_and_the_what_if():
    n = 3000
    grad = _noise(n, 5)
    grad[1499] = 15.0  # ~50x the usual 0.31: 15x the threshold 1.0, clipped to 1.0 = 3.2x the usual level
    found = analyze_run(_clip_run(grad, 1.0, diverge_at=2600, seed=5))
    far = [a for a in _clipping(found) if a.metric == s.GRAD_NORM]
    assert [(a.step, a.end_step, a.value, a.baseline) for a in far] == [(1500, 1500, 15.0, 1.0)]
    assert "1 logged step with a grad norm 10x the clip threshold 1 or more: step 1500 (15, 15x)" in far[0].detail
    # the threshold held the spike within 10x the usual level: nothing to suggest
    assert not [c for c in found.suspected_causes if c.kind == "clip_threshold"]
    # a loose threshold (10: 32x the usual level) let most of it through: the what-if says what one that adapts does
    loose = analyze_run(_clip_run(grad, 10.0, diverge_at=2600, seed=5))
    assert _clipping(loose) == []  # 15 is not 10x a threshold of 10
    what_if = next(c for c in loose.suspected_causes if c.kind == "clip_threshold")
    assert what_if.evidence == [
        "attempt 1, step 1500: grad norm 15 (49x its trailing median 0.31), clipped to the threshold 10 (32.4x the "
        "trailing median); a threshold of 3x the trailing median would have capped it at 0.93, ZClip's z-score rule "
        "(z 2.5 on an EMA) at 0.65 (what-if from the logged norms, not what happened)"]
    unclipped = analyze_run(_clip_run(grad, 20.0, diverge_at=2600, seed=5))
    assert "under the clip threshold 20, so not clipped" in \
        next(c for c in unclipped.suspected_causes if c.kind == "clip_threshold").evidence[0]


def test_no_clipping_finding_on_a_clean_run_or_without_a_threshold():
    for seed in range(3):
        found = analyze_run(_clip_run(_noise(10_000, seed), 1.0, seed=seed))
        assert _clipping(found) == [], [a.detail for a in _clipping(found)]
    grad = _noise(3000, 5)
    grad[1499] = 15.0
    assert _clipping(analyze_run(_clip_run(grad, None, diverge_at=2600, seed=5))) == []
    # a run that clips every step (its grad norm 20x its threshold throughout) has no onset and no 10x event
    assert _clipping(analyze_run(_clip_run(_noise(3000, 4, level=20.0), 1.0, seed=4))) == []


def test_a_slow_wander_every_layer_group_shares_is_not_a_drift():
    """Each group's share wanders slowly (AR(1), phi 0.999, sd 0.2 in log: its running low to a later high reaches 3x
    over 20,000 steps), every group alike: no group drifted out of proportion to the others."""
    from scipy.signal import lfilter

    from forensics.detectors.base import RunFrames
    from forensics.detectors.layer_grads import LayerGradDetector

    n, phi, sd = 20_000, 0.999, 0.2
    for seed in range(3):
        rng = np.random.default_rng(seed)
        frames = []
        for param in PARAMS:
            wander = lfilter([1.0], [1.0, -phi], rng.standard_normal(n) * sd * np.sqrt(1 - phi ** 2))
            v = PARAMS[param] * np.exp(wander + 0.1 * np.clip(rng.standard_t(3, n), -8, 8))
            frames.append(pl.DataFrame({"step": np.arange(1, n + 1), "value": v,
                                        "metric": canonical(f"optim/grad/{param}.norm")[0]}))
        m = s.conform(pl.concat(frames).with_columns(run=pl.lit("r"), source=pl.lit("x"), attempt=1), s.METRICS_SCHEMA)
        assert LayerGradDetector().detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA))) == []


def test_nothing_is_compared_across_a_hole_in_the_log():
    # the embedding's level is 5x after a hole of 10,000 unlogged steps: no drift is measured across it
    steps = np.arange(1, 4001)
    run = _run(4000, 2, embedding=np.where(steps > 2000, 5.0, 1.0))
    run.metrics = run.metrics.with_columns(
        step=pl.when(pl.col("step") > 2000).then(pl.col("step") + 10_000).otherwise(pl.col("step")))
    found = analyze_run(run)
    assert [g.before_step for g in found.gaps] == [12001]
    assert _ratios(found) == []
    # the same levels without the hole: the embedding's share rose 5x at step 2001 (found at 1998)
    assert [(a.metric, a.step) for a in _ratios(analyze_run(_run(4000, 2, embedding=np.where(steps > 2000, 5.0, 1.0))))] \
        == [("grad_norm/embedding/-", 1998)]


# --- logit growth (issue 21, part 3) -------------------------------------------------------------------------------


def _logit_run(n: int, seed: int, metric: str, growth: np.ndarray, diverge_at: int | None = None) -> Run:
    """Loss, global grad norm and one logit series (``metric``: level 12, heavy-tailed noise, times ``growth``)."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    loss = 2.5 + 1.5 * np.exp(-steps / 800) + 0.02 * np.clip(rng.standard_t(3, n), -8, 8)
    if diverge_at is not None:
        loss = np.where(steps >= diverge_at, loss + (steps - diverge_at) * 0.02, loss)
    logit = 12.0 * np.exp(0.1 * np.clip(rng.standard_t(3, n), -8, 8)) * growth
    metrics = s.conform(pl.concat([
        pl.DataFrame({"step": steps, "value": loss, "metric": s.LOSS}),
        pl.DataFrame({"step": steps, "value": _noise(n, seed), "metric": s.GRAD_NORM}),
        pl.DataFrame({"step": steps, "value": logit, "metric": metric}),
    ]).with_columns(run=pl.lit("gen"), source=pl.lit("gen"), attempt=1), s.METRICS_SCHEMA)
    return Run("gen", "gen", metrics, s.empty(s.EVENTS_SCHEMA), s.empty(s.CONFIGS_SCHEMA))


def test_attention_logit_growth_before_a_divergence_warns_with_its_lead():
    assert canonical("train/ZLoss")[0] == s.Z_LOSS and canonical("max_attention_logit")[0] == s.MAX_ATTENTION_LOGIT
    assert canonical("val/z_loss")[0] == "val/z_loss"  # a validation z-loss is not the training one
    n = 4000
    steps = np.arange(1, n + 1)
    growth = np.where(steps > 2000, np.exp((steps - 2000) / 720), 1.0)  # 8x by step 3500
    found = analyze_run(_logit_run(n, 3, s.MAX_ATTENTION_LOGIT, growth, diverge_at=3500))
    logits = [a for a in found.anomalies if a.kind == Kind.LOGIT_GROWTH]
    assert [(a.metric, a.step) for a in logits] == [(s.MAX_ATTENTION_LOGIT, 2131)], [a.detail for a in logits]
    assert "to 190 at step 3985" in logits[0].detail and "above 100, where Kimi K2's QK-clip caps" in logits[0].detail
    divergence = next(a for a in found.anomalies if a.kind == Kind.DIVERGENCE)
    signal = next(x for x in divergence.warning["signals"] if x["kind"] == "logit_growth")
    assert (divergence.step, signal["step"], divergence.warning["lead_steps"]) == (3511, 2131, 1380)
    cause = next(c for c in found.suspected_causes if c.kind == "logits")
    assert cause.cause == "attention-logit growth" and "QK-layernorm and QK-clip" in cause.check_next
    assert any("it began 1380 steps before the loss spike at step 3511" in e for e in cause.evidence)
    # one finding counted once: the precursor note restating it adds no confidence (two rules, one piece of evidence)
    assert cause.confidence == 0.55 and len(cause.evidence) == 1, (cause.confidence, cause.evidence)


def test_a_rising_z_loss_is_output_logit_divergence():
    n = 4000
    steps = np.arange(1, n + 1)
    found = analyze_run(_logit_run(n, 4, s.Z_LOSS, np.where(steps > 2500, np.exp((steps - 2500) / 400), 1.0),
                                   diverge_at=3600))
    logits = [a for a in found.anomalies if a.kind == Kind.LOGIT_GROWTH]
    assert [(a.metric, a.step) for a in logits] == [(s.Z_LOSS, 2569)], [a.detail for a in logits]
    assert next(c for c in found.suspected_causes if c.kind == "logits").cause == \
        "output-logit divergence (z-loss rising)"


def test_attention_logits_and_a_z_loss_both_growing_are_both_causes():
    """A run whose attention logits and z-loss both grow before it diverges: the cause names both, with both
    mitigations (it said 'attention-logit growth' alone, the z-loss's evidence under it)."""
    n = 4000
    steps = np.arange(1, n + 1)
    run = _logit_run(n, 3, s.MAX_ATTENTION_LOGIT, np.where(steps > 2000, np.exp((steps - 2000) / 720), 1.0),
                     diverge_at=3500)
    z = _logit_run(n, 4, s.Z_LOSS, np.where(steps > 2500, np.exp((steps - 2500) / 400), 1.0)).metrics
    run.metrics = pl.concat([run.metrics, z.filter(metric=s.Z_LOSS)])
    found = analyze_run(run)
    assert sorted(a.metric for a in found.anomalies if a.kind == Kind.LOGIT_GROWTH) == [s.MAX_ATTENTION_LOGIT, s.Z_LOSS]
    cause = next(c for c in found.suspected_causes if c.kind == "logits")
    assert cause.cause == "attention-logit growth and output-logit divergence (z-loss rising)"
    assert "QK-layernorm and QK-clip" in cause.check_next and "a z-loss (1e-4 log^2 Z" in cause.check_next


def test_per_layer_attention_logits_are_the_max_attention_logit_with_their_layer():
    """Tags of one layer's attention-logit maxima (nraultwang/cs182-project's logits/layerN/max_p95) become per-layer
    series; their largest per step is judged as the max attention logit, and the finding names the layer."""
    assert canonical("logits/layer11/max_p95")[0] == "max_attention_logit/11/max_p95"
    assert canonical("logits/layer11/mean")[0] == "logits/layer11/mean"  # a mean is not a maximum
    n = 4000
    steps = np.arange(1, n + 1)
    run = _logit_run(n, 3, "max_attention_logit/7/max", np.where(steps > 2000, np.exp((steps - 2000) / 720), 1.0),
                     diverge_at=3500)
    flat = [_logit_run(n, 10 + k, f"max_attention_logit/{k}/max", np.full(n, 0.5)).metrics
            .filter(metric=f"max_attention_logit/{k}/max") for k in (0, 1)]
    run.metrics = pl.concat([run.metrics, *flat])
    found = analyze_run(run)
    [growth] = [a for a in found.anomalies if a.kind == Kind.LOGIT_GROWTH]
    assert (growth.metric, growth.step) == (s.MAX_ATTENTION_LOGIT, 2131)
    assert "at step 3985 (the step's largest in layer 7)" in growth.detail
    assert "the largest of the 3 per-layer series" in growth.detail
    assert next(c for c in found.suspected_causes if c.kind == "logits").cause == "attention-logit growth"
    assert found.coverage["logits"]["per_layer"]["layers"] == [0, 1, 7]
    assert not any(m.startswith("max_attention_logit") for m in found.coverage["other_scalars"])


def test_flat_heavy_tailed_logits_and_a_level_shift_are_not_growth():
    n = 10_000
    steps = np.arange(1, n + 1)
    for seed in range(3):
        assert not [a for a in analyze_run(_logit_run(n, seed, s.MAX_ATTENTION_LOGIT, np.ones(n))).anomalies
                    if a.kind == Kind.LOGIT_GROWTH]
    # a log-linear rise to 2x is below the 3x a finding needs
    found = analyze_run(_logit_run(n, 8, s.MAX_ATTENTION_LOGIT, np.where(steps > 5000, 2.0 ** ((steps - 5000) / 5000), 1.0)))
    assert not [a for a in found.anomalies if a.kind == Kind.LOGIT_GROWTH]
    # a step to 4x that then holds is a level shift, not a log-linear rise
    found = analyze_run(_logit_run(n, 9, s.MAX_ATTENTION_LOGIT, np.where(steps > 5000, 4.0, 1.0)))
    assert not [a for a in found.anomalies if a.kind == Kind.LOGIT_GROWTH]


def test_a_group_departed_since_before_the_lead_window_is_still_the_origin():
    """The embedding grad norm grows 22% a point from step 500 on: at the divergence at step 580 it has been
    departed for longer than the 20-point window looked at (this once raised instead of naming it)."""
    rng = np.random.default_rng(0)
    steps = np.arange(1, 601)
    rows = []
    for name in ("embedding/-/wte", "attention/0/a0", "mlp/0/m0", "attention/1/a1", "mlp/1/m1"):
        v = np.exp(0.05 * rng.standard_normal(steps.size))
        if name.startswith("embedding"):
            v = v * np.where(steps > 500, np.exp(0.2 * (steps - 500)), 1.0)
        rows.append(pl.DataFrame({"step": steps, "value": v, "metric": s.LAYER_GRAD_PREFIX + name}))
    metrics = s.conform(pl.concat(rows).with_columns(run=pl.lit("r"), source=pl.lit("x"), attempt=1), s.METRICS_SCHEMA)
    divergence = Anomaly(Kind.DIVERGENCE, s.LOSS, 1, 580, 600, 10.0, 2.0, detail="x")
    [origin] = spike_origins([divergence], RunFrames(metrics, s.empty(s.EVENTS_SCHEMA)))
    assert (origin.kind, origin.metric, origin.step) == (Kind.GRAD_NORM_RATIO, "grad_norm/embedding/-", 506)
    assert origin.detail.startswith("the divergence at step 580: only the embedding grad norm departed from its level "
                                    "before it: it rose to 3.370014 (3.3x its trailing median) at step 506, 74 steps")


def test_sustained_clipping_that_runs_into_a_hole_does_not_claim_the_end_of_the_attempt():
    """Clipped 3 steps in 4 from step 701 to the end of steps 1-1000; a hole; steps 3001-4000 unclipped."""
    from forensics.detectors.clipping import ClippingDetector

    steps = list(range(1, 1001)) + list(range(3001, 4001))
    grad = [0.5] * 700 + ([1.5] * 3 + [0.5]) * 75 + [0.5] * 1000
    metrics = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": steps, "metric": "grad_norm",
                                      "value": grad}), s.METRICS_SCHEMA)
    [found] = ClippingDetector(1.0).detect(RunFrames(metrics, s.empty(s.EVENTS_SCHEMA)))
    assert (found.step, found.end_step) == (701, 999)
    assert found.detail == ("grad norm above the clip threshold 1 at 75% of logged steps from step 701 to step 999, "
                            "then a hole in the log after step 1000 (against 0% from step 101, after its first 100 points; "
                            "rolling share over 50 points)")


def test_the_sweep_levels_a_run_by_its_per_layer_attention_logits():
    """A run that logs only per-layer attention-logit maxima has a max attention logit level for the sweep's fits:
    the median of the last fifth of their per-step largest (it had none: only a run's own max_attention_logit)."""
    from forensics.findings import ModelCheck
    from forensics.sweep import run_scaling

    steps = np.arange(1, 101)
    metrics = s.conform(pl.concat([
        pl.DataFrame({"step": steps, "value": np.where(steps > 80, 40.0, 10.0), "metric": "max_attention_logit/3/max"}),
        pl.DataFrame({"step": steps, "value": np.full(100, 20.0), "metric": "max_attention_logit/0/max"}),
    ]).with_columns(run=pl.lit("r"), source=pl.lit("x"), attempt=1), s.METRICS_SCHEMA)
    assert run_scaling(ModelCheck(), metrics, None)[s.MAX_ATTENTION_LOGIT] == {"level": 40.0, "max": 40.0,
                                                                             "until_step": 100}


def test_start_up_clipping_held_by_the_first_window_is_no_episode_and_warns_nothing():
    """Clipped points only just before the burn-in ends (indices 25-39 of 400, the window at index 40 still 75%
    clipped): no episode, and no NumPy "Mean of empty slice" on stderr (its onset, clamped to the burn-in, lay past
    its last clipped point; found analysing a tree of fixtures as one run)."""
    import warnings

    from forensics.detectors.clipping import _sustained

    values = np.full(400, 0.5)
    values[25:40] = 5.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _sustained(1, np.arange(1, 401), values, 1.0) == []
