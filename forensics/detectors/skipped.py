"""Bursts of skipped iterations (fp16 overflow), from Megatron's counters, DeepSpeed's running count
(``step=2500, skipped=1586``: the skips between two of its lines are the difference of their counts) and overflow
lines (``OVERFLOW!``, ``Overflow detected. Skipping step``: one skipped step each; lines of one step that reduce the
scale to different values are different steps, as in a console whose lines carry no step).

A single skipped step now and then is how dynamic loss scaling works; ``min_total`` (3) or more skipped
iterations with gaps of at most ``gap_steps`` between them (or on consecutive logged lines up to ``line_steps`` (100)
apart: a storm in a log every 100 steps) form a burst. The start-up search for a loss scale
(:func:`forensics.detectors.loss_scale.startup_searches`: the scale halving from its first value with iterations
skipped, until the first line with nothing skipped) is left out; an attempt without loss-scale lines has its first
lines up to the first with nothing skipped left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from forensics.detectors.base import RunFrames
from forensics.detectors.loss_scale import startup_searches
from forensics.findings import Anomaly, Kind
from forensics.gaps import apart
from parsers import schema as s


@dataclass
class SkippedIterationsDetector:
    """``SkippedIterationsDetector().detect(frames)``."""

    name: Kind = Kind.SKIPPED_ITERATIONS
    min_total: int = 3
    gap_steps: int = 20
    line_steps: int = 100

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        groups, running = self.groups(frames)
        groups = groups.filter(pl.col("total") >= self.min_total)
        if groups.height == 0:
            return []
        return self._anomalies(frames, groups, running)

    def lone(self, frames: RunFrames) -> pl.DataFrame:
        """The skipped iterations outside any burst (fewer than ``min_total`` together), per group: ``attempt``,
        ``start``, ``end`` (the steps whose lines counted them), ``total``; empty when there are none."""
        groups, _ = self.groups(frames)
        return groups.filter(pl.col("total") < self.min_total).select("attempt", "start", "end", "total")

    def groups(self, frames: RunFrames) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Every group of skipped iterations (burst or not) after the start-up search, and DeepSpeed's running counts
        (computed once per run)."""
        return frames.remember(("skipped groups", self.gap_steps), lambda: self._groups(frames))

    def _groups(self, frames: RunFrames) -> tuple[pl.DataFrame, pl.DataFrame]:
        counters = frames.points(s.SKIPPED_ITERATIONS).select("attempt", "step", skipped=pl.col("value"))
        overflows = (
            frames.events.filter(pl.col("kind").is_in(list(s.OVERFLOW_KINDS)) & pl.col("step").is_not_null())
            .unique(["attempt", "step", "value"])
            .group_by("attempt", "step").agg(skipped=pl.len().cast(pl.Float64))
        )
        running = _running_counts(frames.events)
        if running.height:  # DeepSpeed's count holds every skip up to its last line: its overflow lines are in it
            counted = running.group_by("attempt").agg(last_count=pl.col("step").max())
            overflows = overflows.join(counted, on="attempt", how="left").filter(
                pl.col("last_count").is_null() | (pl.col("step") > pl.col("last_count"))).drop("last_count")
        # (a count's row starts where the count before it left off; an attempt's first count, before the log: null)
        per_step = (pl.concat([counters.with_columns(since=pl.col("step")), overflows.with_columns(since=pl.col("step")),
                               running.select("attempt", "step", "skipped", "since")], how="diagonal_relaxed")
                    .group_by("attempt", "step").agg(pl.col("skipped").max(),
                                                     pl.col("since").sort(nulls_last=False).first())
                    .sort("attempt", "step"))
        # (DeepSpeed's "step=0, skipped=0" comes before any step was taken: nothing there was clean yet)
        clean = per_step.filter((pl.col("skipped") == 0) & (pl.col("step") > 0)).group_by("attempt").agg(
            first_clean=pl.col("step").min())
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
        # (skips on consecutive logged lines up to ``line_steps`` apart are one burst: a storm in a log every 100 steps;
        # a log every 1,000 steps shows the scaler's usual overflow, one per 1,000 iterations, on many lines in a row)
        far = apart(frames.spacing(), self.gap_steps, cap=self.line_steps)
        groups = (
            skips.with_columns(
                new=(pl.col("step") - pl.col("step").shift(1).over("attempt") > far).fill_null(True)
            )
            .with_columns(g=pl.col("new").cast(pl.Int32).cum_sum())
            .group_by("attempt", "g", maintain_order=True)
            .agg(start=pl.col("step").min(), end=pl.col("step").max(), total=pl.col("skipped").sum(),
                 since=pl.col("since").min(), known=pl.col("since").is_not_null().all())
        )
        return groups, running

    def _anomalies(self, frames: RunFrames, groups: pl.DataFrame, running: pl.DataFrame) -> list[Anomaly]:
        # what says the skips were fp16 overflows: an overflow line or a loss scale in the attempt (else it is only the
        # usual reason, and said as such)
        seen = set(frames.events.filter(pl.col("kind").is_in(list(s.OVERFLOW_KINDS)))["attempt"].to_list()) | set(
            frames.points(s.LOSS_SCALE)["attempt"].unique().to_list())
        out = []
        for a, _g, start, end, total, since, known in groups.iter_rows():
            count = running.filter((pl.col("attempt") == a) & pl.col("step").is_between(start, end)).tail(1)
            # (its own step, unless the log's steps are counted lines: then fewer than the steps it skipped)
            skips, at = (count["count"][0], count["step"][0]) if count.height else (None, None)
            share = skips / at if skips is not None and at and skips <= at else None
            part = (f" at step={at}" + (f", {math.floor(share * 1000) / 10:g}% of its steps" if share >= 0.01 else "")
                    if share is not None else "")
            counted = f" (DeepSpeed's running count: skipped={skips:.0f}{part})" if skips is not None else ""
            span = (f"at step {end}" if known and min(since, start) == end else
                    f"between steps {min(since, start)} and {end}" if known else
                    f"by step {end}" if share is not None else f"by the count printed after step {end}")
            out.append(Anomaly(
                kind=Kind.SKIPPED_ITERATIONS, metric=s.SKIPPED_ITERATIONS, attempt=int(a), step=int(start),
                end_step=int(end), value=float(total), baseline=0.0,
                detail=f"{total:.0f} iterations skipped " + ("(fp16 overflow)" if a in seen else "(no overflow line "
                       "or loss scale in the log says why; an fp16 overflow is the usual one)") + f" {span}{counted}",
            ))
        return out


