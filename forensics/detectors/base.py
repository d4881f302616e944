"""The one small interface every detector shares: frames in, anomalies out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import polars as pl

from forensics.findings import Anomaly, Gap, Kind
from forensics.gaps import cuts_of, find_gaps, logged_steps, usual_intervals
from forensics.timeline import log_intervals, metric_points, mid_run_epoch


@dataclass(frozen=True)
class RunFrames:
    """The canonical frames of one run, as the detectors see them, with a memo of what several detectors derive
    from them (a metric's points, the log intervals, spike incidents), so each is computed once per run."""

    metrics: pl.DataFrame
    events: pl.DataFrame
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    # the sources whose loss points are means over their log interval (formats that say so); None: not known
    interval_means: frozenset[str] | None = None

    def remember(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()`` the first time ``key`` is asked for, the stored result after that."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]

    def points(self, metric: str) -> pl.DataFrame:
        """(attempt, step, value) of one metric (see :func:`forensics.timeline.metric_points`)."""
        return self.remember(("points", metric), lambda: metric_points(self.metrics, metric))

    def negative(self, metric: str) -> dict[int, tuple[float, int]]:
        """Per attempt whose ``metric`` takes a negative value, its lowest value and that value's step: a loss that
        goes below 0 is not a cross-entropy (a policy, preference or adversarial objective), and its rises are not
        ratios (the spike and divergence checks pass it by)."""
        def compute() -> dict[int, tuple[float, int]]:
            values = self.points(metric).get_column("value").to_numpy()
            if not (np.isfinite(values) & (values < 0)).any():  # (most metrics: three queries saved)
                return {}
            low = self.points(metric).filter((pl.col("value") < 0) & pl.col("value").is_finite()).sort("value").group_by(
                "attempt", maintain_order=True).first()
            return {int(a): (float(v), int(st)) for a, st, v in low.select("attempt", "step", "value").iter_rows()}
        return self.remember(("negative", metric), compute)

    def intervals(self) -> dict[int, int]:
        """Per attempt, the iterations each logged point covers (see :func:`forensics.timeline.log_intervals`)."""
        return self.remember("intervals", lambda: log_intervals(self.metrics))

    def steps(self) -> pl.DataFrame:
        """(attempt, step) at which anything was logged (see :func:`forensics.gaps.logged_steps`)."""
        return self.remember("steps", lambda: logged_steps(self.metrics))

    def first_steps(self) -> dict[int, int]:
        """Per attempt, the first step at which anything was logged."""
        return self.remember("first steps", lambda: {int(a): int(st) for a, st in self.steps().group_by("attempt").agg(
            pl.col("step").min()).iter_rows()})

    def metric_spacing(self, metric: str) -> dict[int, int]:
        """Per attempt, the usual step between ``metric``'s own points where it is logged less often than the run logs
        anything (a loss every 50 steps beside validation metrics at every step has no hole between its points), else
        :meth:`spacing`."""
        def compute() -> dict[int, int]:
            run, own = self.spacing(), usual_intervals(self.points(metric).select("attempt", "step"))
            return {a: max(run.get(a, 1), own.get(a, 1)) for a in {*run, *own}}
        return self.remember(("metric spacing", metric), compute)

    def sources(self) -> dict[int, frozenset[str]]:
        """Per attempt, the sources that logged its steps."""
        return self.remember("sources", lambda: {  # lazily: no copy of the two columns of millions of rows
            int(a): frozenset(src) for a, src in
            self.metrics.lazy().group_by("attempt").agg(pl.col("source").unique().cast(pl.String)).collect().rows()})

    def spacing(self) -> dict[int, int]:
        """Per attempt, the usual step between logged points: what a gap is measured in."""
        return self.remember("spacing", lambda: usual_intervals(self.steps()))

    def gaps(self) -> list[Gap]:
        """The holes in the logged steps (see :func:`forensics.gaps.find_gaps`)."""
        return self.remember("gaps", lambda: find_gaps(self.steps(), self.spacing(), self.events))

    def loss_is_interval_mean(self, attempt: int) -> bool:
        """Whether each of the attempt's logged loss points is known to be a mean over the iterations since the one
        before (every source that logged its steps writes such means: :data:`parsers.schema.INTERVAL_MEAN_FORMATS`)."""
        mine = self.sources().get(attempt, frozenset())
        return self.interval_means is not None and bool(mine) and mine <= self.interval_means

    def begins_mid_run(self) -> int | None:
        """The first attempt, when its epochs show that its log began well into training
        (:func:`forensics.timeline.mid_run_epoch`: a pasted excerpt of a console that prints no step, whose counted
        steps start at 1 all the same): its first points are not a burn-in at the start of training."""
        def compute() -> int | None:
            first = self.metrics["attempt"].min()
            return None if first is None or mid_run_epoch(self.metrics, int(first)) is None else int(first)  # type: ignore[arg-type]
        return self.remember("begins_mid_run", compute)

    def cuts(self, attempt: int) -> np.ndarray:
        """The first step after each hole in ``attempt``'s log: where its stretches begin (with the spacing, what
        :func:`forensics.gaps.stretch_ids` cuts at; a "..." in a pasted log cuts whatever the steps around it)."""
        return self.remember(("cuts", attempt), lambda: cuts_of(self.gaps(), attempt))


class Detector(Protocol):
    """Finds one kind of anomaly in a run's frames."""

    name: Kind

    def detect(self, frames: RunFrames) -> list[Anomaly]:
        """Every anomaly of this kind, in step order."""
        ...
