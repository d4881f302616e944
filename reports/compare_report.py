"""Rendering a comparison of runs: a markdown document and the JSON contract (the terminal's table is
:func:`reports.terminal.compare_table`).

Every output ends with exactly one newline. Losses are quoted as logged (every digit, :func:`forensics.findings.shown`);
what is computed (the spike score, the LR sensitivity) is named as computed."""

from __future__ import annotations

import json
import math
from typing import Any

from forensics.comparison import Comparison, RunRow
from forensics.configs import differing_keys, show_value
from forensics.findings import FAILED_OUTCOMES, Outcome, shown
from forensics.sweep import METRIC_NAMES
from reports.escape import md
from reports.json_report import strict
from reports.markdown import config_diff_table

HEADERS = ("run", "sources", "steps", "outcome", "first anomaly", "spikes", "spike score", "min loss",
           "final loss", "differs from baseline", "top suspected cause", "setup finding")


def _loss(v: float | None) -> str:
    return "–" if v is None or not math.isfinite(v) else shown(v)


def _outcome(row: RunRow) -> str:
    if row.outcome == Outcome.UNREADABLE:
        return str(Outcome.UNREADABLE)
    at = {Outcome.DIVERGED: "diverged at", Outcome.NAN: "NaN at", Outcome.CRASHED: "crashed at",
          Outcome.RUNNING: "no end seen after", Outcome.COMPLETED: "completed at",
          Outcome.STOPPED: "stopped at", Outcome.EXITED: "exited (no reason printed) after"}[row.outcome]
    said = f"{at} {row.outcome_step}" if row.outcome_step is not None else str(row.outcome)
    return f"{said} ({row.outcome_said})" if row.outcome_said else said


MAX_UNSET_LISTED = 3  # more stability keys than this that a run does not set are counted, not listed


def differs(row: RunRow, comparison: Comparison) -> str:
    """The "differs from baseline" cell: the stability settings that differ (see
    :data:`forensics.comparison.STABILITY_KEYS`) and how many other keys do; "no config" once for a run that logged
    none."""
    if row.outcome == Outcome.UNREADABLE:
        return "–"
    if row.name == comparison.baseline:
        return "(baseline)" + ("" if row.has_config else ", no config")
    if not row.has_config:
        return "no config"
    base = next((r for r in comparison.rows if r.name == comparison.baseline), None)
    if base is None or not base.has_config:
        return "baseline has no config"
    parts = [f"{k}={show_value(v)}" for k, v in row.stability_diff.items() if v is not None]
    unset = [k for k, v in row.stability_diff.items() if v is None]
    if len(unset) > MAX_UNSET_LISTED:
        parts.append(f"{len(unset)} stability settings not set")
    else:
        parts += [f"{k} not set" for k in unset]
    others = len(row.config_diff) - len(row.stability_diff)
    if others:
        parts.append(f"+{others} other key{'s' if others > 1 else ''}")
    return ", ".join(parts) or "same"


def cells(row: RunRow, comparison: Comparison) -> list[str]:
    """One table row as plain text (escaped by the markdown renderer, shown as-is in the terminal)."""
    sources = ", ".join(sorted({src["format"] for src in row.sources})) or "–"
    if row.outcome == Outcome.UNREADABLE:
        return [row.name, sources, "–", str(Outcome.UNREADABLE), row.error or "", "–", "–", "–", "–", "–", "–", "–"]
    score = "–" if row.spike_score is None or not math.isfinite(row.spike_score) else f"{row.spike_score:.2f}%"
    return [row.name, sources, str(row.steps_reached) if row.steps_reached is not None else "–", _outcome(row),
            row.first_anomaly or ("none" if row.loss_read else "not checked: no history, its summary only"
                                  if row.final_loss is not None else "none found, no loss read"),
            "–" if row.spikes is None else str(row.spikes), score, _loss(row.min_loss), _loss(row.final_loss),
            differs(row, comparison), row.top_cause or "–", row.setup or "–"]


def render_compare_json(comparison: Comparison) -> str:
    """The comparison as strict, deterministic JSON (``schema_version`` as the analysis JSON)."""
    return json.dumps(strict(comparison.to_dict()), indent=2, allow_nan=False, default=str) + "\n"


def _separation(comparison: Comparison) -> list[str]:
    out = ["## What separates failures from successes", ""]
    unconfigured = [r.name for r in comparison.rows if r.outcome != Outcome.UNREADABLE and not r.has_config]
    if comparison.separation:
        out += [f"- {md(sep.statement)}" for sep in comparison.separation]
        if any(sep.running for sep in comparison.separation):
            out.append("- a run with no end in its log (still running, cut off, or stopped without a word) counts as "
                       "healthy up to its last step.")
    elif any(r.outcome in FAILED_OUTCOMES for r in comparison.rows):
        out.append("- no config key splits the failed runs from the healthy ones")
    else:
        return [*out, "- no run failed"]
    if unconfigured:
        out.append(f"- left out (no config): {md(', '.join(unconfigured))}")
    return out


