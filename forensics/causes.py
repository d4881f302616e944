"""Suspected causes: a small rule set, each rule citing its evidence and a confidence. Never a verdict."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from forensics.findings import INSTABILITY_KINDS, Anomaly, Attempt, Cause, ModelCheck, Schedule, first_trouble
from forensics.infra import infrastructure
from forensics.resumes import optimizer_state_lost, recurrence, skipped_batches
from forensics.timeline import log_intervals


def suspect(
    metrics: pl.DataFrame, events: pl.DataFrame, attempts: list[Attempt], anomalies: list[Anomaly],
    model: ModelCheck, table: dict[int, dict[str, Any]], timing: Schedule | None = None,
    intervals: dict[int, int] | None = None,
) -> list[Cause]:
    """Rank the suspected causes of what went wrong, most likely first (ties keep the order of the rules).
    ``intervals``: the run's :func:`~forensics.timeline.log_intervals`, when already known."""
    intervals = log_intervals(metrics) if intervals is None else intervals
    troubles = [a for a in anomalies if a.kind in INSTABILITY_KINDS]
    timing = timing or Schedule()
    causes = [
        *shape_causes(model, bool(troubles)),
        *lr_causes(attempts, troubles, model, timing, table),
        *after_warmup(troubles, timing),
        *loss_scale_collapse(anomalies, troubles),
        *infrastructure(metrics, events, attempts, anomalies),
        *recurrence(attempts, anomalies, metrics, intervals),
        *skipped_batches(attempts, anomalies, events),
        *optimizer_state_lost(attempts, anomalies, metrics, events, table, intervals),
        *logit_growth(anomalies),
    ]
    return sorted(causes, key=lambda c: -c.confidence)


def shape_causes(model: ModelCheck, unstable: bool) -> list[Cause]:
    """The model is not the size its name says (tr8-104B: a 58B model all along), an odd FFN width, or an init std
    far above the small-init value (tr8b-104B: "fixing std init" overcame the first instability)."""
    out: list[Cause] = []
    headline = next((n for n in model.notes if n.startswith("this is a ~")), None)
    if headline:
        evidence = [headline]
        if model.parameters_logged:
            evidence.append(f"the program itself printed {model.parameters_logged / 1e9:.2f}B parameters")
        out.append(Cause(
            cause="model shape does not match the model's name", confidence=0.9, evidence=evidence,
            check_next="compare num_layers, hidden_size and ffn_hidden_size with the intended architecture",
        ))
    elif model.shape and not 0.5 <= model.shape["ffn_hidden_size"] / model.shape["hidden_size"] / (
        8 / 3 if model.shape["gated_mlp"] else 4
    ) <= 2:
        out.append(Cause(
            cause="unusual FFN width", confidence=0.5, evidence=[n for n in model.notes if "ffn" in n],
            check_next="check that ffn_hidden_size was meant for this hidden size",
        ))
    init = [n for n in model.notes if n.startswith("init_method_std")]
    if init and unstable:
        out.append(Cause(
            cause="initialisation too large for the width", confidence=0.35, evidence=init,
            check_next="small init sqrt(2/(5·hidden)) (tr8b-104B's first fix; 'Spike No More')",
        ))
    return out


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


