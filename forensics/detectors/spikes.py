"""Upward spikes of loss or grad norm: a robust z-score on log values against the points before each one.

Thresholds (documented here; measured on the labelled curves of :mod:`forensics.evaluation` and pinned on the
real logs in ``tests/fixtures/real``):

* log values, because loss and grad-norm noise is multiplicative and their spikes are heavy-tailed;
* expected value = median of the previous 8 points (it follows a falling loss), residual = value - expected,
  standardised by the median and 1.4826 x MAD of the previous ``window`` (100) residuals: the modified z-score of
  Iglewicz & Hoaglin, made trend-proof. Flag at 6 robust sigma (OLMo 2 counts 7 sigma from a 1,000-value rolling
  mean for its spike score, reported separately; Megatron logs often hold only hundreds of points);
* a floor on the scale (``floor``, in log units): loss 0.003 (a 1.8% jump at 6 sigma) divided by the square root
  of the log interval, since a logged mean over k iterations is calmer; grad norm 0.25 (~4.5x), which is printed
  for the logged iteration alone; with fewer than 10 points of history the noise is unknown and the floor is
  0.02 for loss;
* with one iteration per point, a lone flagged point with calm neighbours needs 8 sigma: a single hard batch is
  not an instability (the OLMo spike score still counts it);
* Megatron's spiky-loss rule as a coarse guard: a loss 10x the largest of the first 100 values is a spike
  whatever the noise;
* flagged points separated by at most ``merge_gap`` unflagged points form one incident; it has *recovered* at the
  first later point back within max(3 sigma, 5%) of the level before it;
* an incident's first point must also rise above each of the 8 points before it, so a steep early decline that
  slows down (residuals jump up while the loss still falls) is not a spike;
* burn-in: a log that starts at the beginning of training (first step below ``early_step``) has no baseline at
  first, so its first ``burn_in`` points are never flagged; a log that starts mid-training (an excerpt, a resumed
  job) is judged from its second point;
* baselines never mix attempts or cross a gap in the log (:mod:`forensics.gaps`): each stretch of an attempt
  between gaps is judged on its own points. A spike not back to its level before a gap is "not seen again until
  step N, after a gap" when the first point after it is back; the baseline quoted is a logged value (the lower
  median of the eight points before the onset).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Gap, shown
from forensics.gaps import stretch_ids
from forensics.timeline import runs_of_true, trailing_robust_z

_DEFAULTS = {"loss": (100, 0.003, 6.0), "grad_norm": (100, 0.25, 6.0)}
_AVERAGED = frozenset({"loss"})  # logged as a mean over the interval (grad norm is the logged iteration's own)
_FLOOR_WITHOUT_HISTORY = {"loss": 0.02, "grad_norm": 0.25}  # fewer than 10 points before: noise unknown


@dataclass(frozen=True)
class SpikeIncident:
    """A run of flagged points and what followed it."""

    attempt: int
    onset: int
    end: int
    peak: float
    baseline: float
    recovered_step: int | None
    points_after: int
    scale: float
    interval: int = 1
    points: int = 1  # logged points from onset to end
    gap_after: Gap | None = None  # the first gap in the log after the incident, when it was not back before it
    back_after_gap: int | None = None  # the first step after that gap where it was back at its level (not a recovery:
                                       # what happened in the gap is not in the log)
    level: float = float("nan")        # log of the level it is measured back against (the trailing centre)


@dataclass
class SpikeDetector:
    """Loss or grad-norm spikes: ``SpikeDetector("loss").detect(frames)``."""

    metric: str = "loss"
    series: str | None = None  # read another series as evidence of this metric's spikes (a W&B chart's __max)
    window: int | None = None
    floor: float | None = None
    threshold: float | None = None
    merge_gap: int = 2
    burn_in: int = 10
    early_step: int = 100
    isolated_threshold: float = 8.0
    guard_factor: float = 10.0
    guard_samples: int = 100

    @property
    def name(self) -> str:
        return f"{self.metric}_spike"

    def _params(self) -> tuple[int, float, float]:
        w, f, t = _DEFAULTS.get(self.metric, (100, 0.1, 6.0))
        return self.window or w, self.floor if self.floor is not None else f, self.threshold or t

    def incidents(self, frames: RunFrames) -> list[SpikeIncident]:
        """Every spike incident with its baseline and whether (and when) the metric came back to it (computed once
        per run and settings: the divergence detector asks for the loss incidents too)."""
        return frames.remember(("spike_incidents", repr(self)), lambda: self._incidents(frames))

    def _incidents(self, frames: RunFrames) -> list[SpikeIncident]:
        window, floor, threshold = self._params()
        points = frames.points(self.series or self.metric).filter(
            pl.col("value").is_finite() & (pl.col("value") > 0)
        )
        found: list[SpikeIncident] = []
        intervals, spacing = frames.intervals(), frames.spacing()
        gaps = frames.gaps()
        counts = frames.memo.setdefault(("judged", repr(self)), {})  # per settings, filled once with the incidents
        for (attempt,), own in points.group_by("attempt", maintain_order=True):
            attempt, interval = int(attempt), intervals.get(int(attempt), 1)
            steps, values = own["step"].to_numpy(), own["value"].to_numpy()
            x = np.log(values)
            stretch = stretch_ids(steps, spacing.get(attempt, 1))
            averaged = self.metric in _AVERAGED and interval > 1
            own_floor = floor / math.sqrt(interval) if averaged and self.floor is None else floor  # a mean is calmer
            z, centre, scale = trailing_robust_z(
                x, window, own_floor, groups=stretch,
                floor_without_history=max(floor, _FLOOR_WITHOUT_HISTORY.get(self.metric, 0.1)),
            )
            # each stretch between holes is judged on its own: its first point has no history, and a stretch that
            # starts at the beginning of training has its burn-in
            starts = np.flatnonzero(np.r_[True, stretch[1:] != stretch[:-1]])
            ends = np.r_[starts[1:], len(x)]
            position = np.arange(len(x)) - starts[stretch]
            eligible = ~((position < self.burn_in) & (steps[starts][stretch] < self.early_step))
            counts[attempt] = int((eligible & ~np.isnan(z)).sum())
            with np.errstate(invalid="ignore"):
                hot = (z >= threshold) & eligible
            long_enough = (ends - starts) > self.guard_samples + 1  # where Megatron's guard can speak
            for k in np.flatnonzero(np.bincount(stretch[hot], minlength=len(starts)).astype(bool) | long_enough):
                lo, hi = int(starts[k]), int(ends[k])
                found += [_recovery_over(inc, own, gaps) for inc in self._stretch_incidents(
                    attempt, interval, threshold, steps[lo:hi], values[lo:hi], x[lo:hi], z[lo:hi], centre[lo:hi],
                    scale[lo:hi], eligible[lo:hi])]
        return found

    def judged(self, frames: RunFrames) -> dict[int, int]:
        """Per attempt, how many points the detector could judge (a point needs a point before it in its stretch,
        and is not in the burn-in at the start of training): the chronicle says when that is none."""
        self.incidents(frames)
        return dict(frames.memo.get(("judged", repr(self)), {}))

    def _stretch_incidents(
        self, attempt: int, interval: int, threshold: float, steps: np.ndarray, values: np.ndarray, x: np.ndarray,
        z: np.ndarray, centre: np.ndarray, scale: np.ndarray, eligible: np.ndarray,
    ) -> list[SpikeIncident]:
        """The incidents of one stretch between holes, from its z-scores (see :func:`trailing_robust_z`)."""
        found: list[SpikeIncident] = []
        with np.errstate(invalid="ignore"):
            flagged = (z >= threshold) & eligible
        # an onset must rise above the recent values: a steep early decline that slows down is not a spike
        recent_max = pl.Series(x).shift(1).rolling_max(window_size=8, min_samples=1).to_numpy()
        with np.errstate(invalid="ignore"):
            onset_ok = ~(x < recent_max)
        flagged = _from_first_rise(flagged, onset_ok)
        if interval == 1:
            flagged &= ~self._isolated(z, flagged)
        flagged |= self._guard(x) & eligible
        for start, end in _merge(runs_of_true(flagged), self.merge_gap):
            base = centre[start]
            back = np.flatnonzero(x[end + 1:] <= base + max(3 * scale[start], 0.05))
            before = np.sort(values[max(0, start - 8):start])  # a logged value: the lower median of the 8 before
            found.append(
                SpikeIncident(
                    attempt=attempt,
                    onset=int(steps[start]),
                    end=int(steps[end]),
                    peak=float(values[start:end + 1].max()),
                    baseline=float(before[(before.size - 1) // 2]) if before.size else float(np.exp(base)),
                    recovered_step=int(steps[end + 1 + back[0]]) if back.size else None,
                    points_after=len(x) - end - 1,
                    scale=float(scale[start]),
                    interval=interval,
                    points=end - start + 1,
                    level=float(base),
                )
            )
        return found

    def _isolated(self, z: np.ndarray, flagged: np.ndarray) -> np.ndarray:
        """Single flagged points with calm neighbours and z below ``isolated_threshold``: with one iteration per
        point, a lone 6-8 sigma batch is more often a hard batch than an instability."""
        with np.errstate(invalid="ignore"):
            calm_before = np.r_[True, ~(z[:-1] >= 3.0)]
            calm_after = np.r_[~(z[1:] >= 3.0), True]
            return flagged & calm_before & calm_after & ~(z >= self.isolated_threshold)

    def _guard(self, x: np.ndarray) -> np.ndarray:
        """Megatron's spiky-loss check (``SPIKY_LOSS_FACTOR = 10``): at least 10x the largest of the first 100
        values (the first point left out), as a coarse guard whatever the noise."""
        if self.metric != "loss" or x.size <= self.guard_samples + 1:
            return np.zeros(x.size, dtype=bool)
        limit = float(np.nanmax(x[1:self.guard_samples + 1])) + math.log(self.guard_factor)
        with np.errstate(invalid="ignore"):
            return x >= limit

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        out = []
        incidents = self.incidents(frames)
        if self.series and self.series != self.metric and incidents:
            # extremes only add what the plotted series does not already show
            seen = SpikeDetector(self.metric).incidents(frames)
            incidents = [i for i in incidents if not any(
                s.attempt == i.attempt and s.onset <= i.end and i.onset <= s.end for s in seen)]
        for inc in incidents:
            ratio = inc.peak / inc.baseline if inc.baseline > 0 else float("inf")
            gap = inc.gap_after
            hole = f"no data between steps {gap.after_step} and {gap.before_step}" if gap else ""
            if inc.back_after_gap is not None and gap is not None and inc.back_after_gap == gap.before_step:
                after = f"not seen again until step {gap.before_step}, after a gap ({hole}), where it was at its level"
            elif inc.back_after_gap is not None and gap is not None:
                after = f"not back before a gap ({hole}); at its level again from step {inc.back_after_gap}"
            elif inc.recovered_step is not None:
                after = f"back to its level by step {inc.recovered_step} ({inc.recovered_step - inc.onset} steps)"
            elif inc.points_after:
                after = "not back to its level at any later logged point of the attempt" + (f" ({hole})" if gap else "")
            else:
                after = "the log of the attempt ends here"
            label = self.metric.replace("_", " ")
            if self.series and self.series != self.metric:
                label += f" (the export's {self.series.rsplit('__', 1)[-1].upper()} column; the plotted value is a mean"
                label += " or sample)"
            detail = (
                f"{label} rose to {shown(inc.peak)} ({ratio:.1f}x the trailing median {shown(inc.baseline)}); {after}"
            )
            out.append(
                Anomaly(
                    kind=self.name, metric=self.series or self.metric, attempt=inc.attempt, step=inc.onset, end_step=inc.end,
                    value=inc.peak, baseline=inc.baseline, detail=detail, recovered_step=inc.recovered_step,
                )
            )
        return out


def _recovery_over(inc: SpikeIncident, own: pl.DataFrame, gaps: list[Gap]) -> SpikeIncident:
    """When the stretch ends before the metric is back, the rest of the attempt lies after a gap (a pasted excerpt
    may end mid-spike and the next one show the loss back at its level): the incident names the gap and where the
    metric was at its level again, but never calls that a recovery."""
    later = own.filter(pl.col("step") > inc.end)
    if inc.recovered_step is not None or later.height == 0:
        return inc
    gap = next((g for g in gaps if g.attempt == inc.attempt and g.after_step >= inc.end), None)
    if gap is None:
        return replace(inc, points_after=later.height)
    # the level and margin of the check inside the stretch, over the points after the gap only
    limit = inc.level + max(3 * inc.scale, 0.05)
    back = later.filter((pl.col("step") >= gap.before_step) & (pl.col("value").log() <= limit))
    return replace(inc, points_after=later.height, gap_after=gap,
                   back_after_gap=int(back["step"][0]) if back.height else None)


def _from_first_rise(flagged: np.ndarray, rises: np.ndarray) -> np.ndarray:
    """Each run of flagged points, kept from its first point that rises above the recent values."""
    out = np.zeros_like(flagged)
    for start, end in runs_of_true(flagged):
        ok = np.flatnonzero(rises[start:end + 1])
        if ok.size:
            out[start + ok[0]:end + 1] = True
    return out


def _merge(runs: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in runs:
        if merged and start - merged[-1][1] - 1 <= gap:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
