"""Per-attempt views of a metric, with the history each attempt inherited from the attempts before it."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import numpy as np
import polars as pl

from parsers.schema import EPOCH, EV_CHECKPOINT_LOAD, LOSS


def metric_points(metrics: pl.DataFrame, metric: str) -> pl.DataFrame:
    """(attempt, step, value) of one metric, one row per attempt and step, in order."""
    return one_per_step(metric_rows(metrics, metric), "last")


def metric_rows(metrics: pl.DataFrame, metric: str, finite: bool = False) -> pl.DataFrame:
    """(attempt, step, value) of the rows of one metric (``finite``: its NaN and Inf values left out), as they are:
    ``metrics.filter(...).select(...)`` a column at a time. A DataFrame query costs polars about 0.2 ms of planning
    whatever its size, a Series filter microseconds, and the analysis reads a metric's rows dozens of times per run.

    >>> metric_rows(pl.DataFrame({"attempt": [0, 0], "step": [1, 1], "metric": ["loss", "lr"], "value": [2.0, 0.1]}),
    ...             "loss").rows()
    [(0, 1, 2.0)]
    """
    wanted = metrics.get_column("metric") == metric
    if finite:
        wanted &= metrics.get_column("value").is_finite()
    return pl.DataFrame([metrics.get_column(name).filter(wanted) for name in ("attempt", "step", "value")])


def attempt_groups(frame: pl.DataFrame) -> Iterator[tuple[int, pl.DataFrame]]:
    """(attempt, its rows) for each attempt of ``frame``, as ``frame.group_by("attempt", maintain_order=True)`` gives
    them; where the attempts are in order (a metric's points, most events), slices of the frame: iterating a group_by
    costs polars a query per group, a slice nothing.

    >>> [(a, own["step"].to_list()) for a, own in attempt_groups(pl.DataFrame({"attempt": [1, 1, 2], "step": [1, 2, 9]}))]
    [(1, [1, 2]), (2, [9])]
    """
    labels = frame.get_column("attempt")
    order = labels.to_numpy() if not labels.null_count() else None
    if order is None or not bool((order[1:] >= order[:-1]).all()):
        for (attempt,), own in frame.group_by("attempt", maintain_order=True):
            yield attempt, own  # type: ignore[misc]
        return
    if not order.size:
        return
    starts = np.flatnonzero(np.r_[True, order[1:] != order[:-1]]).tolist()
    for lo, hi in zip(starts, [*starts[1:], order.size], strict=True):
        yield int(order[lo]), frame.slice(lo, hi - lo)


def one_per_step(points: pl.DataFrame, keep: str) -> pl.DataFrame:
    """``points`` with one row per (attempt, step), the ``keep="first"`` or ``"last"`` of each, sorted by them. A
    frame already in that order (most logs: one row per step, in order) is returned as it is, after one check
    instead of a sort and a hash pass.

    >>> one_per_step(pl.DataFrame({"attempt": [0, 0, 0], "step": [2, 1, 2], "value": [1.0, 2.0, 3.0]}), "last").rows()
    [(0, 1, 2.0), (0, 2, 3.0)]
    """
    if in_step_order(points):
        return points
    return points.unique(["attempt", "step"], keep=keep, maintain_order=True).sort("attempt", "step")  # type: ignore[arg-type]


def in_step_order(points: pl.DataFrame, across_attempts: bool = False) -> bool:
    """Whether (attempt, step) strictly increase from row to row (no nulls); ``across_attempts``: whether the steps
    alone do, whatever the attempts."""
    steps = points["step"]
    if points.height < 2:
        return points.height == 0 or steps.null_count() + points["attempt"].null_count() == 0
    if steps.null_count() or points["attempt"].null_count():
        return False
    a, t = points["attempt"].to_numpy(), steps.to_numpy()
    later = t[1:] > t[:-1]
    return bool(later.all()) if across_attempts else bool(((a[1:] > a[:-1]) | ((a[1:] == a[:-1]) & later)).all())


def log_intervals(metrics: pl.DataFrame) -> dict[int, int]:
    """Per attempt, the iterations each logged point covers: the logged ``log_interval`` where the parser recorded
    it (Megatron text logs), else the typical step gap of the loss (1 for per-iteration TensorBoard/W&B points)."""
    logged = metrics.filter(pl.col("metric") == "log_interval").group_by("attempt").agg(pl.col("value").median())
    out = {int(a): max(1, round(v)) for a, v in logged.iter_rows() if v is not None}
    gaps = (
        metrics.filter(pl.col("metric") == "loss").sort("attempt", "step")
        .with_columns(gap=pl.col("step").diff().over("attempt"))
        .group_by("attempt").agg(pl.col("gap").median())
    )
    for attempt, gap in gaps.iter_rows():
        if int(attempt) not in out:
            out[int(attempt)] = max(1, int(gap)) if gap is not None else 1
    return out


def resume_steps(events: pl.DataFrame) -> dict[int, int]:
    """The checkpoint step each attempt loaded, where a checkpoint-load line says so."""
    loads = events.filter((pl.col("kind") == EV_CHECKPOINT_LOAD) & (pl.col("value") > 0))
    return {int(a): int(v) for a, v in loads.group_by("attempt").agg(pl.col("value").last()).iter_rows()}


def mid_run_epoch(metrics: pl.DataFrame, attempt: int) -> float | None:
    """The first logged epoch of an attempt whose epochs show it began well into training (its first epoch over
    2% and over twice the step between its first two: not the first logging interval; a Trainer prints two decimals,
    so two lines inside a long epoch can print the same one), else None; for logs whose steps cannot tell (a console
    that prints no step, so its lines are counted).

    >>> frame = pl.DataFrame({"attempt": [1, 1], "step": [1, 2], "metric": ["epoch", "epoch"], "value": [0.6623, 0.6645]})
    >>> mid_run_epoch(frame, 1), mid_run_epoch(frame.with_columns(value=pl.Series([0.0022, 0.0045])), 1)
    (0.6623, None)
    >>> mid_run_epoch(frame.with_columns(value=pl.Series([0.46, 0.46])), 1), mid_run_epoch(frame.with_columns(
    ...     value=pl.Series([1.0, 1.0])), 1)
    (0.46, None)
    """
    # the epochs first, in one pass: most runs log none, and then their (possibly millions of) losses are not read
    epochs = metrics.filter((pl.col("attempt") == attempt) & (pl.col("metric") == EPOCH) & pl.col("value").is_finite())
    if epochs.height == 0:
        return None
    losses = metrics.filter((pl.col("attempt") == attempt) & (pl.col("metric") == LOSS)).select("step")
    if losses.height:  # the training points' epochs (an evaluation's entry has its own step and epoch)
        epochs = epochs.join(losses.unique(), on="step", how="semi")
    epochs = epochs.unique("step", keep="first").sort("step")["value"].head(2).to_list()  # (an evaluation's copy)
    # (equal whole epochs are a per-epoch log, not two prints inside one epoch)
    if len(epochs) < 2 or not epochs[1] >= epochs[0] > max(0.02, 2 * (epochs[1] - epochs[0])) or (
            epochs[1] == epochs[0] and float(epochs[0]).is_integer()):
        return None
    return float(epochs[0])


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
    x: np.ndarray, window: int, floor: float | np.ndarray, min_mad_points: int = 10, short: int = 8,
    floor_without_history: float | None = None, groups: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Robust z-score of each point against the points before it (the point itself excluded).

    The expected value is the median of the previous ``short`` points, which follows a falling loss closely; the
    residual from it is then standardised by the median of the residuals of the previous ``window`` points and
    1.4826 x the median, over those points, of each residual's distance from the median of the 25 residuals up to it
    (a MAD about a local level: the lag of a bending trend moves over the window, and is not noise), so a steep trend
    (early training) neither hides a spike nor makes one out of the trend.
    The scale is never below ``floor`` (a number, or one per point); with fewer than ``min_mad_points`` points of
    history the noise is unknown and the scale is ``floor_without_history`` (default: ``floor``).
    NaNs in ``x`` are skipped in the statistics and get z = NaN; the first point gets z = NaN. ``groups``: a label
    per point (stretches of the log between holes): no point is judged against another group's.
    Returns (z, level, scale, noise): level is the expected value the point is judged against; noise is the scale
    without any floor (1.4826 x MAD of the residuals before the point, NaN with fewer than ``min_mad_points``), which
    says how unusual a departure is, where the floored scale also says whether it is large enough to matter.
    """
    series = pl.Series(x, dtype=pl.Float64).fill_nan(None)
    several = groups is not None and len(groups) > 0 and groups[0] != groups[-1]  # labels are in order
    bounds = np.flatnonzero(np.diff(groups)) + 1 if several else np.empty(0, dtype=np.int64)  # type: ignore[arg-type]
    if bounds.size > _FEW_GROUPS:  # many stretches: one pass with windows over each
        frame = _trailing_by_group(series, groups, window, short)  # type: ignore[arg-type]
    else:  # each stretch on its own, its rolling medians on polars' null-free kernel where they can be
        edges = [0, *bounds.tolist(), len(series)]
        frame = pl.concat([_trailing(series.slice(a, b - a), window, short) for a, b in pairwise(edges)])
    unknown = floor if floor_without_history is None else floor_without_history
    if isinstance(floor, np.ndarray):
        frame = frame.with_columns(_floor=pl.Series(floor, dtype=pl.Float64))
    lowest, otherwise = (pl.col("_floor") if isinstance(b, np.ndarray) else pl.lit(b) for b in (floor, unknown))
    frame = frame.with_columns(
        scale=pl.when(pl.col("history") >= min_mad_points)
        .then((pl.col("mad") * 1.4826).fill_null(0.0).clip(lower_bound=lowest)).otherwise(otherwise),
        level=pl.col("recent") + pl.col("mid"),
    )
    z = ((frame["x"] - frame["level"]) / frame["scale"]).fill_null(float("nan")).to_numpy()
    noise = frame.select(pl.when(pl.col("history") >= min_mad_points).then(pl.col("mad") * 1.4826))
    return (z, frame["level"].fill_null(float("nan")).to_numpy(), frame["scale"].to_numpy(),
            noise.to_series().fill_null(float("nan")).to_numpy())


# the residuals' spread is read about their median over this many points (not over the whole window): on a curve
# still bending (the start of training, a log every few hundred steps) the lag of the median of the last ``short``
# points changes over the window, and that change is not noise
_LOCAL = 25
_FEW_GROUPS = 64  # stretches (holes + 1) up to which each is computed on its own


def _trailing(series: pl.Series, window: int, short: int) -> pl.DataFrame:
    """The columns :func:`trailing_robust_z` needs, for one stretch."""
    recent = rolling_median(series, short).shift(1)
    resid = series - recent
    centre = rolling_median(resid, window)
    dev = (resid - rolling_median(resid, min(window, _LOCAL))).abs()
    return pl.DataFrame({
        "x": series, "recent": recent,
        "history": series.shift(1).is_not_null().cast(pl.Int32).rolling_sum(window_size=window, min_samples=1),
        "mid": centre.shift(1).fill_null(0.0), "mad": rolling_median(dev, window).shift(1),
    })


def _trailing_by_group(series: pl.Series, groups: np.ndarray, window: int, short: int) -> pl.DataFrame:
    """The columns :func:`trailing_robust_z` needs, each window within its group (``over``)."""
    x_ = pl.col("x")
    history = x_.shift(1).is_not_null().cast(pl.Int32).rolling_sum(window_size=window, min_samples=1).over("g")
    recent = x_.shift(1).rolling_median(window_size=short, min_samples=1).over("g")
    frame = pl.DataFrame({"x": series, "g": groups}).with_columns(history=history, recent=recent)
    r = pl.col("resid")
    return frame.with_columns(resid=x_ - pl.col("recent")).with_columns(
        mid=r.shift(1).rolling_median(window_size=window, min_samples=1).over("g").fill_null(0.0),
        dev=(r - r.rolling_median(window_size=min(window, _LOCAL), min_samples=1).over("g")).abs(),
    ).with_columns(mad=pl.col("dev").shift(1).rolling_median(window_size=window, min_samples=1).over("g"))


def rolling_median(series: pl.Series, window: int) -> pl.Series:
    """``series.rolling_median(window, min_samples=1)`` (nulls skipped). Nulls only at the start (a shifted series,
    a residual from one) are sliced off first: polars' null-aware kernel is 3-5x slower than its plain one.

    >>> rolling_median(pl.Series([None, 1.0, 3.0, 2.0]), 2).to_list()
    [None, 1.0, 2.0, 2.5]
    """
    nulls = series.null_count()
    lead = int(series.is_not_null().arg_max() or 0) if nulls else 0
    if nulls and (nulls != lead or lead == series.len()):
        return series.rolling_median(window_size=window, min_samples=1)
    tail = series.slice(lead).rolling_median(window_size=window, min_samples=1)
    return pl.concat([pl.Series(series.name, [None] * lead, dtype=tail.dtype), tail]) if lead else tail


def runs_of_true(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) index pairs, inclusive, of each run of consecutive True values."""
    if mask.size == 0:
        return []
    padded = np.concatenate(([False], mask.astype(bool), [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def step_bins(points: pl.DataFrame, bins: int) -> pl.DataFrame:
    """(attempt, step, value) reduced per attempt to at most ``bins`` step bins: attempt, step (the bin's first
    logged step), low, mid (median), high; finite values only. A one-step spike keeps its height in ``high``."""
    pts = points.filter(pl.col("value").is_finite()).select("attempt", "step", "value")
    if pts.height == 0:
        return pl.DataFrame(schema={"attempt": pl.Int32, "step": pl.Int64, "low": pl.Float64, "mid": pl.Float64,
                                    "high": pl.Float64})
    return (
        pts.with_columns(lo=pl.col("step").min().over("attempt"), hi=pl.col("step").max().over("attempt"))
        .with_columns(width=(pl.col("hi") - pl.col("lo")) // bins + 1)
        .with_columns(bin=(pl.col("step") - pl.col("lo")) // pl.col("width"))
        .group_by("attempt", "bin")
        .agg(step=pl.col("step").min(), low=pl.col("value").min(), mid=pl.col("value").median(),
             high=pl.col("value").max())
        .sort("attempt", "step")
        .select("attempt", "step", "low", "mid", "high")
    )


def by_step(metrics: pl.DataFrame, metric: str, keep: str = "last", finite: bool = False) -> pl.DataFrame:
    """(attempt, step, value) of one metric with one row per step. ``keep="last"``: the path the run finally took
    (a rollback replaces what the failed attempt logged after the resume point); ``keep="first"``: the first attempt
    that logged each step (schedules, which later attempts repeat). ``finite``: NaN and Inf values left out first."""
    points = metric_rows(metrics, metric, finite)
    if in_step_order(points, across_attempts=True):  # distinct steps in order: nothing to drop or move
        return points
    return points.sort("attempt", "step").unique("step", keep=keep).sort("step")  # type: ignore[arg-type]
