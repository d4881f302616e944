"""Suspected causes: a small rule set, each rule citing its evidence and a confidence. Never a verdict."""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

import numpy as np
import polars as pl

from forensics.detectors.clipping import thresholds, what_if
from forensics.findings import (
    INSTABILITY_KINDS,
    NOT_WHY_CAUSES,
    Anomaly,
    Attempt,
    Cause,
    CauseKind,
    Kind,
    ModelCheck,
    Schedule,
    first_trouble,
    shown,
    step_count,
)
from forensics.infra import NO_STEP_READ, infrastructure, memory, program_errors, stops
from forensics.resumes import optimizer_state_lost, recurrence, skipped_batches
from forensics.timeline import log_intervals, metric_rows
from parsers import schema as s


def suspect(
    metrics: pl.DataFrame, events: pl.DataFrame, attempts: list[Attempt], anomalies: list[Anomaly],
    model: ModelCheck, table: dict[int, dict[str, Any]], timing: Schedule | None = None,
    intervals: dict[int, int] | None = None, searches: dict[int, int] | None = None,
) -> list[Cause]:
    """Rank the suspected causes of the instability and of how attempts ended, most likely first (ties keep the order
    of the rules); causes of one kind are merged. The model's setup (its shape against its name, init, FFN width) is
    not among them: see :attr:`forensics.findings.RunFindings.setup`.
    ``intervals``: the run's :func:`~forensics.timeline.log_intervals`, when already known; ``searches``: per
    attempt, the last step of its fp16 start-up loss-scale search (normal, and no overflow storm)."""
    intervals = log_intervals(metrics) if intervals is None else intervals
    stepped = frozenset(metrics["source"].unique().cast(pl.String).drop_nulls().to_list())  # (unique first: a cast of
    # every row would write out millions of strings)
    troubles = [a for a in anomalies if a.kind in INSTABILITY_KINDS]
    timing = timing or Schedule()
    causes = [
        *lr_causes(attempts, troubles, model, timing, table),
        *after_warmup(troubles, timing, attempts),
        *loss_scale_collapse(anomalies, troubles, metrics, searches, attempts),
        *infrastructure(events, attempts, anomalies, stepped),
        *memory(events, attempts, stepped),
        *program_errors(attempts, anomalies, events),
        *recurrence(attempts, anomalies, metrics, intervals),
        *skipped_batches(attempts, anomalies, events),
        *optimizer_state_lost(attempts, anomalies, metrics, events, table, intervals),
        *logit_growth(anomalies),
        *layer_imbalance(anomalies, troubles),
        *clipping(metrics, anomalies, troubles, table),
        *logit_trend(anomalies, troubles),
        *stops(attempts, anomalies, events),
    ]
    # (how a run was stopped, however sure, comes after why anything failed)
    return sorted(merge(causes), key=lambda c: (c.kind in NOT_WHY_CAUSES, -c.confidence))


def merge(causes: list[Cause]) -> list[Cause]:
    """Causes of one kind as one: the most confident one's words, every distinct piece of evidence and
    counter-evidence, and its confidence (a little more when several rules or rollbacks point the same way)."""
    merged: dict[str, Cause] = {}
    for c in causes:
        key = c.kind or c.cause
        if key not in merged:
            merged[key] = c
            continue
        m = merged[key]
        lead, other = (m, c) if m.confidence >= c.confidence else (c, m)
        merged[key] = Cause(
            kind=lead.kind, cause=lead.cause, check_next=lead.check_next,
            confidence=min(0.9, round(lead.confidence + 0.05, 2)),
            evidence=list(dict.fromkeys(lead.evidence + other.evidence)),
            counter_evidence=list(dict.fromkeys(lead.counter_evidence + other.counter_evidence)),
        )
    return list(merged.values())


# GPT-3 (Brown et al. 2020, table 2.1): parameters -> peak learning rate used
GPT3_LR: tuple[tuple[float, float], ...] = (
    (125e6, 6e-4), (350e6, 3e-4), (760e6, 2.5e-4), (1.3e9, 2e-4), (2.7e9, 1.6e-4), (6.7e9, 1.2e-4), (13e9, 1e-4),
    (175e9, 0.6e-4),
)
LR_TOO_HIGH = 2.0  # a peak LR above twice GPT-3's for the size is suspect when the run is unstable


def reference_lr(parameters: float) -> float:
    """GPT-3's peak LR for a model of this size, interpolated in log-log (clamped at the table's ends)."""
    sizes = np.log([p for p, _ in GPT3_LR])
    lrs = np.log([lr for _, lr in GPT3_LR])
    return float(np.exp(np.interp(math.log(parameters), sizes, lrs)))


