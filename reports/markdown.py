"""The markdown incident chronicle: summary, attempts table, one entry per attempt, suspected causes, inputs."""

from __future__ import annotations

import json
import math
from typing import Any

from forensics.findings import Anomaly, Attempt, Findings, RunFindings
from reports.escape import md

_ENDINGS = {
    "completed": "completed",
    "nan": "ended in NaN",
    "diverged": "diverged",
    "crashed": "crashed",
    "killed": "killed",
    "stopped": "stopped",
    "running": "log ends (still running or cut off)",
    "no_training": "no training step logged",
}
_BAD_ENDINGS = {"nan", "diverged", "crashed", "killed"}


def _num(value: float | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    return f"{value:.6g}"


def _params(n: float | None) -> str:
    if n is None:
        return "n/a"
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def _value(v: Any) -> str:
    return md(json.dumps(v) if not isinstance(v, str) else v)


def _changes(attempt: Attempt) -> str:
    if not attempt.config_changes:
        return "nothing" if attempt.index > 1 else "-"
    return ", ".join(f"{md(k)}: {_value(a)} → {_value(b)}" for k, (a, b) in attempt.config_changes.items())


def _start(attempt: Attempt) -> str:
    if attempt.resumed_from_step is None:
        text = "from scratch"
    else:
        text = f"resumed from step {attempt.resumed_from_step}"
        if attempt.resumed_from_inferred:
            text += " (first step in the log; no checkpoint-load line)"
    return text + (" **(rollback)**" if attempt.rollback else "")


def _steps(attempt: Attempt) -> str:
    if attempt.start_step is None:
        return "none"
    return f"{attempt.start_step}–{attempt.end_step}"


def _anomaly_line(a: Anomaly) -> str:
    span = f"step {a.step}" if a.step == a.end_step else f"steps {a.step}–{a.end_step}"
    line = f"- {span}: **{a.kind.replace('_', ' ')}** ({md(a.metric)}): {md(a.detail)}"
    if a.averaged_over:
        line += f" *(each logged value is a mean over {a.averaged_over} iterations, so a short spike shows diluted)*"
    return "\n".join([line, *(f"  - before it: {md(p)}" for p in a.precursors)])


def _summary(run: RunFindings) -> list[str]:
    lines: list[str] = []
    if run.model.notes and run.model.notes[0].startswith("this is a ~"):
        lines.append(f"- **Model:** {md(run.model.notes[0])}.")
    bad = [a for a in run.attempts if a.end_reason in _BAD_ENDINGS]
    if bad:
        went = "; ".join(
            f"attempt {a.index} {_ENDINGS[a.end_reason]} ({md(a.end_detail)})" for a in bad
        )
        lines.append(f"- **What went wrong:** {went}.")
    else:
        lines.append("- **What went wrong:** no attempt ended in NaN, divergence or a crash.")
    rollbacks = [a for a in run.attempts if a.rollback]
    if rollbacks:
        lines.append(
            "- **Rollbacks:** "
            + ", ".join(f"attempt {a.index} went back to step {a.resumed_from_step or 0}" for a in rollbacks)
            + "."
        )
    first = next((a for a in run.anomalies if a.kind != "skipped_iterations"), None)
    if first:
        lines.append(
            f"- **First anomaly:** {first.kind.replace('_', ' ')} at step {first.step} (attempt {first.attempt})."
        )
    if run.suspected_causes:
        top = run.suspected_causes[0]
        lines.append(f"- **Most likely why (suspected):** {md(top.cause)} (confidence {top.confidence:.1f}).")
        if top.check_next:
            lines.append(f"- **What to check next:** {md(top.check_next)}.")
    if not run.anomalies:
        lines.append("- **Anomalies:** none found.")
    scores = [f"{m.replace('_', ' ')} {v['run']:.2f}%" for m, v in run.spike_scores.items() if v.get("run") is not None]
    if scores:
        lines.append("- **Spike score** (OLMo 2: share of points 7 sd or more from the mean of the previous 1,000): "
                     + ", ".join(scores) + ".")
    return lines


def _run(run: RunFindings) -> list[str]:
    out = [f"# Incident chronicle: {md(run.name)}", "", "## Summary", "", *_summary(run), ""]
    if run.warnings:
        out += ["> **Warnings while reading:**"]
        out += [f"> - {md(w)}" for w in run.warnings[:20]]
        if len(run.warnings) > 20:
            out.append(f"> - … and {len(run.warnings) - 20} more")
        out.append("")

    out += ["## Attempts", "", "| # | steps | start | what changed | how it ended |", "|---|---|---|---|---|"]
    for a in run.attempts:
        out.append(
            f"| {a.index} | {_steps(a)} | {_start(a)} | {_changes(a)} | {_ENDINGS.get(a.end_reason, a.end_reason)} |"
        )
    out.append("")

    for a in run.attempts:
        out += [f"## Attempt {a.index}: steps {_steps(a)}", ""]
        out.append(f"- **Start:** {_start(a)}.")
        if a.index > 1:
            out.append(f"- **What changed:** {_changes(a)}.")
        mine = [x for x in run.anomalies if x.attempt == a.index]
        if mine:
            out.append("- **What happened:**")
            out += ["\n".join("  " + part for part in _anomaly_line(x).split("\n")) for x in mine]
        else:
            out.append("- **What happened:** no anomalies.")
        out.append(f"- **How it ended:** {_ENDINGS.get(a.end_reason, a.end_reason)}: {md(a.end_detail)}.")
        out.append("")

    out += ["## Suspected causes", ""]
    if not run.suspected_causes:
        out += ["None: nothing in the logs points at a cause.", ""]
    for i, c in enumerate(run.suspected_causes, 1):
        out.append(f"{i}. **{md(c.cause)}** (suspected, confidence {c.confidence:.1f})")
        out += [f"   - {md(e)}" for e in c.evidence]
        if c.check_next:
            out.append(f"   - *to confirm or refute:* {md(c.check_next)}")
    out.append("")

    m = run.model
    out += [
        "## Model size",
        "",
        f"- from its shape: {_params(m.parameters_from_shape)}",
        f"- printed by the program: {_params(m.parameters_logged)}",
        f"- stated in its name: {_params(m.parameters_stated)}",
    ]
    if m.shape:
        out.append("- shape: " + ", ".join(f"{md(k)}={md(v)}" for k, v in m.shape.items() if v is not None))
    out += [f"- {md(n)}" for n in m.notes]
    out += ["", "## Inputs", ""]
    out += [f"- {md(s['path'])} ({md(s['format'])}{', sampled' if s.get('sampled') else ''})" for s in run.sources]
    if run.skipped:
        out.append(f"- skipped {len(run.skipped)} file(s): " + "; ".join(md(s) for s in run.skipped[:10]))
    out.append("")
    return out


def render_markdown(findings: Findings) -> str:
    """The incident chronicle of every run, in markdown. Text that came from logs is escaped."""
    lines: list[str] = []
    for run in findings.runs:
        lines += _run(run)
    return "\n".join(lines).rstrip() + "\n"
