"""What came before an incident, which is what a reader of the chronicle most wants to know.

* a grad-norm spike that led a loss spike, and by how many steps (GLM-130B: "a training collapse usually lags
  behind a spike in gradient norm by a few training steps"; BLOOM's first spike: ~3-4 steps);
* an fp16 loss-scale collapse or a burst of skipped iterations shortly before a divergence (GLM-130B: the loss
  scale "reduces drastically around 33710" before the loss "explodes at 33740"; OPT: the loss scalar crashing);
* a slow upward drift of the grad norm before the first instability (OLMo 2: "slow growth in the magnitude of the
  gradient norm ... correlated with increasing frequency of spikes"), as a robust Theil-Sen slope;
* growth of attention or output logits when the run logs them (Wortsman et al.: attention logits above 1e4
  diverged; output-logit divergence): for the max attention logit and the z-loss, the logit-growth detector's
  finding restated (:mod:`forensics.detectors.logits` is the one judge of their growth).

It also folds the loss and grad-norm spikes that happen *during* a divergence into it (they are the divergence,
not separate incidents), and notes when the evidence is a mean over a log interval.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.detectors.spikes import LEAD_WINDOW  # logged points before a loss spike where a grad-norm spike leads it
from forensics.findings import INSTABILITY_KINDS, Anomaly, Kind, shown, step_count
from forensics.gaps import across_gap, since_last_gap
from forensics.theil_sen import theil_sen
from parsers import schema as s

BEFORE_DIVERGENCE = 100     # logged points before a divergence where a loss-scale collapse or skips count
DRIFT_RISE = 0.5            # rise of the grad norm's robust trend before the first instability worth saying
_LOGIT = ("logit",)         # metric names that carry attention/output logits (e.g. max_attention_logit)


def named_like_logit(metric: str) -> bool:
    """Whether a scalar's name says it carries logits (an attention-logit mean, say): such series are checked for a
    2x rise before the first instability.

    >>> named_like_logit("attn/Logit_mean"), named_like_logit("loss")
    (True, False)
    """
    return any(k in metric.lower() for k in _LOGIT)


def consolidate(anomalies: list[Anomaly]) -> list[Anomaly]:
    """Fold what is part of a bigger event into it: spikes and level shifts during a divergence (after its onset)
    are its course; a grad-norm "spike" that never came down where a lasting grad-norm level shift starts is that
    shift's first step; a loss-scale level shift where a loss-scale collapse starts is that collapse."""
    spans = [(a.attempt, a.step, a.end_step) for a in anomalies if a.kind == Kind.DIVERGENCE]
    shifts = [(a.attempt, a.step) for a in anomalies if a.kind == Kind.CHANGEPOINT and a.metric == s.GRAD_NORM]
    collapses = [(a.attempt, a.step) for a in anomalies if a.kind == Kind.LOSS_SCALE_COLLAPSE]

    def near(step: int, at: int) -> bool:  # within a block of a changepoint (long series are block medians)
        return abs(step - at) <= max(50, at // 100)

    def folded(a: Anomaly) -> bool:
        for att, start, end in spans:
            if a.attempt != att:
                continue
            if a.kind in {Kind.LOSS_SPIKE, Kind.GRAD_NORM_SPIKE} and start < a.step <= end:
                return True
            if a.kind in {Kind.CHANGEPOINT, Kind.LOSS_PLATEAU} and a.step <= end and a.end_step >= start:  # runs into it
                return True
        if a.kind == Kind.CHANGEPOINT and a.metric == s.LOSS_SCALE and any(
            a.attempt == att and near(a.step, at) for att, at in collapses
        ):
            return True  # the collapse detector already tells it, at the exact step
        at_divergence = any(a.attempt == att and near(a.step, start) for att, start, _ in spans)
        return a.kind == Kind.GRAD_NORM_SPIKE and a.recovered_step is None and not at_divergence and any(
            a.attempt == att and near(a.step, at) for att, at in shifts
        )

    return [a for a in anomalies if not folded(a)]


def annotate(anomalies: list[Anomaly], frames: RunFrames) -> list[Anomaly]:
    """The anomalies with their precursors, grad-norm lead, recovery and averaging filled in. What lies on the other
    side of a hole in the log is never a precursor."""
    intervals = frames.intervals()
    gaps = frames.gaps()
    out = []
    for a in anomalies:
        notes = list(a.precursors)
        interval = intervals.get(a.attempt, 1)
        lead = None
        near = [b for b in anomalies if not across_gap(gaps, a.attempt, b.step, a.step)]
        if a.kind == Kind.LOSS_SPIKE:
            lead, note = _grad_lead(a, near, interval, frames)
            if note:
                notes.append(note)
        if a.kind == Kind.DIVERGENCE:
            notes.extend(_before_divergence(a, near, interval))
        averaged = (interval if interval > 1 and a.metric == s.LOSS and a.kind == Kind.LOSS_SPIKE
                    and frames.loss_is_interval_mean(a.attempt) else None)
        out.append(replace(a, grad_norm_lead=lead, precursors=notes, averaged_over=averaged))
    first = next((a for a in sorted(out, key=lambda x: (x.attempt, x.step)) if a.kind in INSTABILITY_KINDS), None)
    if first is not None:
        extra = [n for n in (_grad_drift(first, frames), *_logit_growth(first, frames, anomalies)) if n]
        if extra:
            out = [replace(a, precursors=a.precursors + extra) if a is first else a for a in out]
    return out


def _grad_lead(spike: Anomaly, anomalies: list[Anomaly], interval: int,
               frames: RunFrames) -> tuple[int | None, str | None]:
    """The grad-norm spike that led ``spike``, quoted by its logged value at its onset (its peak, a spike's
    ``value``, may come later: tr8-104B's 1490753.218 at 8740, then 3273877.676 at 8741)."""
    window = LEAD_WINDOW * interval
    leaders = [g for g in anomalies if g.kind == Kind.GRAD_NORM_SPIKE and g.attempt == spike.attempt
               and spike.step - window <= g.step <= spike.step]
    if not leaders:
        return None, None
    g = leaders[0]
    lead = spike.step - g.step
    at = frames.points(s.GRAD_NORM).filter((pl.col("attempt") == g.attempt) & (pl.col("step") == g.step))["value"]
    onset = float(at[0]) if at.len() else g.value
    peak = f"; its peak {shown(g.value)}" if g.value is not None and onset is not None and g.value > onset else ""
    if lead == 0:
        return 0, f"grad norm spiked at the same step ({shown(onset)}, from {shown(g.baseline)}{peak})"
    return lead, (f"a grad-norm spike led it by {step_count(lead)} "
                  f"(step {g.step}: {shown(onset)}, from {shown(g.baseline)}{peak})")


def _before_divergence(div: Anomaly, anomalies: list[Anomaly], interval: int) -> list[str]:
    window = BEFORE_DIVERGENCE * interval
    notes = []
    for a in anomalies:
        if a.attempt != div.attempt or not div.step - window <= a.step <= div.step:
            continue
        ahead = div.step - a.step
        when = "at the same step" if ahead == 0 else f"{step_count(ahead)} before"
        if a.kind == Kind.LOSS_SCALE_COLLAPSE:
            notes.append(f"fp16 loss scale collapsed to {shown(a.value)} at step {a.step}, {when}")
        elif a.kind == Kind.SKIPPED_ITERATIONS:
            notes.append(f"iterations were being skipped (overflow) from step {a.step}, {when}")
    return notes


def _grad_drift(first: Anomaly, frames: RunFrames) -> str | None:
    since = since_last_gap(frames.gaps(), first.attempt, first.step) or 0
    points = frames.points(s.GRAD_NORM).filter(
        (pl.col("attempt") == first.attempt) & (pl.col("step") < first.step) & (pl.col("step") >= since)
        & pl.col("value").is_finite() & (pl.col("value") > 0)
    )
    # from a tenth into the attempt (grad norm falls steeply while training settles) up to the instability
    points = points.tail(int(points.height * 0.9))
    if points.height < 30:
        return None
    step = points["step"].to_numpy().astype(float)
    y = np.log(points["value"].to_numpy())
    every = max(1, step.size // 400)  # Theil-Sen compares all pairs: 400 points are plenty
    slope, low, _high = theil_sen(y[::every], step[::every])
    rise = math.exp(slope * (step[-1] - step[0])) - 1
    if low <= 0 or rise < DRIFT_RISE:
        return None
    return (f"grad norm had been drifting up before this: +{rise:.0%} from step {int(step[0])} to "
            f"{int(step[-1])} (robust slope, 95% interval above zero)")


def _logit_growth(first: Anomaly, frames: RunFrames, anomalies: list[Anomaly]) -> list[str]:
    """Logit growth before the first instability. For the metrics :mod:`forensics.detectors.logits` reads
    (:data:`parsers.schema.LOGIT_METRICS`) its :attr:`Kind.LOGIT_GROWTH` finding is the one source: the note
    restates that finding (begun in the same stretch, before this) and nothing else is judged here, so a level shift
    or a 2x wander the detector rejects is never called growth. Other metrics named like a logit (an output-logit
    mean the detector does not read) keep the plain check: the latest tenth's largest value at least 2x the first
    fifth's median."""
    since = since_last_gap(frames.gaps(), first.attempt, first.step) or 0
    notes = [f"{g.metric} grew log-linearly from step {g.step}, {step_count(first.step - g.step)} before this (the "
             f"logit-growth finding: usual level {g.baseline:.4g}, {g.value:.4g} at its peak at step {g.end_step}; "
             "attention or output logit growth precedes divergence, Wortsman et al. 2023)"
             for g in anomalies if g.kind == Kind.LOGIT_GROWTH and g.attempt == first.attempt
             and since <= g.step < first.step and g.baseline is not None and g.value is not None]
    names = [m for m in frames.metrics["metric"].unique().cast(pl.String).to_list()
             if named_like_logit(m) and m not in s.LOGIT_METRICS and not s.is_layer_logit(m)]
    for name in sorted(names):
        points = frames.points(name).filter(
            (pl.col("attempt") == first.attempt) & (pl.col("step") <= first.step) & (pl.col("step") >= since)
            & pl.col("value").is_finite()
        )
        if points.height < 10:
            continue
        v = np.abs(points["value"].to_numpy())
        early = float(np.median(v[: max(3, v.size // 5)]))
        late = float(v[-max(3, v.size // 10):].max())
        if early > 0 and late >= 2 * early:
            notes.append(f"{name} grew {late / early:.1f}x before this ({early:.4g} -> {late:.4g}; attention or "
                         "output logit growth precedes divergence, Wortsman et al. 2023)")
    return notes
