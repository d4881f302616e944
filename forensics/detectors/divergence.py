"""Divergence: the loss leaves its level and does not come back within the attempt, or ends in NaN.

A loss spike whose loss returns to within max(3 sigma, 5%) of the pre-spike trailing median is *recovered*; one that
never does while the attempt goes on for at least three log intervals after its onset, or that is followed by NaN,
is a *divergence* with the spike's onset (a log that ends sooner is too short to tell).
A loss that turns NaN for good (NaN evidence after its last finite point, to the end of the attempt) as the grad
norm blows up is a divergence too, where no finite loss shows the climb
(a log every few hundred steps can go from its level straight to NaN): its grad norm at least ``blow_up`` (10x) the
level of an unrecovered grad-norm incident that began at most ``blow_up_within`` (20) logged points before the
loss's first NaN; the divergence is at the first point it is that high.
Without a spike, a slow climb counts too: the smoothed loss (rolling median of 5 points) staying more than
``rise`` (20%) above its running minimum over the last ``tail_share`` (10%, at least 5 points) of the attempt's
last stretch between gaps (:mod:`forensics.gaps`), and not coming down: the median of those last points not more
than ``falling`` (5%) below the median of as many points before them (a loss that rose with a warm-up and has been
falling since is not diverging), nor back more than ``came_back`` (half) of the way down from the top of its
climb (a loss that rose with a higher LR and settled on a new level).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.detectors.nan import CORE, nan_steps
from forensics.detectors.spikes import SpikeDetector, last_said
from forensics.findings import Anomaly, Kind, shown, times
from forensics.gaps import stretch_ids
from forensics.timeline import attempt_groups
from parsers import schema as s


@dataclass
class DivergenceDetector:
    """``DivergenceDetector().detect(frames)``."""

    name: Kind = Kind.DIVERGENCE
    rise: float = 0.20
    tail_share: float = 0.10
    min_tail: int = 5
    min_points_up: int = 3  # log intervals from a spike's onset to the end of the log, still up: not recovered
    falling: float = 0.05   # a climb whose last points' median is this far below the points' before is coming down
    came_back: float = 0.5  # ... or whose last points' median is back below this share of the way up its climb
    blow_up: float = 10.0   # a grad norm this many times its level as the loss turns NaN for good: the run blew up
    blow_up_within: int = 20  # logged points from the grad norm's rise to the loss's first NaN

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        # a loss that goes below 0 (a policy or preference objective) has no level to leave in ratios
        losses = frames.points(s.LOSS).filter(pl.col("value").is_finite()
                                              & ~pl.col("attempt").is_in(list(frames.negative(s.LOSS))))
        nans = nan_steps(frames).filter(pl.col("family") == CORE)
        out: dict[int, Anomaly] = {}
        for inc in SpikeDetector(metric=s.LOSS).incidents(frames):
            if inc.attempt in out or inc.recovered_step is not None or inc.back_after_gap is not None \
                    or inc.zero_after is not None:  # (a loss that went to 0 is the zero-loss finding's)
                # back at its level, or at its level again after a hole in the log: not a divergence to tell of
                continue
            own = losses.filter(pl.col("attempt") == inc.attempt)
            later_nan = nans.filter((pl.col("attempt") == inc.attempt) & (pl.col("step") >= inc.onset))
            # the grad norm's NaN with the loss still finite at and after it is not a loss that ends in NaN (the
            # loss's own NaN, Megatron's NaN count or check, or its loss left out, is)
            grad = later_nan.filter(pl.col("why").str.starts_with(f"{s.GRAD_NORM} "))
            if later_nan.height > grad.height:
                how = f"ends in NaN at step {later_nan['step'][0]}"
            elif grad.height:
                how = (f"its grad norm {grad['why'][0].split(' ', 1)[1]} at step {grad['step'][0]}, the loss itself "
                       "still finite at its last point")
            elif int(own["step"][-1]) - inc.onset >= self.min_points_up * inc.interval:
                how = f"still {shown(own['value'][-1])} at step {own['step'][-1]}, " + last_said(
                    frames, s.LOSS, inc.attempt, int(own["step"][-1]), "the end of the attempt")
            else:  # the log ends on the spike: too soon to tell
                continue
            if inc.gap_after is not None:
                how += f" (no data between steps {inc.gap_after.after_step} and {inc.gap_after.before_step})"
            end = int(max(own["step"].max(), later_nan["step"].max() or 0))  # type: ignore[arg-type]
            out[inc.attempt] = Anomaly(
                kind=Kind.DIVERGENCE, metric=s.LOSS, attempt=inc.attempt, step=inc.onset, end_step=end,
                value=float(own["value"][-1]), baseline=inc.baseline,
                detail=f"loss left its trailing median {shown(inc.baseline)} at step {inc.onset} and " + (
                    "was not back at any later logged point"
                    if int(own["step"][-1]) > inc.onset or (later_nan["step"] > inc.onset).any()
                    else "no loss was logged after it to show whether it came back") + f"; {how}",
            )
        out.update(self._blown_up(frames, losses, nans, out))
        spacing = frames.spacing()
        for attempt, own in attempt_groups(losses):
            if attempt not in out:  # the attempt's last stretch between gaps: a climb is not read across a hole
                stretch = stretch_ids(own["step"].to_numpy(), spacing.get(attempt, 1), frames.cuts(attempt))
                found = self._slow_climb(own.filter(stretch == stretch.max()))
                if found:
                    out[attempt] = found
        return sorted(out.values(), key=lambda a: (a.attempt, a.step))

    def _blown_up(self, frames: RunFrames, losses: pl.DataFrame, nans: pl.DataFrame,
                  found: dict[int, Anomaly]) -> dict[int, Anomaly]:
        """Per attempt without a divergence yet, the blow-up that ended its loss in NaN (see the module docstring)."""
        loss_nan = nans.filter(~pl.col("why").str.starts_with(f"{s.GRAD_NORM} "))
        if loss_nan.is_empty():
            return {}
        out: dict[int, Anomaly] = {}
        rises: list | None = None
        negative = frames.negative(s.LOSS)  # (a loss below 0 has no level in ratios: the spike checks pass it by)
        for attempt in sorted(set(loss_nan["attempt"].to_list()) - set(found) - set(negative)):
            own = losses.filter(pl.col("attempt") == attempt)
            # NaN from here to the end of the attempt: after its last finite loss (an earlier NaN it got past is not
            # its end), and past the step of that loss (a NaN count printed beside a finite loss is no NaN loss)
            after = loss_nan.filter((pl.col("attempt") == attempt)
                                    & (pl.col("step") > (own["step"].max() if own.height else -1)))
            if after.is_empty():
                continue
            first = int(after["step"].min())  # type: ignore[arg-type]
            rises = rises if rises is not None else SpikeDetector(metric=s.GRAD_NORM).incidents(frames)
            for inc in rises:
                if inc.attempt != attempt or inc.recovered_step is not None or inc.back_after_gap is not None \
                        or not first - self.blow_up_within * inc.interval <= inc.onset <= first:
                    continue
                high = frames.points(s.GRAD_NORM).filter(
                    (pl.col("attempt") == attempt) & pl.col("step").is_between(inc.onset, first)
                    & pl.col("value").is_finite() & (pl.col("value") >= self.blow_up * inc.baseline))
                if high.is_empty():
                    continue
                at, value = int(high["step"][0]), float(high["value"][0])
                before = own.filter(pl.col("step") <= at)
                last = (f" (its last finite loss {shown(own['value'][-1])} at step {own['step'][-1]})" if own.height
                        else " (no finite loss logged)")
                rose = f", rising from step {inc.onset}" if inc.onset < at else ""
                out[attempt] = Anomaly(
                    kind=Kind.DIVERGENCE, metric=s.LOSS, attempt=int(attempt), step=at,
                    end_step=int(max(nans.filter(pl.col("attempt") == attempt)["step"].max(), at)),  # type: ignore[arg-type]
                    value=None, baseline=float(before["value"][-1]) if before.height else None,
                    detail=f"the grad norm blew up at step {at} ({shown(value)}, {times(value / inc.baseline)} its "
                    f"level {shown(inc.baseline)}{rose}) and the loss was NaN or missing from step {first} to the end "
                    f"of the attempt{last}",
                )
                break
        return out

    def _slow_climb(self, own: pl.DataFrame) -> Anomaly | None:
        n = own.height
        tail = max(self.min_tail, int(n * self.tail_share))
        if n < 2 * tail:
            return None
        smooth = own["value"].rolling_median(window_size=5, min_samples=1).to_numpy()
        running_min = np.minimum.accumulate(smooth)
        raw = own["value"].to_numpy()
        above = (smooth > running_min * (1 + self.rise)) & (raw > running_min * (1 + self.rise))
        if not above[-tail:].all():
            return None
        last = float(np.median(raw[-tail:]))
        if last < (1 - self.falling) * np.median(raw[-2 * tail:-tail]):
            return None  # falling back over its last points: a rise it is coming down from, not a divergence
        floor_at = int(np.argmin(smooth))  # the climb starts at its lowest point: the top of the start's fall is no climb
        floor, peak = float(running_min[-1]), float(smooth[floor_at:].max())
        if last < floor + self.came_back * (peak - floor):
            return None  # back down more than half way from the top of its climb: it rose and settled, not diverged
        onset = n - 1 - int(np.argmin(above[::-1]))  # first index of the final run of True
        onset = onset + 1 if not above[onset] else onset
        steps = own["step"].to_numpy()
        low = int(np.argmin(raw[:onset + 1]))  # the lowest logged value before the climb
        return Anomaly(
            kind=Kind.DIVERGENCE, metric=s.LOSS, attempt=int(own["attempt"][0]), step=int(steps[onset]),
            end_step=int(steps[-1]), value=float(own["value"][-1]), baseline=float(raw[low]),
            detail=f"loss climbed from its minimum {shown(raw[low])} (step {steps[low]}) and stayed more than "
            f"{self.rise:.0%} above its running minimum from step {steps[onset]} to the end of the attempt",
        )
