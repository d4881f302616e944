"""Hangs: the program stopped making progress.

Three kinds of evidence, each a ``hang`` incident with its duration where the clock shows it:

* a silence between consecutive logged steps (no step missing between them) of at least ``min_seconds`` (10
  minutes) and ``factor`` (20) times the attempt's usual time between logged steps;
* a silence after the last logged step before the line that ended the attempt (a cancel, a kill, a stack dump),
  by the same measure;
* stack dumps (py-spy, faulthandler) printed after the last step: someone looked at a hung program. Frames waiting
  in a collective (broadcast, all_reduce, barrier) say which ranks were stuck in communication.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.endings import ending_block
from forensics.findings import Anomaly, Kind
from forensics.gaps import STEP_KEY, is_gap, packable, unpacked
from forensics.timeline import attempt_groups
from parsers import schema as s


def duration(seconds: float) -> str:
    """A duration as the chronicle writes it.

    >>> duration(5400), duration(600), duration(200000), duration(30)
    ('1.5 h', '10 min', '2.3 days', '30 s')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"


def first_wall_times(metrics: pl.DataFrame) -> pl.DataFrame:
    """(attempt, step, wall_time): each logged step's first wall time (the least; NaN only where all are), in
    (attempt, step) order. Rows already in that order (most logs) are read in one pass, each step's rows a run.

    >>> first_wall_times(pl.DataFrame({"attempt": [1, 1, 1, 2], "step": [5, 5, 7, 1],
    ...                                "wall_time": [9.0, 8.0, None, 3.0]})).rows()
    [(1, 5, 8.0), (2, 1, 3.0)]
    """
    timed = metrics.lazy().filter(pl.all_horizontal(pl.col("wall_time", "step", "attempt").is_not_null()))
    if not packable(timed):
        return timed.group_by("attempt", "step").agg(pl.col("wall_time").min()).sort("attempt", "step").collect()
    packed = timed.select(STEP_KEY, "wall_time").collect()
    key, wall = packed["key"].to_numpy(), packed["wall_time"].to_numpy()
    if key.size and bool((key[1:] >= key[:-1]).all()):
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        # (polars' min leaves NaN out, as fmin does)
        packed = pl.DataFrame({"key": key[starts], "wall_time": np.fmin.reduceat(wall, starts)})
    else:
        packed = packed.group_by("key").agg(pl.col("wall_time").min()).sort("key")
    return packed.select(*unpacked(metrics), "wall_time")


@dataclass
class HangDetector:
    """``HangDetector().detect(frames)``."""

    name: Kind = Kind.HANG
    factor: float = 20.0
    min_seconds: float = 600.0

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        first = first_wall_times(frames.metrics)
        # (one attempt, the most common case: the same windows without grouping by it)
        per = (lambda e: e.over("attempt")) if first["attempt"].n_unique() > 1 else (lambda e: e)
        times = (
            first.lazy().with_columns(
                next_step=per(pl.col("step").shift(-1)),
                gap=per(pl.col("wall_time").diff().shift(-1)),
            )
            .with_columns(usual=per(pl.col("gap").median()))
            .collect()
        )
        spacing = frames.spacing()
        out = []
        long = pl.col("gap") >= pl.max_horizontal(pl.lit(self.min_seconds), self.factor * pl.col("usual").fill_null(0.0))
        for attempt, step, _t, nxt, gap, usual in times.filter(long).rows():  # few: no loop over every step
            if not is_gap(nxt - step, spacing.get(attempt, 1)):
                out.append(Anomaly(
                    kind=self.name, metric=s.ITERATION_TIME_MS, attempt=int(attempt), step=int(step),
                    end_step=int(nxt), value=float(gap), baseline=usual,
                    detail=f"nothing logged for {duration(gap)} between steps {step} and {nxt} (usually "
                    f"{usual:.0f} s between logged steps)",
                ))
        out += self._at_the_end(frames, times)
        return out

    def _at_the_end(self, frames: RunFrames, times: pl.DataFrame) -> list[Anomaly]:
        last = times.group_by("attempt").agg(
            step=pl.col("step").last(), wall_time=pl.col("wall_time").last(), usual=pl.col("usual").first()
        )
        ends = dict(frames.steps().group_by("attempt").agg(pl.col("step").max()).rows())
        sources = frames.sources()
        out = []
        for attempt, events in attempt_groups(frames.events):
            end = ends.get(attempt)
            # what was printed after its last step, as its ending is read (start-up lines are not after it)
            mine = ending_block(events, end, sources.get(attempt, frozenset()))
            dumps = mine.filter(pl.col("kind") == s.EV_STACK_DUMP)
            if mine.filter(pl.col("kind").is_in([*(s.ERROR_KINDS - s.WAITING_KINDS), *s.DONE_KINDS,
                                                 s.EV_EXIT])).height:
                # a crash's own dumps (faulthandler as it exits), or a finished or planned-exit program's at its exit
                # ("Stack (most recent call first): <no Python frame>"), not a look at a hung program
                dumps = dumps.clear()
            waits = mine.filter(pl.col("kind") == s.EV_COLLECTIVE_WAIT)
            stop = mine.filter(pl.col("kind").is_in(list(s.ENDING_KINDS | s.ERROR_KINDS | {s.EV_STACK_DUMP}))
                               & pl.col("wall_time").is_not_null())
            seen = last.filter(pl.col("attempt") == attempt)
            silence = None
            if stop.height and seen.height:
                gap = float(stop["wall_time"][0]) - float(seen["wall_time"][0])
                usual = seen["usual"][0] or 0.0
                if gap >= max(self.min_seconds, self.factor * usual):
                    silence = f"nothing logged for {duration(gap)} after step {seen['step'][0]} before: " + (
                        stop["text"][0] or "").strip()[:160]
            if not dumps.height and silence is None:
                continue
            parts = [silence] if silence else []
            if dumps.height:
                parts.append(f"{dumps.height} thread stack dump(s) printed after the last step")
            if waits.height:
                frames_text = sorted({(t or "").strip().split(" (")[0].split(" in ")[-1] for t in waits["text"]})
                parts.append(f"{waits.height} dumped frame(s) waiting in a collective ({', '.join(frames_text[:4])})")
            out.append(Anomaly(
                kind=self.name, metric=s.ITERATION_TIME_MS, attempt=int(attempt),
                step=int(end) if end is not None else 0, end_step=int(end) if end is not None else 0,
                value=None, baseline=None, detail="; ".join(parts),
            ))
        return out