def _config_differences(comparison: Comparison) -> list[str]:
    out = ["## Config differences from the baseline", ""]
    base = next((r for r in comparison.rows if r.name == comparison.baseline), None)
    if base is None or not base.has_config:
        return [*out, "- the baseline has no config to compare against"]
    others = [r for r in comparison.rows if r is not base and r.outcome != Outcome.UNREADABLE and r.has_config]
    columns = {f"{base.name} (baseline)": base.config, **{r.name: r.config for r in others}}
    diffs = differing_keys(columns)
    if diffs:
        out += ["Every setting that differs from the baseline in some run (– : not set):", "",
                *config_diff_table(diffs, "")]
    else:
        out.append("- every run with a config has the baseline's settings")
    unconfigured = [r.name for r in comparison.rows if r.outcome != Outcome.UNREADABLE and not r.has_config]
    if unconfigured:
        out += ["", f"- no config: {md(', '.join(unconfigured))}"]
    return out


def _lr_sensitivity(sens: dict[str, Any]) -> list[str]:
    lrs = sens["lr_range"]
    out = ["## LR sensitivity", "",
           f"- LR sensitivity **≈{sens['sensitivity']:#.4g}** (computed, rounded to 4 significant digits: the mean over the "
           f"{len(sens['runs'])} runs of min(final loss, ℓ0) minus ℓ*, the smallest of those; Wortsman et al. 2023) "
           f"over LR {show_value(lrs[0])}–{show_value(lrs[1])}.",
           f"- ℓ0 = {shown(sens['initial_loss'])}: the highest first logged loss of the sweep "
           f"({md(sens['initial_loss_run'])}); a run that diverged or hit NaN counts as ℓ0."]
    if sens["best_final_loss"] is not None:
        out.append(f"- best final loss (logged): {shown(sens['best_final_loss'])}, {md(sens['best_run'])} at LR "
                   f"{show_value(sens['best_lr'])}.")
    stable = "none" if sens["largest_stable_lr"] is None else \
        f"**{show_value(sens['largest_stable_lr'])}** ({md(sens['largest_stable_run'])})"
    failed = "" if sens["smallest_failed_lr"] is None else \
        f"; smallest LR that failed: {show_value(sens['smallest_failed_lr'])}"
    out.append(f"- largest stable LR: {stable}{failed}.")
    if sens.get("running"):
        out.append("- no end in the log (healthy up to its last step; its final loss is its last logged one): "
                   + ", ".join(f"{md(n)} at step {s}" for n, s in sens["running"].items()) + ".")
    if sens["final_steps_differ"]:
        out.append("- the stable runs stopped at different steps, so their final losses are not quite comparable.")
    logged = [n for n, f in sens.get("lr_from", {}).items() if f == "logged peak"]
    if logged:
        out.append(f"- LR of {len(logged)} of the {len(sens['runs'])} runs: the largest it logged (no LR in a config of "
                   "its own)" + (": " + md(", ".join(logged)) if len(logged) < len(sens["runs"]) else "") + ".")
    if unseen := sens.get("settings_unseen"):
        out.append(f"- {len(unseen)} of the {len(sens['runs'])} runs have no config, so that they differ in nothing but "
                   "the LR (and seed) is taken, not seen.")
    return out


def _lr(value: float | None) -> str:
    return "–" if value is None else show_value(value)


