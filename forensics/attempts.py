"""Attempts and rollbacks: where each (re)start resumed from, what changed, how far it got and how it ended."""

from __future__ import annotations

from typing import Any

import polars as pl

from forensics.configs import config_changes
from forensics.findings import Anomaly, Attempt
from parsers import schema as s


def _resume_point(events: pl.DataFrame, start: int | None, interval: float | None) -> tuple[int | None, bool]:
    loads = events.filter((pl.col("kind") == s.EV_CHECKPOINT_LOAD) & pl.col("value").is_not_null())
    if loads.height:
        it = int(loads["value"][-1])
        return (it if it > 0 else None), False
    if events.filter(pl.col("kind") == s.EV_NO_CHECKPOINT).height or start is None:
        return None, False
    if start <= max(interval or 1, 1):
        return None, True
    return start, True


def _end_reason(
    attempt: int, is_last: bool, events: pl.DataFrame, anomalies: list[Anomaly], end_step: int | None,
    train_iters: Any, losses: pl.DataFrame,
) -> tuple[str, str]:
    mine = [a for a in anomalies if a.attempt == attempt]
    nan = next((a for a in mine if a.kind == "nan"), None)
    if nan is not None and not losses.filter(pl.col("step") > nan.end_step).height:
        return "nan", f"NaN from step {nan.step}"
    div = next((a for a in mine if a.kind == "divergence"), None)
    if div is not None:
        return "diverged", f"diverged from step {div.step}"
    errors = events.filter(pl.col("kind").is_in(list(s.ERROR_KINDS - {s.EV_KILLED})))
    if errors.height:
        last = errors.sort("line").tail(1)
        text = (last["text"][0] or "").strip()[:160]
        return "crashed", f"{last['kind'][0]}: {text}"
    if events.filter(pl.col("kind") == s.EV_TRAINING_DONE).height or (
        isinstance(train_iters, int) and end_step is not None and end_step >= train_iters
    ):
        return "completed", "reached the last iteration"
    killed = events.filter(pl.col("kind") == s.EV_KILLED)
    if killed.height:
        return "killed", (killed["text"][0] or "").strip()[:160]
    exits = events.filter(pl.col("kind") == s.EV_EXIT)
    if exits.height:
        return "stopped", (exits["text"][0] or "").strip()[:160]
    if end_step is None:
        return "no_training", "no iteration was logged"
    if is_last:
        return "running", "the log ends here (still running, or cut off)"
    return "stopped", "the next attempt took over"


def build_attempts(
    metrics: pl.DataFrame, events: pl.DataFrame, cfg: dict[int, dict[str, Any]], anomalies: list[Anomaly]
) -> list[Attempt]:
    """The attempts of a run, in order, with rollbacks marked and config changes between consecutive ones."""
    numbers = sorted(
        set(metrics["attempt"].unique().to_list())
        | set(cfg)
        | set(events.filter(pl.col("kind") == s.EV_PROCESS_START)["attempt"].unique().to_list())
    ) or sorted(set(events["attempt"].unique().to_list()))
    losses_all = metrics.filter((pl.col("metric") == s.LOSS) & pl.col("value").is_finite())
    out: list[Attempt] = []
    furthest: int | None = None
    previous_cfg: dict[str, Any] | None = None
    for i, n in enumerate(numbers):
        mine = metrics.filter(pl.col("attempt") == n)
        steps = mine["step"]
        start = int(steps.min()) if len(steps) else None  # type: ignore[arg-type]
        end = int(steps.max()) if len(steps) else None  # type: ignore[arg-type]
        interval = mine.filter(pl.col("metric") == s.LOG_INTERVAL)["value"].median()
        ev = events.filter(pl.col("attempt") == n)
        resumed, inferred = _resume_point(ev, start, interval)  # type: ignore[arg-type]
        resume_at = resumed if resumed is not None else 0
        rollback = furthest is not None and (start is not None or resumed is not None) and resume_at < furthest
        this_cfg = cfg.get(n)
        changes = config_changes(previous_cfg, this_cfg) if previous_cfg and this_cfg else {}
        reason, detail = _end_reason(
            n, i == len(numbers) - 1, ev, anomalies, end, (this_cfg or {}).get("train_iters"),
            losses_all.filter(pl.col("attempt") == n),
        )
        out.append(
            Attempt(
                index=int(n), start_step=start, end_step=end, resumed_from_step=resumed,
                resumed_from_inferred=inferred, rollback=bool(rollback), config_changes=changes,
                end_reason=reason, end_detail=detail,
                points=int(mine.filter(pl.col("metric") == s.LOSS).height),
                sources=sorted(set(mine["source"].unique().to_list()) | set(ev["source"].unique().to_list())),
            )
        )
        if end is not None:
            furthest = end if furthest is None else max(furthest, end)
        if this_cfg:
            previous_cfg = this_cfg
    return out
