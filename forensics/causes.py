"""Suspected causes: a small rule set, each rule citing its evidence and a confidence. Never a verdict."""

from __future__ import annotations

from typing import Any

import polars as pl

from forensics.findings import INSTABILITY_KINDS, Anomaly, Attempt, Cause, ModelCheck, Schedule
from forensics.timeline import log_intervals
from parsers import schema as s


def suspect(
    metrics: pl.DataFrame, events: pl.DataFrame, attempts: list[Attempt], anomalies: list[Anomaly],
    model: ModelCheck, config: dict[str, Any], timing: Schedule | None = None,
) -> list[Cause]:
    """Rank the suspected causes of what went wrong, most likely first."""
    causes: list[Cause] = []
    if model.notes and model.notes[0].startswith("this is a ~"):
        causes.append(Cause(
            cause="model shape does not match the model's name",
            confidence=0.9,
            evidence=list(model.notes),
            check_next="compare num_layers, hidden_size and ffn_hidden_size with the intended architecture",
        ))
    elif model.shape and not 0.5 <= model.shape["ffn_hidden_size"] / model.shape["hidden_size"] / (
        8 / 3 if model.shape["gated_mlp"] else 4
    ) <= 2:
        causes.append(Cause(
            cause="unusual FFN width", confidence=0.5, evidence=[n for n in model.notes if "ffn" in n],
            check_next="check that ffn_hidden_size was meant for this hidden size",
        ))

    troubles = [a for a in anomalies if a.kind in INSTABILITY_KINDS]
    causes.extend(after_warmup(troubles, timing or Schedule()))

    collapses = [a for a in anomalies if a.kind in {"loss_scale_collapse", "skipped_iterations"}]
    if collapses:
        later = [t for t in troubles if any(c.attempt == t.attempt and c.step <= t.step for c in collapses)]
        causes.append(Cause(
            cause="fp16 loss-scale collapse / overflow storm",
            confidence=0.6 if later else 0.3,
            evidence=[f"attempt {c.attempt}, step {c.step}: {c.detail}" for c in collapses[:5]],
            check_next="bf16, a higher min loss scale, or lower LR; look for the first overflow before the spike",
        ))

    infra = events.filter(pl.col("kind").is_in(list(s.INFRA_KINDS)))
    if infra.height:
        crashed = {a.index for a in attempts if a.end_reason in {"crashed", "killed"}}
        rows = infra.unique(["attempt", "kind"], keep="first").sort("line")
        causes.append(Cause(
            cause="hardware or infrastructure failure",
            confidence=0.7 if crashed else 0.3,
            evidence=[
                f"attempt {a}, {k.replace('_', ' ')} near step {st}: {(t or '').strip()[:140]}"
                for a, st, k, t in rows.select("attempt", "step", "kind", "text").iter_rows()
            ][:6],
            check_next="node health (ECC, Xid, NCCL) and whether the same node was reused after the failure",
        ))

    causes.extend(recurrence(attempts, anomalies, metrics))
    return sorted(causes, key=lambda c: -c.confidence)


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


def _samples_at(metrics: pl.DataFrame, attempt: int, step: int) -> float | None:
    rows = metrics.filter((pl.col("metric") == s.CONSUMED_SAMPLES) & (pl.col("attempt") == attempt)
                          & (pl.col("step") <= step)).sort("step")
    return float(rows["value"][-1]) if rows.height else None


def recurrence(attempts: list[Attempt], anomalies: list[Anomaly], metrics: pl.DataFrame) -> list[Cause]:
    """Across a rollback: trouble that comes back at the same step (or the same consumed samples) points at the data
    there; trouble that comes sooner or later points at optimizer or model state (PaLM: spikes "only occur due to
    the combination of specific data batches with a particular model parameter state")."""
    first: dict[int, Anomaly] = {}
    for a in anomalies:
        if a.kind in INSTABILITY_KINDS and (a.attempt not in first or a.step < first[a.attempt].step):
            first[a.attempt] = a
    intervals = log_intervals(metrics)
    out: list[Cause] = []
    for att in attempts:
        mine = first.get(att.index)
        if not att.rollback or mine is None or att.resumed_from_step is None:
            continue
        before = [first[p.index] for p in attempts if p.index < att.index and p.index in first
                  and first[p.index].step > att.resumed_from_step]
        if not before:
            continue
        prev = before[-1]
        tol = max(20, 2 * intervals.get(att.index, 1))
        samples = (_samples_at(metrics, prev.attempt, prev.step), _samples_at(metrics, att.index, mine.step))
        same_samples = None not in samples and abs(samples[0] - samples[1]) <= tol * max(  # type: ignore[operator]
            1.0, (samples[0] or 0) / max(prev.step, 1))
        seed = att.config_changes.get("seed")
        how = f" with a new seed ({seed[0]} → {seed[1]})" if seed else ""
        evidence = [
            f"attempt {prev.attempt}: first {prev.kind.replace('_', ' ')} at step {prev.step}",
            f"attempt {att.index} rolled back to step {att.resumed_from_step}{how} and hit "
            f"{mine.kind.replace('_', ' ')} at step {mine.step}",
        ]
        if abs(mine.step - prev.step) <= tol or same_samples:
            out.append(Cause(
                cause="a stretch of data: the trouble came back at the same point after the rollback",
                confidence=0.6 if seed else 0.5, evidence=evidence,
                check_next=f"inspect the batches just before step {mine.step}; restart ~100 steps earlier and skip "
                           "a few hundred batches (PaLM)",
            ))
        else:
            when = "sooner" if mine.step < prev.step else "later"
            out.append(Cause(
                cause=f"optimizer or model state rather than one batch: after the rollback the trouble came {when} "
                      f"(step {mine.step} vs {prev.step})",
                confidence=0.4, evidence=evidence,
                check_next="LR, initialisation, Adam beta2/epsilon or the model shape rather than data order",
            ))
    return out
