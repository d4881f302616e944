"""What the terminal shows after a report is written: a run's headline, attempts and first troubles, or the
comparison table. Log text is printed as plain text (never read as rich markup) and cut at a word boundary."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from forensics.configs import show_value
from forensics.findings import Findings, Outcome, first_trouble
from reports.escape import terminal

if TYPE_CHECKING:  # (the comparison's modules are imported when a comparison is shown, not by ``analyze``)
    from forensics.comparison import Comparison

_STYLES = {Outcome.DIVERGED: "red", Outcome.NAN: "red", Outcome.CRASHED: "red", Outcome.UNREADABLE: "magenta",
           Outcome.COMPLETED: "green"}


def clip(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters at a word boundary, with an ellipsis when cut.

    >>> clip("loss rose to 4.29132 (1.1x the trailing median)", 24)
    'loss rose to 4.29132 …'
    >>> clip("short", 24)
    'short'
    """
    if len(text) <= width:
        return text
    head = text[: width - 1]  # room for " …" after a cut at a space
    cut = head.rsplit(" ", 1)[0] if " " in head else text[: width - 2]
    return cut.rstrip(" ,;:") + " …"


def written_line(what: str, written: list[Path]) -> Text:
    """"report written to out.md (+ 2 plots in out_files)"."""
    extra = len(written) - 1
    plots = f" (+ {extra} plot{'s' if extra != 1 else ''} in {written[1].parent})" if extra > 0 else ""
    return terminal(f"{what} written to {written[0]}{plots}")


def print_summary(findings: Findings, written: list[Path], console: Console | None = None) -> None:
    """Per run: the size headline, an attempts table, each attempt's first trouble and the top suspected causes;
    then where the report went."""
    console = console or Console(highlight=False)
    for run in findings.runs:
        if run.model.size_mismatch:
            console.print(terminal(run.model.size_headline, style="bold red"))
        table = Table(title=terminal(f"{run.name}: attempts"), title_justify="left")
        for col in ("#", "steps", "start", "what changed", "ended"):
            table.add_column(col, overflow="fold")
        troubled = first_trouble(run.anomalies)
        shown_rows = _rows_shown(run.attempts, set(troubled))
        for i, a in enumerate(run.attempts):
            if i not in shown_rows:
                if i - 1 in shown_rows:  # the first of a hidden run of rows
                    hidden = next((j for j in range(i, len(run.attempts)) if j in shown_rows), len(run.attempts)) - i
                    table.add_row("…", "", terminal(f"{hidden} attempts not shown (all are in the report)"), "", "")
                continue
            start = ("log begins mid-run" if a.begins_mid_run else "loaded weights" if a.loaded_weights
                     else "scratch" if a.resumed_from_step is None
                     else f"step {a.resumed_from_step}")
            steps = "-" if a.start_step is None else f"{a.start_step}-{a.end_step}"
            changed = ", ".join(f"{k}: {show_value(v[0])} → {show_value(v[1])}" for k, v in a.config_changes.items())
            table.add_row(*(terminal(c) for c in (str(a.index), steps, start + (" (rollback)" if a.rollback else ""),
                                                  clip(changed, 60), str(a.end_reason))))
        console.print(table)
        for _, x in sorted(troubled.items()):
            console.print(terminal(f"attempt {x.attempt}: {x.kind.replace('_', ' ')} at step {x.step}: "
                                   + clip(x.detail, 100)))
        for c in run.suspected_causes[:3]:
            console.print(terminal(f"suspected: {c.cause} (confidence {c.confidence:.2f})"))
    console.print(written_line("report", written), soft_wrap=True)  # a path is never broken


TABLE_ROWS = 30  # attempts up to which the terminal lists every one; beyond: the first and last ten, and troubled


def _rows_shown(attempts: list, troubled: set[int]) -> set[int]:
    """Which attempts (positions) the terminal table lists: all of up to ``TABLE_ROWS``; of more (a log that
    restarts every few lines), the first ten, the last ten and those with an anomaly.

    >>> from types import SimpleNamespace as A
    >>> sorted(_rows_shown([A(index=i) for i in range(1, 41)], {25}))[8:13]
    [8, 9, 24, 30, 31]
    """
    if len(attempts) <= TABLE_ROWS:
        return set(range(len(attempts)))
    return ({*range(10), *range(len(attempts) - 10, len(attempts))}
            | {i for i, a in enumerate(attempts) if a.index in troubled})


def compare_table(comparison: Comparison) -> Table:
    """A rich table of the comparison for the terminal."""
    from reports.compare_report import HEADERS, cells

    table = Table(title=terminal("runs compared" + (f" (baseline: {comparison.baseline})" if comparison.baseline
                                                    else "")), title_justify="left")
    for h in HEADERS:
        table.add_column(h, overflow="fold")
    for r in comparison.rows:
        table.add_row(*(terminal(c) for c in cells(r, comparison)), style=_STYLES.get(r.outcome))
    return table


def print_comparison(comparison: Comparison, written: list[Path], console: Console | None = None) -> None:
    """The comparison table, then where the comparison went."""
    console = console or Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    console.print(compare_table(comparison))
    for line in sweep_lines(comparison.sweep):
        console.print(terminal(line), soft_wrap=True)
    console.print(written_line("comparison", written), soft_wrap=True)


def sweep_lines(sweep: dict | None) -> list[str]:
    """The sweep's predictions in brief (:mod:`forensics.sweep`; the comparison holds the fits and the evidence):
    per fitted quantity, the prediction for the largest size (held out when it was), then every flagged run.

    >>> [line] = sweep_lines({"predictions": [{"metric": "grad_norm", "size": "1.3B", "parameters": 1.3e9,
    ...     "held_out": True, "lr_at_least": 0.00056, "from_sizes": ["125M", "760M"], "fit": {"r2": 0.999},
    ...     "agrees": True}], "flagged": []})
    >>> line  # doctest: +ELLIPSIS
    'sweep: the grad norm fit predicts instability at LR ≥ 0.00056 for 1.3B (fitted on 125M–760M, R² 0.999); ...'
    """
    if not sweep:
        return []
    from forensics.sweep import METRIC_NAMES

    out = []
    for metric in dict.fromkeys(p["metric"] for p in sweep["predictions"]):
        p = max((p for p in sweep["predictions"] if p["metric"] == metric),
                key=lambda p: (p["parameters"], p["held_out"]))
        seen = "" if p["agrees"] is None else f"; observed at {p['size']}: {'agrees' if p['agrees'] else 'disagrees'}"
        out.append(f"sweep: the {METRIC_NAMES[metric]} fit predicts instability at LR ≥ {p['lr_at_least']:.2g} for "
                   f"{p['size']} (fitted on {p['from_sizes'][0]}–{p['from_sizes'][-1]}, R² {p['fit']['r2']:.3f})"
                   + seen)
    return out + [f"sweep flagged: {f['statement']}" for f in sweep["flagged"]]


@contextmanager
def progress(what: str = "reading runs") -> Iterator[Callable[[str, int], None]]:
    """A progress bar on stderr (only when it is a terminal); yields the callback to call with each item's name and
    the number of items as each finishes (the ``progress`` of :func:`forensics.compare_runs`)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True, highlight=False)
    with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(what, total=None)
        yield lambda _, total: bar.update(task, total=total, advance=1)