def _size(parameters: float) -> str:
    return f"{parameters / 1e9:.3g}B" if parameters >= 1e9 else f"{parameters / 1e6:.3g}M"


def _of_gpt3(parameters: float, size: float | None = None) -> bool:
    """Whether ``parameters`` is one of GPT-3's sizes (``size``, or any), within 5%."""
    return any(abs(math.log(parameters / s)) < 0.05 for s in ([size] if size else [s for s, _ in GPT3_LR]))


def reference_said(parameters: float) -> str:
    """Where :func:`reference_lr` comes from, in words: a size of GPT-3's own, or the two it lies between.

    >>> reference_said(13e9)
    'the 0.0001 GPT-3 used at 13B parameters'
    >>> print(reference_said(66e9))  # doctest: +NORMALIZE_WHITESPACE
    about 7.3e-05, between the 0.0001 GPT-3 used at 13B parameters and the 6e-05 at 175B
    (interpolated in log-log)
    >>> reference_said(500e9)
    'the 6e-05 GPT-3 used at 175B parameters, its largest model'
    """
    for size, lr in GPT3_LR:
        if _of_gpt3(parameters, size):
            return f"the {lr:.2g} GPT-3 used at {_size(size)} parameters"
    (small, low_lr), (large, high_lr) = GPT3_LR[0], GPT3_LR[-1]
    if parameters <= small:
        return f"the {low_lr:.2g} GPT-3 used at {_size(small)} parameters, its smallest model"
    if parameters >= large:
        return f"the {high_lr:.2g} GPT-3 used at {_size(large)} parameters, its largest model"
    below, above = next((a, b) for a, b in pairwise(GPT3_LR) if a[0] < parameters < b[0])
    return (f"about {reference_lr(parameters):.2g}, between the {below[1]:.2g} GPT-3 used at {_size(below[0])} "
            f"parameters and the {above[1]:.2g} at {_size(above[0])} (interpolated in log-log)")


def lr_causes(
    attempts: list[Attempt], troubles: list[Anomaly], model: ModelCheck, timing: Schedule,
    table: dict[int, dict[str, Any]],
) -> list[Cause]:
    """LR too high: above what GPT-3 used at this size while the run is unstable, or an attempt that lowered the LR
    got further without trouble. Against it: an attempt that lowered the LR and had trouble sooner; other settings
    changed in the same attempt."""
    out: list[Cause] = []
    first = first_trouble(troubles)
    lowered_sooner = []
    for att in attempts:
        change = att.config_changes.get("lr")
        if not change or not all(isinstance(v, (int, float)) for v in change) or change[1] >= change[0]:
            continue
        prev = [p for p in attempts if p.index < att.index and p.index in first]
        if not prev:
            continue
        before, mine = first[prev[-1].index], first.get(att.index)
        others = sorted(k for k in att.config_changes if k != "lr")
        also = [f"attempt {att.index} also changed {', '.join(others)}"] if others else []
        if mine is None or mine.step > before.step:
            got = "without trouble" if mine is None else f"until step {mine.step}"
            out.append(Cause(
                kind=CauseKind.LR, cause="learning rate too high: lowering it got further",
                confidence=(0.6 if mine is None else 0.45) - (0.1 if others else 0.0),
                evidence=[f"attempt {before.attempt} (lr {change[0]:g}): {before.kind.replace('_', ' ')} at step "
                          f"{before.step}",
                          f"attempt {att.index} lowered lr to {change[1]:g} and ran to step {att.end_step} {got}"],
                counter_evidence=also,
                check_next="keep the lower LR; with several runs, `forensics compare` measures the LR sensitivity",
            ))
        else:
            lowered_sooner.append(f"attempt {att.index} lowered lr to {change[1]:g} and still had "
                                  f"{mine.kind.replace('_', ' ')} at step {mine.step}, no later than before "
                                  f"(step {before.step})")
    size = model.parameters_from_shape or model.parameters_logged
    lr = timing.lr_peak or next((c.get("lr") for c in table.values() if isinstance(c.get("lr"), float)), None)
    if troubles and size and lr and lr > LR_TOO_HIGH * reference_lr(size):
        out.append(Cause(
            kind=CauseKind.LR, cause="learning rate too high for the model size",
            confidence=0.4 if not lowered_sooner else 0.2,
            evidence=[f"peak LR {lr:.3g} is {lr / reference_lr(size):.1f}x {reference_said(size)}" + (
                "" if _of_gpt3(size) else f", for a model of {_size(size)} parameters")],
            counter_evidence=lowered_sooner,
            check_next="an LR sweep at small scale (Wortsman et al.: LR sensitivity) or a lower peak LR",
        ))
    elif lowered_sooner and out:
        out[0].counter_evidence += lowered_sooner
    return out


