"""Bursts of skipped iterations (fp16 overflow), from Megatron's counters and DeepSpeed ``OVERFLOW!`` lines.

A single skipped step now and then is how dynamic loss scaling works; ``min_total`` (3) or more skipped
iterations with gaps of at most ``gap_steps`` between them form a burst. The start-up search for a loss scale
(:func:`forensics.detectors.loss_scale.startup_searches`: the scale halving from its first value with iterations
skipped, until the first line with nothing skipped) is left out; an attempt without loss-scale lines has its first
lines up to the first with nothing skipped left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from forensics.detectors.base import RunFrames
from forensics.detectors.loss_scale import startup_searches
from forensics.findings import Anomaly, Kind
from parsers import schema as s


@dataclass
class SkippedIterationsDetector:
    """``SkippedIterationsDetector().detect(frames)``."""

    name: Kind = Kind.SKIPPED_ITERATIONS
    min_total: int = 3
    gap_steps: int = 20

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        counters = frames.points(s.SKIPPED_ITERATIONS).select("attempt", "step", skipped=pl.col("value"))
        overflows = (
            frames.events.filter((pl.col("kind") == s.EV_OVERFLOW) & pl.col("step").is_not_null())
            .select("attempt", "step")
            .unique()
            .with_columns(skipped=pl.lit(1.0))
        )
        per_step = pl.concat([counters, overflows]).group_by("attempt", "step").agg(pl.col("skipped").max())
        per_step = per_step.sort("attempt", "step")
        clean = per_step.filter(pl.col("skipped") == 0).group_by("attempt").agg(first_clean=pl.col("step").min())
        searches = startup_searches(frames)
        if searches:  # the start-up search, as the loss-scale lines show it
            clean = clean.join(pl.DataFrame({"attempt": list(searches), "search_end": [
                x.last_step for x in searches.values()]}, schema={"attempt": pl.Int32, "search_end": pl.Int64}),
                on="attempt", how="full", coalesce=True).with_columns(
                first_clean=pl.max_horizontal("first_clean", "search_end")).drop("search_end")
        skips = (
            per_step.join(clean, on="attempt", how="left", maintain_order="left")
            .filter((pl.col("skipped") > 0) & (pl.col("step") > pl.col("first_clean").fill_null(-1)))
        )
        if skips.height == 0:
            return []
        groups = (
            skips.with_columns(
                new=(pl.col("step") - pl.col("step").shift(1).over("attempt") > self.gap_steps).fill_null(True)
            )
            .with_columns(g=pl.col("new").cast(pl.Int32).cum_sum())
            .group_by("attempt", "g", maintain_order=True)
            .agg(start=pl.col("step").min(), end=pl.col("step").max(), total=pl.col("skipped").sum())
            .filter(pl.col("total") >= self.min_total)
        )
        return [
            Anomaly(
                kind=Kind.SKIPPED_ITERATIONS, metric=s.SKIPPED_ITERATIONS, attempt=int(a), step=int(start),
                end_step=int(end), value=float(total), baseline=0.0,
                detail=f"{total:.0f} iterations skipped (fp16 overflow) between steps {start} and {end}",
            )
            for a, _g, start, end, total in groups.iter_rows()
        ]
