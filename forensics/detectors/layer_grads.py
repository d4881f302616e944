"""Per-layer gradient norms: which layer group's share of the gradient drifts, and where a spike starts.

GLM-130B (Zeng et al. 2023, section 3): "a training collapse usually lags behind a spike in gradient norm by a few
training steps ... usually caused by the embedding layer's abnormal gradients ... its gradient norm is often several
magnitude larger than those of other layers". Runs that log per-layer or per-parameter grad norms (``grad_norm/<group>/
<layer>/<parameter>`` in the canonical frames, :func:`parsers.metric_names.layer_grad_name`) get two findings, both
:attr:`~forensics.findings.Kind.GRAD_NORM_RATIO`:

* **drift**: a *unit* (one group of one layer: ``embedding``, ``attention 3``, ``mlp 3``; its parameters' norms
  combined as sqrt(sum of squares)) whose ratio to the median of the other units at the same step rose at least
  ``DRIFT`` (3x) above its lowest level, and at least ``NOISE_SIGMAS`` (4) robust sigmas of its own scatter, on a
  rolling median of ``SMOOTH`` points (9 to 25: a twentieth of the attempt), and stands at or above that median there;
  its largest rise (in log) is at least ``RELATIVE`` (2) times the median unit's largest rise, so a slow wander that
  every layer group shares (correlated noise in every share) is not one group's drift. The first tenth of each attempt
  is burn-in (the shares settle while training starts). A lone outlier never moves a rolling median: a clean run with
  heavy-tailed per-layer noise raises none. The onset is where the smoothed ratio last stood within 20% of its usual
  level (its median before the rise) before it rose (less half the median's window, by which it lags). One finding per
  group and attempt (its most drifted unit; the detail counts the others of the group that drifted too). Each stretch
  of an attempt between holes in the log is judged on its own (nothing is compared across a hole).
* **origin** (:func:`spike_origins`, on the anomalies found): for a grad-norm spike, divergence or NaN, the unit
  whose grad norm departed first from its own trailing median (at least ``DEPART`` (3x) and ``DEPART_SIGMAS`` (5)
  robust sigmas) and stayed departed at every point up to the incident's step, within ``LEAD_WINDOW`` logged points
  before it: when one unit departed before every other still departed there, or was the only one, or rose 3x more
  (in its own multiple) than every other that departed at that step. (A lone heavy-tailed outlier in some layer a
  few steps before is not the incident's start: it must still be up.)

>>> import numpy as np, polars as pl
>>> from parsers import schema as s
>>> from forensics.detectors.base import RunFrames
>>> rng = np.random.default_rng(0)
>>> steps = np.arange(1, 2001)
>>> rows = []
>>> for name, level in (("embedding/-/wte", 1.0), ("attention/0/h.0.attn", 1.0), ("mlp/0/h.0.mlp", 2.0),
...                     ("attention/1/h.1.attn", 1.0), ("mlp/1/h.1.mlp", 2.0)):
...     v = level * np.exp(0.1 * rng.standard_normal(steps.size))
...     if name.startswith("embedding"):
...         v = v * np.where(steps > 1500, np.exp((steps - 1500) / 100), 1.0)  # 3x by step 1610, rising
...     rows.append(pl.DataFrame({"step": steps, "value": v, "metric": s.LAYER_GRAD_PREFIX + name}))
>>> m = s.conform(pl.concat(rows).with_columns(run=pl.lit("r"), source=pl.lit("x"), attempt=1), s.METRICS_SCHEMA)
>>> [found] = LayerGradDetector().detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
>>> found.metric, found.step, found.end_step, found.value > 50
('grad_norm/embedding/-', 1520, 2000, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind, shown, step_count
from forensics.gaps import since_last_gap, stretch_of
from forensics.timeline import attempt_groups
from parsers import schema as s

DRIFT = 3.0           # a unit's ratio to the median unit must rise this far above its low
NOISE_SIGMAS = 4.0    # ... and this many robust sigmas of its own scatter about its rolling median
SMOOTH = (9, 25)      # points in the rolling median: a twentieth of the attempt, within these bounds
BURN_IN = 0.1         # the first tenth of an attempt's points: the shares settle while training starts
MIN_UNITS = 3         # a median unit needs at least three units logged at the step
MIN_POINTS = 40       # an attempt needs this many steps with per-layer norms for a drift
RELATIVE = 2.0        # a drifting unit rose at least this many times (in log) the median unit's largest rise
DEPART = 3.0          # origin: a unit's grad norm at least this multiple of its trailing median ...
DEPART_SIGMAS = 5.0   # ... and this many robust sigmas of its own scatter
TRAILING = 20         # points in the trailing median a departure is measured against
LEAD_WINDOW = 20      # logged points before an incident where its origin is sought
ORIGIN_OF = (Kind.GRAD_NORM_SPIKE, Kind.DIVERGENCE, Kind.NAN)


@dataclass(frozen=True)
class LayerGradDetector:
    """Layer groups whose share of the grad norm drifted up (see the module docstring)."""

    name: Kind = Kind.GRAD_NORM_RATIO

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        units, names = unit_norms(frames)
        if units.height == 0:
            return []
        gaps = frames.gaps()
        out = []
        for attempt, own in attempt_groups(units):
            # nothing is measured across a hole in the log: each stretch between holes on its own
            stretch = stretch_of(own["step"].to_numpy(), gaps, int(attempt))
            for part in np.unique(stretch):
                out += _drifts(int(attempt), own.filter(pl.Series(stretch == part)), names)  # type: ignore[arg-type]
        return sorted(out, key=lambda a: (a.attempt, a.step, a.metric))


def unit_label(group: str, layer: str) -> str:
    """How the chronicle names a unit.

    >>> unit_label("embedding", "-"), unit_label("attention", "3")
    ('embedding', 'attention 3')
    """
    return group if layer == s.NO_LAYER else f"{group} {layer}"


def unit_norms(frames: RunFrames) -> tuple[pl.DataFrame, dict[int, tuple[str, str, str]]]:
    """(attempt, step, unit, norm): per step, each unit's grad norm (its parameters' norms combined as sqrt(sum of
    squares); the last value of a tag logged twice at a step), sorted by attempt, unit and step, with ``unit`` an
    integer id; and the ids' names: id -> (metric name ``grad_norm/<group>/<layer>``, group, layer). Empty when the
    run logs no per-layer grad norms."""
    return frames.remember("layer_grad_units", lambda: _unit_norms(frames.metrics))


def layer_grad_metrics(metrics: pl.DataFrame) -> list[str]:
    """The per-layer grad-norm series among a run's metrics, by name."""
    return sorted(m for m in metrics["metric"].unique().cast(pl.String).to_list() if m and s.is_layer_grad(m))