def loss_scale_collapse(anomalies: list[Anomaly], troubles: list[Anomaly], metrics: pl.DataFrame | None = None,
                        searches: dict[int, int] | None = None, attempts: list[Attempt] | None = None) -> list[Cause]:
    """fp16 loss scale falling to its floor with overflows skipping steps; stronger when trouble follows it.
    Against it: trouble that began before the first collapse (the overflows then follow the trouble), unless the
    logged loss scale had already fallen before the trouble (overflows came first, below the collapse rule). An
    attempt that the program stopped on its overflows (its own line says so) is the cause's strongest evidence."""
    collapses = [a for a in anomalies if a.kind in {Kind.LOSS_SCALE_COLLAPSE, Kind.SKIPPED_ITERATIONS}]
    stopped = [f"attempt {a.index} ended " + (f"after step {a.end_step}" if a.end_step is not None else NO_STEP_READ)
               + f": {a.end_detail}" for a in attempts or [] if a.end_kind == s.EV_OVERFLOW_STOP]
    if stopped and not collapses:
        return [Cause(
            kind=CauseKind.LOSS_SCALE, cause="fp16 loss-scale collapse / overflow storm", confidence=0.8,
            evidence=stopped[:6],
            check_next="bf16, a higher min loss scale, or lower LR; look for the first overflow before the stop",
        )]
    if not collapses:
        return []
    first = first_trouble(troubles)
    counter, led, earlier = [], [], []
    scales = metrics.filter(pl.col("metric") == s.LOSS_SCALE) if metrics is not None else None  # once, not per attempt
    for attempt in sorted({c.attempt for c in collapses}):
        onset = min(c.step for c in collapses if c.attempt == attempt)
        t = first.get(attempt)
        fell = (_scale_fell_before(scales, attempt, (searches or {}).get(attempt), t.step)
                if t is not None and t.step < onset else None)
        if fell:
            earlier.append(f"attempt {attempt}: the loss scale had already fallen before the "
                           f"{t.kind.replace('_', ' ')} at step {t.step}: {fell}")  # type: ignore[union-attr]
            led.append(attempt)
        elif t is not None and t.step < onset:
            counter.append(f"attempt {attempt}: {t.kind.replace('_', ' ')} at step {t.step} came before the first "
                           f"overflow or collapse (step {onset}): the overflows may follow the instability")
        elif t is not None:
            led.append(attempt)  # the collapse came first, and trouble followed
    return [Cause(
        kind=CauseKind.LOSS_SCALE, cause="fp16 loss-scale collapse / overflow storm",
        confidence=0.8 if stopped else 0.6 if led else 0.3 if not counter else 0.15,
        evidence=[*stopped[:3], *earlier, *(f"attempt {c.attempt}, step {c.step}: {c.detail}" for c in collapses[:5])],
        counter_evidence=counter,
        check_next="bf16, a higher min loss scale, or lower LR; look for the first overflow before the spike",
    )]


def _scale_fell_before(scales: pl.DataFrame | None, attempt: int, searched: int | None, step: int) -> str | None:
    """How the logged loss scale (``scales``: its rows of the metrics) fell in this attempt before ``step``, after its
    start-up search (which ends at ``searched``): "64 (step 400) to 4 (step 600)"; None if it never fell there (or
    is not logged)."""
    if scales is None:
        return None
    scale = scales.filter((pl.col("attempt") == attempt)
                           & (pl.col("step") < step) & (pl.col("step") >= (searched or 0))
                           & pl.col("value").is_finite()).sort("step")
    values = scale["value"].to_numpy()
    if values.size < 2 or not (np.diff(values) < 0).any():
        return None
    top = int(np.argmax(values))
    low = top + int(np.argmin(values[top:]))
    if low == top:
        return None
    steps = scale["step"].to_list()
    return f"{shown(values[top])} (step {steps[top]}) to {shown(values[low])} (step {steps[low]})"


