"""The OLMo 2 spike score (Team OLMo, "2 OLMo 2 Furious", 2025, section 3.2): "the percentage of values in a time
series that are at least seven standard deviations away from a rolling average of the last 1,000 values".

Choices the paper leaves open, made here: the mean and standard deviation are of the *previous* 1,000 values (the
point itself excluded); two-sided (|x - mean| >= 7 sd); raw values, not logs, as in the paper; a point is scored
once 100 values precede it (the paper's first 1,000 values would leave short text logs unscored; fewer than 100
scored points give no score). Non-finite values are left out.
"""

from __future__ import annotations

import polars as pl

from forensics.gaps import stretches
from forensics.timeline import metric_points

WINDOW = 1000
SIGMAS = 7.0
MIN_HISTORY = 100


def spike_flags(values: pl.Series, window: int = WINDOW, sigmas: float = SIGMAS,
                min_history: int = MIN_HISTORY) -> pl.DataFrame:
    """Per point: ``scored`` (enough history) and ``spike`` (at least ``sigmas`` sd from the trailing mean)."""
    x = values.cast(pl.Float64)
    x = x.set(~x.is_finite(), None) if x.len() else x  # type: ignore[arg-type]
    prev = x.shift(1)
    mean = prev.rolling_mean(window_size=window, min_samples=min_history)
    sd = prev.rolling_std(window_size=window, min_samples=min_history)
    return pl.DataFrame({
        "scored": (mean.is_not_null() & sd.is_not_null() & x.is_not_null()).fill_null(False),
        "spike": ((x - mean).abs() >= sigmas * sd).fill_null(False) & (sd > 0).fill_null(False),
    })


def spike_scores(
    metrics: pl.DataFrame, metric: str, points: pl.DataFrame | None = None, spacing: dict[int, int] | None = None
) -> dict[str, float | dict[str, float | None] | None]:
    """``{"run": pct, "attempts": {attempt: pct}}`` for one metric (percent of scored points; None when fewer
    than 100 points could be scored). The rolling window never crosses an attempt or, given each attempt's usual
    step between points (``spacing``), a hole in the log (:mod:`forensics.gaps`).

    >>> import polars as pl
    >>> m = pl.DataFrame({"attempt": [1] * 300, "step": range(300), "metric": ["loss"] * 300,
    ...                   "value": [2.0 + 0.01 * (i % 7) for i in range(299)] + [9.0]})
    >>> spike_scores(m, "loss")["run"]
    0.5
    """
    points = metric_points(metrics, metric) if points is None else points  # (attempt, step, value), if known
    per: dict[str, float | None] = {}
    hits = scored = 0
    # each attempt's points split off once (a filter per attempt is quadratic in a log whose steps restart at every
    # line); a null attempt matches no filter, so it has no points
    split = points.partition_by("attempt", as_dict=True, maintain_order=True)
    for attempt in points["attempt"].unique().sort().to_list():
        own = split[(attempt,)] if attempt is not None else points.clear()
        parts = stretches(own, spacing.get(attempt, 0)) if spacing and own.height > MIN_HISTORY else [own]
        n = k = 0
        for part in parts:
            if part.height <= MIN_HISTORY:  # no point has the history to be scored
                continue
            flags = spike_flags(part["value"])
            n, k = n + int(flags["scored"].sum()), k + int((flags["scored"] & flags["spike"]).sum())
        per[str(attempt)] = round(100.0 * k / n, 4) if n >= MIN_HISTORY else None
        if n >= MIN_HISTORY:
            hits, scored = hits + k, scored + n
    return {"run": round(100.0 * hits / scored, 4) if scored else None, "attempts": per}
