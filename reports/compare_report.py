"""Rendering a comparison of runs: a markdown document, the JSON contract, and a rich table for the terminal."""

from __future__ import annotations

import json
import math

from rich.table import Table

from forensics.comparison import FAILED, Comparison, RunRow
from forensics.configs import show_value
from reports.escape import md

HEADERS = ("run", "sources", "steps", "outcome", "first anomaly", "spikes", "spike score", "min loss", "final loss",
           "differs from baseline", "top suspected cause", "setup finding")


def _num(v: float | None, fmt: str = ".4g") -> str:
    return "–" if v is None or not math.isfinite(v) else format(v, fmt)


def _outcome(row: RunRow) -> str:
    if row.outcome == "unreadable":
        return "unreadable"
    at = {"diverged": "diverged at", "nan": "NaN at", "crashed": "crashed at", "running": "still running at",
          "completed": "completed at", "stopped": "stopped at"}[row.outcome]
    return f"{at} {row.outcome_step}" if row.outcome_step is not None else row.outcome


def cells(row: RunRow, baseline: str | None) -> list[str]:
    """One table row as plain text (escaped by the markdown renderer, shown as-is in the terminal)."""
    sources = ", ".join(sorted({src["format"] for src in row.sources})) or "–"
    if row.outcome == "unreadable":
        return [row.name, sources, "–", "unreadable", row.error or "", "–", "–", "–", "–", "–", "–", "–"]
    diff = "(baseline)" if row.name == baseline else ", ".join(f"{k}={show_value(v)}" for k, v in row.config_diff.items())
    return [row.name, sources, _num(row.steps_reached, "d") if row.steps_reached is not None else "–", _outcome(row),
            row.first_anomaly or "none", str(row.spikes), _num(row.spike_score, ".2f") + ("%" if row.spike_score
            is not None else ""), _num(row.min_loss), _num(row.final_loss), diff or "same", row.top_cause or "–",
            row.setup or "–"]


def render_compare_json(comparison: Comparison) -> str:
    """The comparison as strict, deterministic JSON (``schema_version`` as the analysis JSON)."""
    return json.dumps(comparison.to_dict(), indent=2, allow_nan=False, default=str) + "\n"


def render_compare_markdown(comparison: Comparison, images: dict[str, str] | None = None) -> str:
    """The comparison as markdown: the table, what separates failures from successes, LR sensitivity, plots."""
    out = ["# Comparison of runs", ""]
    if comparison.baseline:
        out += [f"Baseline: **{md(comparison.baseline)}** (config differences are against it).", ""]
    out += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    out += ["| " + " | ".join(md(c) for c in cells(r, comparison.baseline)) + " |" for r in comparison.rows]
    out += ["", "## What separates failures from successes", ""]
    if comparison.separation:
        out += [f"- {md(sep.statement)}" for sep in comparison.separation]
    else:
        failed = [r for r in comparison.rows if r.outcome in FAILED]
        out.append("- no config key splits the failed runs from the healthy ones" if failed else
                   "- no run failed")
    sens = comparison.lr_sensitivity
    if sens:
        out += ["", "## LR sensitivity", "",
                f"- LR sensitivity (Wortsman et al. 2023: mean over the sweep of min(final loss, initial loss) minus "
                f"the best final loss): **{sens['sensitivity']:.4g}** over LR {sens['lr_range'][0]:g}–"
                f"{sens['lr_range'][1]:g} ({len(sens['runs'])} runs; initial loss {sens['initial_loss']:.4g}, best "
                f"final loss {sens['best_final_loss']:.4g} at LR {sens['best_lr']:g}).",
                "- largest stable LR: " + ("none" if sens["largest_stable_lr"] is None else
                                           f"**{sens['largest_stable_lr']:g}**")
                + ("" if sens["smallest_failed_lr"] is None
                   else f"; smallest LR that failed: {sens['smallest_failed_lr']:g}")
                + "."]
        if sens["final_steps_differ"]:
            out.append("- the stable runs stopped at different steps, so their final losses are not quite comparable.")
    if images:
        out += ["", "## Overlays", ""]
        out += [f"![{md(label)}]({path})" for label, path in images.items()]
    errors = [r for r in comparison.rows if r.error]
    if errors:
        out += ["", "## Read errors and notes", ""]
        out += [f"- {md(r.name)}: {md(r.error)}" for r in errors]
    return "\n".join(out).rstrip() + "\n"


def compare_table(comparison: Comparison) -> Table:
    """A rich table of the comparison for the terminal."""
    table = Table(title="runs compared" + (f" (baseline: {comparison.baseline})" if comparison.baseline else ""),
                  title_justify="left")
    for h in HEADERS:
        table.add_column(h, overflow="fold")
    styles = {"diverged": "red", "nan": "red", "crashed": "red", "unreadable": "magenta", "completed": "green"}
    for r in comparison.rows:
        table.add_row(*cells(r, comparison.baseline), style=styles.get(r.outcome))
    return table