def logit_growth(anomalies: list[Anomaly]) -> list[Cause]:
    """Attention or output logits that grew before the trouble (Wortsman et al. 2023), when the run logs them: the
    precursor notes of a metric named like a logit that :mod:`forensics.detectors.logits` does not read. In an attempt
    with a :attr:`Kind.LOGIT_GROWTH` finding the notes restate it, and :func:`logit_trend` counts it once."""
    found = {a.attempt for a in anomalies if a.kind == Kind.LOGIT_GROWTH}
    notes = [f"attempt {a.attempt}, before step {a.step}: {p}" for a in anomalies if a.attempt not in found
             for p in a.precursors if "logit" in p]
    if not notes:
        return []
    return [Cause(
        kind=CauseKind.LOGITS, cause="attention or output logit growth", confidence=0.5, evidence=notes[:4],
        check_next="qk-layernorm and z-loss (1e-4) fix logit growth in Wortsman et al.; check per-layer logits",
    )]


def logit_trend(anomalies: list[Anomaly], troubles: list[Anomaly]) -> list[Cause]:
    """Attention logits or the z-loss growing log-linearly before the first instability of its attempt
    (:attr:`Kind.LOGIT_GROWTH`; Wortsman et al. 2023). Merges with :func:`logit_growth` (one kind). Against it:
    growth that began only after the instability."""
    first = first_trouble(troubles)
    evidence, counter, metrics = [], [], set()
    for a in anomalies:
        t = first.get(a.attempt)
        if a.kind != Kind.LOGIT_GROWTH or t is None:
            continue
        if a.step < t.step:
            metrics.add(a.metric)
            evidence.append(f"attempt {a.attempt}: {a.detail}; it began {step_count(t.step - a.step)} before the "
                            f"{t.kind.replace('_', ' ')} at step {t.step}")
        else:
            counter.append(f"attempt {a.attempt}: its {a.metric.replace('_', ' ')} finding began at step {a.step}, "
                           f"after the {t.kind.replace('_', ' ')} at step {t.step}")
    if not evidence:
        return []
    # (each metric names its own instability: a run whose attention logits and z-loss both grew has both)
    said = {s.MAX_ATTENTION_LOGIT: ("attention-logit growth", "QK-layernorm and QK-clip are the published mitigations "
                                    "for attention-logit growth (Wortsman et al. 2023; Kimi K2 clips at a max logit of "
                                    "100)"),
            s.Z_LOSS: ("output-logit divergence (z-loss rising)", "a z-loss (1e-4 log^2 Z, PaLM; Wortsman et al. 2023) "
                       "keeps the output logits from drifting")}
    mine = [said[m] for m in s.LOGIT_METRICS if m in metrics]
    return [Cause(
        kind=CauseKind.LOGITS, cause=" and ".join(c for c, _ in mine),
        confidence=0.55,  # a trend test with its lead: its words lead when merged with logit_growth's notes
        evidence=evidence[:4], counter_evidence=counter[:4], check_next="; ".join(n for _, n in mine),
    )]


def layer_imbalance(anomalies: list[Anomaly], troubles: list[Anomaly]) -> list[Cause]:
    """One layer group's grad norm rising against the others before the first instability of its attempt (GLM-130B:
    the embedding's gradients, "several magnitude larger" than other layers', preceded its collapses), from the
    :attr:`Kind.GRAD_NORM_RATIO` findings. Against it: such a finding that began only after the instability."""
    ratios = [a for a in anomalies if a.kind == Kind.GRAD_NORM_RATIO]
    first = first_trouble(troubles)
    evidence, counter = [], []
    for r in ratios:
        t = first.get(r.attempt)
        if t is None:
            continue
        if r.step < t.step:
            evidence.append(f"attempt {r.attempt}: {r.detail}; {step_count(t.step - r.step)} before the "
                            f"{t.kind.replace('_', ' ')} at step {t.step}")
        elif r.step > t.step:
            counter.append(f"attempt {r.attempt}: {r.metric} began rising at step {r.step}, after the "
                           f"{t.kind.replace('_', ' ')} at step {t.step}")
    if not evidence:
        return []
    return [Cause(
        kind=CauseKind.LAYER_GRADS, cause="one layer group's gradients grew out of proportion to the others",
        confidence=0.45 if any("embedding" in e for e in evidence) else 0.35, evidence=evidence[:4],
        counter_evidence=counter[:4],
        check_next="GLM-130B shrank the embedding's gradient (word_embedding * 0.1 + word_embedding.detach() * 0.9); "
                   "a lower LR or weight decay off the embedding (OLMo 2) also help; see the per-layer heatmap",
    )]


