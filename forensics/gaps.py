"""Holes in the logged steps, and the settings that changed where the log cannot show how.

A *gap* is a step between consecutive logged points of an attempt larger than ``GAP_INTERVALS`` (5) of its usual
step between points (the median; a point is a step at which any metric was logged, so a NaN line without a loss
is not a hole), or a forward jump from the furthest step any earlier attempt logged to the next attempt's first
step. Nothing is inferred across a gap: detectors judge each stretch between gaps on its own history
(:func:`stretch_ids`), and a value seen again only after a gap is reported as such.

A *discontinuity* is a setting that differs on both sides of a gap or of a relaunch that carried on where the last
one stopped (the LR or the batch size by more than 10%, unless a warm-up or ramp-up seen on one side runs straight
through the hole, or an LR after a hole is where the slope of its decay before it would have taken it: its
schedule went on while the log was silent; the fp16 loss scale falling 8x or more), or an LR that jumps between
two consecutive points ten times more than its neighbouring steps move it (and by more than 1%; a rise from an
attempt's first point is its warm-up).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from forensics.findings import Discontinuity, Gap
from forensics.timeline import attempt_groups, metric_rows, one_per_step
from parsers import schema as s

GAP_INTERVALS = 5       # a step gap above this many usual intervals is a hole in the data
LR_CHANGE = 1.10        # across a gap or relaunch, an LR this much higher or lower is reported
SCALE_FALL = 8.0        # an fp16 loss scale this many times lower after a gap is reported
JUMP_SHARE = 0.01       # an LR jump between consecutive points: more than 1% ...
JUMP_FACTOR = 10.0      # ... and ten times the change between its neighbouring points
SETTINGS = (s.LR, s.BATCH_SIZE, s.LOSS_SCALE)


def logged_steps(metrics: pl.DataFrame) -> pl.DataFrame:
    """(attempt, step) at which anything was logged, one row each, in order (values with no step left out).

    >>> logged_steps(pl.DataFrame({"attempt": [1, 1, 0, 1], "step": [5, 3, 9, 5]})).rows()
    [(0, 9), (1, 3), (1, 5)]
    """
    pairs = metrics.lazy().select("attempt", "step").drop_nulls()
    if not packable(pairs):
        return pairs.unique().sort("attempt", "step").collect()
    packed = pairs.select(key=STEP_KEY).sort("key")
    return packed.filter(pl.col("key") != pl.col("key").shift(1).fill_null(-1)).select(*unpacked(metrics)).collect()


# (attempt, step) packed into one integer: sorting, grouping and deduplicating one Int64 column costs a tenth of two
# columns on millions of values; every real run's steps are far below 2**40
PACK = 2**40
STEP_KEY = (pl.col("attempt").cast(pl.Int64) * PACK + pl.col("step").cast(pl.Int64)).alias("key")


def packable(pairs: pl.LazyFrame) -> bool:
    """Whether the (attempt, step) of ``pairs`` (no nulls) fit :data:`STEP_KEY`."""
    lo, top, last = pairs.select(lo=pl.min_horizontal(pl.col("attempt").min(), pl.col("step").min()),
                                 top=pl.col("step").max(), last=pl.col("attempt").max()).collect().row(0)
    return lo is not None and lo >= 0 and top < PACK and last < 2**22


def unpacked(metrics: pl.DataFrame) -> list[pl.Expr]:
    """``attempt`` and ``step`` back out of a ``key`` column, in the metrics' types."""
    return [(pl.col("key") // PACK).cast(metrics.schema["attempt"]).alias("attempt"),
            (pl.col("key") % PACK).cast(metrics.schema["step"]).alias("step")]


FEW = 10  # with fewer step differences than this, an attempt's usual interval is its most common one, not its median


def usual_intervals(steps: pl.DataFrame) -> dict[int, int]:
    """Per attempt, the median step between its logged points; with only a few (a pasted excerpt, where the holes
    can be as many as the intervals) the most common one, else the smallest; 1 for an attempt with one point.

    >>> usual_intervals(pl.DataFrame({"attempt": [0, 0, 0, 0, 1, 1, 2], "step": [10, 20, 30, 50, 5, 6, 1]}))
    {0: 10, 1: 1, 2: 1}
    >>> usual_intervals(pl.DataFrame({"attempt": [1, 0, 1], "step": [3, 7, 9]}))  # (attempts not in order)
    {0: 1, 1: 6}
    """
    attempts, at = steps["attempt"], steps["step"]
    if attempts.null_count() or at.null_count() or not _grouped(attempts.to_numpy()):
        return _usual_intervals_polars(steps)
    found = _usual_in_order(attempts.to_numpy(), at.to_numpy())
    return {int(a): found.get(int(a), 1) for a in attempts.unique().to_list()}


def _grouped(attempts: np.ndarray) -> bool:
    """Whether each attempt's rows are together, in attempt order."""
    return bool((attempts[1:] >= attempts[:-1]).all())


def _usual_in_order(attempts: np.ndarray, steps: np.ndarray) -> dict[int, int]:
    """:func:`usual_intervals` of rows grouped by attempt, in numpy (the polars one is six queries, each costing
    more than the work on a log of a few thousand lines), for the attempts with a positive step difference."""
    keep = (attempts[1:] == attempts[:-1]) & (steps[1:] > steps[:-1])
    owner, diff = attempts[1:][keep], (steps[1:] - steps[:-1])[keep]
    if not diff.size:
        return {}
    order = np.lexsort((diff, owner))
    owner, diff = owner[order], diff[order]
    first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    sizes = np.diff(np.r_[first, owner.size])
    median = (diff[first + (sizes - 1) // 2] + diff[first + sizes // 2]) / 2
    # the most common difference (the larger of equally common ones), and how often it occurs
    runs = np.flatnonzero(np.r_[True, (owner[1:] != owner[:-1]) | (diff[1:] != diff[:-1])])
    run_owner, run_diff, run_size = owner[runs], diff[runs], np.diff(np.r_[runs, owner.size])
    ranked = np.lexsort((run_diff, run_size, run_owner))
    top = ranked[np.r_[run_owner[ranked][1:] != run_owner[ranked][:-1], True]]
    usual = np.where(sizes >= FEW, median, np.where(run_size[top] > 1, run_diff[top], diff[first]))
    return {int(a): max(1, round(float(d))) for a, d in zip(owner[first], usual, strict=True)}


def _usual_intervals_polars(steps: pl.DataFrame) -> dict[int, int]:
    """:func:`usual_intervals` of any rows (nulls, attempts in any order)."""
    diffs = steps.with_columns(d=pl.col("step").diff().over("attempt")).filter(pl.col("d") > 0)
    counts = diffs.group_by("attempt", "d").agg(n=pl.len())
    common = counts.sort("n", "d", descending=[True, True]).group_by("attempt").agg(
        mode=pl.col("d").first(), repeats=pl.col("n").first())
    usual = diffs.group_by("attempt").agg(many=pl.len() >= FEW, median=pl.col("d").median(), least=pl.col("d").min())
    usual = usual.join(common, on="attempt").select(
        "attempt", d=pl.when("many").then("median").when(pl.col("repeats") > 1).then("mode").otherwise("least"))
    found = {int(a): max(1, round(float(d))) for a, d in usual.rows()}
    return {int(a): found.get(int(a), 1) for a in steps["attempt"].unique().to_list()}


def apart(spacing: dict[int, int], least: int, cap: int | None = None) -> pl.Expr:
    """Per row, how many steps apart two of its attempt's points may be and still be one stretch of an incident: at
    least ``least``, else its attempt's usual spacing between logged points (``spacing``, at most ``cap``; 1 for an
    attempt it does not name).

    >>> pl.DataFrame({"attempt": [1, 2, 3]}).select(apart({1: 100, 2: 5000}, 10, cap=1000)).to_series().to_list()
    [100, 1000, 10]
    """
    per = {int(a): int(v) if cap is None else min(int(v), cap) for a, v in spacing.items()}
    return pl.max_horizontal(pl.lit(least), pl.col("attempt").replace_strict(per, default=1, return_dtype=pl.Int64))


def is_gap(step_delta: np.ndarray | int, interval: int) -> np.ndarray | bool:
    """Whether a step delta between consecutive points is a hole in the data."""
    return step_delta > GAP_INTERVALS * max(interval, 1)


def stretch_ids(steps: np.ndarray, interval: int, cuts: np.ndarray | None = None) -> np.ndarray:
    """For consecutive points of one attempt (steps in order), the number of the stretch between gaps each lies in;
    ``cuts``: steps that begin a stretch whatever the step before them (the first step after a "..." in a pasted
    log, :func:`elided_holes`).

    >>> stretch_ids(np.array([10, 20, 30, 500, 510]), 10).tolist(), stretch_ids(np.array([1, 2, 3]), 1, [3]).tolist()
    ([0, 0, 0, 1, 1], [0, 0, 1])
    """
    if steps.size == 0:
        return np.zeros(0, dtype=np.int64)
    breaks = is_gap(np.diff(steps), interval)
    if cuts is not None and len(cuts):  # a cut between two points, whether or not a point lies on it
        breaks = breaks | (np.diff(np.searchsorted(np.asarray(cuts), steps, side="right")) > 0)
    return np.concatenate([[0], np.cumsum(breaks)]).astype(np.int64)


def stretches(own: pl.DataFrame, interval: int, cuts: np.ndarray | None = None) -> list[pl.DataFrame]:
    """The points of one attempt (``step`` in order) cut at its gaps: its stretches, in order.

    >>> [p["step"].to_list() for p in stretches(pl.DataFrame({"step": [10, 20, 30, 500, 510]}), 10)]
    [[10, 20, 30], [500, 510]]
    """
    ids = stretch_ids(own["step"].to_numpy(), interval, cuts)
    return own.with_columns(_stretch=ids).partition_by("_stretch", maintain_order=True, include_key=False)


def stretch_of(steps: np.ndarray, gaps: list[Gap], attempt: int) -> np.ndarray:
    """For an attempt's ``steps``, the number of the stretch between its holes each lies in (0 before the first):
    what detectors judge on its own, so that nothing is measured across a hole.

    >>> stretch_of(np.array([1, 2, 9, 10]), [Gap(after_step=2, before_step=9, attempt=1)], 1).tolist()
    [0, 0, 1, 1]
    """
    return np.searchsorted(cuts_of(gaps, attempt), steps, side="right")


def cuts_of(gaps: list[Gap], attempt: int) -> np.ndarray:
    """The first step after each hole inside ``attempt``: the ``cuts`` of :func:`stretch_ids`."""
    return np.array(sorted(g.before_step for g in gaps if g.attempt == attempt), dtype=np.int64)


def across_gap(gaps: list[Gap], attempt: int, a: int, b: int) -> bool:
    """Whether a hole in the log of this attempt lies between steps ``a`` and ``b`` (then nothing links them).

    >>> across_gap([Gap(after_step=100, before_step=900, attempt=1)], 1, 50, 950), across_gap([], 1, 50, 950)
    (True, False)
    """
    lo, hi = min(a, b), max(a, b)
    return any(g.attempt == attempt and lo <= g.after_step and g.before_step <= hi for g in gaps)


def since_last_gap(gaps: list[Gap], attempt: int, step: int) -> int | None:
    """The first step after the last hole in this attempt's log before ``step`` (None: no hole before it)."""
    starts = [g.before_step for g in gaps if g.attempt == attempt and g.before_step <= step]
    return max(starts) if starts else None


def find_gaps(steps: pl.DataFrame, intervals: dict[int, int] | None = None,
              events: pl.DataFrame | None = None) -> list[Gap]:
    """Holes inside each attempt (with ``events``, also where a pasted log says it left lines out:
    :func:`elided_holes`), then forward jumps between attempts, in order (see the module docstring)."""
    intervals = usual_intervals(steps) if intervals is None else intervals
    out: list[Gap] = []
    holes = _deltas(steps, intervals).filter(pl.col("delta") > GAP_INTERVALS * pl.col("usual"))
    for attempt, prev, step, interval in holes.select("attempt", "prev", "step", "usual").rows():  # few: the holes
        out.append(Gap(after_step=int(prev), before_step=int(step), attempt=int(attempt), interval=int(interval)))
    if events is not None:
        seen = {(g.attempt, g.after_step) for g in out}
        out += [g for g in elided_holes(steps, events, intervals) if (g.attempt, g.after_step) not in seen]
        out.sort(key=lambda g: (g.attempt, g.after_step))
    spans = steps.group_by("attempt").agg(lo=pl.col("step").min(), hi=pl.col("step").max()).sort("attempt").rows()
    furthest: tuple[int, int] | None = None  # (step, attempt)
    for attempt, lo, hi in spans:
        if furthest is not None:
            interval = max(intervals.get(attempt, 1), intervals.get(furthest[1], 1))
            if is_gap(lo - furthest[0], interval):
                out.append(Gap(after_step=furthest[0], before_step=int(lo), attempt=None,
                               attempts=(furthest[1], int(attempt)), interval=interval))
        if furthest is None or hi > furthest[0]:
            furthest = (int(hi), int(attempt))
    return out


def elided_holes(steps: pl.DataFrame, events: pl.DataFrame, intervals: dict[int, int]) -> list[Gap]:
    """Where a pasted log left lines out (a "..." line between two logged steps of an attempt): a hole whatever the
    steps on either side, since what was between them is not in the log.

    >>> steps = pl.DataFrame({"attempt": [1, 1, 1], "step": [100, 1000, 2000]})
    >>> events = pl.DataFrame({"attempt": [1, 1], "step": [100, 1000], "kind": ["elision", "elision"]})
    >>> [(g.after_step, g.before_step) for g in elided_holes(steps, events, {1: 900})]
    [(100, 1000), (1000, 2000)]
    """
    cut = events.filter((pl.col("kind") == s.EV_ELISION) & pl.col("step").is_not_null() & pl.col("attempt").is_not_null())
    if not cut.height:
        return []
    after = steps.select(pl.col("attempt").cast(pl.Int64), pl.col("step").cast(pl.Int64).alias("next")).sort("next")
    marks = cut.select(pl.col("attempt").cast(pl.Int64), pl.col("step").cast(pl.Int64)).unique().sort("step")
    found = marks.with_columns(_at=pl.col("step") + 1).sort("_at").join_asof(
        after, left_on="_at", right_on="next", by="attempt", strategy="forward", check_sortedness=False
    ).drop_nulls("next")
    return [Gap(after_step=int(a), before_step=int(b), attempt=int(att), interval=int(intervals.get(int(att), 1)))
            for att, a, b in found.select("attempt", "step", "next").rows()]


def _deltas(steps: pl.DataFrame, intervals: dict[int, int]) -> pl.DataFrame:
    """Each logged step after an attempt's first with ``prev`` (the step before), ``delta`` and the attempt's
    ``usual`` interval (at least 1)."""
    usual = pl.DataFrame({"attempt": list(intervals), "usual": list(intervals.values())},
                         schema={"attempt": steps.schema["attempt"], "usual": pl.Int64})
    return (steps.with_columns(prev=pl.col("step").shift(1).over("attempt"))
            .join(usual, on="attempt", how="left").with_columns(pl.col("usual").fill_null(1).clip(lower_bound=1))
            .filter(pl.col("prev").is_not_null()).with_columns(delta=pl.col("step") - pl.col("prev")))


def short_holes(steps: pl.DataFrame, intervals: dict[int, int]) -> dict[str, Any] | None:
    """Points missing inside an attempt's regular logging that are too few to be a gap (more than 1.5 and at most
    ``GAP_INTERVALS`` usual intervals between two points): detectors read across them, and the report says where.
    Only where at least 90% of the attempt's steps between points are its usual one (an irregular log has no
    points to miss), and where the point after lies on the same grid (a whole number of usual intervals on). None
    when there are none; else ``places``, ``points_missing`` and the first ``examples`` as (attempt, after_step,
    before_step).

    >>> steps = pl.DataFrame({"attempt": [1] * 30, "step": [10 * i for i in range(1, 15)] + [10 * i for i in range(16, 32)]})
    >>> short_holes(steps, {1: 10})
    {'places': 1, 'points_missing': 1, 'examples': [(1, 140, 160)]}
    """
    deltas = _deltas(steps, intervals)
    regular = deltas.group_by("attempt").agg(share=(pl.col("delta") == pl.col("usual")).mean())
    holes = (deltas.join(regular.filter(pl.col("share") >= 0.9), on="attempt", how="semi")
             .filter((pl.col("delta") > 1.5 * pl.col("usual")) & (pl.col("delta") <= GAP_INTERVALS * pl.col("usual"))
                     # off the grid: the counter started again (mmcv logs iterations 50, 100, ..., 900 of each 930-
                     # iteration epoch: 900 -> 980 misses nothing)
                     & (pl.col("delta") % pl.col("usual") == 0))
             .sort("attempt", "step"))
    if not holes.height:
        return None
    missing = int(((holes["delta"] / holes["usual"]).round() - 1).clip(lower_bound=1).sum())
    return {"places": holes.height, "points_missing": missing,
            "examples": [(int(a), int(p), int(st)) for a, p, st in holes.head(3).select("attempt", "prev", "step").rows()]}


def _series(metrics: pl.DataFrame, metric: str) -> pl.DataFrame:
    return one_per_step(metric_rows(metrics, metric, finite=True), "last")


def _changed(metric: str, before: float, after: float) -> bool:
    if metric == s.LR:
        return before > 0 and after > 0 and not 1 / LR_CHANGE <= after / before <= LR_CHANGE
    if metric == s.BATCH_SIZE:
        return before != after
    return before > 0 and after * SCALE_FALL <= before  # loss scale: a fall only


def _decay_went_on(before: pl.DataFrame, after: pl.DataFrame) -> bool:
    """Whether the LR after a hole is where its decay before it would have taken it: falling, by no more than twice
    what the slope of the (up to 10) points before the hole gives over the hole (a cosine decay steepens as it goes),
    so a schedule that went on while the log was silent is no changed setting, while a cut by hand is.

    >>> b = pl.DataFrame({"step": [31214, 31251], "value": [5.279e-05, 5.277e-05]})
    >>> _decay_went_on(b, pl.DataFrame({"step": [42780], "value": [4.475e-05]}))
    True
    >>> _decay_went_on(b, pl.DataFrame({"step": [42780], "value": [1.7e-05]}))
    False
    """
    last = before.tail(10)
    (s_first, v_first), (s0, v0) = last.select("step", "value").row(0), last.select("step", "value").row(-1)
    s1, v1 = after.select("step", "value").row(0)
    if s0 == s_first or v_first <= v0 or v1 >= v0:
        return False
    return v0 - v1 <= 2 * (v_first - v0) / (s0 - s_first) * (s1 - s0)


def _on_trend(before: pl.DataFrame, after: pl.DataFrame) -> bool:
    """Whether the values on both sides of a hole lie on the straight line that the two points next to it on one
    side draw (a warm-up or a ramp-up carrying on through the hole), within ``LR_CHANGE``."""
    (s0, v0), (s1, v1) = before.select("step", "value").row(-1), after.select("step", "value").row(0)
    lines = []
    if before.height >= 2:
        (sa, va) = before.select("step", "value").row(-2)
        lines.append((v0 - va) / (s0 - sa) if s0 != sa else None)
    if after.height >= 2:
        (sb, vb) = after.select("step", "value").row(1)
        lines.append((vb - v1) / (sb - s1) if sb != s1 else None)
    for slope in (x for x in lines if x):
        predicted = v0 + slope * (s1 - s0)
        if predicted > 0 and 1 / LR_CHANGE <= v1 / predicted <= LR_CHANGE:
            return True
    return False


def discontinuities(metrics: pl.DataFrame, gaps: list[Gap], steps: pl.DataFrame,
                    intervals: dict[int, int] | None = None) -> list[Discontinuity]:
    """Settings that differ across each gap and each relaunch that carried on from the step before it, and LR jumps
    between consecutive points (see the module docstring)."""
    intervals = usual_intervals(steps) if intervals is None else intervals
    firsts = steps.group_by("attempt").agg(pl.col("step").min()).sort("attempt").rows()
    out: list[Discontinuity] = []
    for metric in SETTINGS:
        series = _series(metrics, metric)
        if series.height == 0:
            continue
        pairs: list[tuple[int, int, int, int, str]] = []  # attempt and step before, attempt and step after, across
        for g in gaps:
            before_attempt = g.attempt if g.attempt is not None else g.attempts[0]  # type: ignore[index]
            after_attempt = g.attempt if g.attempt is not None else g.attempts[1]  # type: ignore[index]
            pairs.append((before_attempt, g.after_step, after_attempt, g.before_step, "gap"))
        for attempt, first in firsts:
            earlier = series.filter((pl.col("attempt") < attempt) & (pl.col("step") < first)).sort("step")
            if earlier.height and not is_gap(first - earlier["step"][-1], intervals.get(attempt, 1)):
                pairs.append((int(earlier["attempt"][-1]), int(earlier["step"][-1]), attempt, first, "relaunch"))
        for a0, s0, a1, s1, across in pairs:
            before = series.filter((pl.col("attempt") == a0) & (pl.col("step") <= s0))
            after = series.filter((pl.col("attempt") == a1) & (pl.col("step") >= s1))
            if not before.height or not after.height:
                continue
            v0, v1 = float(before["value"][-1]), float(after["value"][0])
            if _changed(metric, v0, v1) and not (metric != s.LOSS_SCALE and _on_trend(before, after)) \
                    and not (metric == s.LR and _decay_went_on(before, after)):
                out.append(Discontinuity(metric=metric, before=v0, after=v1, step_before=int(before["step"][-1]),
                                         step_after=int(after["step"][0]), attempt_before=a0, attempt_after=a1,
                                         across=across))
        if metric == s.LR:
            out += _lr_jumps(series, intervals, gaps)
    return sorted(out, key=lambda d: (d.step_after, d.metric))


@np.errstate(over="ignore", invalid="ignore")  # a damaged log's 1e308 rates: no jump found, no warning on stderr
def _lr_jumps(series: pl.DataFrame, intervals: dict[int, int], gaps: list[Gap]) -> list[Discontinuity]:
    out: list[Discontinuity] = []
    for attempt, own in attempt_groups(series):
        steps, v = own["step"].to_numpy(), own["value"].to_numpy()
        if v.size < 2:
            continue
        stretch = stretch_ids(steps, intervals.get(int(attempt), 1), cuts_of(gaps, int(attempt)))
        delta = np.abs(np.diff(v))
        same = stretch[1:] == stretch[:-1]  # consecutive points, no gap between
        ref_all = float(np.median(delta[same])) if same.any() else 0.0
        # a move of one printed digit is rounding (a cosine tail printed to 3 digits: 1.01e-06 -> 1.00e-06 -> 9.99e-07)
        last_digit = printed_digit(v)
        digit = np.maximum(last_digit[:-1], last_digit[1:])
        # (only where a digit is a small part of the value: printed to one digit, 1e-4 -> 2e-4 doubles the LR)
        rounding = (delta <= 1.5 * digit) & (digit <= 0.02 * np.minimum(v[:-1], v[1:]))
        for i in np.flatnonzero(same & (delta > JUMP_SHARE * np.minimum(v[:-1], v[1:])) & ~rounding):
            if i == 0 and v[1] > v[0]:
                continue  # a rise from an attempt's first point: its warm-up
            near = [delta[j] for j in (i - 1, i + 1) if 0 <= j < delta.size and same[j]]
            reference = max(near) if near else ref_all
            if delta[i] > JUMP_FACTOR * reference:
                out.append(Discontinuity(metric=s.LR, before=float(v[i]), after=float(v[i + 1]),
                                         step_before=int(steps[i]), step_after=int(steps[i + 1]),
                                         attempt_before=int(attempt), attempt_after=int(attempt), across="jump"))
    return out


def printed_digit(v: np.ndarray, most: int = 6) -> np.ndarray:
    """The value of the last printed digit of each of ``v``, when the series was printed rounded to at most ``most``
    significant digits (the fewest that hold every finite value), else 0: a change of one such digit is rounding.

    >>> printed_digit(np.array([1.02e-06, 1.01e-06, 1.0e-06, 9.99e-07])).tolist()
    [1e-08, 1e-08, 1e-08, 1e-09]
    >>> printed_digit(np.array([0.1234567891, 0.2])).tolist()
    [0.0, 0.0]
    """
    v = np.asarray(v, dtype=float)
    out = np.zeros(v.size)
    ok = np.isfinite(v) & (v != 0)
    if not ok.any():
        return out
    magnitude = np.floor(np.log10(np.abs(v[ok])))
    mantissa = np.abs(v[ok]) / 10.0**magnitude
    for digits in range(1, most + 1):
        scaled = mantissa * 10.0 ** (digits - 1)
        if np.all(np.abs(scaled - np.round(scaled)) < 1e-6 * scaled):
            out[ok] = 10.0 ** (magnitude - (digits - 1))
            return out
    return out
