"""The one small interface every detector shares: frames in, anomalies out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import polars as pl

from forensics.findings import Anomaly


@dataclass(frozen=True)
class RunFrames:
    """The canonical frames of one run, as the detectors see them."""

    metrics: pl.DataFrame
    events: pl.DataFrame


class Detector(Protocol):
    """Finds one kind of anomaly in a run's frames."""

    name: str

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        """Every anomaly of this kind, in step order."""
        ...