def clipping(metrics: pl.DataFrame, anomalies: list[Anomaly], troubles: list[Anomaly],
             table: dict[int, dict[str, Any]]) -> list[Cause]:
    """With the clip threshold known: sustained clipping that began before the first instability of its attempt
    (against it: clipping that began only after), and the points up to it that the fixed threshold let through at 10x
    the usual grad norm or more, with what a threshold that adapts would have done (a what-if, said as one:
    :func:`forensics.detectors.clipping.what_if`)."""
    limits = thresholds(table)
    first = first_trouble(troubles)
    if not limits or not first:
        return []
    run_limit = limits[max(limits)]
    out = []
    evidence, counter = [], []
    for a in anomalies:
        t = first.get(a.attempt)
        if a.kind != Kind.CLIPPING or a.metric != s.CLIPPED_SHARE or t is None:
            continue
        if a.step < t.step:
            evidence.append(f"attempt {a.attempt}: {a.detail}; it began {step_count(t.step - a.step)} before the "
                            f"{t.kind.replace('_', ' ')} at step {t.step}")
        else:
            counter.append(f"attempt {a.attempt}: clipping became sustained at step {a.step}, after the "
                           f"{t.kind.replace('_', ' ')} at step {t.step}")
    if evidence:
        out.append(Cause(
            kind=CauseKind.CLIPPING, cause="gradients clipped at most steps before the instability", confidence=0.35,
            evidence=evidence[:4], counter_evidence=counter[:4],
            check_next="the grad norm was rising through the clip threshold: look at what raised it (LR, data, a "
                       "layer group in the per-layer norms); clipping every step hides the gradient's growth",
        ))
    points = metric_rows(metrics, s.GRAD_NORM)
    notes = what_if(points, {a: limits.get(a, run_limit) for a in first}, {a: t.step for a, t in first.items()})
    if notes:
        out.append(Cause(
            kind=CauseKind.CLIP_THRESHOLD,
            cause="grad-norm spikes the fixed clip threshold let through at 10x the usual level",
            confidence=0.25, evidence=notes[:4],
            check_next="a clip threshold that adapts to the grad norm (ZClip's z-score rule; GLM-130B used the "
                       "grad-norm statistics as an instability detector) would have capped these spikes lower",
        ))
    return out


WARMUP_WINDOW = 0.25  # trouble within a quarter of the warm-up length after it ends ...
WARMUP_FLOOR = 1000   # ... or within this many steps, but never more than the warm-up's own length: 68 steps after a
                      # 5-step warm-up is 14 warm-ups later, not shortly after it


def after_warmup(troubles: list[Anomaly], timing: Schedule, attempts: list[Attempt] | None = None) -> list[Cause]:
    """Spikes soon after the LR reaches its peak (tr8-104B: "the spike happened right after the warm-up ended";
    tr1-13B likewise): the first trouble of each attempt within the window after the warm-up end. Against it: an
    attempt whose first trouble came while still in warm-up, or well after the window."""
    end = timing.warmup_end_step
    if not end:
        return []
    window = max(WARMUP_WINDOW * end, min(WARMUP_FLOOR, end))
    first = first_trouble(troubles)
    near = {a: t for a, t in first.items() if end <= t.step <= end + window}
    if not near:
        return []
    peak = f" ({timing.lr_peak:.3g})" if timing.lr_peak else ""
    evidence = [f"the learning rate reached its peak{peak} at step {end}"]
    evidence += [f"attempt {a}: first {t.kind.replace('_', ' ')} at step {t.step}, {step_count(t.step - end)} later"
                 for a, t in sorted(near.items())]
    counter = [f"attempt {a}: first {t.kind.replace('_', ' ')} at step {t.step}, while still in warm-up "
               f"(it ends at step {end})" for a, t in sorted(first.items()) if t.step < end]
    counter += [f"attempt {a}: first {t.kind.replace('_', ' ')} at step {t.step}, {step_count(t.step - end)} after the "
                "warm-up ended" for a, t in sorted(first.items()) if t.step > end + window]
    return [Cause(
        kind=CauseKind.WARMUP, cause="instability shortly after the learning-rate warm-up ended",
        confidence=max(0.1, min(0.3 + 0.1 * len(near), 0.6) - 0.1 * len(counter)),
        evidence=evidence,
        counter_evidence=counter,
        check_next="a lower peak LR or a longer warm-up: if the spike moves with the end of warm-up, the LR is the "
                   "trigger; if it stays at the same samples, suspect the data there",
    )]
