"""The earliest warning sign before a blow-up (a divergence, or a NaN), and its lead time.

Signals, each with the step it began at, read only from the points of the same attempt before the blow-up and
after the last hole in the log before it (what lies across a gap is never a warning):

* **grad-norm rise** (OLMo 2: slow growth of the gradient norm before instabilities): the rolling median of the
  grad norm (over ``SMOOTH`` (15) points, or a twentieth of the look-back's points when fewer, at least 5) stands
  at least ``RISE`` (1.8x) above its lowest value in the look-back just
  before the blow-up; the signal begins at the break of a level then a line rising from it, fitted by least
  squares to the log grad norm from the low's window up to where the median first stood ``RISE`` above the low,
  points beyond five MADs of a centred median held in (:func:`_hinge`; where no rise fits, the last point the
  median stood within 10% of its low, less half its window); on a look-back of fewer than 10 points, too few to
  smooth, the grad norm higher at each of its last ``CLIMB`` (3) points or more than at the one before, and at
  least ``RISE`` times the point it climbed from (the signal begins at the first point of the climb);
* **loss-scale overflows** (GLM-130B, OPT: the loss scale crashing before the loss): a skipped-iteration burst or a
  loss-scale collapse in the look-back;
* **spikes not back to their level**: a loss or grad-norm spike in the look-back (an incident, beyond what the
  attempt's own noise reaches: :mod:`forensics.detectors.spikes`) that had not come back before the blow-up; on a
  log every few hundred steps the grad norm's rise before a blow-up spans too few points for a rolling median, and
  the spike detector's calibrated run test is what sees it;
* **a rising spike rate**: at least three loss or grad-norm spikes or blips in the look-back, more than twice as
  many in its second half as in its first, and more than the stretch's own rate before that half makes likely
  (Poisson, chance below ``RATE_CHANCE``, 1%): a long run with heavy-tailed noise has a blip every few hundred
  steps, and three in 1,500 steps against one before is what its noise does;
* **a layer group's grad-norm share rising** (GLM-130B: the embedding's abnormal gradients before its collapses): a
  :attr:`~forensics.findings.Kind.GRAD_NORM_RATIO` finding (:mod:`forensics.detectors.layer_grads`) that began in the
  look-back, when the run logs per-layer grad norms;
* **sustained clipping**: the grad norm above the configured clip threshold at most steps from a step in the
  look-back on (:mod:`forensics.detectors.clipping`);
* **logit growth** (Wortsman et al. 2023): attention logits or the z-loss growing log-linearly from a step in the
  look-back (:mod:`forensics.detectors.logits`).

The look-back is ``LOOKBACK`` (300) logged points or 3,000 steps, whichever is longer (at most 5,000 points). The
warning is the earliest signal; its lead is the blow-up's step minus that signal's step (a signal begins before the
blow-up: one at the same step would be no warning at all).

>>> from forensics.findings import Anomaly
>>> import polars as pl
>>> from parsers import schema as s
>>> steps = list(range(1, 401))
>>> grad = [1.0] * 200 + [1.0 + (i - 200) * 0.02 for i in range(200, 400)]   # rises from step 201
>>> m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": steps, "metric": "grad_norm",
...                             "value": grad, "wall_time": None}), s.METRICS_SCHEMA)
>>> from forensics.detectors import RunFrames
>>> blowup = Anomaly("divergence", "loss", 1, 400, 400, 9.0, 2.0)
>>> w = warning_before(blowup, [blowup], RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
>>> (w["step"], w["lead_steps"], str(w["signals"][0]["kind"]))
(198, 202, 'grad_norm_rise')
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind, Signal, shown, step_count
from forensics.gaps import since_last_gap
from parsers import schema as s

LOOKBACK = 300   # logged points before the blow-up, and at least LOOKBACK_STEPS steps
LOOKBACK_STEPS = 3000
MAX_POINTS = 5000
SMOOTH = 15      # points in the grad norm's rolling median
RISE = 1.8       # how far the smoothed grad norm must stand above its low (benign drifts stay within ~1.5x)
RATE_CHANCE = 0.01  # how unlikely the second half's spikes must be at the stretch's own rate before it
CLIMB = 3        # a look-back too short to smooth: rises in a row at its end


def warning_before(blowup: Anomaly, anomalies: list[Anomaly], frames: RunFrames,
                   blips: list[Any] | None = None) -> dict[str, Any] | None:
    """``{"step", "lead_steps", "signals": [{"kind", "step", "detail"}, ...]}`` for the earliest warning sign before
    ``blowup`` (signals in step order, each kind a :class:`~forensics.findings.Signal`), or None when nothing
    warned."""
    attempt, at = blowup.attempt, blowup.step
    points = frames.points(s.GRAD_NORM).filter(
        (pl.col("attempt") == attempt) & (pl.col("step") < at) & pl.col("value").is_finite() & (pl.col("value") > 0))
    since = since_last_gap(frames.gaps(), attempt, at) or -1
    interval = frames.intervals().get(attempt, 1)
    start = max(since, at - max(LOOKBACK * interval, LOOKBACK_STEPS))
    points = points.filter(pl.col("step") >= start).tail(MAX_POINTS)
    start = int(points["step"][0]) if points.height else start
    signals = []
    rise = _grad_rise(points) or _grad_climb(points)
    if rise:
        signals.append(rise)
    for a in anomalies:
        if a.attempt != attempt or not start <= a.step < at or a is blowup:
            continue
        if a.kind == Kind.SKIPPED_ITERATIONS:
            signals.append({"kind": Signal.LOSS_SCALE_OVERFLOWS, "step": a.step,
                            "detail": f"loss-scale overflows from step {a.step} ({shown(a.value or 0)} iterations skipped)"})
        elif a.kind == Kind.LOSS_SCALE_COLLAPSE:
            signals.append({"kind": Signal.LOSS_SCALE_OVERFLOWS, "step": a.step,
                            "detail": f"the loss scale fell to {shown(a.value or 0)} from step {a.step}"})
        elif a.kind == Kind.GRAD_NORM_RATIO:
            signals.append({"kind": Signal.GRAD_NORM_RATIO, "step": a.step, "detail": a.detail})
        elif a.kind == Kind.CLIPPING and a.metric == s.CLIPPED_SHARE:
            signals.append({"kind": Signal.SUSTAINED_CLIPPING, "step": a.step, "detail": a.detail})
        elif a.kind == Kind.LOGIT_GROWTH:
            signals.append({"kind": Signal.LOGIT_GROWTH, "step": a.step, "detail": a.detail})
        elif a.kind == Kind.LOSS_SPIKE and not _back_before(a, at):
            signals.append({"kind": Signal.UNRECOVERED_SPIKE, "step": a.step,
                            "detail": f"a loss spike at step {a.step} that was not back to its level before it"})
        elif a.kind == Kind.GRAD_NORM_SPIKE and not _back_before(a, at):
            signals.append(_grad_spike(a, at, points))
    seen = frames.steps().filter((pl.col("attempt") == attempt) & (pl.col("step") >= since))["step"].min()
    rate = _spike_rate(attempt, start, at, anomalies, blips or [], None if seen is None else int(seen))
    if rate:
        signals.append(rate)
    if not signals:
        return None
    signals.sort(key=lambda x: x["step"])
    first = signals[0]
    return {"step": first["step"], "lead_steps": at - first["step"], "signals": signals}


def _back_before(spike: Anomaly, at: int) -> bool:
    """Whether a spike came back to its level before step ``at``."""
    return spike.recovered_step is not None and spike.recovered_step < at


def _grad_spike(spike: Anomaly, at: int, points: pl.DataFrame) -> dict[str, Any]:
    """A grad-norm spike (an incident beyond the attempt's own noise) still above its level at the blow-up, quoted
    by its logged values: at its onset, and the last before the blow-up."""
    last = points.filter(pl.col("step") >= spike.step).tail(1)
    onset = points.filter(pl.col("step") == spike.step)
    level = f", from {shown(spike.baseline)}" if spike.baseline else ""
    detail = (f"a grad-norm spike at step {spike.step} ({shown(onset['value'][0])}{level}) not back to its level "
              f"before the blow-up" if onset.height else f"a grad-norm spike at step {spike.step} not back to its level "
              "before the blow-up")
    if last.height and int(last["step"][0]) > spike.step:
        detail += f" ({shown(last['value'][0])} at step {int(last['step'][0])})"
    return {"kind": Signal.UNRECOVERED_GRAD_NORM_SPIKE, "step": spike.step, "detail": detail}


def _grad_rise(points: pl.DataFrame) -> dict[str, Any] | None:
    width = int(np.clip(points.height // 20, 5, SMOOTH))  # a sparse log has few points to smooth over
    if points.height < 2 * width:
        return None
    smooth = points["value"].rolling_median(window_size=width, min_samples=width).to_numpy()
    steps = points["step"].to_numpy()
    ok = np.isfinite(smooth)
    low_at = int(np.nanargmin(np.where(ok, smooth, np.nan)))
    low, end = float(smooth[low_at]), float(smooth[-1])
    if not end >= RISE * low:
        return None
    # the break of a level then a rise, fitted from the points of the low's window (what fell before the low is no
    # level) up to where the median first stands RISE above it (the blow-up's own jump after that would pull the
    # break late), points beyond five MADs of a centred median held in
    up = np.flatnonzero(ok & (np.arange(smooth.size) >= low_at) & (smooth >= RISE * low))
    first = max(low_at - width + 1, 0)
    values = points["value"].to_numpy()[first: int(up[0]) + 1]
    log = np.log(values)
    centred = np.log(pl.Series(values).rolling_median(window_size=width, min_samples=1, center=True).to_numpy())
    resid = log - centred
    mad = float(np.median(np.abs(resid - np.median(resid))))
    held = centred + np.clip(resid, -5 * mad, 5 * mad) if mad > 0 else log
    began = first + _hinge(held) if held.size >= 8 else None
    if began is None or began < first:  # too few points for a line and a break, or no rise fits: the last point
        near = np.flatnonzero(ok & (np.arange(len(smooth)) >= low_at) & (smooth <= 1.1 * low))  # near the low,
        began = max(int(near[-1]) - width // 2 if near.size else low_at, 0)                  # less the median's lag
    return {"kind": Signal.GRAD_NORM_RISE, "step": int(steps[began]),
            "detail": f"grad norm began rising at step {int(steps[began])} ({end / low:.1f}x its low by step "
                      f"{int(steps[-1])}, rolling median of {width} points)"}


def _hinge(y: np.ndarray) -> int:
    """The index where ``y`` turns upward (-1 where no rise fits): least squares of a level, then a line rising from
    a break, over every break from the third point to the fourth from the end, all at once from suffix sums. (Read
    off a rolling median, a rise starts half a window late, or where noise last touched the median's low: on a long
    look-back, hundreds of steps early.)

    >>> _hinge(np.r_[np.zeros(30), np.linspace(0.0, 2.0, 21)[1:]]), _hinge(np.linspace(1.0, 0.0, 20))
    (29, -1)
    """
    n = y.size
    x = np.arange(n) / n
    c = np.arange(n, 0, -1, dtype=float)
    s1, s2 = np.cumsum(x[::-1])[::-1], np.cumsum((x * x)[::-1])[::-1]
    sy, sxy = np.cumsum(y[::-1])[::-1], np.cumsum((x * y)[::-1])[::-1]
    m = np.empty((n, 2, 2))
    m[:, 0, 0] = n
    m[:, 0, 1] = m[:, 1, 0] = s1 - x * c          # sums of (x - x_b)+ and of its square, per break b
    m[:, 1, 1] = s2 - 2 * x * s1 + x * x * c
    v = np.stack([np.full(n, sy[0]), sxy - x * sy], axis=1)
    breaks = np.arange(2, n - 3)
    beta = np.linalg.solve(m[breaks], v[breaks][..., None])[..., 0]
    sse = np.where(beta[:, 1] > 0, -(beta * v[breaks]).sum(axis=1), np.inf)  # the sum of y**2 is common to all
    return int(breaks[np.argmin(sse)]) if np.isfinite(sse).any() else -1


def _grad_climb(points: pl.DataFrame) -> dict[str, Any] | None:
    """On a look-back too short for the rolling median (fewer than ``2 * 5`` points: an excerpt, a run logged every
    few hundred steps), the grad norm higher at each of its last ``CLIMB`` or more points than at the one before,
    ending at least ``RISE`` times the point it climbed from; the signal begins at the first point above it."""
    v = points["value"].to_numpy()
    if points.height >= 10 or points.height < CLIMB + 1:
        return None
    up = np.diff(v) > 0
    first = up.size - (np.argmin(up[::-1]) if not up.all() else up.size)  # the first move of the final climb
    if up.size - first < CLIMB or not v[-1] >= RISE * v[first]:
        return None
    steps = points["step"].to_numpy()
    began = int(steps[first + 1])
    return {"kind": Signal.GRAD_NORM_RISE, "step": began,
            "detail": f"grad norm rose at each of its last {up.size - first} logged points before the blow-up, from "
                      f"{shown(float(v[first]))} at step {int(steps[first])} to {shown(float(v[-1]))} at step "
                      f"{int(steps[-1])} ({v[-1] / v[first]:.1f}x)"}


def _at_least(k: int, mean: float) -> float:
    """P(X >= k) for X Poisson with ``mean`` (scipy.stats is not imported for it: 0.2-0.5 s on a short log).

    >>> round(_at_least(3, 1.0), 4), _at_least(0, 2.0)
    (0.0803, 1.0)
    """
    below = sum(math.exp(-mean + i * math.log(mean) - math.lgamma(i + 1)) for i in range(k))
    return max(0.0, 1.0 - below)


def _spike_rate(attempt: int, start: int, at: int, anomalies: list[Anomaly], blips: list[Any],
                first: int | None = None) -> dict[str, Any] | None:
    """More spikes and blips in the look-back's second half than twice its first, and more than the stretch's own
    rate before that half allows (Poisson, below ``RATE_CHANCE``): a long run's blips come in clusters of three now
    and then by chance."""
    since = start if first is None else min(first, start)
    every = sorted([a.step for a in anomalies if a.attempt == attempt and since <= a.step < at
                    and a.kind in (Kind.LOSS_SPIKE, Kind.GRAD_NORM_SPIKE)]
                   + [b for x in blips if x.attempt == attempt for b in x.steps if since <= b < at])
    hits = [h for h in every if h >= start]
    if len(hits) < 3:
        return None
    middle = (start + at) / 2
    early, late = sum(h < middle for h in hits), sum(h >= middle for h in hits)
    if late <= 2 * early:
        return None
    before = sum(h < middle for h in every)
    expected = before / (middle - since) * (at - middle) if middle > since else 0.0
    if expected > 0 and _at_least(late, expected) >= RATE_CHANCE:
        return None
    first_late = next(h for h in hits if h >= middle)
    return {"kind": Signal.RISING_SPIKE_RATE, "step": first_late,
            "detail": f"spikes came faster: {late} from step {first_late} against {early} in the "
                      f"{step_count(int(middle - start))} before"}
