"""NaN / Inf: non-finite values, a loss missing from an iteration line, NaN counters and NaN-check messages.

Megatron never prints a NaN loss: ``if avg > 0.0`` is False for NaN, so the key disappears from the line. A line
without a loss whose skipped-iteration counter covers its whole interval is an fp16 overflow window instead (all
iterations skipped), which the skipped-iterations detector reports.

Every scalar is checked, whatever its name: NaN/Inf in the loss or grad norm (or a NaN counter or check) is a
``nan`` incident, in any other metric a ``non_finite`` one, named by its metric (a run whose loss tag was not
recognised still has its NaN found).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind
from forensics.gaps import apart
from parsers import schema as s

CORE = "core"  # the family of NaN evidence about the training itself
_CORE_METRICS = (s.LOSS, s.GRAD_NORM)


def nan_steps(frames: RunFrames) -> pl.DataFrame:
    """(attempt, step, why, family) for every step with NaN/Inf evidence; ``family`` is ``core`` for the loss, grad
    norm, NaN counters and checks, else the metric's name (computed once per run: the divergence detector reads it
    too)."""
    return frames.remember("nan_steps", lambda: _nan_steps(frames))


def _nan_steps(frames: RunFrames) -> pl.DataFrame:
    m = frames.metrics
    interval = m.filter(pl.col("metric") == s.LOG_INTERVAL).select("attempt", "step", interval=pl.col("value"))
    metric = pl.col("metric").cast(pl.String)
    bad_values = m.filter(
        ~pl.col("value").is_finite() | ((pl.col("metric") == s.NAN_ITERATIONS) & (pl.col("value") > 0))
    ).select(
        "attempt", "step", why=s.format_text("{} {}", metric, "value"),
        family=pl.when(metric.is_in([*_CORE_METRICS, s.NAN_ITERATIONS])).then(pl.lit(CORE)).otherwise(metric),
        value=pl.when(~pl.col("value").is_finite()).then("value"),
    )
    ev = frames.events
    missing = (
        ev.filter(pl.col("kind") == s.EV_LOSS_MISSING)
        .join(interval, on=["attempt", "step"], how="left")
        .filter(pl.col("value").is_null() | (pl.col("value") < pl.col("interval").fill_null(1)))
        .select("attempt", "step", why=pl.lit("loss missing from the log line (Megatron leaves a NaN loss out)"),
                family=pl.lit(CORE), value=pl.lit(float("nan")))
    )
    # a check printed after step N's line is about an iteration after N: N + 1 is the first it can be
    checks = ev.filter((pl.col("kind") == s.EV_NAN_CHECK) & pl.col("step").is_not_null()).select(
        "attempt", step=pl.col("step") + 1,
        why=pl.format("NaN check printed after step {}'s line: ", "step")
        + pl.col("text").str.strip_chars().str.slice(0, 120),
        family=pl.lit(CORE), value=pl.lit(float("nan")),
    )
    return pl.concat([bad_values, missing, checks]).drop_nulls("step").sort("attempt", "step")


@dataclass
class NanDetector:
    """Groups NaN evidence into incidents: ``NanDetector().detect(frames)``."""

    name: Kind = Kind.NAN
    gap_steps: int = 50

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        steps = nan_steps(frames)
        if steps.height == 0:
            return []
        # NaN points further apart than ``gap_steps`` are separate incidents, unless they are consecutive logged points
        # (a log every 100 steps whose loss stays NaN is one stretch of NaN, not one incident per line)
        far = apart(frames.spacing(), self.gap_steps)
        grouped = (
            steps.sort("family", "attempt", "step")
            .with_columns(
                new=(pl.col("step") - pl.col("step").shift(1).over("family", "attempt") > far).fill_null(True)
            )
            .with_columns(group=pl.col("new").cast(pl.Int32).cum_sum())
            .group_by("family", "attempt", "group", maintain_order=True)
            .agg(
                pl.col("step").min().alias("start"),
                pl.col("step").max().alias("end"),
                pl.col("why").unique(maintain_order=True),
                pl.col("step").n_unique().alias("bad"),
                # Inf where every value it rests on is infinite (DeepSpeed-Chat's "act_loss: inf"), else NaN
                pl.when(pl.col("value").is_infinite().all() & pl.col("value").is_not_null().any())
                .then(pl.col("value").drop_nulls().first())
                .otherwise(float("nan")).alias("value"),
            )
        )
        # per (metric, attempt): the steps it was logged at, and those with a finite value, with the values (sorted:
        # each group's questions are binary searches, not passes over the table)
        m = frames.metrics.select(metric=pl.col("metric").cast(pl.String), attempt="attempt", step="step",
                                  value="value").drop_nulls("step").sort("metric", "attempt", "step")
        logged = {k: g["step"].unique().to_numpy() for k, g in m.group_by("metric", "attempt")}
        finite = {k: (g["step"].to_numpy(), g["value"].to_numpy())
                  for k, g in m.filter(pl.col("value").is_finite()).group_by("metric", "attempt")}
        empty = np.empty(0, dtype=np.int64)

        def seen_between(metrics: list[str], attempt: int, start: int, end: int) -> int:
            found = [a[(a >= start) & (a <= end)] for a in (logged.get((x, attempt), empty) for x in metrics)]
            return int(np.unique(np.concatenate(found)).size) if found else 0

        out = []
        for family, attempt, _g, start, end, whys, bad, bad_value in grouped.iter_rows():
            where = f"step {start}" if start == end else f"steps {start}-{end}"
            own = [s.LOSS, s.GRAD_NORM] if family == CORE else [family]  # the steps its own series were logged at
            seen = seen_between(own, attempt, start, end)
            if start != end and bad < seen:  # finite points between them: not one stretch of NaN
                where = f"{bad} of the {seen} logged steps from {start} to {end}"
            if family == CORE:
                loss_steps, loss_values = finite.get((s.LOSS, attempt), (empty, empty))
                i = int(np.searchsorted(loss_steps, start))  # the last finite loss before it
                baseline = float(loss_values[i - 1]) if i > 0 else None
                metric = s.LOSS if any(w.startswith(("loss", "NaN check")) for w in whys) else s.GRAD_NORM
                kind, detail = Kind.NAN, f"NaN/Inf at {where}: " + "; ".join(whys[:3])
            else:
                baseline, metric = None, family
                kind, detail = Kind.NON_FINITE, f"NaN/Inf in {family} at {where}"
            # the series finite again after it (a lone NaN batch the run got past is not a run that stayed NaN)
            own_steps = finite.get((metric, attempt), (empty, empty))[0]
            j = int(np.searchsorted(own_steps, end, side="right"))
            after = int(own_steps[j]) if j < own_steps.size else None
            if after is not None:
                detail += f"; {metric.replace('_', ' ')} finite again from step {after}"
            out.append(
                Anomaly(
                    kind=kind, metric=metric, attempt=int(attempt), step=int(start), end_step=int(end),
                    value=bad_value, baseline=baseline, detail=detail, recovered_step=after,
                )
            )
        return sorted(out, key=lambda a: (a.attempt, a.step))
