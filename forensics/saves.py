"""Checkpoints the logs show saved: a save done ("successfully saved checkpoint at iteration N"), or a save begun
("saving checkpoint at iteration N", the Trainer's "Saving model checkpoint to .../checkpoint-N") that no error
followed before the next step. A full disk fails the write after the line that begins it, so a begun save followed
by an error is none: a relaunch cannot resume from it."""

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
    if not events.height:
        return pl.Series("at", [], dtype=pl.Float64)
    saves = events.filter(pl.col("kind").is_in([s.EV_CHECKPOINT_SAVE, s.EV_CHECKPOINT_SAVING])).with_columns(
        at=pl.coalesce(pl.col("value").cast(pl.Float64), pl.col("step").cast(pl.Float64)))
    errors = events.filter(pl.col("kind").is_in(list(s.ERROR_KINDS)) & pl.col("step").is_not_null()).select(
        "source", "attempt", error_line="line", error_step="step")
    failed = (saves.filter(pl.col("kind") == s.EV_CHECKPOINT_SAVING)
              .join(errors, on=["source", "attempt"], how="inner", nulls_equal=True)
              .filter((pl.col("error_line") > pl.col("line")) & (pl.col("error_step") <= pl.col("at")))
              .select("source", "line").unique())
    return saves.join(failed, on=["source", "line"], how="anti", nulls_equal=True)["at"].drop_nulls()
