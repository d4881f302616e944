"""Causes read across restarts: trouble that recurs after a rollback (data or state?), trouble that vanishes when
batches are skipped, and optimizer state lost on resume."""

from __future__ import annotations

from typing import Any

import polars as pl

from forensics.findings import Anomaly, Attempt, Cause, CauseKind, first_trouble, shown, step_count
from forensics.timeline import log_intervals
from parsers import schema as s

# settings that start a resumed run without the saved optimizer state (Megatron, DeepSpeed, HF)
NO_OPTIMIZER_KEYS: tuple[str, ...] = ("no_load_optim", "finetune", "reset_optimizer", "load_module_only",
                                      "no_load_optimizer_state")
SOON_AFTER_RESUME = 200   # steps (or 20 log intervals, if longer) after a resume that count as "right after"
SCALE_RESET = 8.0         # fp16 loss scale this many times above the pre-resume scale: the scaler was not restored


def _samples_at(metrics: pl.DataFrame, attempt: int, step: int) -> float | None:
    rows = metrics.filter((pl.col("metric") == s.CONSUMED_SAMPLES) & (pl.col("attempt") == attempt)
                          & (pl.col("step") <= step)).sort("step")
    return float(rows["value"][-1]) if rows.height else None


def recurrence(
    attempts: list[Attempt], anomalies: list[Anomaly], metrics: pl.DataFrame,
    intervals: dict[int, int] | None = None,
) -> list[Cause]:
    """Across a rollback: trouble that comes back at the same step (or the same consumed samples) points at the data
    there; trouble that comes sooner or later points at optimizer or model state (PaLM: spikes "only occur due to
    the combination of specific data batches with a particular model parameter state"). ``intervals``: the run's
    :func:`~forensics.timeline.log_intervals`, when already known."""
    first = first_trouble(anomalies)
    intervals = log_intervals(metrics) if intervals is None else intervals
    out: list[Cause] = []
    for att in attempts:
        mine = first.get(att.index)
        if not att.rollback or mine is None or att.resumed_from_step is None:
            continue
        before = [first[p.index] for p in attempts if p.index < att.index and p.index in first
                  and first[p.index].step > att.resumed_from_step]
        if not before:
            continue
        prev = before[-1]
        tol = max(20, 2 * intervals.get(att.index, 1))
        samples = (_samples_at(metrics, prev.attempt, prev.step), _samples_at(metrics, att.index, mine.step))
        same_samples = None not in samples and abs(samples[0] - samples[1]) <= tol * max(  # type: ignore[operator]
            1.0, (samples[0] or 0) / max(prev.step, 1))
        seed = att.config_changes.get("seed")
        how = f" with a new seed ({seed[0]} → {seed[1]})" if seed else ""
        evidence = [
            f"attempt {prev.attempt}: first {prev.kind.replace('_', ' ')} at step {prev.step}",
            f"attempt {att.index} rolled back to step {att.resumed_from_step}"
            + (f" (inferred: its first logged step is {att.start_step})" if att.resumed_from_inferred else "")
            + f"{how} and hit "
            f"{mine.kind.replace('_', ' ')} at step {mine.step}",
        ]
        if abs(mine.step - prev.step) <= tol or same_samples:
            out.append(Cause(
                kind=CauseKind.DATA, cause="bad data batch: the trouble came back at the same point after the rollback",
                confidence=0.5, evidence=evidence,
                counter_evidence=[f"the seed changed ({seed[0]} → {seed[1]}): where the seed sets the data order, the "
                                  f"batches at step {mine.step} were not the same ones"] if seed else [],
                check_next=f"inspect the batches just before step {mine.step}; restart ~100 steps earlier and skip "
                           "a few hundred batches (PaLM): if the spike vanishes, it was the data",
            ))
        else:
            when = "sooner" if mine.step < prev.step else "later"
            out.append(Cause(
                kind=CauseKind.STATE,
                cause=f"optimizer or model state rather than one batch: after the rollback the trouble came {when} "
                      f"(step {mine.step} vs {prev.step})",
                confidence=0.4, evidence=evidence,
                check_next="LR, initialisation, Adam beta2/epsilon or the model shape rather than data order",
            ))
    return out