def _unit_norms(metrics: pl.DataFrame) -> tuple[pl.DataFrame, dict[int, tuple[str, str, str]]]:
    names = layer_grad_metrics(metrics)
    schema = {"attempt": pl.Int32, "step": pl.Int64, "unit": pl.UInt32, "norm": pl.Float64}
    if not names:
        return pl.DataFrame(schema=schema), {}
    parts = [n.split("/", 3) for n in names]
    pairs = sorted({(p[1], p[2]) for p in parts})
    uid = {pair: i for i, pair in enumerate(pairs)}
    table = pl.DataFrame({"metric": names, "unit": [uid[(p[1], p[2])] for p in parts]},
                         schema={"metric": metrics.schema["metric"], "unit": pl.UInt32})
    single = len(pairs) == len(names)  # one series per unit: no sum over parameters
    rows = (
        metrics.lazy().filter(pl.col("metric").is_in(names) & pl.col("value").is_finite() & (pl.col("value") >= 0))
        .select("attempt", "step", "metric", "value")
        .join(table.lazy(), on="metric")
        .unique(subset=["attempt", "step", "metric"], keep="last", maintain_order=True)
    )
    if single:
        rows = rows.select("attempt", "step", "unit", norm="value")
    else:
        rows = rows.group_by("attempt", "step", "unit").agg(norm=(pl.col("value") ** 2).sum().sqrt())
    rows = rows.filter(pl.col("norm") > 0).sort("attempt", "unit", "step").collect()
    named = {i: (f"{s.LAYER_GRAD_PREFIX}{g}/{layer}", g, layer) for (g, layer), i in uid.items()}
    return rows.select(list(schema)).cast(schema), named  # type: ignore[arg-type]


