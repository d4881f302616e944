"""Comparing runs: one row per run (outcome, first anomaly, spikes, losses, config differences from a baseline, top
suspected cause), the config keys that separate failed runs from healthy ones, the LR sensitivity of an LR
sweep (Wortsman et al. 2023) and, over runs of several sizes and LRs, the sweep's fits, LR sensitivity per size and
predicted instabilities (:mod:`forensics.sweep`).

Every loss a row quotes is a value the run logged (on the path it finally took); what is computed (the spike score,
the LR sensitivity) is named as computed where it is shown."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import polars as pl

from forensics.configs import INFERRED_KEYS, differing_keys, show_value
from forensics.findings import (
    FAILED_OUTCOMES,
    NOT_WHY_CAUSES,
    SCHEMA_VERSION,
    EndReason,
    Kind,
    Outcome,
    RunFindings,
    finite_or_none,
    first_anomaly,
)
from forensics.sweep import FAILED as FAILED_INSTABILITY
from forensics.sweep import run_scaling, sweep
from forensics.timeline import by_step
from parsers import schema as s
from parsers.config_names import normal_name
from parsers.metric_names import canonical

# the run's final state, from how its last attempt ended
OUTCOMES: dict[EndReason, Outcome] = {
    EndReason.COMPLETED: Outcome.COMPLETED, EndReason.NAN: Outcome.NAN, EndReason.DIVERGED: Outcome.DIVERGED,
    EndReason.CRASHED: Outcome.CRASHED, EndReason.FAILED_STARTUP: Outcome.CRASHED, EndReason.KILLED: Outcome.CRASHED,
    EndReason.HUNG: Outcome.CRASHED, EndReason.RUNNING: Outcome.RUNNING, EndReason.UNKNOWN: Outcome.RUNNING,
    EndReason.NO_TRAINING: Outcome.RUNNING, EndReason.EXITED: Outcome.STOPPED, EndReason.STOPPED: Outcome.STOPPED,
    EndReason.INTERRUPTED: Outcome.STOPPED, EndReason.SILENT_EXIT: Outcome.EXITED,
}
# keys that differ between runs without being a plausible cause: seeds, logging and checkpoint cadence
NOT_SEPARATING = frozenset({"seed", "data_seed", "log_interval", "save_interval", "eval_interval", "eval_iters",
                            "exit_interval", "tensorboard_log_interval", "train_iters", "train_samples"})
MIN_RUNS_TO_SEPARATE = 3  # with two runs every difference "separates" them
# a run's own name or id under any prefix ("wandb_run_name", "experiment_name", "job_id")
_RUN_IDENTITY = re.compile(r"(?:^|_)(?:run|exp|experiment|job|wandb)_?(?:name|id)$|^name$")

# The settings that bear on a run's stability and outcome, by what they are (canonical names, see
# parsers/config_names.py, plus a few common spellings that canonicalisation keeps: nanoGPT's ``batch_size`` and
# ``dtype``, Hugging Face's ``gradient_accumulation_steps``, Lightning's ``precision``). The "differs from baseline"
# cell shows only these; paths, logging and unrelated options go to the full diff.
STABILITY_GROUPS: dict[str, tuple[str, ...]] = {
    # train_iters / train_samples set the decay horizon when lr_decay_iters is not given
    "LR and schedule": ("lr", "min_lr", "lr_decay_style", "lr_decay_iters", "lr_decay_samples", "lr_decay_tokens",
                        "train_iters", "train_samples", "decay_lr", "lr_scheduler_type", "lr_scheduler", "scheduler"),
    "batch": ("global_batch_size", "micro_batch_size", "rampup_batch_size", "batch_size",
              "gradient_accumulation_steps", "per_device_train_batch_size", "accumulate_grad_batches"),
    "warm-up": ("lr_warmup_iters", "lr_warmup_fraction", "lr_warmup_samples", "lr_warmup_tokens"),
    "optimizer": ("optimizer", "adam_beta1", "adam_beta2", "adam_eps", "weight_decay"),
    "clipping": ("clip_grad", "gradient_clip_val"),
    "init": ("init_method_std", "init_method_xavier_uniform"),
    "precision": ("fp16", "bf16", "params_dtype", "dtype", "torch_dtype", "mixed_precision", "precision",
                  "loss_scale", "initial_loss_scale", "min_loss_scale", "loss_scale_window", "hysteresis",
                  "fp32_residual_connection", "attention_softmax_in_fp32", "apply_query_key_layer_scaling",
                  "accumulate_allreduce_grads_in_fp32"),
    "model shape": ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_key_value_heads",
                    "num_query_groups", "kv_channels", "seq_length", "max_position_embeddings", "vocab_size",
                    "padded_vocab_size", "swiglu", "glu_activation"),
    "seed": ("seed", "data_seed"),
    "data": ("data_path", "train_data_path", "valid_data_path", "data_impl", "split", "tokenizer_type",
             "tokenizer_model", "vocab_file", "merge_file", "dataset", "dataset_name"),
}
STABILITY_KEYS: frozenset[str] = frozenset(k for keys in STABILITY_GROUPS.values() for k in keys)


def is_stability_key(key: str) -> bool:
    """Whether a (canonical) config key is one of :data:`STABILITY_KEYS`, ignoring case, ``-`` and spaces.

    >>> is_stability_key("lr"), is_stability_key("Batch-Size"), is_stability_key("output_dir")
    (True, True, False)
    """
    return normal_name(key) in STABILITY_KEYS


@dataclass
class RunRow:
    """One run in a comparison (the JSON contract's ``runs[]``).

    ``min_loss``, ``final_loss`` and ``initial_loss`` are logged loss values on the path the run finally took (a
    rollback replaces what the failed attempt logged after its resume point): its smallest, last and first finite
    value. ``config_diff`` is the full diff against the baseline (``{key: this run's value}``, null where this run
    does not set a key the baseline sets), empty for the baseline itself and for a run without a config;
    ``stability_diff`` is its subset on :data:`STABILITY_KEYS` (what the table's "differs from baseline" cell
    shows). ``has_config`` (a property, written to the JSON) says whether the run logged any settings at all.
    ``outcome`` "running" means no end was seen: such a run counts as healthy up to ``outcome_step``, its last step.
    """

    name: str
    path: str = ""
    sources: list[dict[str, Any]] = field(default_factory=list)
    outcome: Outcome = Outcome.UNREADABLE
    outcome_step: int | None = None
    steps_reached: int | None = None
    first_anomaly_step: int | None = None
    first_anomaly: str | None = None
    spikes: int | None = 0  # None: no loss was read, or none could be judged for spikes (a loss below 0)
    loss_read: bool = True
    outcome_said: str | None = None  # where the outcome comes from, when not from the run's own log (W&B's state)
    spike_score: float | None = None
    min_loss: float | None = None
    final_loss: float | None = None
    initial_loss: float | None = None
    config_diff: dict[str, Any] = field(default_factory=dict)
    stability_diff: dict[str, Any] = field(default_factory=dict)
    top_cause: str | None = None
    setup: str | None = None          # the first setup finding (the model against its name, init, FFN width)
    error: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    scaling: dict[str, Any] = field(default_factory=dict)  # size and norm levels for the sweep (forensics.sweep)
    lr_peak: float | None = None  # the largest LR the run logged (its schedule's peak, where it reached it)

    def __post_init__(self) -> None:
        self.outcome = Outcome(self.outcome)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["outcome"] = str(self.outcome)
        for key in ("spike_score", "min_loss", "final_loss", "initial_loss"):
            out[key] = finite_or_none(out[key])
        del out["config"], out["scaling"]  # the sweep object carries the scaling of the runs it uses
        out["has_config"] = self.has_config
        return out

    @property
    def has_config(self) -> bool:
        """Whether the run logged any settings (bookkeeping such as paths and run names left aside, and keys a
        parser infers from the training lines, :data:`INFERRED_KEYS`)."""
        return bool(self.config.keys() - INFERRED_KEYS)


# the states W&B records for a run (parsers.schema.RunState) as outcomes
RUN_STATES: dict[str, Outcome] = {
    s.RunState.FINISHED: Outcome.COMPLETED, s.RunState.FAILED: Outcome.CRASHED, s.RunState.CRASHED: Outcome.CRASHED,
    s.RunState.KILLED: Outcome.STOPPED, s.RunState.RUNNING: Outcome.RUNNING}


def _summary_loss(summary: dict[str, Any]) -> float | None:
    """The loss among a run's summary values (``summary/train/loss``), when it holds one number for it."""
    found = [v for k, v in summary.items() if k.startswith(s.SUMMARY_PREFIX)
             and canonical(k.removeprefix(s.SUMMARY_PREFIX))[0] == s.LOSS]
    value = found[0] if len(found) == 1 else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def summarize(run: RunFindings, metrics: pl.DataFrame) -> RunRow:
    """A comparison row from one run's findings and metrics (``config_diff`` and ``stability_diff`` are filled by
    :func:`compare_rows`)."""
    last = run.attempts[-1] if run.attempts else None
    # a run whose log shows no training (a W&B runs-table row): the state W&B recorded for it, where there is one
    state, ended = run.summary.get(s.RUN_STATE_KEY), run.summary.get(s.RUN_END_KEY)
    told = (state is not None or ended is not None) and not any(a.end_reason != EndReason.NO_TRAINING
                                                                for a in run.attempts)
    # (a state W&B added since, "preempted" say, is an end the table names but this does not know: exited)
    outcome = (RUN_STATES.get(str(state).lower(), Outcome.EXITED) if state is not None else Outcome.EXITED) if told \
        else OUTCOMES.get(last.end_reason, Outcome.RUNNING) if last else Outcome.RUNNING
    if outcome == Outcome.COMPLETED and last and any(a.attempt == last.index and a.kind == Kind.DIVERGENCE
                                                     for a in run.anomalies):
        outcome = Outcome.DIVERGED  # it ran its steps with its loss diverged: that is the state it ended in
    steps = [a.end_step for a in run.attempts if a.end_step is not None]
    if last is None:
        outcome_step = None
    elif outcome in {Outcome.NAN, Outcome.DIVERGED}:
        kind = Kind.NAN if outcome == Outcome.NAN else Kind.DIVERGENCE
        outcome_step = next((a.step for a in run.anomalies if a.attempt == last.index and a.kind == kind),
                            last.end_step)
    else:
        outcome_step = last.end_step
    first = first_anomaly(run.anomalies)
    # (the scalar that took the loss's role by its name, where no loss was recognised: the analysis read it as the loss)
    loss = by_step(metrics, run.coverage.get("roles", {}).get(s.LOSS, s.LOSS), finite=True)["value"]
    # no history, but the run's summary: its last logged loss (W&B's summary keeps each key's last value)
    final = None if len(loss) or not told else _summary_loss(run.summary)
    # a loss that goes below 0 in every attempt is not judged for spikes (not a cross-entropy: no ratios)
    checks = run.coverage.get("spike_checks", {}).get(s.LOSS, {})
    judged = bool(len(loss)) and not (checks and all(c.get("negative") for c in checks.values()))
    score = run.spike_scores.get(s.LOSS, {}).get("run") if run.spike_scores else None
    return RunRow(
        name=run.name, path=run.path, sources=run.sources, outcome=outcome, outcome_step=outcome_step,
        steps_reached=max(steps) if steps else None,
        first_anomaly_step=first.step if first else None,
        first_anomaly=f"{first.kind.replace('_', ' ')} at step {first.step}" if first else None,
        spikes=sum(a.kind == Kind.LOSS_SPIKE for a in run.anomalies) if judged else None,
        loss_read=bool(len(loss)),
        spike_score=score,
        min_loss=float(loss.min()) if len(loss) else None,  # type: ignore[arg-type]
        final_loss=float(loss[-1]) if len(loss) else final,
        outcome_said=(f"W&B state: {state}" if state is not None else f"W&B end time: {ended}") if told else None,
        initial_loss=float(loss[0]) if len(loss) else None,
        top_cause=next((c.cause for c in run.suspected_causes if c.kind not in NOT_WHY_CAUSES), None),
        setup=run.setup[0] if run.setup else None,
        config=run.config,
        scaling=run_scaling(run.model, metrics, outcome_step if outcome in FAILED_INSTABILITY else None),
        lr_peak=_lr_peak(metrics),
    )


def _lr_peak(metrics: pl.DataFrame) -> float | None:
    """The largest finite LR a run logged, or None: no LR logged, none above 0, or one still rising at its last
    logged point (a run that ended in its warm-up never reached its schedule's peak: its largest LR understates it).

    >>> lr = lambda v: pl.DataFrame({"metric": s.LR, "step": range(len(v)), "value": v})
    >>> _lr_peak(lr([1e-4, 3e-4, 2e-4])), _lr_peak(lr([1e-4, 3e-4])), _lr_peak(lr([3e-4, 3e-4]))
    (0.0003, None, 0.0003)
    """
    lr = metrics.filter((pl.col("metric") == s.LR) & pl.col("value").is_finite()).sort("step")["value"]
    top = lr.max()
    if not isinstance(top, int | float) or not top > 0:
        return None
    rising = lr.len() >= 2 and lr[-1] == top and lr[-1] > lr[-2]
    return None if rising else float(top)


def run_lr(row: RunRow) -> tuple[float | None, str | None]:
    """A run's LR for a sweep, and where it comes from: its config's ``lr`` (the LR the sweep set), else the largest
    LR it logged where the log shows it stopped rising (a history export carries no config: the LR the optimizer ran
    at, at its schedule's peak).

    >>> run_lr(RunRow("a", config={"lr": 3e-4}, lr_peak=2.9e-4)), run_lr(RunRow("b", lr_peak=0.0768)), run_lr(RunRow("c"))
    ((0.0003, 'config'), (0.0768, 'logged peak'), (None, None))
    """
    lr = row.config.get("lr")
    if isinstance(lr, int | float) and not isinstance(lr, bool) and lr > 0:
        return float(lr), "config"
    if row.lr_peak is not None:
        return row.lr_peak, "logged peak"
    return None, None


def with_run_lr(row: RunRow) -> RunRow:
    """The row with its :func:`run_lr` as its config's ``lr`` where its config has none (for the sweep's fits, where no
    run has an LR in a config: as in :func:`lr_sensitivity`, a run without one beside configured runs is left out)."""
    lr, source = run_lr(row)
    return row if source != "logged peak" else replace(row, config={**row.config, "lr": lr})


def healthy(row: RunRow) -> bool:
    """Completed, stopped on purpose, or still running (healthy up to its last step) without NaN, divergence or a
    crash."""
    return row.outcome in {Outcome.COMPLETED, Outcome.RUNNING, Outcome.STOPPED}


def choose_baseline(rows: list[RunRow], name: str | None = None) -> RunRow | None:
    """The named run, else the healthy readable run with a config that got furthest (a run without a config has
    nothing to diff against; among equals, the fullest config, then the first), else the first readable run."""
    readable = [r for r in rows if r.outcome != Outcome.UNREADABLE]
    if name is not None:
        return next((r for r in readable if r.name == name), None)
    good = [r for r in readable if healthy(r)]
    if good:
        return max(good, key=lambda r: (r.has_config, r.steps_reached or 0, len(r.config), -readable.index(r)))
    return readable[0] if readable else None


@dataclass
class Separation:
    """A config key whose values split failed runs from healthy ones. ``running``: the healthy runs that are still
    running (no end seen), with their last step: they count as healthy up to that step."""

    key: str
    failed: dict[str, Any]
    healthy: dict[str, Any]
    statement: str
    running: dict[str, int | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _names(rows: dict[str, Any], running: dict[str, int | None]) -> str:
    return ", ".join(n + (f" (no end in the log after step {running[n]})" if n in running else "") for n in rows)


def separating_keys(rows: list[RunRow]) -> list[Separation]:
    """Config keys whose values among failed runs and among healthy runs do not overlap: for numbers, every failed
    value above (or below) every healthy one; for other values, disjoint sets. A run still running counts as healthy
    up to its last step (and the statement says so); one that has not logged a step yet, and a run without a config,
    say nothing and are left out. Needs both kinds of run and at least three runs; seeds, logging cadence and run
    length are left out, and so are keys some run lacks and a run's own name or id (``wandb_run_name``: it
    separates any split of the runs)."""
    considered = [r for r in rows if r.has_config and not (r.outcome == Outcome.RUNNING and r.outcome_step is None)]
    failed = [r for r in considered if r.outcome in FAILED_OUTCOMES]
    good = [r for r in considered if healthy(r)]
    if not failed or not good or len(failed) + len(good) < MIN_RUNS_TO_SEPARATE:
        return []
    running = {r.name: r.outcome_step for r in good if r.outcome == Outcome.RUNNING}
    diffs = differing_keys({r.name: r.config for r in failed + good})
    out: list[Separation] = []
    for key, values in diffs.items():
        bad = {r.name: values[r.name] for r in failed}
        fine = {r.name: values[r.name] for r in good}
        if key in NOT_SEPARATING or _RUN_IDENTITY.search(key) or None in values.values():
            continue  # (a key some run does not have proves nothing; a run's own name separates any split)
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
        text += f" (failed: {', '.join(bad)}; healthy: {_names(fine, running)})"
        out.append(Separation(key=key, failed=bad, healthy=fine, statement=text,
                              running={n: s for n, s in running.items() if n in fine}))
    return out


def lr_sensitivity(rows: list[RunRow], also: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """Wortsman et al.'s LR sensitivity over runs that differ only in ``lr`` (and seed / run bookkeeping, and the
    keys in ``also``: the sweep of :mod:`forensics.sweep` lets ``min_lr`` follow the LR); the LR of each is its
    config's, or where no run has one in a config, the largest it logged (:func:`run_lr`; ``lr_from`` says which,
    ``settings_unseen`` names the runs without a config):
    E_η[min(ℓ(η), ℓ0) − ℓ*], with ℓ the final loss (a run that diverged or hit NaN counts as ℓ0), ℓ0 the highest
    first logged loss of the sweep (``initial_loss``, from ``initial_loss_run``) and ℓ* the smallest of the clipped
    final losses. ``sensitivity`` is the one computed number; every other number is a logged loss or an LR that was
    run: ``best_final_loss`` is the lowest final loss of a run that did not fail (``best_run`` at ``best_lr``),
    ``largest_stable_lr`` the largest LR of a run that did not fail (``largest_stable_run``), ``running`` the runs
    still running with their last step (their final loss is their last logged one). None with fewer than 3 runs."""
    lr_of = {r.name: run_lr(r) for r in rows if r.outcome != Outcome.UNREADABLE}
    # runs with a config LR are the sweep, as configured; only where none has one (history exports) the logged peaks
    # (a run without a config beside configured ones may differ in anything: it is left out)
    configured = any(f == "config" for _, f in lr_of.values())
    sweep = [r for r in rows if r.name in lr_of and lr_of[r.name][1] == ("config" if configured else "logged peak")]
    if len(sweep) < 3:
        return None
    others = differing_keys({r.name: {k: v for k, v in r.config.items() if k not in {"lr", "seed", *also}}
                             for r in sweep})
    if others or len({lr_of[r.name][0] for r in sweep}) < 3:
        return None
    unseen = [r.name for r in sweep if not r.has_config]
    sweep = [replace(r, config={**r.config, "lr": lr_of[r.name][0]}) for r in sweep]
    starts = [r for r in sweep if r.initial_loss is not None and math.isfinite(r.initial_loss)]
    if not starts:
        return None
    first = max(starts, key=lambda r: r.initial_loss)  # type: ignore[arg-type,return-value]
    l0: float = first.initial_loss  # type: ignore[assignment]
    finals = {r.name: (l0 if r.outcome in FAILED_OUTCOMES or r.final_loss is None else min(r.final_loss, l0)) for r in sweep}
    stable = [r for r in sweep if r.outcome not in FAILED_OUTCOMES]
    ended = [r for r in stable if r.final_loss is not None and math.isfinite(r.final_loss)]
    best = min(ended, key=lambda r: r.final_loss) if ended else None  # type: ignore[arg-type,return-value]
    widest = max(stable, key=lambda r: r.config["lr"]) if stable else None
    failed = [r for r in sweep if r.outcome in FAILED_OUTCOMES]
    lrs = sorted(r.config["lr"] for r in sweep)
    return {
        "lr_range": [lrs[0], lrs[-1]],
        "runs": {r.name: r.config["lr"] for r in sorted(sweep, key=lambda r: r.config["lr"])},
        "sensitivity": sum(finals.values()) / len(finals) - min(finals.values()),
        "initial_loss": l0,
        "initial_loss_run": first.name,
        "best_final_loss": best.final_loss if best else None,
        "best_lr": best.config["lr"] if best else None,
        "best_run": best.name if best else None,
        "largest_stable_lr": widest.config["lr"] if widest else None,
        "largest_stable_run": widest.name if widest else None,
        "smallest_failed_lr": min((r.config["lr"] for r in failed), default=None),
        "running": {r.name: r.outcome_step for r in stable if r.outcome == Outcome.RUNNING},
        "final_steps_differ": len({r.steps_reached for r in stable}) > 1,
        "lr_from": {r.name: lr_of[r.name][1] for r in sweep},  # config, or logged peak where the config has none
        "settings_unseen": unseen,  # no config: that they differ only in LR is not known
    }


@dataclass
class Comparison:
    """Runs side by side: the ``forensics compare`` document."""

    rows: list[RunRow]
    baseline: str | None
    separation: list[Separation]
    lr_sensitivity: dict[str, Any] | None
    sweep: dict[str, Any] | None = None  # runs of several sizes and LRs: forensics.sweep.sweep

    def to_dict(self) -> dict[str, Any]:
        out = {
            "schema_version": SCHEMA_VERSION,
            "baseline": self.baseline,
            "runs": [r.to_dict() for r in self.rows],
            "separating_keys": [sep.key for sep in self.separation],
            "separation": [sep.to_dict() for sep in self.separation],
            "lr_sensitivity": self.lr_sensitivity,
        }
        if self.sweep is not None:  # additive: a comparison that is no size sweep is as before
            out["sweep"] = self.sweep
        return out


def compare_rows(rows: list[RunRow], baseline: str | None = None) -> Comparison:
    """Fill each row's ``config_diff`` (and its ``stability_diff`` subset) against the baseline run and find what
    separates failures from successes. A run without a config, or any run when the baseline has none, gets no
    diff (the report says "no config" rather than listing every key as missing)."""
    base = choose_baseline(rows, baseline)
    for row in rows:
        row.config_diff, row.stability_diff = {}, {}
        if base is not None and base.has_config and row.has_config and row.outcome != Outcome.UNREADABLE:
            diffs = differing_keys({"base": base.config, "row": row.config})
            row.config_diff = {k: v["row"] for k, v in diffs.items()}
            row.stability_diff = {k: v for k, v in row.config_diff.items() if is_stability_key(k)}
    return Comparison(rows=rows, baseline=base.name if base else None, separation=separating_keys(rows),
                      lr_sensitivity=lr_sensitivity(rows), sweep=sweep(rows if any(
                          run_lr(r)[1] == "config" for r in rows) else [with_run_lr(r) for r in rows]))
