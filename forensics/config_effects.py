"""Config changes linked to the change in behaviour that followed them: each attempt that changed settings is set
against the earlier attempt that covered the same steps (loss level, grad-norm level, where trouble came), and a
regime change at its start is tied to the change."""

from __future__ import annotations

from typing import Any

import polars as pl

from forensics.configs import config_changes
from forensics.detectors.base import RunFrames
from forensics.findings import Anomaly, Attempt, Kind, first_trouble, step_count
from parsers import schema as s

LOSS_SHIFT = 0.02       # a median loss difference over the common steps above 2% is a change in level
GRAD_RATIO = 1.25       # a median grad-norm ratio beyond 1.25x (or below 1/1.25) is a change in level


def _change_text(att: Attempt) -> str:
    return ", ".join(f"{k} {a} → {b}" for k, (a, b) in att.config_changes.items())


def _levels(frames: RunFrames, metric: str, mine: int, ref: int, lo: int, hi: int) -> tuple[float, float, int, int]:
    """Median of ``metric`` in both attempts over the steps both logged in [lo, hi]: (mine, ref, first, last)."""
    pts = frames.points(metric).filter(pl.col("step").is_between(lo, hi) & pl.col("value").is_finite())
    both = pts.filter(pl.col("attempt") == mine).join(pts.filter(pl.col("attempt") == ref), on="step", suffix="_ref")
    if both.height < 5:
        return float("nan"), float("nan"), 0, 0
    return (float(both["value"].median()), float(both["value_ref"].median()),  # type: ignore[arg-type]
            int(both["step"].min()), int(both["step"].max()))  # type: ignore[arg-type]


def _differs(metric: str, mine: float, other: float) -> bool:
    if metric == s.LOSS:
        return abs(mine / other - 1) > LOSS_SHIFT
    return other > 0 and not 1 / GRAD_RATIO <= mine / other <= GRAD_RATIO


def _same_settings(attempts: list[Attempt], att: Attempt, ref: Attempt, table: dict[int, dict[str, Any]],
                   frames: RunFrames, metric: str, lo: int, hi: int) -> str:
    """``"; but attempt N, with the same settings, ..."`` when an earlier attempt ran this one's settings over the same
    steps (``lo``-``hi``) with a level of ``metric`` of its own: the change of settings does not explain the
    difference."""
    mine = table.get(att.index)
    if not mine:
        return ""
    for twin in attempts:
        if twin.index >= att.index or twin.index == ref.index or twin.start_step is None or not table.get(twin.index):
            continue
        if config_changes(table[twin.index], mine):
            continue
        level, level_twin, first, last = _levels(frames, metric, att.index, twin.index, lo, hi)
        if level == level and _differs(metric, level, level_twin):
            return (f"; but attempt {twin.index}, with the same settings, had {level_twin:.4g} over steps "
                    f"{first}–{last} (this attempt {level:.4g}): the change does not explain it")
    return ""


def link_config_changes(attempts: list[Attempt], anomalies: list[Anomaly], frames: RunFrames,
                        table: dict[int, dict[str, Any]] | None = None) -> None:
    """Fill ``Attempt.behaviour`` for attempts that changed settings, and add a note to regime changes (and first
    trouble) that start right where such an attempt began. A change in loss level is set against an earlier attempt
    with the same settings (``table``: each attempt's config), when one ran the same steps: if its loss differed
    too, the change does not explain the difference. Mutates the findings in place."""
    table = table or {}
    first = first_trouble(anomalies)
    intervals = frames.intervals()
    for att in attempts:
        if not att.config_changes or att.start_step is None or att.end_step is None:
            continue
        change = _change_text(att)
        ref = next((p for p in reversed(attempts) if p.index < att.index and p.start_step is not None
                    and p.end_step is not None and p.start_step <= att.end_step and p.end_step >= att.start_step), None)
        notes: list[str] = []
        if ref is not None:
            mine_t, ref_t = first.get(att.index), first.get(ref.index)
            hi = min(x.step - 1 for x in (mine_t, ref_t) if x is not None) if (mine_t or ref_t) else att.end_step
            loss, loss_ref, lo_s, hi_s = _levels(frames, s.LOSS, att.index, ref.index, att.start_step, hi)
            if loss == loss and _differs(s.LOSS, loss, loss_ref):
                notes.append(f"loss {abs(loss / loss_ref - 1):.0%} {'lower' if loss < loss_ref else 'higher'} than "
                             f"attempt {ref.index} over steps {lo_s}–{hi_s} ({loss:.4g} vs {loss_ref:.4g})"
                             + _same_settings(attempts, att, ref, table, frames, s.LOSS, lo_s, hi_s))
            gn, gn_ref, lo_g, hi_g = _levels(frames, s.GRAD_NORM, att.index, ref.index, att.start_step, hi)
            if gn == gn and _differs(s.GRAD_NORM, gn, gn_ref):
                notes.append(f"grad norm {gn / gn_ref:.2f}x attempt {ref.index}'s over steps {lo_g}–{hi_g}"
                             + _same_settings(attempts, att, ref, table, frames, s.GRAD_NORM, lo_g, hi_g))
            if mine_t is not None and ref_t is not None:
                when = ("at the same step" if mine_t.step == ref_t.step else
                        f"{step_count(abs(mine_t.step - ref_t.step))} {'sooner' if mine_t.step < ref_t.step else 'later'}")
                notes.append(f"first {mine_t.kind.replace('_', ' ')} at step {mine_t.step}, {when} than attempt "
                             f"{ref.index}'s (step {ref_t.step})")
            elif mine_t is not None:
                notes.append(f"{mine_t.kind.replace('_', ' ')} at step {mine_t.step}, where attempt {ref.index} had "
                             f"run clean" + (f" until step {ref.end_step}" if ref.end_step >= mine_t.step else ""))
            elif ref_t is not None and att.end_step > ref_t.step:
                notes.append(f"no trouble past step {ref_t.step}, where attempt {ref.index} had its first "
                             f"{ref_t.kind.replace('_', ' ')}")
        near = 3 * intervals.get(att.index, 1)
        for a in anomalies:
            if a.attempt == att.index and a.kind == Kind.CHANGEPOINT and a.step - att.start_step <= near:
                notes.append(f"{a.metric.replace('_', ' ')} changed level at the start: {a.detail}")
                a.precursors.append(f"attempt {att.index} began at step {att.start_step} with {change}")
        if notes:
            att.behaviour = [f"after {change}: {n}" for n in notes]
