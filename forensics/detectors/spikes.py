"""Upward spikes of loss or grad norm: a robust z-score on log values against a trailing window.

Thresholds (documented here, tuned on the real logs in ``tests/fixtures/real`` and the generated samples):

* log values, because loss and grad-norm noise is multiplicative and their spikes are heavy-tailed;
* centre = median and scale = 1.4826 x MAD of the previous ``window`` points (the point itself excluded), as in
  the modified z-score of Iglewicz & Hoaglin; OLMo 2's spike score uses 7 sigma from a rolling mean of 1,000
  values; we use 6 robust sigma on 100 points because Megatron logs often hold only hundreds of points;
* a floor on the scale (``floor``, in log units) so that an almost noiseless or very short history does not make
  every wiggle a spike: for loss 0.02 (so at least a ~13% jump at 6 sigma), for grad norm 0.25 (at least ~4.5x);
* flagged points separated by at most ``merge_gap`` unflagged points form one incident;
* burn-in: a log that starts at the beginning of training (first step below ``early_step``) is volatile and has
  no baseline, so its first ``burn_in`` points are never flagged; a log that starts mid-training (an excerpt, a
  resumed job) is judged from its second point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly
from forensics.timeline import metric_points, resume_steps, runs_of_true, trailing_robust_z, with_lineage

_DEFAULTS = {"loss": (100, 0.02, 6.0), "grad_norm": (100, 0.25, 6.0)}


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

    @property
    def name(self) -> str:
        return f"{self.metric}_spike"

    def _params(self) -> tuple[int, float, float]:
        w, f, t = _DEFAULTS.get(self.metric, (100, 0.1, 6.0))
        return self.window or w, self.floor if self.floor is not None else f, self.threshold or t

    def incidents(self, frames: RunFrames) -> list[SpikeIncident]:
        """Every spike incident with its baseline and whether (and when) the metric came back to it."""
        window, floor, threshold = self._params()
        points = metric_points(frames.metrics, self.series or self.metric).filter(
            pl.col("value").is_finite() & (pl.col("value") > 0)
        )
        found: list[SpikeIncident] = []
        resumed = resume_steps(frames.events)
        for attempt in points["attempt"].unique().sort().to_list():
            series = with_lineage(points, attempt, resumed.get(attempt))
            x = np.log(series["value"].to_numpy())
            z, centre, scale = trailing_robust_z(x, window, floor)
            own = series["own"].to_numpy()
            eligible = np.ones(len(x), dtype=bool)
            if series["step"][0] < self.early_step:
                eligible[: self.burn_in] = False
            flagged = (z >= threshold) & own & eligible
            steps = series["step"].to_numpy()
            values = series["value"].to_numpy()
            for start, end in _merge(runs_of_true(flagged), self.merge_gap):
                base = centre[start]
                back = np.flatnonzero(own[end + 1:] & (x[end + 1:] <= base + max(3 * scale[start], 0.05)))
                found.append(
                    SpikeIncident(
                        attempt=int(attempt),
                        onset=int(steps[start]),
                        end=int(steps[end]),
                        peak=float(values[start:end + 1].max()),
                        baseline=float(np.exp(base)),
                        recovered_step=int(steps[end + 1 + back[0]]) if back.size else None,
                        points_after=int(own[end + 1:].sum()),
                        scale=float(scale[start]),
                    )
                )
        return found

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
            if inc.recovered_step is not None:
                after = f"back to its level by step {inc.recovered_step}"
            elif inc.points_after:
                after = "not back to its level by the end of the attempt"
            else:
                after = "the log of the attempt ends here"
            label = self.metric.replace("_", " ")
            if self.series and self.series != self.metric:
                label += f" (the export's {self.series.rsplit('__', 1)[-1].upper()} column; the plotted value is a mean"
                label += " or sample)"
            detail = (
                f"{label} rose to {inc.peak:.6g} ({ratio:.1f}x the trailing median {inc.baseline:.6g}); {after}"
            )
            out.append(
                Anomaly(
                    kind=self.name, metric=self.series or self.metric, attempt=inc.attempt, step=inc.onset, end_step=inc.end,
                    value=inc.peak, baseline=inc.baseline, detail=detail,
                )
            )
        return out


def _merge(runs: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in runs:
        if merged and start - merged[-1][1] - 1 <= gap:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
