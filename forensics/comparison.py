"""Comparing runs: one row per run (outcome, first anomaly, spikes, losses, config differences from a baseline, top
suspected cause), the config keys that separate failed runs from healthy ones, and the LR sensitivity of an LR
sweep (Wortsman et al. 2023)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from forensics.configs import differing_keys, show_value
from forensics.findings import SCHEMA_VERSION, EndReason, RunFindings, finite_or_none
from forensics.timeline import by_step
from parsers import schema as s

# the run's final state, from how its last attempt ended
OUTCOMES: dict[EndReason, str] = {
    EndReason.COMPLETED: "completed", EndReason.NAN: "nan", EndReason.DIVERGED: "diverged",
    EndReason.CRASHED: "crashed", EndReason.FAILED_STARTUP: "crashed", EndReason.KILLED: "crashed",
    EndReason.HUNG: "crashed", EndReason.RUNNING: "running", EndReason.UNKNOWN: "running",
    EndReason.NO_TRAINING: "running", EndReason.EXITED: "stopped", EndReason.STOPPED: "stopped",
    EndReason.INTERRUPTED: "stopped",
}
_NOT_WHY = frozenset({"stopped", "interrupted"})  # causes that say how a run was stopped, not why it failed
FAILED = frozenset({"nan", "diverged", "crashed"})
_IGNORED_FIRST = frozenset({"skipped_iterations", "changepoint"})  # not "what went wrong first"
# keys that differ between runs without being a plausible cause: seeds, logging and checkpoint cadence
NOT_SEPARATING = frozenset({"seed", "data_seed", "log_interval", "save_interval", "eval_interval", "eval_iters",
                            "exit_interval", "tensorboard_log_interval", "train_iters", "train_samples"})
MIN_RUNS_TO_SEPARATE = 3  # with two runs every difference "separates" them


@dataclass
class RunRow:
    """One run in a comparison (the JSON contract's ``runs[]``)."""

    name: str
    path: str = ""
    sources: list[dict[str, Any]] = field(default_factory=list)
    outcome: str = "unreadable"
    outcome_step: int | None = None
    steps_reached: int | None = None
    first_anomaly_step: int | None = None
    first_anomaly: str | None = None
    spikes: int = 0
    spike_score: float | None = None
    min_loss: float | None = None
    final_loss: float | None = None
    initial_loss: float | None = None
    config_diff: dict[str, Any] = field(default_factory=dict)
    top_cause: str | None = None
    setup: str | None = None          # the first setup finding (the model against its name, init, FFN width)
    error: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("spike_score", "min_loss", "final_loss", "initial_loss"):
            out[key] = finite_or_none(out[key])
        del out["config"]
        return out


def summarize(run: RunFindings, metrics: pl.DataFrame) -> RunRow:
    """A comparison row from one run's findings and metrics (``config_diff`` is filled by :func:`compare_rows`)."""
    last = run.attempts[-1] if run.attempts else None
    outcome = OUTCOMES.get(last.end_reason, "running") if last else "running"
    steps = [a.end_step for a in run.attempts if a.end_step is not None]
    if last is None:
        outcome_step = None
    elif outcome in {"nan", "diverged"}:
        kind = "nan" if outcome == "nan" else "divergence"
        outcome_step = next((a.step for a in run.anomalies if a.attempt == last.index and a.kind == kind),
                            last.end_step)
    else:
        outcome_step = last.end_step
    first = next((a for a in sorted(run.anomalies, key=lambda a: (a.attempt, a.step)) if a.kind not in _IGNORED_FIRST),
                 None)
    loss = by_step(metrics, s.LOSS, finite=True)["value"]
    score = run.spike_scores.get(s.LOSS, {}).get("run") if run.spike_scores else None
    return RunRow(
        name=run.name, path=run.path, sources=run.sources, outcome=outcome, outcome_step=outcome_step,
        steps_reached=max(steps) if steps else None,
        first_anomaly_step=first.step if first else None,
        first_anomaly=f"{first.kind.replace('_', ' ')} at step {first.step}" if first else None,
        spikes=sum(a.kind == "loss_spike" for a in run.anomalies),
        spike_score=score,
        min_loss=float(loss.min()) if len(loss) else None,  # type: ignore[arg-type]
        final_loss=float(loss[-1]) if len(loss) else None,
        initial_loss=float(loss[0]) if len(loss) else None,
        top_cause=next((c.cause for c in run.suspected_causes if c.kind not in _NOT_WHY), None),
        setup=run.setup[0] if run.setup else None,
        config=run.config,
    )


def healthy(row: RunRow) -> bool:
    """Completed, stopped on purpose, or still running (healthy up to its last step) without NaN, divergence or a
    crash."""
    return row.outcome in {"completed", "running", "stopped"}


def choose_baseline(rows: list[RunRow], name: str | None = None) -> RunRow | None:
    """The named run, else the healthy readable run that got furthest, else the first readable run."""
    readable = [r for r in rows if r.outcome != "unreadable"]
    if name is not None:
        return next((r for r in readable if r.name == name), None)
    good = [r for r in readable if healthy(r)]
    if good:
        return max(good, key=lambda r: (r.steps_reached or 0, -readable.index(r)))
    return readable[0] if readable else None


@dataclass
class Separation:
    """A config key whose values split failed runs from healthy ones."""

    key: str
    failed: dict[str, Any]
    healthy: dict[str, Any]
    statement: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def separating_keys(rows: list[RunRow]) -> list[Separation]:
    """Config keys whose values among failed runs and among healthy runs do not overlap: for numbers, every failed
    value above (or below) every healthy one; for other values, disjoint sets. Needs both kinds of run and at least
    three runs; seeds, logging cadence and run length are left out, and so are keys some run lacks."""
    failed = [r for r in rows if r.outcome in FAILED]
    good = [r for r in rows if healthy(r)]
    if not failed or not good or len(failed) + len(good) < MIN_RUNS_TO_SEPARATE:
        return []
    diffs = differing_keys({r.name: r.config for r in failed + good})
    out: list[Separation] = []
    for key, values in diffs.items():
        bad = {r.name: values[r.name] for r in failed}
        fine = {r.name: values[r.name] for r in good}
        if key in NOT_SEPARATING or None in values.values():  # a key some run does not have proves nothing
            continue
        nums = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in [*bad.values(), *fine.values()])
        if nums and min(bad.values()) > max(fine.values()):
            text = f"{key} ≥ {show_value(min(bad.values()))} failed, ≤ {show_value(max(fine.values()))} healthy"
        elif nums and max(bad.values()) < min(fine.values()):
            text = f"{key} ≤ {show_value(max(bad.values()))} failed, ≥ {show_value(min(fine.values()))} healthy"
        elif not nums and not {json.dumps(v, sort_keys=True) for v in bad.values()} & {
                json.dumps(v, sort_keys=True) for v in fine.values()}:
            text = (f"{key} = {', '.join(sorted({show_value(v) for v in bad.values()}))} failed, "
                    f"{', '.join(sorted({show_value(v) for v in fine.values()}))} healthy")
        else:
            continue
        text += f" (failed: {', '.join(bad)}; healthy: {', '.join(fine)})"
        out.append(Separation(key=key, failed=bad, healthy=fine, statement=text))
    return out