def layer_coverage(record: dict[str, Any], frames: RunFrames) -> dict[str, Any]:
    """A run's coverage record (:func:`forensics.coverage.coverage`) with its per-layer grad-norm series out of
    ``other_scalars`` (they are not checked for NaN/Inf only) and under ``layer_grad_norms``: ``series`` (how many),
    ``units`` (the layer groups they make, top to bottom), ``points`` (values logged). Unchanged for a run without
    them."""
    layered = set(layer_grad_metrics(frames.metrics))
    if not layered:
        return record
    units, names = unit_norms(frames)
    ids = sorted({int(u) for u in units["unit"].unique().to_list()}, key=lambda i: unit_order(names[i][0]))
    return {**record, "other_scalars": [m for m in record.get("other_scalars", []) if m not in layered],
            "layer_grad_norms": {"series": len(layered), "units": [unit_label(*names[i][1:]) for i in ids],
                                 "points": int(frames.metrics.select(pl.col("metric").is_in(list(layered)).sum()).item())}}


def unit_order(unit: str) -> tuple[int, int, int, str]:
    """Units top to bottom: the embedding, then each layer's groups in depth order, then the final norm and the
    output head.

    >>> sorted(["grad_norm/head/-", "grad_norm/mlp/1", "grad_norm/attention/1", "grad_norm/mlp/0", "grad_norm/embedding/-"],
    ...        key=unit_order)
    ['grad_norm/embedding/-', 'grad_norm/mlp/0', 'grad_norm/attention/1', 'grad_norm/mlp/1', 'grad_norm/head/-']
    """
    _, group, layer = unit.split("/")
    rank = s.LAYER_GROUPS.index(group) if group in s.LAYER_GROUPS else len(s.LAYER_GROUPS)
    if layer == s.NO_LAYER:
        return (0 if group == "embedding" else 2, 0, rank, unit)
    return (1, int(layer) if layer.isdigit() else 0, rank, unit)


