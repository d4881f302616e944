"""fp16 loss-scale collapse: the dynamic loss scale falls far below its recent level, or to its minimum.

Dynamic scaling halves the scale on each overflow and doubles it after ``loss_scale_window`` clean steps, so a
healthy fp16 run moves between S and S/2. Falling to ``1/drop`` (1/8: three halvings) of the maximum of the
previous ``window`` points, or to 1 or below after having been higher, is a collapse. The start-up search for a
first scale (2**32 halving down) is left out: points before the first non-decreasing scale of an attempt.
bf16 runs print ``loss scale: 1.0`` (or nothing) throughout and are never flagged. Each stretch of an attempt
between gaps in the log is read on its own: a scale lower after a gap is a discontinuity (:mod:`forensics.gaps`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, shown
from forensics.gaps import stretches
from forensics.timeline import runs_of_true
from parsers import schema as s


@dataclass
class LossScaleCollapseDetector:
    """``LossScaleCollapseDetector().detect(frames)``."""

    name: str = "loss_scale_collapse"
    drop: float = 8.0
    window: int = 200

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        points = frames.points(s.LOSS_SCALE).filter(pl.col("value") > 0)
        spacing = frames.spacing()
        out = []
        for (attempt,), own in points.group_by("attempt", maintain_order=True):
            for part in stretches(own, spacing.get(attempt, 1)):
                out += self._stretch(int(attempt), part["step"].to_numpy(), part["value"].to_numpy())
        return out

    def _stretch(self, attempt: int, steps: np.ndarray, v: np.ndarray) -> list[Anomaly]:
        """Collapses within one stretch of consecutive points (a fall across a gap is a discontinuity instead)."""
        if v.size < 2 or v.max() <= 1:
            return []
        rises = np.flatnonzero(v[1:] >= v[:-1])
        start = int(rises[0]) + 1 if rises.size else v.size
        v_pre = pl.Series(v[start:]).shift(1).rolling_max(window_size=self.window, min_samples=1).to_numpy()
        recent = np.full(v.size, np.nan)
        recent[start:] = v_pre
        with np.errstate(invalid="ignore"):
            flagged = (v * self.drop <= recent) | ((v <= 1) & (recent > 1))
        out = []
        for a, b in runs_of_true(flagged):
            low = float(v[a:b + 1].min())
            high_at = max(i for i in range(max(start, a - self.window), a) if v[i] == recent[a])
            out.append(
                Anomaly(
                    kind="loss_scale_collapse", metric=s.LOSS_SCALE, attempt=attempt,
                    step=int(steps[a]), end_step=int(steps[b]), value=low, baseline=float(recent[a]),
                    detail=f"loss scale fell from {shown(recent[a])} (step {steps[high_at]}) to {shown(low)} by step "
                    f"{steps[a + int(np.argmin(v[a:b + 1]))]} ({recent[a] / low:.0f}x lower) over consecutive logged "
                    "points: repeated fp16 overflows",
                )
            )
        return out