def lr_sensitivity(rows: list[RunRow]) -> dict[str, Any] | None:
    """Wortsman et al.'s LR sensitivity over runs that differ only in ``lr`` (and seed / run bookkeeping):
    E_η[min(ℓ(η), ℓ0) − ℓ*], with ℓ the final loss (a run that diverged or hit NaN counts as ℓ0, the loss at
    initialisation), ℓ* the best final loss. Also the largest LR that stayed stable. None with fewer than 3 runs."""
    sweep = [r for r in rows if r.outcome != "unreadable" and isinstance(r.config.get("lr"), (int, float))]
    if len(sweep) < 3:
        return None
    others = differing_keys({r.name: {k: v for k, v in r.config.items() if k not in {"lr", "seed"}} for r in sweep})
    if others or len({r.config["lr"] for r in sweep}) < 3:
        return None
    starts = [r.initial_loss for r in sweep if r.initial_loss is not None and math.isfinite(r.initial_loss)]
    if not starts:
        return None
    l0 = max(starts)
    finals = {r.name: (l0 if r.outcome in FAILED or r.final_loss is None else min(r.final_loss, l0)) for r in sweep}
    best = min(finals.values())
    stable = [r for r in sweep if r.outcome not in FAILED]
    lrs = sorted(r.config["lr"] for r in sweep)
    return {
        "lr_range": [lrs[0], lrs[-1]],
        "runs": {r.name: r.config["lr"] for r in sorted(sweep, key=lambda r: r.config["lr"])},
        "sensitivity": sum(finals.values()) / len(finals) - best,
        "initial_loss": l0,
        "best_final_loss": best,
        "best_lr": next(r.config["lr"] for r in sweep if finals[r.name] == best),
        "largest_stable_lr": max((r.config["lr"] for r in stable), default=None),
        "smallest_failed_lr": min((r.config["lr"] for r in sweep if r.outcome in FAILED), default=None),
        "final_steps_differ": len({r.steps_reached for r in stable}) > 1,
    }


@dataclass
class Comparison:
    """Runs side by side: the ``forensics compare`` document."""

    rows: list[RunRow]
    baseline: str | None
    separation: list[Separation]
    lr_sensitivity: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "baseline": self.baseline,
            "runs": [r.to_dict() for r in self.rows],
            "separating_keys": [sep.key for sep in self.separation],
            "separation": [sep.to_dict() for sep in self.separation],
            "lr_sensitivity": self.lr_sensitivity,
        }


def compare_rows(rows: list[RunRow], baseline: str | None = None) -> Comparison:
    """Fill each row's ``config_diff`` against the baseline run and find what separates failures from successes."""
    base = choose_baseline(rows, baseline)
    for row in rows:
        if base is not None and row.outcome != "unreadable":
            diffs = differing_keys({"base": base.config, "row": row.config})
            row.config_diff = {k: v["row"] for k, v in diffs.items()}
    return Comparison(rows=rows, baseline=base.name if base else None, separation=separating_keys(rows),
                      lr_sensitivity=lr_sensitivity(rows))
