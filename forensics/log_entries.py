"""The errors, stops and scheduler notices the logs printed, as the chronicle lists them: one entry per distinct
line of an attempt (the same error from 64 ranks is one entry with its count), in the order printed."""

from __future__ import annotations

import polars as pl

from forensics.endings import quote
from forensics.findings import LogEntry
from parsers import schema as s
from parsers.ranks import same_line

LISTED = s.ERROR_KINDS | s.STOP_KINDS | {s.EV_KILLED, s.EV_SCHEDULER, s.EV_NAN_CHECK, s.EV_EXIT_CODE,
                                         *s.DONE_KINDS, s.EV_OOM_RECOVERED, s.EV_SHUTDOWN,
                                         s.EV_EVALUATION_PASS,
                                         s.EV_NETWORK_DROPPED}


def log_entries(events: pl.DataFrame, limit: int = 200) -> list[LogEntry]:
    """Listed events (see ``LISTED``), one per attempt and distinct text (launcher, rank and NCCL prefixes ignored:
    :func:`parsers.ranks.same_line`)."""
    listed = events.filter(pl.col("kind").is_in(list(LISTED)))
    # one end of training that two sources record (a TensorBoard file and the trainer_state.json beside it, their
    # numbers at two precisions) is one entry: one of its rows whole, the one with a time first, then the fuller text
    done = pl.col("kind").is_in(list(s.DONE_KINDS)) & pl.col("step").is_not_null()
    if listed.filter(done).height > 1:
        listed = listed.with_row_index("_row")
        kept = (listed.filter(done)
                .sort([pl.col("wall_time").is_null(), pl.col("text").str.len_chars()], descending=[False, True],
                      maintain_order=True)
                .unique(["attempt", "step"], keep="first", maintain_order=True)["_row"])
        listed = listed.filter(~done | pl.col("_row").is_in(kept.implode())).drop("_row")
    rows = (
        listed.with_columns(same=same_line(pl.col("text")))
        .group_by("attempt", "kind", "same", maintain_order=True)
        .agg(pl.col("step").first(), pl.col("wall_time").first(), pl.col("source").first(), pl.col("line").first(),
             pl.col("text").first(), count=pl.len())
        .sort("attempt", "line", "wall_time", nulls_last=True, maintain_order=True)
        .head(limit)
    )
    return [
        LogEntry(attempt=a, step=st, kind=k, text=quote(t), wall_time=w, source=src or "", line=ln, count=n)
        for a, k, st, w, src, ln, t, n in rows.select(
            "attempt", "kind", "step", "wall_time", "source", "line", "text", "count").rows()
    ]