def _sweep(sweep: dict[str, Any]) -> list[str]:
    """The sweep section (:mod:`forensics.sweep`): LR sensitivity per size, the fits, the predictions with their
    evidence, flagged runs and why no prediction was made."""
    shaped = {r["size"] for r in sweep["runs"].values() if r["parameters_from"] == "shape"}
    sizes = ", ".join(f"{label} ({'from the shape' if label in shaped else 'as named'})" for label in sweep["sizes"])
    out = ["## Predicting instability across the sweep", "",
           f"- sizes: {md(sizes)}; LRs: {', '.join(show_value(x) for x in sweep['lrs'])}."]
    by_size = {k: v for k, v in sweep["lr_sensitivity_by_size"].items() if v}
    if by_size:
        out += ["", "LR sensitivity per size (computed: Wortsman et al. 2023's mean over the size's LRs of min(final "
                "loss, ℓ0) minus the best of those, a failed run counting as ℓ0; rounded to 4 significant digits):", "",
                "| size | LR range | LR sensitivity | best final loss (logged) | largest stable LR | "
                "smallest LR that failed |",
                "|---|---|---|---|---|---|"]
        for label, sens in by_size.items():
            best = "–" if sens["best_final_loss"] is None else \
                f"{shown(sens['best_final_loss'])} at LR {show_value(sens['best_lr'])}"
            out.append(f"| {label} | {show_value(sens['lr_range'][0])}–{show_value(sens['lr_range'][1])} | "
                       f"{sens['sensitivity']:#.4g} | {best} | {_lr(sens['largest_stable_lr'])} | "
                       f"{_lr(sens['smallest_failed_lr'])} |")
    fits = {k: v for k, v in sweep["fits"].items() if "none" not in v}
    if fits:
        out += ["", "How each quantity scales (least squares of its log on log LR and log size; the final loss over the "
                "runs that finished, a norm over every run that did not fail, its value the median of the last fifth "
                "of its points before the end, the first tenth left out):", "",
                "| quantity | fit | R² (log scale) | runs | largest factor off the fit |", "|---|---|---|---|---|"]
        out += [f"| {METRIC_NAMES[k]} | ∝ LR^{f['lr_exponent']:.2f} · N^{f['size_exponent']:.2f} | {f['r2']:.3f} | "
                f"{f['runs']} | {f['spread']:.2f}x |" for k, f in fits.items()]
    predictions = sweep["predictions"]
    for metric in dict.fromkeys(p["metric"] for p in predictions):
        mine = [p for p in predictions if p["metric"] == metric]
        first = mine[0]
        out += ["", f"**{METRIC_NAMES[metric]}** (a prediction from the fit, not an observation): the highest level a "
                f"run survived is {first['highest_survived']['level']:.4g} ({md(first['highest_survived']['run'])}), "
                f"the lowest at which one failed {first['lowest_failed']['level']:.4g} "
                f"({md(first['lowest_failed']['run'])}, {first['lowest_failed']['outcome']}); the fit reaches the level "
                "between them (their geometric mean) at:", "",
                "| size | fitted on | level | predicted unstable at LR ≥ | LR range (the two levels) | observed at that "
                "size | agrees |", "|---|---|---|---|---|---|---|"]
        for p in mine:
            seen = "no finished or failed run" if p["agrees"] is None else (
                (f"stable up to {show_value(p['largest_stable_lr'])}" if p["largest_stable_lr"] is not None
                 else "no stable run")
                + (f", failed from {show_value(p['smallest_failed_lr'])}" if p["smallest_failed_lr"] is not None
                   else ", none failed"))
            fitted = f"{p['from_sizes'][0]}–{p['from_sizes'][-1]}" + (f" ({p['size']} held out)" if p["held_out"] else "")
            agrees = "–" if p["agrees"] is None else "yes" if p["agrees"] else "**no**"
            out.append(f"| {p['size']} | {fitted}, R² {p['fit']['r2']:.3f} | {p['threshold']:.3g} | "
                       f"**{p['lr_at_least']:.2g}**{' (outside the LRs run)' if p['beyond_lrs_run'] else ''} | "
                       f"{p['lr_between'][0]:.2g}–{p['lr_between'][1]:.2g} | {seen} | {agrees} |")
    if sweep["flagged"]:
        out += ["", *[f"- flagged: {md(f['statement'])}." for f in sweep["flagged"]]]
    if sweep["no_prediction"]:
        out += ["", *[f"- no prediction from {md(why)}." for why in sweep["no_prediction"]]]
    return out


def render_compare_markdown(comparison: Comparison, images: dict[str, str] | None = None) -> str:
    """The comparison as markdown: the table, what separates failures from successes, the full config differences
    from the baseline, LR sensitivity, the sweep's predictions (runs of several sizes), plots, read errors."""
    out = ["# Comparison of runs", ""]
    if comparison.baseline:
        out += [f"Baseline: **{md(comparison.baseline)}** (config differences are against it; the table shows the "
                "settings that bear on stability, the full diff is in its own section).", ""]
    out += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    out += ["| " + " | ".join(md(c) for c in cells(r, comparison)) + " |" for r in comparison.rows]
    out += ["", "Losses are logged values on the path each run finally took, with every digit logged; the spike score "
            "is computed (OLMo 2: the percentage of loss values at least 7 standard deviations from the mean of the "
            "1,000 before them), to 2 decimals.", ""]
    out += _separation(comparison)
    out += ["", *_config_differences(comparison)]
    if comparison.lr_sensitivity:
        out += ["", *_lr_sensitivity(comparison.lr_sensitivity)]
    if comparison.sweep:
        out += ["", *_sweep(comparison.sweep)]
    if images:
        out += ["", "## Overlays", ""]
        out += [f"![{md(label)}]({path})" for label, path in images.items()]
    errors = [r for r in comparison.rows if r.error]
    if errors:
        out += ["", "## Read errors and notes", ""]
        out += [f"- {md(r.name)}: {md(r.error)}" for r in errors]
    return "\n".join(out).rstrip() + "\n"

