"""Upward spikes of loss or grad norm: a robust z-score on log values against the points before each one, judged
against the run's own noise tail.

* log values, because loss and grad-norm noise is multiplicative and their spikes are heavy-tailed;
* expected value = median of the previous 8 points (it follows a falling loss), residual = value - expected,
  standardised by the median and 1.4826 x MAD of the previous ``window`` (100) residuals, each residual's deviation
  taken from the median of the 25 up to it: the modified z-score of Iglewicz & Hoaglin, made trend-proof;
* a floor on the scale (``floor``, in log units): loss 0.003 (a 1.8% jump at 6 sigma) divided by the square root
  of the log interval, since a logged mean over k iterations is calmer; grad norm ln 3 / 6 (a 3x jump at 6 sigma),
  which is printed for the logged iteration alone; with fewer than 10 points of history the noise is unknown and the
  floor is 0.02 for loss, 0.25 for grad norm; an incident must also rise, at one of its points and over the level
  where it began, the screen times the floor of one iteration (1.8% for a loss, 3x for a grad norm, whatever the
  interval: averaging calms the noise, it does not make a smaller rise matter; several grad-norm points, 2x: a grad
  norm that doubles and stays is material); a lone point beyond the noise tail that does not is a blip, several are
  nothing (a run of points each barely above a calm noise is unusual, not an incident to tell of);
* **candidates**: points at or above the screen (``threshold``, 6 robust sigma), whose onset rises above each of
  the 8 points before it (a steep early decline that slows down is not a spike); candidates separated by at most
  ``merge_gap`` points are one;
* **incident or blip** (:mod:`forensics.detectors.noise_tail`): a candidate is an *incident* when some run of k
  consecutive points in it (k = 1, 2, 3, 5, 8, running on past its last candidate point) all reach the threshold
  for k that the attempt's own noise would reach with probability 2% over the whole attempt (tail fitted to the
  attempt's residuals, censored at the screen, so longer and noisier runs need larger or longer excursions); a
  lone point inside that tail is a *blip* (judged again against the tail fitted without its own points, which a
  spike in the sample lifts above itself: :meth:`SpikeDetector._unmasked`): counted (:meth:`SpikeDetector.blips`;
  the OLMo spike score reads every point), not an incident. Significance is read on the z-score against the
  noise itself (no floor), materiality on the floored one; a grad-norm blip at a loss incident or up to 20 points
  before it is part of that incident (two series at once are not one hard batch);
* **absolute checks**: Megatron's spiky-loss rule (a loss 10x the largest of the first 100 values) everywhere;
  where a point has too little history to know the noise (fewer than 10 points before it in its stretch: an
  excerpt, a short log, a run logged every few hundred steps), a loss at least 2x the lowest of the 8 points before
  it (1.5x for a mean over 10 or more iterations) and three times their median step-to-step move, and a grad norm
  at least 10x the point before it, or climbing to 10x the lowest and twice the highest of the (2-8) points before
  (:meth:`SpikeDetector.unknown` counts those points, and the report says they had only these checks); there, a
  candidate that stays away from its level for three points or more is an incident too: lasting is the evidence.
  In an attempt too short for a tail fit, such a jump that also reaches the screen is an incident; there too, an
  onset read against the floor must rise three times the step-to-step moves before it (a per-batch loss that swings
  20% from point to point is noisy, not rising);
* a noise read off a stretch's first 30 residuals is never taken below the attempt's typical noise (the median over
  its points with a full history: post hoc, the later points are known);
* recovered: at the first later point back within max(3 sigma, 5%) of the level before the incident; the incident
  spans its points up to the one before that (its peak the highest of them), however few were flagged;
* burn-in: a log that starts at the beginning of training (first step below ``early_step``) has no baseline at
  first, so its first ``burn_in`` points are never candidates; a log that starts mid-training (an excerpt, a
  resumed job) is judged from its second point;
* baselines never mix attempts or cross a gap in the log (:mod:`forensics.gaps`): each stretch of an attempt
  between gaps is judged on its own points. A spike not back to its level before a gap is "not seen again until
  step N, after a gap" when the first point after it is back; the baseline quoted is a logged value (the lower
  median of the eight points before the onset, or of the fewer there are, which the chronicle then says).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.detectors.noise_tail import (
    MIN_FIT,
    RUN_FLOOR,
    NoiseTail,
    fixed_tail,
    held_run_minima,
    lead_threshold,
    noise_tail,
    student_body,
    without_points,
)
from forensics.findings import Anomaly, Gap, Kind, shown, step_count, times
from forensics.gaps import stretch_ids
from forensics.timeline import runs_of_true, trailing_robust_z

_DEFAULTS = {"loss": (100, 0.003, 6.0), "grad_norm": (100, math.log(3.0) / 6.0, 6.0)}
_AVERAGED = frozenset({"loss"})  # logged as a mean over the interval (grad norm is the logged iteration's own)
_SETTLED = 50  # points into a stretch before its residuals enter the noise-tail fit
_FEW_RESIDUALS = 30  # points into a stretch before its own noise estimate is trusted alone
_MASKING = 10  # blips judged again against a tail fitted without their own points
_RUN_MATERIAL = {"grad_norm": math.log(2.0)}  # log rise several points of a grad norm must reach at one (a lone: 3x)
LEAD_WINDOW = 20  # logged points: a grad-norm blip this far before a loss incident may go with it (and a
                  # grad-norm spike leads one: forensics.precursors)
_RESOLUTION = 1e-4  # log units: the noise is never taken as calmer than this, nor than one step of the values' grid
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
    zero_after: int | None = None      # not back, but logged as 0 (or below) from this later step: what it fell to is
                                       # the zero-loss finding's, not a level it stayed above
    baseline_points: int = 8           # the logged points before the onset that the baseline is the lower median of
    recovered_value: float | None = None  # the value at ``recovered_step``: within 3 sigmas of the level, maybe not 5%

    def rise_said(self) -> str:
        """The peak over the baseline, and what the baseline is, as the chronicle says it: "1.6x the trailing median
        6.59", "4.6x 1.406, the lower median of the 2 points before it"."""
        n, ratio = self.baseline_points, self.peak / self.baseline if self.baseline > 0 else float("inf")
        if n >= 8:
            return f"{times(ratio)} the trailing median {shown(self.baseline)}"
        what = ("the point before it" if n == 1 else f"the lower median of the {n} points before it" if n
                else "its expected level")
        return f"{times(ratio)} {shown(self.baseline)}, {what}"


