"""Per-attempt views of a metric, with the history each attempt inherited from the attempts before it."""

from __future__ import annotations

import numpy as np
import polars as pl


def metric_points(metrics: pl.DataFrame, metric: str) -> pl.DataFrame:
    """(attempt, step, value) of one metric, one row per attempt and step, in order."""
    return (
        metrics.filter(pl.col("metric") == metric)
        .select("attempt", "step", "value")
        .unique(["attempt", "step"], keep="last", maintain_order=True)
        .sort("attempt", "step")
    )


def resume_steps(events: pl.DataFrame) -> dict[int, int]:
    """The checkpoint step each attempt loaded, where a checkpoint-load line says so."""
    loads = events.filter((pl.col("kind") == "checkpoint_load") & (pl.col("value") > 0))
    return {int(a): int(v) for a, v in loads.group_by("attempt").agg(pl.col("value").last()).iter_rows()}


def with_lineage(points: pl.DataFrame, attempt: int, resumed_from: int | None) -> pl.DataFrame:
    """An attempt's points preceded by the history it resumed on: earlier attempts' points up to its checkpoint.

    Without a known checkpoint (``resumed_from`` None: from scratch, or an excerpt) the attempt stands alone.
    Column ``own`` tells the attempt's own points from inherited ones.
    """
    own = points.filter(pl.col("attempt") == attempt)
    if own.height == 0 or resumed_from is None:
        return own.with_columns(own=pl.lit(True))
    first = min(int(own["step"].min()), resumed_from + 1)  # type: ignore[arg-type]
    history = (
        points.filter((pl.col("attempt") < attempt) & (pl.col("step") < first))
        .sort("attempt", "step")
        .unique("step", keep="last", maintain_order=True)
        .sort("step")
    )
    return pl.concat([history.with_columns(own=pl.lit(False)), own.with_columns(own=pl.lit(True))])


def trailing_robust_z(
    x: np.ndarray, window: int, floor: float, min_mad_points: int = 5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Robust z-score of each point against the trailing ``window`` points before it (the point itself excluded).

    Centre: rolling median; scale: 1.4826 x rolling median of absolute deviations from the trailing median,
    never below ``floor``; with fewer than ``min_mad_points`` points of history the MAD means nothing and the
    scale is ``floor`` alone. NaNs in ``x`` are skipped in the
    statistics and get z = NaN. The first point has no history and gets z = NaN.
    Returns (z, centre, scale).
    """
    s = pl.Series("x", x, dtype=pl.Float64)
    valid = s.is_not_nan()
    clean = s.set(~valid, None) if (~valid).any() else s  # type: ignore[arg-type]
    centre = clean.shift(1).rolling_median(window_size=window, min_samples=1)
    dev = (clean - clean.rolling_median(window_size=window, min_samples=1)).abs()
    mad = dev.shift(1).rolling_median(window_size=window, min_samples=1)
    history = clean.shift(1).is_not_null().cast(pl.Int32).rolling_sum(window_size=window, min_samples=1)
    mad = pl.select(pl.when(history >= min_mad_points).then(mad).otherwise(None)).to_series()
    scale = (mad * 1.4826).fill_null(0.0).clip(lower_bound=floor)
    z = ((clean - centre) / scale).fill_null(float("nan")).to_numpy()
    return z, centre.fill_null(float("nan")).to_numpy(), scale.to_numpy()


def runs_of_true(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) index pairs, inclusive, of each run of consecutive True values."""
    if mask.size == 0:
        return []
    padded = np.concatenate(([False], mask.astype(bool), [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]
