"""Checkpoints the logs show saved: a save done ("successfully saved checkpoint at iteration N"), or a save begun
("saving checkpoint at iteration N", the Trainer's "Saving model checkpoint to .../checkpoint-N") that no error
followed before the log shows a later step. A full disk fails the write after the line that begins it, so a begun
save followed by an error may not have finished: it is not counted as saved, and :func:`saves_said` says so."""

from __future__ import annotations

import polars as pl

from parsers import schema as s


def saved_steps(events: pl.DataFrame) -> pl.Series:
    """The steps of the checkpoints saved in the logs (in the events' order).

    >>> ev = pl.DataFrame({"source": "log", "attempt": 1, "line": [5, 9, 10], "step": [10, 20, 20],
    ...                    "kind": ["checkpoint_saving", "checkpoint_saving", "error"], "value": [10.0, 20.0, None]})
    >>> saved_steps(ev).to_list()  # the save at 20 was followed by an error before any later step
    [10.0]
    """
    return _split(*save_events(events))[0]


def saves_said(events: pl.DataFrame | None) -> str:
    """"; the last checkpoint saved in the logs is at step N", and any save begun after it that an error followed,
    for what to check next (empty when the logs show no save).

    >>> ev = pl.DataFrame({"source": "log", "attempt": 1, "line": [5, 9, 10], "step": [10, 20, 20],
    ...                    "kind": ["checkpoint_saving", "checkpoint_saving", "error"], "value": [10.0, 20.0, None]})
    >>> saves_said(ev)
    '; the last checkpoint saved in the logs is at step 10; a save begun at step 20 was followed by an error before \
the log shows a later step: it may not have finished'
    """
    if events is None or not events.height:
        return ""
    saved, unfinished = _split(*save_events(events))
    last = saved.max() if saved.len() else None
    later = unfinished.filter(unfinished > last) if last is not None else unfinished
    said = f"; the last checkpoint saved in the logs is at step {last:.0f}" if last is not None else ""
    if later.len():
        said += (f"; a save begun at step {later.max():.0f} was followed by an error before the log shows a later "
                 "step: it may not have finished")
    return said


def _split(saves: pl.DataFrame, failed: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
    """The steps of the saves done, and of those begun that an error followed."""
    on = ["source", "line"]
    return (saves.join(failed, on=on, how="anti", nulls_equal=True)["at"].drop_nulls(),
            saves.join(failed, on=on, how="semi", nulls_equal=True)["at"].drop_nulls())


def save_events(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The saves (begun or done) with their step ``at``, and the begun ones an error followed before a later step
    (``source``, ``line``)."""
    if not events.height:
        return (pl.DataFrame(schema={"source": pl.String, "line": pl.Int64, "at": pl.Float64}),
                pl.DataFrame(schema={"source": pl.String, "line": pl.Int64}))
    saves = events.filter(pl.col("kind").is_in([s.EV_CHECKPOINT_SAVE, s.EV_CHECKPOINT_SAVING])).with_columns(
        at=pl.coalesce(pl.col("value").cast(pl.Float64), pl.col("step").cast(pl.Float64)))
    errors = events.filter(pl.col("kind").is_in(list(s.ERROR_KINDS)) & pl.col("step").is_not_null()).select(
        "source", "attempt", error_line="line", error_step="step")
    failed = (saves.filter(pl.col("kind") == s.EV_CHECKPOINT_SAVING)
              .join(errors, on=["source", "attempt"], how="inner", nulls_equal=True)
              .filter((pl.col("error_line") > pl.col("line")) & (pl.col("error_step") <= pl.col("at")))
              .select("source", "line").unique())
    return saves, failed
