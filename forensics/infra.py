"""Hardware and infrastructure: error lines, hangs (long silences between iterations), throughput drops, and
crashes that no NaN or divergence explains."""

from __future__ import annotations

import polars as pl

from forensics.findings import INSTABILITY_KINDS, Anomaly, Attempt, Cause
from parsers import schema as s

HANG_FACTOR = 20       # a gap between log lines this many times the attempt's median gap ...
HANG_MIN_SECONDS = 600  # ... and at least ten minutes is a hang (or a stall of the job)


def hangs(metrics: pl.DataFrame) -> pl.DataFrame:
    """Silences between consecutive logged iterations of an attempt: attempt, step (before), next_step, seconds,
    median (the attempt's usual gap)."""
    times = (
        metrics.filter((pl.col("metric") == s.LOSS) & pl.col("wall_time").is_not_null())
        .select("attempt", "step", "wall_time").unique(["attempt", "step"]).sort("attempt", "step")
        .with_columns(gap=pl.col("wall_time").diff().over("attempt"), next_step=pl.col("step").shift(-1).over("attempt"))
        .with_columns(gap=pl.col("gap").shift(-1).over("attempt"))
        .with_columns(median=pl.col("gap").median().over("attempt"))
    )
    return times.filter(
        (pl.col("gap") > HANG_FACTOR * pl.col("median")) & (pl.col("gap") >= HANG_MIN_SECONDS)
    ).select("attempt", "step", "next_step", pl.col("gap").alias("seconds"), "median")


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"


def infrastructure(
    metrics: pl.DataFrame, events: pl.DataFrame, attempts: list[Attempt], anomalies: list[Anomaly]
) -> list[Cause]:
    """One cause with every piece of infrastructure evidence: error lines, hangs, throughput drops, and attempts
    that crashed without a NaN or divergence first."""
    evidence: list[str] = []
    confidence = 0.0
    infra = events.filter(pl.col("kind").is_in(list(s.INFRA_KINDS)))
    if infra.height:
        rows = infra.unique(["attempt", "kind"], keep="first").sort("line")
        evidence += [
            f"attempt {a}, {k.replace('_', ' ')}{'' if st is None else f' near step {st}'}: {(t or '').strip()[:140]}"
            for a, st, k, t in rows.select("attempt", "step", "kind", "text").iter_rows()
        ][:6]
        confidence = 0.3
    unstable = {a.attempt for a in anomalies if a.kind in INSTABILITY_KINDS}
    crashed = [a for a in attempts if a.end_reason in {"crashed", "killed"}]
    if crashed:
        confidence = max(confidence, 0.7 if infra.height else 0.4)
        evidence += [
            f"attempt {a.index} {a.end_reason} at step {a.end_step}"
            + (" with no NaN or divergence before it" if a.index not in unstable else "")
            + (f": {a.end_detail[:120]}" if a.end_detail else "")
            for a in crashed
        ]
    for attempt, step, nxt, seconds, median in hangs(metrics).head(5).iter_rows():
        evidence.append(f"attempt {attempt}: nothing logged for {_duration(seconds)} between steps {step} and "
                        f"{nxt} (usually {median:.0f} s)")
        confidence = max(confidence, 0.4)
    slow = [a for a in anomalies if a.kind == "changepoint" and a.metric == s.ITERATION_TIME_MS]
    for a in slow[:3]:
        evidence.append(f"attempt {a.attempt}, step {a.step}: {a.detail}")
        confidence = max(confidence, 0.3)
    if not evidence:
        return []
    return [Cause(
        cause="hardware or infrastructure failure",
        confidence=confidence,
        evidence=evidence,
        check_next="node health (ECC, Xid, NCCL timeouts) around those steps and whether the same node was reused; "
                   "a slow or hung rank shows in every rank's iteration time",
    )]