def _smooth_width(n: int) -> int:
    return int(np.clip(n // 20, *SMOOTH))


def others_median(units: pl.DataFrame) -> pl.DataFrame:
    """``units`` (at steps where at least ``MIN_UNITS`` are logged) with ``median``: the median of the *other* units'
    norms at the step (leaving the unit itself out, so a unit rising through the middle of the others does not drag
    its own reference up with it).

    >>> u = pl.DataFrame({"attempt": 1, "step": [1] * 5, "unit": list("abcde"), "norm": [1.0, 2.0, 3.0, 4.0, 10.0]})
    >>> others_median(u).sort("unit")["median"].to_list()
    [3.5, 3.5, 3.0, 2.5, 2.5]
    """
    by = ("attempt", "step")
    # leaving out one of n sorted values v, the others' median is among v[p-1], v[p], v[p+1] (p = n // 2), chosen by
    # where the one left out stands against v[p] (an equal value counts as v[p] itself)
    order = units.group_by(by).agg(n=pl.len(), v=pl.col("norm").sort()).filter(pl.col("n") >= MIN_UNITS).select(
        *by, "n", a=pl.col("v").list.get(pl.col("n") // 2 - 1), b=pl.col("v").list.get(pl.col("n") // 2),
        c=pl.col("v").list.get(pl.col("n") // 2 + 1, null_on_oob=True))
    joined = units.join(order, on=list(by))
    x, a, b, c = pl.col("norm"), pl.col("a"), pl.col("b"), pl.col("c")
    odd = (pl.when(x < b).then((b + c) / 2).when(x > b).then((a + b) / 2).otherwise((a + c) / 2))
    even = pl.when(x < b).then(b).otherwise(a)
    return joined.with_columns(median=pl.when(pl.col("n") % 2 == 1).then(odd).otherwise(even)).drop("n", "a", "b", "c")


def _drifts(attempt: int, units: pl.DataFrame, names: dict[int, tuple[str, str, str]]) -> list[Anomaly]:
    units = others_median(units)
    steps = units["step"].unique().sort()
    n_steps = steps.len()
    if n_steps < MIN_POINTS:
        return []
    width = _smooth_width(n_steps)
    first = int(steps[int(n_steps * BURN_IN)])
    ratios = (
        units.filter(pl.col("step") >= first)
        .sort("unit", "step")
        .with_columns(r=(pl.col("norm") / pl.col("median")).log())
        .with_columns(smooth=pl.col("r").rolling_median(width, min_samples=width).over("unit"))
    )
    found: dict[str, list[tuple[float, Anomaly]]] = {}
    rises, hits = [], []
    for (unit,), own in ratios.group_by("unit", maintain_order=True):
        rise, hit = _drift(attempt, names[int(unit)], own, width)  # type: ignore[arg-type]
        rises.append(rise)
        if hit:
            hits.append((rise, names[int(unit)][1], hit))  # type: ignore[arg-type]
    typical = float(np.median(rises)) if rises else 0.0
    for rise, group, hit in hits:
        if rise >= RELATIVE * typical:  # not a wander every layer group shares
            found.setdefault(group, []).append((rise, hit))
    out = []
    for group, hits in found.items():
        hits.sort(key=lambda h: (-h[0], h[1].step))
        top = hits[0][1]
        if len(hits) > 1:
            others = ", ".join(a.metric.rsplit("/", 1)[-1] for _, a in hits[1:6]) + (", ..." if len(hits) > 6 else "")
            top.detail += f"; {len(hits) - 1} other {group} unit{'s' if len(hits) > 2 else ''} drifted too ({others})"
        out.append(top)
    return out


def _drift(attempt: int, name: tuple[str, str, str], own: pl.DataFrame,
           width: int) -> tuple[float, Anomaly | None]:
    """The unit's largest rise (log of the smoothed ratio over its running low), and its drift finding if any."""
    smooth = own["smooth"].to_numpy()
    ok = np.isfinite(smooth)
    if ok.sum() < width:
        return 0.0, None
    r = own["r"].to_numpy()
    sigma = 1.4826 * float(np.median(np.abs(r[ok] - smooth[ok])))
    need = max(math.log(DRIFT), NOISE_SIGMAS * sigma)
    low = np.fmin.accumulate(np.where(ok, smooth, np.inf))
    rise = np.where(ok, smooth - low, 0.0)
    fired = np.flatnonzero(ok & (rise >= need) & (smooth >= 0.0))
    if fired.size == 0:
        return float(rise.max()), None
    at = int(fired[0])
    base = float(low[at])
    low_at = int(np.flatnonzero(smooth == base)[0])
    usual = float(np.median(smooth[: at][ok[: at]]))  # its level before the rise
    near = np.flatnonzero(ok[: at] & (np.arange(at) >= low_at) & (smooth[: at] - usual <= math.log(1.2)))
    onset = max(int(near[-1]) - width // 2 + 1, 0) if near.size else low_at
    peak_at = at + int(np.nanargmax(np.where(ok[at:], smooth[at:], -np.inf)))
    steps = own["step"].to_numpy()
    unit, group, layer = name
    label = unit_label(group, layer)
    peak, start = math.exp(float(smooth[peak_at])), math.exp(base)
    still = " and still rising at the last point" if peak_at == len(smooth) - 1 else ""
    detail = (f"{label} grad norm rose from {times(start)} to {times(peak)} the median of the other layer groups "
              f"between steps {int(steps[onset])} and {int(steps[peak_at])}{still} (rolling median of {width} points; "
              f"GLM-130B: abnormal embedding gradients preceded its collapses)")
    return float(rise.max()), Anomaly(
        Kind.GRAD_NORM_RATIO, unit, attempt, int(steps[onset]), int(steps[peak_at]), round(peak, 4), round(start, 4),
        detail=detail)


def times(x: float) -> str:
    """A ratio as the chronicle says it.

    >>> times(0.834), times(7.06), times(712.4), times(25310.0)
    ('0.83x', '7.1x', '712x', '25,310x')
    """
    return f"{x:.2g}x" if x < 1 else f"{x:.1f}x" if x < 10 else f"{x:,.0f}x"


def spike_origins(anomalies: list[Anomaly], frames: RunFrames) -> list[Anomaly]:
    """For each grad-norm or loss spike, divergence or NaN, where its grad norm started: the unit that departed from
    its own trailing median first (see the module docstring), as a :attr:`Kind.GRAD_NORM_RATIO` finding at the
    departure, or nothing when no unit led."""
    incidents = [a for a in anomalies if a.kind in ORIGIN_OF]
    if not incidents:
        return []
    units, names = unit_norms(frames)
    if units.height == 0:
        return []
    excess = frames.remember("layer_grad_excess", lambda: _excess(units, frames.gaps()))
    by_attempt = {int(k[0]): part.sort("step") for k, part in excess.group_by("attempt")}  # type: ignore[arg-type]
    step_arrays = {k: part["step"].to_numpy() for k, part in by_attempt.items()}
    intervals, gaps = frames.intervals(), frames.gaps()
    out, seen = [], set()
    for a in sorted(incidents, key=lambda x: (x.attempt, x.step)):
        window = LEAD_WINDOW * intervals.get(a.attempt, 1)
        part = by_attempt.get(a.attempt)
        if part is None:
            continue
        steps = step_arrays[a.attempt]
        since = max(a.step - window, since_last_gap(gaps, a.attempt, a.step) or a.step - window)  # not across a hole
        lo, hi = np.searchsorted(steps, since, "left"), np.searchsorted(steps, a.step, "right")
        near = part.slice(int(lo), int(hi - lo))  # the incident's window, without a scan of every point
        # each unit's last point up to the incident, when it is still departed there: since when it has been
        first = (near.sort("step").group_by("unit").last().filter(pl.col("departed"))
                 .with_columns(step=pl.col("since")).sort(["step", "e", "unit"], descending=[False, True, False]))
        if first.height == 0:
            continue
        top = first.row(0, named=True)
        # (departed since before the window: its first departed point lies before ``near``)
        top = part.filter((pl.col("unit") == top["unit"]) & (pl.col("step") == top["step"])).row(0, named=True)
        tied = first.filter(pl.col("step") == top["step"])["e"].to_list()  # by excess, largest first
        if len(tied) > 1 and tied[0] - tied[1] < math.log(DEPART):
            continue  # several units rose at once, alike: no single origin
        key = (a.attempt, top["unit"], top["step"])
        if key in seen:
            continue
        seen.add(key)
        unit, group, layer = names[int(top["unit"])]
        label = unit_label(group, layer)
        lead = a.step - int(top["step"])
        when = "at the same step" if lead == 0 else f"{step_count(lead)} before it"
        rise = (f"it rose to {shown(round(top['norm'], 6))} ({times(math.exp(top['e']))} its trailing median) at step "
                f"{int(top['step'])}, {when}")
        incident = f"the {a.kind.replace('_', ' ')} at step {a.step}"
        if len(tied) > 1:
            detail = (f"{incident} started in the {label} grad norm: {rise}, {times(math.exp(tied[0] - tied[1]))} "
                      f"more than the {len(tied) - 1} other layer group(s) that rose at that step")
        elif first.height > 1:
            second = first.row(1, named=True)
            detail = (f"{incident} started in the {label} grad norm: {rise}; next: "
                      f"{unit_label(*names[int(second['unit'])][1:])} at step {second['step']}")
        else:
            detail = f"{incident}: only the {label} grad norm departed from its level before it: {rise}"
        out.append(Anomaly(Kind.GRAD_NORM_RATIO, unit, a.attempt, int(top["step"]), a.step,
                           round(top["norm"], 6), round(top["base"], 6), detail=detail))
    return out


def _excess(units: pl.DataFrame, gaps: list[Any]) -> pl.DataFrame:
    """Per unit and step: its log excess over the trailing median of its previous ``TRAILING`` points (in the same
    stretch between holes in the log), and whether it departed (at least ``DEPART`` times and ``DEPART_SIGMAS``
    robust sigmas of the unit's excesses)."""
    holes = [(g.attempt, g.before_step) for g in gaps if g.attempt is not None]
    if holes:
        cuts = pl.DataFrame(holes, schema={"attempt": units.schema["attempt"], "before_step": pl.Int64}, orient="row")
        cuts = cuts.sort("attempt", "before_step").with_columns(stretch=pl.int_range(1, pl.len() + 1).over("attempt"))
        units = (units.sort("step").join_asof(cuts.sort("before_step"), left_on="step", right_on="before_step",
                                              by="attempt", strategy="backward")
                 .with_columns(pl.col("stretch").fill_null(0)).drop("before_step").sort("attempt", "unit", "step"))
    else:
        units = units.with_columns(stretch=pl.lit(0))
    by = ("attempt", "stretch", "unit")
    out = units.with_columns(base=pl.col("norm").shift(1).rolling_median(TRAILING, min_samples=TRAILING // 2).over(by))
    out = out.with_columns(e=(pl.col("norm") / pl.col("base")).log())
    out = out.with_columns(sigma=1.4826 * (pl.col("e") - pl.col("e").median().over(by)).abs()
                           .median().over(by))
    out = out.with_columns(departed=(pl.col("e") >= math.log(DEPART)) & (pl.col("e") >= DEPART_SIGMAS * pl.col("sigma")))
    streak = (pl.col("departed") != pl.col("departed").shift(1)).fill_null(True).cum_sum().over(by)
    return out.with_columns(streak=streak).with_columns(since=pl.col("step").min().over(*by, "streak"))