@dataclass(frozen=True)
class Blip:
    """A lone candidate point inside what the attempt's noise tail allows: counted, not an incident."""

    attempt: int
    step: int
    value: float
    baseline: float  # the lower median of the 8 logged values before it


@dataclass(frozen=True)
class _Scored:
    """One attempt's series as the spike detector reads it."""

    attempt: int
    interval: int
    steps: np.ndarray
    values: np.ndarray
    x: np.ndarray          # log values
    z: np.ndarray          # robust z with the scale floored: is it large enough to matter
    zn: np.ndarray         # robust z against the noise itself, NaN where not judged: is it unusual
    centre: np.ndarray
    scale: np.ndarray
    eligible: np.ndarray
    absolute: np.ndarray   # points caught by an absolute check where the noise is not known
    short_jump: np.ndarray  # an absolute check's jump at the screen: decisive where the tail could not be fitted
    blind: np.ndarray      # points whose noise is not known (too little history)
    stretch: np.ndarray
    starts: np.ndarray     # per stretch, the index of its first point
    ends: np.ndarray       # per stretch, the index after its last point
    candidate: np.ndarray  # at or above the screen, or caught by an absolute check
    judged_points: int
    unknown_points: int
    position: np.ndarray   # each point's index in its stretch
    onset_ok: np.ndarray   # at or above the 8 points before it: where a spike may start
    minima: dict[int, np.ndarray]  # the run minima of zn, each run against its first point's level (held_run_minima)
    held: np.ndarray       # the centre where the point is judged, NaN elsewhere
    noise: np.ndarray      # the noise scale (no floor but the printed digits)
    rise: tuple[float, int, float] | None  # the largest rise over the lower median of the 8 points before (largest_rises)
    beyond_swing: np.ndarray  # known noise, or (where not known) a rise of 3 times the step-to-step moves before it
    # each candidate's incident and how many points after it it was back, by (stretch start, first, last point): the
    # same candidates recur in each judgement (the fixed rule, the fitted tail, its refits)
    seen: dict[tuple[int, int, int], tuple[SpikeIncident, int | None]] = field(default_factory=dict, compare=False,
                                                                              repr=False)

    def inside(self, incidents: list[SpikeIncident]) -> np.ndarray:
        """The points from each incident's onset until it is over: back to its level and back inside 3 sigmas of the
        noise (a recovery to within 5% can still be far out in a calm series), or the end of its stretch."""
        out = np.zeros(self.steps.size, dtype=bool)
        for inc in incidents:
            at = int(np.searchsorted(self.steps, inc.onset))
            end = int(self.ends[self.stretch[at]])
            stop = end if inc.recovered_step is None else int(np.searchsorted(self.steps, inc.recovered_step))
            with np.errstate(invalid="ignore"):
                calm = np.flatnonzero(~(self.zn[stop:end] >= RUN_FLOOR))
            out[at:stop + int(calm[0]) if calm.size else end] = True
        return out


