"""Loss plateaus: training that stops improving while the learning rate is still high.

A healthy loss keeps setting new lows (a power law, slower and slower, but lower). A plateau is a stretch of at
least ``min_share`` (25%) of the attempt, and at least ``min_points`` points, after the warm-up, in which the
smoothed loss (rolling median of 2% of the points, at least 5) never gets ``min_gain`` (2%, more than benign
wiggles) below the lowest value it had reached before the stretch, while the learning rate stays at half its
peak or more (late in a cosine schedule the loss flattens by design), and although the power law fitted to the
stretch before it (log loss on log step, Theil-Sen) promised at least 3% and twice what was gained: a slow power
law flattens too, and is not a plateau. The end of the log counts: a run that plateaus and is stopped is
the usual story.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Kind
from forensics.theil_sen import theil_sen
from parsers import schema as s


@dataclass
class LossPlateauDetector:
    """``LossPlateauDetector().detect(frames)``: kind ``loss_plateau``."""

    min_share: float = 0.25
    min_points: int = 50
    min_gain: float = 0.02
    min_expected: float = 0.03  # the earlier trend must promise at least 3% over the stretch
    name: Kind = Kind.LOSS_PLATEAU

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        loss = frames.points(s.LOSS).filter(pl.col("value").is_finite() & (pl.col("value") > 0))
        lr = frames.points(s.LR).filter(pl.col("value").is_finite())
        out = []
        for attempt in loss["attempt"].unique().sort().to_list():
            own = loss.filter(pl.col("attempt") == attempt)
            found = self._plateau(own, lr.filter(pl.col("attempt") == attempt))
            if found:
                out.append(found)
        return out

    def _plateau(self, own: pl.DataFrame, lr: pl.DataFrame) -> Anomaly | None:
        n = own.height
        if n < 4 * self.min_points:
            return None
        width = max(5, n // 50)
        smooth = own["value"].log().rolling_median(window_size=width, min_samples=1).to_numpy()
        steps = own["step"].to_numpy()
        high_lr = np.ones(n, dtype=bool)
        start = n // 10
        if lr.height:
            peak = float(lr["value"].max())  # type: ignore[arg-type]
            at = np.searchsorted(lr["step"].to_numpy(), steps, side="right") - 1
            rate = lr["value"].to_numpy()[np.clip(at, 0, None)]
            high_lr = (at >= 0) & (rate >= 0.5 * peak)
            start = max(start, int(np.argmax(rate >= 0.995 * peak)))  # after the warm-up
        best = np.minimum.accumulate(smooth[start:])
        # a new low counts when the best-so-far crosses another min_gain step of a fixed grid in log space
        grid = np.floor(best / self.min_gain)
        breaks = np.flatnonzero(np.r_[True, grid[1:] < grid[:-1]] | ~high_lr[start:])
        ends = np.r_[breaks[1:], best.size]
        lengths = ends - breaks
        need = max(self.min_points, int(self.min_share * n))
        long = np.flatnonzero(lengths >= need)
        if not long.size:
            return None
        k = long[-1]
        first, last = start + int(breaks[k]), start + int(ends[k]) - 1
        expected = self._expected_gain(smooth, steps, start, first, last)
        gained = float(best[first - start] - smooth[last])
        if expected < self.min_expected or gained > 0.5 * expected:
            return None  # a slow power law flattens too: only a clear break from the earlier trend counts
        level = float(np.exp(best[first - start]))
        return Anomaly(
            kind=Kind.LOSS_PLATEAU, metric=s.LOSS, attempt=int(own["attempt"][0]), step=int(steps[first]),
            end_step=int(steps[last]), value=float(np.exp(smooth[last])), baseline=level,
            detail=f"the loss stopped improving from step {int(steps[first])} to {int(steps[last])} "
                   f"({last - first + 1} points) while the learning rate stayed at least half its peak; "
                   f"best before {level:.6g}; its earlier trend promised {expected:.1%} more",
        )

    @staticmethod
    def _expected_gain(smooth: np.ndarray, steps: np.ndarray, start: int, first: int, last: int) -> float:
        """Log-loss the power law fitted before the stretch (log loss on log step, robust slope) would have gained
        over it."""
        lo = max(start, first - (last - first))
        if first - lo < 10 or steps[lo] <= 0:
            return 0.0
        every = max(1, (first - lo) // 400)
        x = np.log(steps[lo:first:every].astype(float))
        slope = theil_sen(smooth[lo:first:every], x)[0]
        return -slope * float(np.log(steps[last] / steps[first]))