def lr_causes(
    attempts: list[Attempt], troubles: list[Anomaly], model: ModelCheck, timing: Schedule,
    table: dict[int, dict[str, Any]],
) -> list[Cause]:
    """LR too high: above what GPT-3 used at this size while the run is unstable, or an attempt that lowered the LR
    got further without trouble."""
    out: list[Cause] = []
    size = model.parameters_from_shape or model.parameters_logged
    lr = timing.lr_peak or next((c.get("lr") for c in table.values() if isinstance(c.get("lr"), float)), None)
    if troubles and size and lr and lr > LR_TOO_HIGH * reference_lr(size):
        out.append(Cause(
            cause="learning rate too high for the model size", confidence=0.4,
            evidence=[f"peak LR {lr:.3g} is {lr / reference_lr(size):.1f}x the {reference_lr(size):.2g} GPT-3 used "
                      f"at {size / 1e9:.2g}B parameters"],
            check_next="an LR sweep at small scale (Wortsman et al.: LR sensitivity) or a lower peak LR",
        ))
    first = first_trouble(troubles)
    for att in attempts:
        change = att.config_changes.get("lr")
        if not change or not all(isinstance(v, (int, float)) for v in change) or change[1] >= change[0]:
            continue
        prev = [p for p in attempts if p.index < att.index and p.index in first]
        if not prev:
            continue
        before, mine = first[prev[-1].index], first.get(att.index)
        if mine is None or mine.step > before.step:
            got = "without trouble" if mine is None else f"until step {mine.step}"
            out.append(Cause(
                cause="learning rate too high: lowering it got further", confidence=0.6 if mine is None else 0.45,
                evidence=[f"attempt {before.attempt} (lr {change[0]:g}): {before.kind.replace('_', ' ')} at step "
                          f"{before.step}",
                          f"attempt {att.index} lowered lr to {change[1]:g} and ran to step {att.end_step} {got}"],
                check_next="keep the lower LR; with several runs, `forensics compare` measures the LR sensitivity",
            ))
    return out


def loss_scale_collapse(anomalies: list[Anomaly], troubles: list[Anomaly]) -> list[Cause]:
    """fp16 loss scale falling to its floor with overflows skipping steps; stronger when trouble follows it."""
    collapses = [a for a in anomalies if a.kind in {"loss_scale_collapse", "skipped_iterations"}]
    if not collapses:
        return []
    later = [t for t in troubles if any(c.attempt == t.attempt and c.step <= t.step for c in collapses)]
    return [Cause(
        cause="fp16 loss-scale collapse / overflow storm",
        confidence=0.6 if later else 0.3,
        evidence=[f"attempt {c.attempt}, step {c.step}: {c.detail}" for c in collapses[:5]],
        check_next="bf16, a higher min loss scale, or lower LR; look for the first overflow before the spike",
    )]


def logit_growth(anomalies: list[Anomaly]) -> list[Cause]:
    """Attention or output logits that grew before the trouble (Wortsman et al. 2023), when the run logs them."""
    notes = [f"attempt {a.attempt}, before step {a.step}: {p}" for a in anomalies for p in a.precursors if "logit" in p]
    if not notes:
        return []
    return [Cause(
        cause="attention or output logit growth", confidence=0.5, evidence=notes[:4],
        check_next="qk-layernorm and z-loss (1e-4) fix logit growth in Wortsman et al.; check per-layer logits",
    )]


WARMUP_WINDOW = 0.25  # trouble within a quarter of the warm-up length (at least 1,000 steps) after it ends


def after_warmup(troubles: list[Anomaly], timing: Schedule) -> list[Cause]:
    """Spikes soon after the LR reaches its peak (tr8-104B: "the spike happened right after the warm-up ended";
    tr1-13B likewise): the first trouble of each attempt within the window after the warm-up end."""
    end = timing.warmup_end_step
    if not end:
        return []
    window = max(WARMUP_WINDOW * end, 1000)
    first: dict[int, Anomaly] = {}
    for t in sorted(troubles, key=lambda a: a.step):
        if end <= t.step <= end + window:
            first.setdefault(t.attempt, t)
    if not first:
        return []
    peak = f" ({timing.lr_peak:.3g})" if timing.lr_peak else ""
    evidence = [f"the learning rate reached its peak{peak} at step {end}"]
    evidence += [f"attempt {a}: first {t.kind.replace('_', ' ')} at step {t.step}, {t.step - end} steps later"
                 for a, t in sorted(first.items())]
    return [Cause(
        cause="instability shortly after the learning-rate warm-up ended",
        confidence=min(0.3 + 0.1 * len(first), 0.6),
        evidence=evidence,
        check_next="a lower peak LR or a longer warm-up: if the spike moves with the end of warm-up, the LR is the "
                   "trigger; if it stays at the same samples, suspect the data there",
    )]
