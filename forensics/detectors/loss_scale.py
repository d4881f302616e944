"""fp16 loss-scale collapse: the dynamic loss scale falls far below its recent level, or to its minimum.

Dynamic scaling halves the scale on each overflow and doubles it after ``loss_scale_window`` clean steps, so a
healthy fp16 run moves between S and S/2. Falling to ``1/drop`` (1/8: three halvings) of the maximum of the
previous ``window`` points, or to 1 or below after having been higher, is a collapse. The start-up search for a
first scale (2**32 halving down) is left out: points before the first non-decreasing scale of an attempt.
bf16 runs print ``loss scale: 1.0`` (or nothing) throughout and are never flagged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly
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
        out = []
        for attempt in points["attempt"].unique().sort().to_list():
            own = points.filter(pl.col("attempt") == attempt)
            v = own["value"].to_numpy()
            if v.size < 2 or v.max() <= 1:
                continue
            rises = np.flatnonzero(v[1:] >= v[:-1])
            start = int(rises[0]) + 1 if rises.size else v.size
            v_pre = pl.Series(v[start:]).shift(1).rolling_max(window_size=self.window, min_samples=1).to_numpy()
            recent = np.full(v.size, np.nan)
            recent[start:] = v_pre
            with np.errstate(invalid="ignore"):
                flagged = (v * self.drop <= recent) | ((v <= 1) & (recent > 1))
            steps = own["step"].to_numpy()
            for a, b in runs_of_true(flagged):
                low = float(v[a:b + 1].min())
                out.append(
                    Anomaly(
                        kind="loss_scale_collapse", metric=s.LOSS_SCALE, attempt=int(attempt),
                        step=int(steps[a]), end_step=int(steps[b]), value=low, baseline=float(recent[a]),
                        detail=f"loss scale fell from {recent[a]:.6g} to {low:.6g} "
                        f"({recent[a] / low:.0f}x lower): fp16 overflows in a row",
                    )
                )
        return out