def _running_counts(events: pl.DataFrame) -> pl.DataFrame:
    """DeepSpeed's running counts of skipped steps (``step=N, skipped=M``) as skips per line: (attempt, step,
    skipped since the attempt's count before, ``since``: the step after that count (null for an attempt's first
    count: since before the log), ``count``: M). A count that goes down started again (a relaunch)."""
    count = pl.col("count")
    return (
        events.filter((pl.col("kind") == s.EV_SKIPPED_COUNT) & pl.col("step").is_not_null()
                      & pl.col("value").is_not_null())
        .select("attempt", "step", count=pl.col("value"))
        .unique(["attempt", "step"], keep="last", maintain_order=True)
        .sort("attempt", "step")
        .with_columns(before=count.shift(1).over("attempt"), since=pl.col("step").shift(1).over("attempt") + 1)
        .with_columns(skipped=pl.when(pl.col("before").is_null() | (count < pl.col("before"))).then(count)
                      .otherwise(count - pl.col("before")),
                      since=pl.when(count < pl.col("before")).then(None).otherwise("since"))
    )


def untrained(frames: RunFrames) -> dict[int, tuple[int, int, int, bool]]:
    """Per attempt in which no logged iteration changed the weights: every step it logged has a skipped count that is
    its whole interval (Megatron's ``number of skipped iterations:   1`` on each line of a log every iteration, an fp16
    loss-scale search that never settled): (iterations skipped, first step, last step, whether an overflow line or a
    loss scale says they were fp16 overflows). An attempt with a line that skipped less, or none counted, is not one.
    """
    def compute() -> dict[int, tuple[int, int, int, bool]]:
        counts = frames.points(s.SKIPPED_ITERATIONS)
        if not counts.height:
            return {}
        usual = frames.intervals()
        intervals = frames.points(s.LOG_INTERVAL).select("attempt", "step", interval=pl.col("value"))
        lines = (frames.steps().filter(pl.col("attempt").is_in(counts["attempt"].unique().implode()))
                 .join(counts.select("attempt", "step", skipped=pl.col("value")), on=["attempt", "step"], how="left")
                 .join(intervals, on=["attempt", "step"], how="left")
                 .with_columns(interval=pl.col("interval").fill_null(pl.col("attempt").replace_strict(
                     {int(a): int(v) for a, v in usual.items()}, default=1, return_dtype=pl.Float64))))
        per = lines.group_by("attempt").agg(
            every=(pl.col("skipped") >= pl.col("interval")).fill_null(False).all(), total=pl.col("skipped").sum(),
            first=pl.col("step").min(), last=pl.col("step").max())
        overflowed = set(frames.events.filter(pl.col("kind").is_in(list(s.OVERFLOW_KINDS)))["attempt"].to_list()) \
            | set(frames.points(s.LOSS_SCALE)["attempt"].unique().to_list())
        return {int(a): (int(total), int(first), int(last), a in overflowed)
                for a, every, total, first, last in per.select("attempt", "every", "total", "first", "last").iter_rows()
                if every and total > 0}
    return frames.remember("untrained", compute)
