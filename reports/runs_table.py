"""A runs-table export without history (a W&B runs table): one summary table of its runs, not one empty chronicle
per run. Text from the export is escaped."""

from __future__ import annotations

from typing import Any

from forensics.configs import differing_keys, show_value
from forensics.findings import RunFindings
from parsers import schema as s
from parsers.wandb_csv import RUNS_TABLE
from reports.escape import md

_SHOWN_SETTINGS = 6   # settings that differ between runs, shown per run
_SHOWN_SUMMARY = 4    # summary values (losses first), shown per run
_FIRST = ("seed", "lr", "global_batch_size", "micro_batch_size", "train_iters")  # settings shown before the rest


def _value(v: Any) -> str:
    """A value as the export holds it (floats with all their digits)."""
    return md(show_value(v))


def summary_only(run: RunFindings) -> bool:
    """A run known only from a runs table: no step was logged, every source is a runs table."""
    return bool(run.sources) and all(src["format"] == RUNS_TABLE for src in run.sources) and not any(
        a.start_step is not None for a in run.attempts)


def _summary_cells(summary: dict[str, Any]) -> str:
    values = {k.removeprefix(s.SUMMARY_PREFIX): v for k, v in summary.items() if k.startswith(s.SUMMARY_PREFIX)
              and isinstance(v, (int, float)) and not isinstance(v, bool)}
    keys = sorted(values, key=lambda k: ("loss" not in k.lower(), k))[:_SHOWN_SUMMARY]
    return ", ".join(f"{md(k)}={_value(values[k])}" for k in keys) or "–"


def runs_table_section(runs: list[RunFindings]) -> list[str]:
    """The runs of a runs table as one table: state, runtime, the settings that differ between them, and their
    final summary values (losses first). Every value is one the export holds."""
    sources = sorted({src["path"] for r in runs for src in r.sources})
    diffs = differing_keys({r.name: r.config for r in runs})
    order = sorted(diffs, key=lambda k: (_FIRST.index(k) if k in _FIRST else len(_FIRST), k))
    columns = order[:_SHOWN_SETTINGS]
    out = [f"# Runs table: {', '.join(md(p) for p in sources)}", "",
           f"{len(runs)} runs and no history in the export: what it holds of each run, not a chronicle (export the "
           "runs' history, or point forensics at their run directories, for that).", "",
           "| run | state | runtime (s) | " + " | ".join(md(k) for k in columns) + (" | " if columns else "")
           + "final summary |", "|---|---|---|" + "---|" * len(columns) + "---|"]
    for r in runs:
        info = r.summary
        state = info.get(s.RUN_STATE_KEY, "–")
        runtime = info.get(f"{s.RUN_INFO_PREFIX}Runtime", "–")
        cells = ["–" if diffs[k][r.name] is None else _value(diffs[k][r.name]) for k in columns]
        out.append(f"| {md(r.name)} | {md(state)} | {md(runtime)} | " + " | ".join(cells) + (" | " if cells else "")
                   + f"{_summary_cells(info)} |")
    if len(order) > len(columns):
        out += ["", "Other settings that differ between the runs: " + ", ".join(md(k) for k in order[len(columns):])
                + "."]
    return [*out, ""]
