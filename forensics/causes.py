"""Suspected causes: a small rule set, each rule citing its evidence and a confidence. Never a verdict."""

from __future__ import annotations

from typing import Any

import polars as pl

from forensics.findings import Anomaly, Attempt, Cause, ModelCheck
from parsers import schema as s


def warmup_end_step(metrics: pl.DataFrame) -> int | None:
    """The first step where the learning rate reaches its peak (within 0.5%), if it rose to get there."""
    lr = metrics.filter((pl.col("metric") == s.LR) & pl.col("value").is_finite()).sort("step")
    if lr.height < 3:
        return None
    peak = lr["value"].max()
    first = lr["value"][0]
    if not peak or first >= peak * 0.995:  # type: ignore[operator]
        return None
    return int(lr.filter(pl.col("value") >= peak * 0.995)["step"][0])  # type: ignore[operator]


def suspect(
    metrics: pl.DataFrame, events: pl.DataFrame, attempts: list[Attempt], anomalies: list[Anomaly],
    model: ModelCheck, config: dict[str, Any],
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

    troubles = [a for a in anomalies if a.kind in {"loss_spike", "divergence", "nan"}]
    warmup = warmup_end_step(metrics)
    after = [t for t in troubles if warmup and warmup <= t.step <= warmup + max(2 * warmup, 1000)]
    if warmup and after:
        first = min(after, key=lambda a: a.step)
        causes.append(Cause(
            cause="instability shortly after the learning-rate warm-up ended",
            confidence=0.5,
            evidence=[
                f"learning rate reached its peak at step {warmup}",
                f"first {first.kind.replace('_', ' ')} at step {first.step} (attempt {first.attempt})",
            ],
            check_next="a lower peak LR or a longer warm-up; see whether the spike moves with the warm-up end",
        ))

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

    seeds = [a for a in attempts if "seed" in a.config_changes]
    for a in seeds:
        again = [t for t in troubles if t.attempt == a.index]
        if again:
            causes.append(Cause(
                cause="not a single bad batch: the trouble came back after the seed changed",
                confidence=0.4,
                evidence=[
                    f"attempt {a.index} changed seed {a.config_changes['seed'][0]} → {a.config_changes['seed'][1]}",
                    f"then {again[0].kind.replace('_', ' ')} at step {again[0].step}",
                ],
                check_next="optimizer/model state (LR, init, beta2, shape) rather than data order",
            ))
            break
    return sorted(causes, key=lambda c: -c.confidence)