@dataclass
class SpikeDetector:
    """Loss or grad-norm spikes: ``SpikeDetector("loss").detect(frames)``."""

    metric: str = "loss"
    series: str | None = None  # read another series as evidence of this metric's spikes (a W&B chart's __max)
    window: int | None = None
    floor: float | None = None
    threshold: float | None = None  # the screen: candidates are at least this many robust sigmas out
    merge_gap: int = 2
    burn_in: int = 10
    early_step: int = 100
    guard_factor: float = 10.0
    guard_samples: int = 100
    jump_factor: float = 2.0    # noise unknown: a loss at least this many times the lowest of the 8 before
    neighbour_factor: float = 10.0  # noise unknown: a grad norm at least this many times the point before

    @property
    def name(self) -> Kind:
        return Kind(f"{self.metric}_spike")

    def _params(self) -> tuple[int, float, float]:
        w, f, t = _DEFAULTS.get(self.metric, (100, 0.1, 6.0))
        return self.window or w, self.floor if self.floor is not None else f, self.threshold or t

    def incidents(self, frames: RunFrames) -> list[SpikeIncident]:
        """Every spike incident with its baseline and whether (and when) the metric came back to it (computed once
        per run and settings: the divergence detector asks for the loss incidents too)."""
        return self._judge(frames)[0]

    def blips(self, frames: RunFrames) -> list[Blip]:
        """Lone candidates inside the attempt's noise tail, in (attempt, step) order."""
        return self._judge(frames)[1]

    def tails(self, frames: RunFrames) -> dict[int, NoiseTail]:
        """Per attempt, the noise tail its points were judged against (``fitted`` False: too few points)."""
        return self._judge(frames)[2]

    def judged(self, frames: RunFrames) -> dict[int, int]:
        """Per attempt, how many points were judged against the noise (a point needs 10 points before it in its
        stretch to know the noise, and is not in the burn-in at the start of training): the chronicle says when
        that is none, and which points had the absolute checks only (:meth:`unknown`)."""
        return self._judge(frames)[3]

    def unknown(self, frames: RunFrames) -> dict[int, int]:
        """Per attempt, the points whose noise could not be known (too little history before them): they had the
        absolute checks only."""
        return self._judge(frames)[4]

    def largest_rises(self, frames: RunFrames) -> dict[int, tuple[float, int, float]]:
        """Per attempt, its largest rise over its recent level among the points judged against the noise: (the
        value over the lower median of the 8 points before it, its step, its value). A run whose noise is wide can rise
        far without an incident: the report says how far it went."""
        return self._judge(frames)[5]

    def _judge(self, frames: RunFrames) -> tuple[list[SpikeIncident], list[Blip], dict[int, NoiseTail], dict[int, int],
                                                 dict[int, int], dict[int, tuple[float, int, float]]]:
        return frames.remember(("spikes", repr(self)), lambda: self._incidents(frames))

    def _incidents(self, frames: RunFrames) -> tuple[list[SpikeIncident], list[Blip], dict[int, NoiseTail],
                                                     dict[int, int], dict[int, int], dict[int, tuple[float, int, float]]]:
        metric = self.series or self.metric
        if frames.points(metric).is_empty():  # a metric the run does not log (most runs log a few of the four)
            return [], [], {}, {}, {}, {}
        points = frames.points(metric).filter(
            pl.col("value").is_finite() & (pl.col("value") > 0)
            & ~pl.col("attempt").is_in(list(frames.negative(metric)))  # not a ratio scale: see RunFrames.negative
        )
        found: list[SpikeIncident] = []
        lone: list[SpikeIncident] = []
        tails: dict[int, NoiseTail] = {}
        counts: dict[int, int] = {}
        unknown: dict[int, int] = {}
        rises: dict[int, tuple[float, int, float]] = {}
        beside: dict[int, Callable[[], float]] = {}  # per attempt: how far out a grad-norm blip must be to join a loss
        peaks: dict[int, float] = {}   # each grad-norm blip's z against the noise
        # the points the ratios leave out (a loss logged as 0): once, almost always none
        below = frames.points(metric).filter(pl.col("value") <= 0)
        gaps = frames.gaps()
        for series, lo, hi in self._scored(points, frames):
            attempt = series.attempt
            counts[attempt], unknown[attempt] = series.judged_points, series.unknown_points
            if series.rise is not None:
                rises[attempt] = series.rise
            # what the fixed t(3) rule already calls an incident stays out of the fit of the run's own noise tail
            # a loss known to be a mean over the interval (the format says so) has a mean's lighter tail
            mean_of = series.interval if (self.metric in _AVERAGED and self.series is None and series.interval > 1
                                          and frames.loss_is_interval_mean(attempt)) else 1
            first = [inc for inc, decisive in self._candidates(series, fixed_tail(
                series.zn, series.stretch, minima=series.minima, mean_of=mean_of)) if decisive]
            # the fit also leaves out each stretch's first points, whose noise is estimated from too few residuals
            left_out = series.inside(first) | (series.position < _SETTLED)
            sample = np.where(left_out, np.nan, series.zn)
            windows = {k: int(np.isfinite(lows).sum()) for k, lows in series.minima.items()}
            tail = noise_tail(sample, series.stretch, minima=without_points(series.minima, left_out), judged=windows,
                              mean_of=mean_of)
            judged, tails[attempt] = self._unmasked(series, self._candidates(series, tail), tail, left_out, windows,
                                                    mean_of)
            incidents = _through_recovery([inc for inc, decisive in judged if decisive], series)
            mine = below.filter(pl.col("attempt") == attempt) if incidents and below.height else below
            found += [_recovery_over(inc, points.slice(lo, hi - lo), gaps, mine) for inc in incidents]
            blips = [inc for inc, decisive in judged if not decisive]
            if blips and self.metric == "grad_norm" and self.series is None:
                # how far out each is against the noise, and how far a lone point must be to go with a loss incident
                # (below)
                beside[attempt] = functools.cache(functools.partial(lead_threshold, sample, LEAD_WINDOW + 1))
                peaks.update(zip(map(id, blips), _peak_z(series, blips), strict=True))
            lone += blips
        # a grad-norm point inside the noise tail that goes with a loss incident is part of it: at the incident's
        # points, or up to 20 logged points before it where the noise alone would put a point that far out in those
        # 21 points with probability ALPHA at most (a loss incident makes a grad-norm blip before it likelier, not
        # certain: a t(3) noise's 8-sigma point 15 steps before a loss spike is still noise)
        if self.metric == "grad_norm" and self.series is None and lone:
            loss = SpikeDetector("loss").incidents(frames)
            joined = [inc for inc in lone if any(s.attempt == inc.attempt and (
                s.onset <= inc.onset <= s.end or (s.onset - LEAD_WINDOW * s.interval <= inc.onset < s.onset
                                                  and peaks[id(inc)] >= beside[inc.attempt]())) for s in loss)]
            found += [_recovery_over(inc, points.filter(pl.col("attempt") == inc.attempt), gaps,
                                     below.filter(pl.col("attempt") == inc.attempt)) for inc in joined]
            lone = [inc for inc in lone if inc not in joined]
        found.sort(key=lambda inc: (inc.attempt, inc.onset))
        blips = [Blip(inc.attempt, inc.onset, inc.peak, inc.baseline) for inc in lone]
        return found, blips, tails, counts, unknown, rises

    def _scored(self, points: pl.DataFrame, frames: RunFrames) -> Iterator[tuple[_Scored, int, int]]:
        """Each attempt's points (``points`` in (attempt, step) order) with their z-scores, stretches, eligibility
        and absolute checks, and the rows they hold in ``points``. The windows of every attempt are computed in one
        pass, each stretch of each attempt a group of its own (no window crosses a hole or an attempt), then cut per
        attempt: a log that restarts every few lines costs what one long attempt costs."""
        window, floor, threshold = self._params()
        intervals, spacings = frames.intervals(), frames.metric_spacing(self.series or self.metric)
        steps, values = points["step"].to_numpy(), points["value"].to_numpy()
        x = np.log(values)
        n = x.size
        labels = points["attempt"].to_numpy()
        lows = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]]) if n else np.zeros(0, dtype=np.int64)
        highs = np.r_[lows[1:], n].astype(np.int64) if n else lows
        attempts = [int(a) for a in labels[lows]]
        # per point: the stretch (numbered across attempts), and its attempt's number, log interval and spacing
        group = np.empty(n, dtype=np.int64)
        sizes = highs - lows
        attempt_no = np.repeat(np.arange(len(attempts)), sizes)
        interval = np.repeat(np.array([intervals.get(a, 1) for a in attempts], dtype=np.int64), sizes)
        spacing = np.repeat(np.array([spacings.get(a, 1) for a in attempts], dtype=np.int64), sizes)
        offset = 0
        for a, lo, hi in zip(attempts, lows, highs, strict=True):
            ids = stretch_ids(steps[lo:hi], spacings.get(a, 1), frames.cuts(a))
            group[lo:hi] = ids + offset
            offset += int(ids[-1]) + 1
        averaged = (self.metric in _AVERAGED) & (interval > 1) & (self.floor is None)
        own_floor = np.where(averaged, floor / np.sqrt(np.maximum(interval, 1)), floor)  # a mean is calmer
        z, centre, scale, noise = trailing_robust_z(
            x, window, own_floor if averaged.any() else floor, groups=group,
            floor_without_history=max(floor, _FLOOR_WITHOUT_HISTORY.get(self.metric, 0.1)),
        )
        # each stretch between holes is judged on its own: its first point has no history, and a stretch that
        # starts at the beginning of training has its burn-in
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if n else np.zeros(0, dtype=np.int64)
        position = np.arange(n) - starts[group]
        # (the first point of a log every 100 steps is step 100: still the start of training; an excerpt whose
        # epochs show it began mid-run has none, whatever its counted steps)
        eligible = ~((position < self.burn_in)
                     & (steps[np.arange(n) - position] <= np.maximum(self.early_step - 1, spacing))
                     & (labels != (frames.begins_mid_run() if n else None)))
        judged = eligible & ~np.isnan(z)
        # how unusual each point is, against the noise itself (the floored z also asks whether it matters)
        held = np.where(judged, centre, np.nan)  # the level each point (and each run starting at it) is read against
        # neither the noise nor the floored scale is finer than one step of the grid the values were printed on
        quantum = _quantum(values) if n else 0.0
        noise = np.maximum(noise, _RESOLUTION)
        if quantum > 0:  # (most series sit on no grid: no pass over their points)
            grid = np.log1p(quantum / values)
            noise = np.maximum(noise, grid)
            if float(grid.max()) > float(np.nanmin(scale, initial=np.inf)):
                with np.errstate(invalid="ignore", divide="ignore"):
                    scale = np.maximum(scale, grid)
                    z = (x - centre) / scale
        # a noise read off the first few residuals of a stretch can come out small by chance: there it is never
        # taken below the attempt's typical noise (the median over its points with a full history; post hoc, the
        # later points are known)
        full = position >= _FEW_RESIDUALS
        if full.any() and (~full & ~np.isnan(noise)).any():
            known = np.where(full, noise, np.nan)
            typical = (np.full(n, np.nanmedian(known)) if len(attempts) == 1 else
                       pl.DataFrame({"a": attempt_no, "n": known}).select(pl.col("n").fill_nan(None).median().over(
                           "a")).to_series().fill_null(np.nan).to_numpy())
            with np.errstate(invalid="ignore"):
                noise = np.where(~full & (typical > noise), typical, noise)
        with np.errstate(invalid="ignore", divide="ignore"):
            zn = (x - held) / noise
        # where the noise is not known; a grad norm also waits out the burn-in (it swings widely as training starts,
        # where a loss jumping 2x never is benign)
        blind = np.isnan(noise)
        # where a tail fit is coming, jumps matter only where the noise is unknown, the first points of each
        # stretch (their points before are such points too); in a shorter attempt, at every point
        long = np.repeat(sizes > 2 * MIN_FIT, sizes)
        jump = np.zeros(n, dtype=bool)
        for where in (long & blind, ~long):
            if where.any():
                own = attempt_no[where]
                first = np.maximum.accumulate(np.where(np.r_[True, own[1:] != own[:-1]], np.arange(own.size), 0))
                jump[where] = self._absolute(x[where], group[where], interval[where], first)
        jump &= eligible | (self.metric == "loss")
        if self.metric == "grad_norm" and (~eligible).any():
            # in the burn-in a grad norm swings widely as training starts; a lone point 10x both points beside it
            # is still no swing (406 between 0.48 and 0.36 at a Trainer's fifth log); read at those few points only
            # nor is a point 10x the one before it and twice every one of the (two or more) points before it in its
            # stretch (the start's decline does not climb back to twice where it began: 92 after 7.64 and 14.98 at
            # an unsloth run's fourth log)
            at = np.flatnonzero(~eligible)
            at = at[(at > 0) & (group[np.maximum(at - 1, 0)] == group[at])]
            inside = (at < n - 1) & (group[np.minimum(at + 1, n - 1)] == group[at])
            after = np.where(inside, x[np.minimum(at + 1, n - 1)], np.nan)
            upto = int(at.max()) + 1 if at.size else 0
            highest = pl.DataFrame({"x": x[:upto], "g": group[:upto]}).select(
                pl.col("x").shift(1).cum_max().over("g")).to_series().fill_null(np.nan).to_numpy()
            factor = math.log(self.neighbour_factor)
            with np.errstate(invalid="ignore"):
                rose = x[at] - x[at - 1] >= factor
                lone = rose & (x[at] - after >= factor)
                new_high = rose & (position[at] >= 2) & (x[at] - highest[at] >= math.log(2.0))
            jump[at[lone | new_high]] = True
        absolute = jump & blind
        # where the noise is not known, the floor stands in for it: a rise must also be three times the usual
        # step-to-step move of the points before it (a per-batch loss that swings 20% from point to point is noisy,
        # not rising), as the absolute checks ask
        # (the points whose noise is not known are the first of each stretch: their moves are among themselves)
        swing = np.full(n, np.nan)
        if blind.any():
            swing[blind] = _swing(x[blind], group[blind])
        one = n == 0 or group[0] == group[-1]  # (one stretch: no windows per group)
        with np.errstate(invalid="ignore"):
            calm_enough = ~(blind & ~(x - centre >= 3 * swing))  # (no moves before it: only the absolute checks)
            candidate = ((z >= threshold) & eligible & calm_enough) | absolute
            # where the noise is known but too few points back a tail fit, a jump at the screen counts too: at the
            # screen against the noise itself as well (a per-step DPO loss calm for its first 30 points and swinging
            # 10x later is not spiking when it rises 2x at step 30)
            short_jump = jump & (z >= threshold) & (zn >= threshold) & eligible
        # an onset must rise above the recent values: a steep early decline that slows down is not a spike; the
        # largest rise the report quotes is over the lower median of the 8 points before it in its stretch, as an
        # incident's baseline is (not the level the detector judges it against, which follows the trend)
        previous = pl.col("x").shift(1).rolling_max(window_size=8, min_samples=1)
        recent_max = pl.DataFrame({"x": x, "g": group}).select(previous if one else previous.over("g"))
        with np.errstate(invalid="ignore"):
            onset_ok = ~(x < recent_max["x"].fill_null(np.nan).to_numpy())
        # the rise is over the lower median of the 8 points before (a full 8 in the stretch, known noise), which lies
        # between their lowest and their highest: only where the rise over the lowest reaches the attempt's largest
        # rise over the highest can the largest rise be, and only there is the median taken (one pass of rolling
        # quantiles over every point cost more than the rest of the scoring)
        risen = (position >= 8) & np.isfinite(noise)
        low8, high8 = _lowest_highest_8(x)
        minima = held_run_minima(x, held, noise, group)
        counted = judged & ~blind
        unseen = blind & (position > 0)
        for a, lo, hi in zip(attempts, lows, highs, strict=True):
            stretch = group[lo:hi] - group[lo]
            own_starts = np.flatnonzero(np.r_[True, stretch[1:] != stretch[:-1]])
            top, rise = _largest_rise(x, risen, low8, high8, lo, hi)
            yield _Scored(
                a, int(interval[lo]), steps[lo:hi], values[lo:hi], x[lo:hi], z[lo:hi], zn[lo:hi], centre[lo:hi],
                scale[lo:hi], eligible[lo:hi], absolute[lo:hi], short_jump[lo:hi], blind[lo:hi], stretch, own_starts,
                np.r_[own_starts[1:], hi - lo], candidate[lo:hi], int(counted[lo:hi].sum()),
                int(unseen[lo:hi].sum()), position[lo:hi], onset_ok[lo:hi],
                {k: m[lo:max(hi - k + 1, lo)] for k, m in minima.items()}, held[lo:hi], noise[lo:hi],
                None if top is None else (float(np.exp(rise)), int(steps[top]), float(values[top])),
                calm_enough[lo:hi],
            ), int(lo), int(hi)

    def _unmasked(self, sc: _Scored, judged: list[tuple[SpikeIncident, bool]], tail: NoiseTail, left_out: np.ndarray,
                  windows: dict[int, int], mean_of: int = 1) -> tuple[list[tuple[SpikeIncident, bool]], NoiseTail]:
        """The blips judged again, each against the tail fitted without its own points (leave-one-out): a spike in
        the sample it is judged against lifts the fitted tail above itself (a 7.9-sigma point in a calm run of 2,100
        made the lone-point threshold 15 sigma, 6.8 without it). Only the blip's own points leave the fit: other blips
        of its size stay in, so a run whose hard batches recur keeps them as its noise; a lone point logged for one
        iteration (a grad norm is always the logged iteration's own) is not judged again (one hard batch, back at the
        next point, is noise however rare). The
        ``_MASKING`` strongest blips (by peak z) are judged again. Returns the candidates and the tail to report: the
        original one, or the one the first blip made an incident was judged against."""
        averaged = self.metric in _AVERAGED and sc.interval > 1  # a mean over the interval: one batch is diluted
        lone = [inc for inc, decisive in judged if not decisive and (inc.points > 1 or averaged)]
        if not lone:
            return judged, tail
        peaks = _peak_z(sc, lone)
        order = [lone[i] for i in np.argsort(peaks)[::-1][:_MASKING]]
        # a few points left out of a fit of a few dozen excesses can make its tail look lighter than the noise is:
        # the refits' tails are never lighter than the body of the residuals (the heaviest Student-t it allows,
        # its 1% at each end censored, so the blips do not decide it)
        shape = 1.0 / student_body(sc.zn[np.isfinite(sc.zn) & ~left_out])[0]

        def without(top: list[SpikeIncident]) -> tuple[NoiseTail, list[tuple[SpikeIncident, bool]]]:
            out = left_out | sc.inside(top)
            refit = noise_tail(np.where(out, np.nan, sc.zn), sc.stretch, minima=without_points(sc.minima, out),
                               judged=windows, least_xi=shape, mean_of=mean_of)
            return refit, self._candidates(sc, refit)

        def passes(inc: SpikeIncident, again: list[tuple[SpikeIncident, bool]]) -> bool:
            return any(decisive and other.onset <= inc.end and inc.onset <= other.end for other, decisive in again)

        # a tail fitted without all of them is the lowest any one of them meets: a blip that fails it fails its own
        _, again = without(order)
        promoted: set[int] = set()
        reported = tail
        for inc in (inc for inc in order if passes(inc, again)):
            refit, own = without([inc])
            if passes(inc, own):
                promoted.add(id(inc))
                reported = refit if reported is tail else reported
        return [(inc, decisive or id(inc) in promoted) for inc, decisive in judged], reported

    def _candidates(self, sc: _Scored, tail: NoiseTail) -> list[tuple[SpikeIncident, bool]]:
        """Every candidate of the attempt, and whether it is an incident against ``tail``."""
        hot = tail.hot(sc.zn, sc.stretch, sc.minima)
        absolute = sc.absolute if tail.fitted else sc.absolute | sc.short_jump
        with np.errstate(invalid="ignore"):
            worth = sc.candidate | (hot & (sc.z >= RUN_FLOOR) & sc.eligible)
        long_enough = (sc.ends - sc.starts) > self.guard_samples + 1  # where Megatron's guard can speak
        return [got for k in np.flatnonzero(np.bincount(sc.stretch[worth], minlength=len(sc.starts)).astype(bool)
                                            | long_enough)
                for got in self._stretch_incidents(sc, int(sc.starts[k]), int(sc.ends[k]), hot, absolute)]

    def _absolute(self, x: np.ndarray, stretch: np.ndarray, interval: np.ndarray, first: np.ndarray) -> np.ndarray:
        """Checks that need no statistics, for points with too little history to know the noise: a loss at least
        ``jump_factor`` (2x) the lowest of the (up to 8) points before it in its stretch, 1.5x when each point is a
        mean over 10 or more iterations (its noise is at least three times smaller), at least three times their
        median step-to-step move (a loss that swings 2x from step to step is noisy, not spiking), and above the
        highest of them by more than that move (a loss back at a level it left a few points before is not a spike,
        nor one that swings between 0.07 and 0.4 from batch to batch when it reaches 0.43); a grad norm at
        least ``neighbour_factor`` (10x) the point before it, or 10x the lowest of the (two to 8) points before it and
        twice the highest of them, the point before already twice that lowest (a climb). ``interval``: each point's
        log interval; ``first``: the row of ``x`` where its attempt's points begin."""
        frame = pl.DataFrame({"x": x, "g": stretch})
        if self.metric == "grad_norm":
            prev = pl.col("x").shift(1)
            edges = frame.select(before=prev.over("g"), low=prev.rolling_min(window_size=8, min_samples=2).over("g"),
                                 high=prev.rolling_max(window_size=8, min_samples=2).over("g"))
            before, low, high = (edges[c].fill_null(np.nan).to_numpy() for c in ("before", "low", "high"))
            factor = math.log(self.neighbour_factor)
            with np.errstate(invalid="ignore"):
                # or a climb: 10x the lowest of the (two to 8) points before it and twice the highest of them, the
                # point before already twice that lowest (a blow-up rising 3-9x a step: 0.24, 0.95, 2.4, 15.9, 145,
                # 960 in BLOOM-176B's first spike; not one jump out of calm points, which the first rule judges)
                double = math.log(2.0)
                return ((x - before) >= factor) | ((x - low >= factor) & (x - high >= double) & (before - low >= double))
        if self.metric != "loss":
            return np.zeros(x.size, dtype=bool)
        factor = np.where(interval >= 10, min(self.jump_factor, 1.5), self.jump_factor)
        prev = pl.col("x").shift(1)
        edges = frame.select(low=prev.rolling_min(window_size=8, min_samples=1).over("g"),
                             high=prev.rolling_max(window_size=8, min_samples=1).over("g"))
        low, high = (edges[c].fill_null(np.nan).to_numpy() for c in ("low", "high"))
        swing = _swing(x, stretch)
        rise = x - low
        with np.errstate(invalid="ignore"):
            jumped = (rise >= np.log(factor)) & ~(rise < 3 * swing)
            above = x - high > np.where(np.isfinite(swing), swing, 0.0)
        # a spike rises above all the points before it: a loss back at a level it had just left (in the start's
        # fall) is no spike; the jumped points up to 8 after such an onset (in its attempt) belong to its spike
        index = np.arange(x.size)
        onset = np.maximum.accumulate(np.where(jumped & above, index, -(10**9))) if x.size else index
        return jumped & (index - np.where(onset >= first, onset, -(10**9)) <= 8)

    def _stretch_incidents(self, sc: _Scored, lo: int, hi: int, hot: np.ndarray,
                           absolute: np.ndarray) -> list[tuple[SpikeIncident, bool]]:
        """Every candidate of the stretch ``lo:hi`` of the attempt, and whether it is an incident (beyond the noise
        tail, or an absolute check) rather than a blip."""
        steps, values, x, z = sc.steps[lo:hi], sc.values[lo:hi], sc.x[lo:hi], sc.z[lo:hi]
        centre, scale, eligible, blind = sc.centre[lo:hi], sc.scale[lo:hi], sc.eligible[lo:hi], sc.blind[lo:hi]
        hot, absolute = hot[lo:hi], absolute[lo:hi]
        found: list[tuple[SpikeIncident, bool]] = []
        # candidates: at the screen, or a run of points beyond the noise tail, each at least 3 floored sigmas out
        with np.errstate(invalid="ignore"):
            flagged = ((z >= self._params()[2]) | (hot & (z >= RUN_FLOOR))) & eligible
        # (a run's onset must also rise beyond the swing where the noise is not known; the points after it have the
        # onset's own move in their swing)
        flagged = _from_first_rise(flagged, sc.onset_ok[lo:hi] & sc.beyond_swing[lo:hi])
        guard = self._guard(x) & eligible
        decisive = guard | absolute
        flagged |= guard | absolute
        _, floor, screen = self._params()
        for start, end in _merge(runs_of_true(flagged), self.merge_gap):
            if (lo, start, end) not in sc.seen:
                sc.seen[lo, start, end] = self._incident(sc, x, values, steps, centre, scale, blind, start, end)
            incident, back = sc.seen[lo, start, end]
            # beyond the noise tail, and risen as far as a lone point must to matter (the screen times the floor of
            # one iteration: 1.8% for a loss, 3x for a grad norm, however calm a mean over many iterations is: a
            # 100-update mean drifting 3.017 -> 3.034 is unusual, not an incident to tell of)
            beyond = bool(hot[start:end + 1].any())
            with np.errstate(invalid="ignore"):  # (a NaN level: no rise to measure, nothing material)
                # (against the level where it began: the trailing median climbs into a rise that lasts)
                least = screen * floor if end == start else min(screen * floor, _RUN_MATERIAL.get(self.metric,
                                                                                                         math.inf))
                material = bool(np.any(x[start:end + 1] - centre[start] >= least))
            # where the noise is not known, lasting (three points or more before it is back) is the evidence
            other = bool(decisive[start:end + 1].any() or (blind[start] and end - start + 1 + (
                back if back is not None else len(x) - end - 1) >= 3))
            if beyond and not material and not other and end > start:
                continue  # several points, too small a rise to count: no incident, and no lone point (no blip)
            found.append((incident, (beyond and material) or other))
        return found

    @staticmethod
    def _incident(sc: _Scored, x: np.ndarray, values: np.ndarray, steps: np.ndarray, centre: np.ndarray,
                  scale: np.ndarray, blind: np.ndarray, start: int, end: int) -> tuple[SpikeIncident, int | None]:
        """The incident of points ``start``-``end`` and how many points after it it was back (None: never)."""
        before = np.sort(values[max(0, start - 8):start])  # a logged value: the lower median of the 8 before
        base = centre[start]
        if blind[start] and before.size:  # (a level that follows a steep early fall can lie far below the points)
            base = max(base, math.log(before[(before.size - 1) // 2]))
        back = _first_at_most(x, end + 1, base + max(3 * scale[start], 0.05))
        return (
            SpikeIncident(
                attempt=sc.attempt,
                onset=int(steps[start]),
                end=int(steps[end]),
                peak=float(values[start:end + 1].max()),
                baseline=float(before[(before.size - 1) // 2]) if before.size else float(np.exp(base)),
                recovered_step=int(steps[end + 1 + back]) if back is not None else None,
                recovered_value=float(values[end + 1 + back]) if back is not None else None,
                points_after=len(x) - end - 1,
                scale=float(scale[start]),
                interval=sc.interval,
                points=end - start + 1,
                level=float(base),
                baseline_points=int(before.size),
            ),
            back)

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
            gap = inc.gap_after
            hole = f"no data between steps {gap.after_step} and {gap.before_step}" if gap else ""
            if inc.back_after_gap is not None and gap is not None and inc.back_after_gap == gap.before_step:
                after = f"not seen again until step {gap.before_step}, after a gap ({hole}), where it was at its level"
            elif inc.back_after_gap is not None and gap is not None:
                after = f"not back before a gap ({hole}); at its level again from step {inc.back_after_gap}"
            elif inc.recovered_step is not None:
                after = f"back to its level by step {inc.recovered_step} ({step_count(inc.recovered_step - inc.onset)})"
                there = (inc.recovered_value or 0.0) / inc.baseline if inc.baseline > 0 else 0.0
                if there > 1.05:  # back inside 3 sigmas of a noisy series' level, not at it: said as it is
                    after = (f"back within its noise of its level by step {inc.recovered_step} "
                             f"({step_count(inc.recovered_step - inc.onset)}; {shown(inc.recovered_value)} there, "
                             f"{times(there)} the baseline)")
            elif inc.zero_after is not None:
                after = f"then logged as 0 from step {inc.zero_after}"
            elif inc.points_after:
                after = "not back to its level at any later logged point of the attempt" + (f" ({hole})" if gap else "")
            elif inc.end > inc.onset:
                after = f"still above its level at step {inc.end}, " + last_said(frames, self.metric, inc.attempt,
                                                                                inc.end, "where the log of the attempt ends")
            else:
                after = last_said(frames, self.metric, inc.attempt, inc.end, "the log of the attempt ends here")
            label = self.metric.replace("_", " ")
            if self.series and self.series != self.metric:
                label += f" (the export's {self.series.rsplit('__', 1)[-1].upper()} column; the plotted value is a mean"
                label += " or sample)"
            detail = (
                f"{label} rose to {shown(inc.peak)} ({inc.rise_said()}); {after}"
            )
            out.append(
                Anomaly(
                    kind=self.name, metric=self.series or self.metric, attempt=inc.attempt, step=inc.onset, end_step=inc.end,
                    value=inc.peak, baseline=inc.baseline, detail=detail, recovered_step=inc.recovered_step,
                )
            )
        return out


def last_said(frames: RunFrames, metric: str, attempt: int, step: int, ends: str) -> str:
    """What follows ``step``, the last finite point of ``metric`` in ``attempt``: ``ends`` (the log of the attempt
    ends there), or, when the attempt's log goes on, that the metric turned NaN or was no longer logged (a Megatron
    line leaves the loss out of an interval whose iterations were all skipped: the attempt's log goes on to its skipped
    iterations and loss scale, its loss does not)."""
    last = frames.steps().filter(pl.col("attempt") == attempt)["step"].max()
    if last is None or int(last) <= step:  # type: ignore[arg-type]
        return ends
    label = metric.replace("_", " ")
    later = frames.points(metric).filter((pl.col("attempt") == attempt) & (pl.col("step") > step)
                                         & ~pl.col("value").is_finite())
    if later.height:
        return f"its last finite {label}: NaN/Inf from step {later['step'][0]} (the attempt's log goes on to step {last})"
    return f"its last logged {label} (the attempt's log goes on to step {last} without one)"


def _through_recovery(incidents: list[SpikeIncident], sc: _Scored) -> list[SpikeIncident]:
    """Each incident that came back to its level spans its points up to the last one before that recovery (a loss at
    2x for 20 steps was flagged for its first 6, until the trailing median caught up, and is a spike of 20 steps),
    its peak the highest of them; an incident that begins inside another's span is part of it."""
    out: list[SpikeIncident] = []
    for inc in incidents:
        if inc.recovered_step is not None:
            at, back = np.searchsorted(sc.steps, [inc.onset, inc.recovered_step])
            inc = replace(inc, end=int(sc.steps[back - 1]), peak=max(inc.peak, float(sc.values[at:back].max())),
                          points=int(back - at))
        if out and out[-1].attempt == inc.attempt and inc.onset <= out[-1].end:
            first = out[-1]
            if inc.end > first.end:
                points = int(np.searchsorted(sc.steps, inc.end, side="right") - np.searchsorted(sc.steps, first.onset))
                first = replace(first, end=inc.end, recovered_step=inc.recovered_step, points=points,
                                points_after=inc.points_after)
            out[-1] = replace(first, peak=max(first.peak, inc.peak))
            continue
        out.append(inc)
    return out


def _recovery_over(inc: SpikeIncident, own: pl.DataFrame, gaps: list[Gap], below: pl.DataFrame) -> SpikeIncident:
    """When the stretch ends before the metric is back, the rest of the attempt lies after a gap (a pasted excerpt
    may end mid-spike and the next one show the loss back at its level): the incident names the gap and where the
    metric was at its level again, but never calls that a recovery. A metric logged as 0 (or below: ``below``, its
    points the ratios leave out) after the spike is said, as where it went."""
    if inc.recovered_step is None:
        zero = below.filter(pl.col("step") > inc.end)["step"].min()
        nxt = own.filter(pl.col("step") > inc.end)["step"].min()  # the spike's next positive point
        if zero is not None and (nxt is None or zero < nxt):  # the zeros follow the spike, not some later point
            inc = replace(inc, zero_after=int(zero))  # type: ignore[arg-type]
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


def _swing(x: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The median of the (up to 7) step-to-step moves before each point in its group, NaN with none: how far the
    series usually moves from one point to the next, where its noise is not known.

    >>> _swing(np.array([1.0, 2.0, 4.0, 10.0, 20.0, 40.0]), np.array([0, 0, 0, 1, 1, 1])).tolist()
    [nan, nan, 1.0, nan, nan, 10.0]
    """
    moves = (pl.col("x") - pl.col("x").shift(1)).abs().shift(1)
    return pl.DataFrame({"x": x, "g": groups}).select(moves.rolling_median(window_size=7, min_samples=1).over(
        "g")).to_series().fill_null(np.nan).to_numpy()


def _peak_z(sc: _Scored, incidents: list[SpikeIncident]) -> list[float]:
    """Each incident's highest z against the noise, onset to end (-inf where none of its points was judged)."""
    at = np.searchsorted(sc.steps, [(inc.onset, inc.end) for inc in incidents])
    return [float(np.nanmax(sc.zn[a:b + 1], initial=-np.inf)) for a, b in at]


def _quantum(values: np.ndarray) -> float:
    """The grid the values were printed on, when they sit on one: the smallest step between two of them, where every
    value is a whole multiple of it (a loss printed to 4 decimals that sits at 0.0001 and 0.0002 moves 2x by one digit,
    which is rounding, not a spike); 0 where they do not (unrounded floats; a frozen 6.9078 with one 3x spike, whose
    one step is no grid).

    >>> round(_quantum(np.array([0.0002, 0.0001, 0.0002, 0.0003])), 12), _quantum(np.array([6.9078, 20.7234, 6.9078]))
    (0.0001, 0.0)
    """
    sample = values[:: -(-values.size // 20_000)] if values.size > 20_000 else values  # (a grid shows in a sample)
    distinct = np.unique(sample)
    if distinct.size < 2:
        return 0.0
    step = float(np.diff(distinct).min())
    with np.errstate(over="ignore", invalid="ignore"):  # (a value near the largest float over a small step: no grid)
        multiples = distinct / step
        return step if bool(np.all(np.abs(multiples - np.round(multiples)) <= 1e-6 * np.maximum(multiples, 1.0))) \
            else 0.0


def _lowest_highest_8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per point, the lowest and the highest of the 8 values before it (NaN for the first 8 points), by shifted
    minima and maxima (1, 2, 4, 8 wide).

    >>> [a.tolist()[8:] for a in _lowest_highest_8(np.array([5.0, 1, 2, 3, 4, 5, 6, 7, 9, 0]))]
    [[1.0, 1.0], [7.0, 9.0]]
    """
    low, high = np.full(x.size, np.nan), np.full(x.size, np.nan)
    if x.size > 8:
        lo, hi = x, x
        for width in (1, 2, 4):
            lo, hi = np.minimum(lo[:-width], lo[width:]), np.maximum(hi[:-width], hi[width:])
        low[8:], high[8:] = lo[:-1], hi[:-1]  # lo[j]: the lowest of x[j:j + 8], the 8 before point j + 8
    return low, high


def _largest_rise(x: np.ndarray, risen: np.ndarray, low8: np.ndarray, high8: np.ndarray, lo: int,
                  hi: int) -> tuple[int | None, float]:
    """The point of ``lo:hi`` (an attempt) where ``x`` rises most over the lower median of the 8 points before it
    (among the ``risen`` points: a full 8 before it in its stretch), the first of equals, and that rise; (None, NaN)
    with no such point. That median lies between the lowest and the highest of the 8 (``low8``, ``high8``): it is
    taken only where the rise over the lowest reaches the largest rise over the highest, where the largest rise
    must be.

    >>> x = np.log(np.array([4.0, 2, 3, 2, 3, 2, 3, 2, 3, 8, 3]))
    >>> top, rise = _largest_rise(x, np.arange(11) >= 8, *_lowest_highest_8(x), 0, 11)
    >>> top, round(float(np.exp(rise)), 6)
    (9, 4.0)
    """
    ok = np.flatnonzero(risen[lo:hi]) + lo
    if not ok.size:
        return None, math.nan
    reach = float(np.max(x[ok] - high8[ok]))
    near = ok[x[ok] - low8[ok] >= reach]
    windows = x[near[:, None] - 8 + np.arange(8)]
    rise = x[near] - np.partition(windows, 3, axis=1)[:, 3]  # the lower median: the 4th lowest of 8
    best = int(np.argmax(rise))
    return int(near[best]), float(rise[best])


def _from_first_rise(flagged: np.ndarray, rises: np.ndarray) -> np.ndarray:
    """Each run of flagged points, kept from its first point that rises above the recent values.

    >>> f = np.array([1, 1, 1, 0, 1, 1, 0, 1], dtype=bool)
    >>> _from_first_rise(f, np.array([0, 1, 0, 1, 0, 0, 0, 1], dtype=bool)).astype(int).tolist()
    [0, 1, 1, 0, 0, 0, 0, 1]
    """
    flagged = flagged.astype(bool)
    if not flagged.size:
        return flagged
    run = np.cumsum(flagged & ~np.r_[False, flagged[:-1]])  # each run of flagged points numbered from 1
    # the latest run that has risen at or before each point: the point's own when its run has
    risen = np.maximum.accumulate(np.where(flagged & rises.astype(bool), run, 0))
    return flagged & (risen == run)


def _merge(runs: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in runs:
        if merged and start - merged[-1][1] - 1 <= gap:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _first_at_most(x: np.ndarray, start: int, limit: float) -> int | None:
    """Offset from ``start`` of the first ``x[start:]`` at or below ``limit`` (NaN is not), or None: searched in
    windows that grow fourfold, so a spike back at the next point costs a few comparisons, not a pass over the attempt.

    >>> _first_at_most(np.array([5.0, 9.0, np.nan, 4.0]), 1, 4.5), _first_at_most(np.array([5.0, 9.0]), 1, 4.5)
    (2, None)
    """
    width = 64
    at = start
    while at < x.size:
        with np.errstate(invalid="ignore"):
            hits = np.flatnonzero(x[at:at + width] <= limit)
        if hits.size:
            return at - start + int(hits[0])
        at += width
        width *= 4
    return None