def skipped_batches(attempts: list[Attempt], anomalies: list[Anomaly], events: pl.DataFrame) -> list[Cause]:
    """An attempt that skipped the iterations where an earlier attempt's trouble began, and got past them cleanly:
    the data there is the suspect (PaLM's remedy; BLOOM's ``--skip-train-iteration-range``)."""
    first = first_trouble(anomalies)
    skips = events.filter((pl.col("kind") == s.EV_SKIP_RANGE) & pl.col("value").is_not_null())
    out: list[Cause] = []
    for att in attempts:
        mine = skips.filter(pl.col("attempt") == att.index)
        if not mine.height or att.end_step is None:
            continue
        lo, hi = int(mine["value"].min()), int(mine["value"].max())  # type: ignore[arg-type]
        earlier = [first[p.index] for p in attempts if p.index < att.index and p.index in first
                   and lo - 100 <= first[p.index].step <= hi + 100]
        trouble = first.get(att.index)
        if earlier and att.end_step > earlier[-1].step and (trouble is None or trouble.step > hi + 1000):
            out.append(Cause(
                kind=CauseKind.DATA,
                cause="bad data batch: the trouble did not come back once the batches around it were skipped",
                confidence=0.7,
                evidence=[f"attempt {earlier[-1].attempt}: {earlier[-1].kind.replace('_', ' ')} at step "
                          f"{earlier[-1].step}",
                          f"attempt {att.index} skipped iterations from {lo} and ran on to step {att.end_step} "
                          + ("without trouble" if trouble is None else f"until step {trouble.step}")],
                check_next="look at the skipped samples (repeated or garbled documents are the usual find)",
            ))
    return out


def optimizer_state_lost(
    attempts: list[Attempt], anomalies: list[Anomaly], metrics: pl.DataFrame, events: pl.DataFrame,
    table: dict[int, dict[str, Any]], intervals: dict[int, int] | None = None,
) -> list[Cause]:
    """A resumed attempt that started without its optimizer state (a setting, a message, or an fp16 loss scale
    back at its initial value), worse when trouble follows right after the resume."""
    first = first_trouble(anomalies)
    intervals = log_intervals(metrics) if intervals is None else intervals
    scales = metrics.filter((pl.col("metric") == s.LOSS_SCALE) & pl.col("value").is_finite())
    out: list[Cause] = []
    for att in attempts:
        if att.resumed_from_step is None or att.start_step is None or att.resumed_from_inferred:
            continue  # an inferred resume (a log that starts mid-run) says nothing about what was loaded
        evidence: list[str] = []
        cfg = table.get(att.index, {})
        evidence += [f"attempt {att.index} ran with {k}={cfg[k]}" for k in NO_OPTIMIZER_KEYS if cfg.get(k) is True]
        said = events.filter((pl.col("attempt") == att.index) & (pl.col("kind") == s.EV_OPTIMIZER_NOT_LOADED)
                             & pl.col("text").is_not_null())
        evidence += [f"attempt {att.index} logged: {t.strip()[:140]}" for t in said["text"].head(2).to_list()]
        mine = scales.filter(pl.col("attempt") == att.index).sort("step")
        before = scales.filter((pl.col("attempt") < att.index) & (pl.col("step") <= att.resumed_from_step)).sort(
            "step")
        if mine.height and before.height and mine["value"][0] >= SCALE_RESET * before["value"][-1]:
            evidence.append(f"fp16 loss scale restarted at {shown(mine['value'][0])} after the resume, "
                            f"{mine['value'][0] / before['value'][-1]:g}x the {shown(before['value'][-1])} before it "
                            "(the grad scaler is part of the optimizer state)")
        soon = max(SOON_AFTER_RESUME, 20 * intervals.get(att.index, 1))
        trouble = first.get(att.index)
        right_after = trouble is not None and trouble.step - att.resumed_from_step <= soon
        if not evidence and not right_after:
            continue
        if right_after:
            evidence.append(f"{trouble.kind.replace('_', ' ')} at step {trouble.step}, "  # type: ignore[union-attr]
                            f"{step_count(trouble.step - att.resumed_from_step)} after resuming from "  # type: ignore[union-attr]
                            f"{att.resumed_from_step}")
        lost = len(evidence) > (1 if right_after else 0)
        out.append(Cause(
            kind=CauseKind.OPTIMIZER_STATE,
            cause="optimizer state lost on resume" if lost else "trouble right after a resume",
            confidence=(0.6 if right_after else 0.3) if lost else 0.25,
            evidence=evidence,
            check_next="check that the checkpoint's optimizer state (Adam moments and step, loss scaler) was loaded: "
                       "a fresh Adam with a full LR takes outsized steps",
        ))
    return out
