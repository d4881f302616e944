"""fp16 loss-scale collapse: the dynamic loss scale falls far below its recent level, or to its minimum.

Dynamic scaling halves the scale on each overflow and doubles it after ``loss_scale_window`` clean steps, so a
healthy fp16 run moves between S and S/2. Falling to ``1/drop`` (1/8: three halvings) of the maximum of the
previous ``window`` points, or to 1 or below after having been higher, or below 1 at all (the gradients overflow
even divided by the scale), is a collapse; an overflow line's new scale (fairseq's "setting loss scale to", DeepSpeed's
"reducing to") is a point of the scale where no logged value says it. The start-up search for a
first scale (2**32 halving down) is left out: points before the first non-decreasing scale of an attempt.
bf16 runs print ``loss scale: 1.0`` (or nothing) throughout and are never flagged. Each stretch of an attempt
between gaps in the log is read on its own: a scale lower after a gap is a discontinuity (:mod:`forensics.gaps`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind, shown
from forensics.gaps import stretches
from forensics.timeline import attempt_groups, runs_of_true
from parsers import schema as s


@dataclass(frozen=True)
class StartupSearch:
    """fp16's search for a first loss scale at the start of an attempt: the scale halving from its initial value with
    iterations skipped, then holding. Normal, and never a collapse or an overflow storm."""

    attempt: int
    first_step: int
    last_step: int          # the last logged point of the search
    from_scale: float
    to_scale: float         # the scale at its last point
    skipped: int            # iterations skipped during it
    settled: bool           # False: the log of the attempt ends while it is still searching
    skipped_after: int = 0  # iterations skipped later in the attempt (overflows after the search)
    first_skip_after: int | None = None  # the first logged step after the search that counts skipped iterations
    uncounted: int = 0      # points of the search whose count of skipped iterations is missing (a cut line)

    def sentence(self) -> str:
        """One line for the setup section."""
        later = (f"then {self.skipped_after} more skipped later in the attempt (the first at step "
                 f"{self.first_skip_after})" if self.skipped_after else "then nothing more skipped")
        end = later if self.settled else "and the log of the attempt ends before it settled"
        skipped = (f"{'at least ' if self.uncounted else ''}{self.skipped} iteration{'s' if self.skipped != 1 else ''} "
                   f"skipped" + (f" ({self.uncounted} logged point{'s' if self.uncounted != 1 else ''} with no count)"
                                 if self.uncounted else ""))
        normal = "(normal: dynamic loss scaling looking for its first scale, not a collapse)"
        if self.first_step == self.last_step:  # the search happened inside the first logged interval
            return (f"attempt {self.attempt}: fp16 start-up loss-scale search, {skipped} by step {self.last_step} "
                    f"(the scale {shown(self.to_scale)} there), {end} {normal}")
        return (f"attempt {self.attempt}: fp16 start-up loss-scale search, the scale fell from {shown(self.from_scale)} "
                f"to {shown(self.to_scale)} over steps {self.first_step}–{self.last_step} with {skipped}, {end} "
                f"{normal}")


def startup_searches(frames: RunFrames) -> dict[int, StartupSearch]:
    """Per attempt, its start-up search when it has one: the leading logged points at which the loss scale fell (or,
    at the first point, started above 1) with iterations skipped, up to the first point where the scale held or rose
    with nothing skipped. The one rule the loss-scale and skipped-iteration detectors both leave out."""
    return frames.remember("startup_searches", lambda: _searches(frames))


def _searches(frames: RunFrames) -> dict[int, StartupSearch]:
    scales = frames.points(s.LOSS_SCALE)
    if scales.height == 0:
        return _searches_of_lines(frames)
    skips = frames.points(s.SKIPPED_ITERATIONS).select("attempt", "step", pl.col("value").alias(s.SKIPPED_ITERATIONS))
    wide = (scales.select("attempt", "step", pl.col("value").alias(s.LOSS_SCALE))
            .join(skips, on=["attempt", "step"], how="left").sort("attempt", "step"))
    out = {}
    for attempt, own in attempt_groups(wide):
        scale = own[s.LOSS_SCALE].to_numpy()
        uncounted = own[s.SKIPPED_ITERATIONS].is_null().to_numpy()  # a cut line: its count is not known
        skipped = own[s.SKIPPED_ITERATIONS].fill_null(0.0).to_numpy()
        steps = own["step"].to_numpy()
        ok = np.isfinite(scale)
        if not ok[0] or not skipped[0] > 0 or not scale[0] > 1:
            continue
        # searching: skipping and the scale not rising (or, with no count, the scale falling: a halving is a skip);
        # it ends at the first point that skips nothing
        fell = np.r_[True, scale[1:] < scale[:-1]]
        falling = np.r_[True, ~(scale[1:] > scale[:-1])] & ((skipped > 0) | (uncounted & fell))
        stop = int(np.argmin(falling)) if not falling.all() else len(falling)
        last = stop - 1
        settled = stop < len(falling)
        after = np.flatnonzero(skipped[stop:] > 0)
        out[int(attempt)] = StartupSearch(
            attempt=int(attempt), first_step=int(steps[0]), last_step=int(steps[last]), from_scale=float(scale[0]),
            to_scale=float(scale[last]), skipped=int(skipped[:stop].sum()), settled=settled,
            uncounted=int(uncounted[:stop].sum()),
            skipped_after=int(skipped[stop:].sum()), first_skip_after=int(steps[stop + after[0]]) if after.size else None,
        )
    return out


def _searches_of_lines(frames: RunFrames) -> dict[int, StartupSearch]:
    """Per attempt, the start-up search its overflow lines show where no series of the scale is logged (Apex's
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0" under a Trainer's bar): the
    overflows from its first logging interval before its first logged loss, each setting half the scale the one
    before set (from twice the first's), settled when a loss was logged after them; the overflows after it are said as
    skipped later."""
    lines = frames.events.filter((pl.col("kind") == s.EV_OVERFLOW) & (pl.col("value") > 0)
                                 & pl.col("step").is_not_null())
    if lines.height == 0:
        return {}
    first_loss = dict(frames.points(s.LOSS).group_by("attempt").agg(pl.col("step").min()).iter_rows())
    spacing = frames.spacing()
    out = {}
    for attempt, own in attempt_groups(lines.sort("step", "line")):
        steps, scale = own["step"].to_numpy(), own["value"].to_numpy()
        first = first_loss.get(attempt)
        # (from the first logging interval of training: overflows before the first point of an excerpt that begins
        # mid-run are no start-up)
        if first is None or steps[0] >= first or steps[0] > max(spacing.get(attempt, 1), 1):
            continue
        halving = np.r_[True, np.isclose(scale[1:], scale[:-1] / 2)] & (steps < first)
        stop = int(np.argmin(halving)) if not halving.all() else len(halving)
        after = steps[stop:]
        out[int(attempt)] = StartupSearch(
            attempt=int(attempt), first_step=int(steps[0]), last_step=int(steps[stop - 1]),
            from_scale=float(scale[0] * 2), to_scale=float(scale[stop - 1]), skipped=stop, settled=True,
            skipped_after=int(after.size), first_skip_after=int(after[0]) if after.size else None)
    return out


@dataclass
class LossScaleCollapseDetector:
    """``LossScaleCollapseDetector().detect(frames)``."""

    name: Kind = Kind.LOSS_SCALE_COLLAPSE
    drop: float = 8.0
    window: int = 200

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        points = frames.points(s.LOSS_SCALE).filter(pl.col("value") > 0).select("attempt", "step", "value")
        # the scale an overflow line set ("setting loss scale to: 0.000244", "reducing to 32"), where no logged
        # point says it (after an excerpt's last metrics line, or a console that prints the scale nowhere else)
        set_to = frames.events.filter(pl.col("kind").is_in(list(s.OVERFLOW_KINDS)) & (pl.col("value") > 0)
                                      & pl.col("step").is_not_null()).select("attempt", "step", "value")
        if set_to.height:
            extra = set_to.join(points, on=["attempt", "step"], how="anti").group_by("attempt", "step").agg(
                pl.col("value").min())
            points = pl.concat([points, extra], how="vertical_relaxed").sort("attempt", "step")
        spacing = frames.spacing()
        out = []
        for attempt, own in attempt_groups(points):
            for part in stretches(own, spacing.get(attempt, 1), frames.cuts(attempt)):
                out += self._stretch(int(attempt), part["step"].to_numpy(), part["value"].to_numpy())
        return out + _at_the_floor(frames, out)

    def _stretch(self, attempt: int, steps: np.ndarray, v: np.ndarray) -> list[Anomaly]:
        """Collapses within one stretch of consecutive points (a fall across a gap is a discontinuity instead)."""
        if v.size == 0 or (v.max() <= 1 and v.min() >= 1):
            return []
        rises = np.flatnonzero(v[1:] >= v[:-1])
        start = int(rises[0]) + 1 if rises.size else v.size
        v_pre = pl.Series(v[start:]).shift(1).rolling_max(window_size=self.window, min_samples=1).to_numpy()
        recent = np.full(v.size, np.nan)
        recent[start:] = v_pre
        with np.errstate(invalid="ignore"):
            # (below 1, the scale divides the gradients, and they still overflow: never a start-up search's value)
            flagged = (v * self.drop <= recent) | ((v <= 1) & (recent > 1)) | (v < 1)
        out = []
        for a, b in runs_of_true(flagged):
            low = float(v[a:b + 1].min())
            lowest = steps[a + int(np.argmin(v[a:b + 1]))]
            if recent[a] > low:  # from the highest of the window before it
                high_at = max(i for i in range(max(start, a - self.window), a) if v[i] == recent[a])
            elif a and v[:a].max() > low:  # below 1 after a fall the start-up rule left out (no point held or rose)
                high_at = int(np.argmax(v[:a]))
            else:
                out.append(Anomaly(
                    kind=Kind.LOSS_SCALE_COLLAPSE, metric=s.LOSS_SCALE, attempt=attempt,
                    step=int(steps[a]), end_step=int(steps[b]), value=low, baseline=None,
                    detail=f"loss scale at {shown(low)} by step {lowest}, below 1 (the gradients overflow fp16 even "
                    "scaled down), from the first point the log shows of it: repeated fp16 overflows",
                ))
                continue
            high = float(v[high_at])
            out.append(
                Anomaly(
                    kind=Kind.LOSS_SCALE_COLLAPSE, metric=s.LOSS_SCALE, attempt=attempt,
                    step=int(steps[a]), end_step=int(steps[b]), value=low, baseline=high,
                    detail=f"loss scale fell from {shown(high)} (step {steps[high_at]}) to {shown(low)} by step "
                    f"{lowest} ({high / low:.0f}x lower) over consecutive logged "
                    "points: repeated fp16 overflows",
                )
            )
        return out


# the smallest scale of DeepSpeed's and Megatron's dynamic loss scalers by default; a floor configured above it
# (min_loss_scale) is not read here, and overflows held there are not reported as a floor (a kept scale above 1 is
# as often DeepSpeed's hysteresis)
MIN_SCALE = 1.0


def _at_the_floor(frames: RunFrames, found: list[Anomaly]) -> list[Anomaly]:
    """Overflows at a scale that could go no lower (DeepSpeed's "Attempted loss scale: 1, reducing to 1"): the
    gradients overflow fp16 at the smallest scale, every such step skipped; one finding per attempt, where no
    collapse of the series already covers it. An overflow that kept a larger scale says nothing of a floor: that is
    DeepSpeed's hysteresis, which holds the scale for an overflow before it halves it ("Attempted loss scale:
    1048576.0, reducing to 1048576.0" in tr8b-104B, one step before it fell to 524288)."""
    stuck = frames.events.filter((pl.col("kind") == s.EV_OVERFLOW_SCALE_KEPT) & pl.col("step").is_not_null()
                                 & (pl.col("value") <= MIN_SCALE))
    out = []
    for attempt, own in attempt_groups(stuck):
        first, last = int(own["step"].min()), int(own["step"].max())  # type: ignore[arg-type]
        if any(a.attempt == attempt and a.step <= last and first <= a.end_step for a in found):
            continue
        scale = float(own["value"][0])
        steps = own["step"].n_unique()
        out.append(Anomaly(
            kind=Kind.LOSS_SCALE_COLLAPSE, metric=s.LOSS_SCALE, attempt=int(attempt), step=first, end_step=last,
            value=scale, baseline=None,
            detail=f"fp16 overflows at a loss scale already at its minimum ({shown(scale)}: \"Attempted loss scale: "
                   f"{shown(scale)}, reducing to {shown(scale)}\") at {steps} step{'s' if steps != 1 else ''} from step "
                   f"{first}: the gradients overflow even at the smallest scale, and those steps are skipped",
        ))
    return out
