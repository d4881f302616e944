"""The ``forensics`` command line: thin wrappers over library functions usable from Python."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

import forensics
import reports
from forensics.compare import compare_runs, discover
from forensics.findings import Findings, Outcome, first_trouble
from parsers import InputError, load_runs
from parsers.cache import default_cache_dir, write_frames

app = typer.Typer(
    help="Post-hoc forensics of large-model training runs: reads Megatron logs, TensorBoard event files and W&B "
    "exports, and writes an incident chronicle.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def analyze_path(path: str | Path, fmt: str = "markdown") -> tuple[Findings, str]:
    """Load a run directory or log file (every run it holds), analyze it, and render the report.

    >>> findings, text = analyze_path("sample_logs/tr8-104B-sample", fmt="json")   # doctest: +SKIP
    >>> findings.runs[0].attempts[1].config_changes                               # doctest: +SKIP
    {'seed': [42, 43]}
    """
    findings = forensics.analyze(*load_runs(path))
    return findings, reports.render(findings, fmt)


def _inside(child: Path, parent: Path) -> bool:
    """Whether writing ``child`` would write into ``parent``: inside it when it is a directory; a file given on its
    own is only that file (a report beside a log in ~/Downloads writes nothing that was read)."""
    if not parent.is_dir():
        return child.resolve() == parent.resolve()
    try:
        child.resolve().relative_to(parent.resolve())
    except ValueError:
        return False
    return True


def print_summary(findings: Findings, written: list[Path], console: Console | None = None) -> None:
    """The terminal summary after a report is written: per run, the headline, an attempts table and the top
    findings and suspected causes."""
    console = console or Console(highlight=False)
    for run in findings.runs:
        if run.model.size_mismatch:
            console.print(Text(run.model.size_headline, style="bold red"))
        table = Table(title=f"{run.name}: attempts", title_justify="left")
        for col in ("#", "steps", "start", "what changed", "ended"):
            table.add_column(col)
        for a in run.attempts:
            start = "scratch" if a.resumed_from_step is None else f"step {a.resumed_from_step}"
            steps = "-" if a.start_step is None else f"{a.start_step}-{a.end_step}"
            changed = ", ".join(f"{k}: {v[0]} → {v[1]}" for k, v in a.config_changes.items())
            table.add_row(str(a.index), steps, start + (" (rollback)" if a.rollback else ""), changed[:60],
                          a.end_reason)
        console.print(table)
        for _, x in sorted(first_trouble(run.anomalies).items()):
            console.print(Text(f"attempt {x.attempt}: {x.kind.replace('_', ' ')} at step {x.step}: {x.detail[:100]}"))
        for c in run.suspected_causes[:3]:
            console.print(Text(f"suspected: {c.cause} (confidence {c.confidence:.2f})"))
    console.print(Text(f"report written to {written[0]}"
                       + (f" (+ {len(written) - 1} plot(s) in {written[1].parent})" if len(written) > 1 else "")))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"forensics {forensics.__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """Read what a training run left behind and tell its story."""


@app.command()
def analyze(
    run_dir: Path = typer.Argument(..., help="A run directory (every log in it) or a single log file."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    fmt: str = typer.Option("markdown", "--format", "-f", help="markdown or json."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="With -o and markdown: PNG plots beside the report."),
) -> None:
    """Analyze a run and write its incident chronicle (markdown) or findings (JSON).

    Example: ``forensics analyze runs/tr8-104B -o tr8.md``
    """
    if fmt not in reports.FORMATS:
        raise InputError(f"--format {fmt}: unknown format (choose from {', '.join(reports.FORMATS)})")
    if output is not None and run_dir.exists() and _inside(output, run_dir):
        raise InputError(f"{output}: inside {run_dir}, the run being read; forensics never writes into what it reads")
    runs = load_runs(run_dir)
    findings = forensics.analyze(*runs)
    if output is None:
        sys.stdout.write(reports.render(findings, fmt))
        return
    try:
        written = reports.write_report(findings, {r.name: r.metrics for r in runs}, output, fmt, plots)
    except OSError as exc:
        raise InputError(f"{exc.filename or output}: cannot write ({exc.strerror or exc})") from None
    print_summary(findings, written)


@app.command()
def compare(
    runs: list[Path] = typer.Argument(..., help="A directory whose subdirectories are runs, or several run paths."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the comparison here instead of stdout."),
    fmt: str = typer.Option("markdown", "--format", "-f", help="markdown or json."),
    baseline: str | None = typer.Option(None, "--baseline", "-b", help="The run others are diffed against "
                                        "(default: the healthy run that got furthest)."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Parallel processes (default: one per CPU)."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Reuse cached frames and results of unchanged runs."),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="Cache location (default: the user cache dir, "
                                          "or $FORENSICS_CACHE_DIR)."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="With -o and markdown: overlay PNGs beside it."),
) -> None:
    """Compare runs: outcome, first anomaly, spikes, losses, config differences from a baseline, top suspected
    cause; which config keys separate failed runs from healthy ones; LR sensitivity of an LR sweep.

    Example: ``forensics compare runs/ -o compare.md``
    """
    if fmt not in reports.FORMATS:
        raise InputError(f"--format {fmt}: unknown format (choose from {', '.join(reports.FORMATS)})")
    if output is not None and any(r.exists() and _inside(output, r) for r in runs):
        raise InputError(f"{output}: inside a run directory; forensics never writes into what it reads")
    found = discover(runs)
    if baseline is not None and baseline not in {name for name, _ in found}:
        raise InputError(f"--baseline {baseline}: no such run (runs: {', '.join(n for n, _ in found)})")
    where = (cache_dir or default_cache_dir()) if cache else None
    console = Console(stderr=True, highlight=False)
    with Progress(TextColumn("reading runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("runs", total=len(found))
        comparison, overlay = compare_runs(runs, baseline=baseline, jobs=jobs, cache_dir=where,
                                           progress=lambda _: bar.advance(task))
    if all(r.outcome == Outcome.UNREADABLE for r in comparison.rows):
        raise InputError("no readable runs: " + "; ".join(r.error or r.name for r in comparison.rows))
    if output is None:
        text = reports.render_compare_json(comparison) if fmt == "json" else reports.render_compare_markdown(comparison)
        sys.stdout.write(text)
        return
    try:
        written = reports.write_comparison(comparison, overlay, output, fmt, plots)
    except OSError as exc:
        raise InputError(f"{exc.filename or output}: cannot write ({exc.strerror or exc})") from None
    out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    out.print(reports.compare_table(comparison))
    out.print(Text(f"comparison written to {written[0]}"
                   + (f" (+ {len(written) - 1} plot(s) in {written[1].parent})" if len(written) > 1 else "")))


@app.command()
def export(
    run_dir: Path = typer.Argument(..., help="A run directory or a single log file."),
    output: Path = typer.Option(..., "--output", "-o", help="Directory for the Parquet frames."),
) -> None:
    """Write a run's canonical frames (metrics, events, configs) as Parquet for notebooks; read them back with
    ``parsers.read_frames(dir)``.

    Example: ``forensics export runs/tr8-104B -o frames/`` then ``pl.read_parquet("frames/0.metrics.parquet")``
    """
    if run_dir.exists() and _inside(output, run_dir):
        raise InputError(f"{output}: inside {run_dir}, the run being read; forensics never writes into what it reads")
    runs = load_runs(run_dir)
    try:
        written = write_frames(runs, output)
    except OSError as exc:
        raise InputError(f"{exc.filename or output}: cannot write ({exc.strerror or exc})") from None
    Console(highlight=False).print(Text(f"{len(runs)} run(s) exported to {output} ({len(written)} files): "
                                        + ", ".join(r.name for r in runs)))


def _fail(message: str) -> None:
    sys.stderr.write(" ".join(message.split()) + "\n")


def main() -> None:
    """Console entry point: one clear line and exit code 2 for bad input, never a traceback."""
    try:
        app(standalone_mode=False)
    except InputError as exc:
        _fail(f"forensics: error: {exc}")
        sys.exit(2)
    except (typer.Exit, SystemExit) as exc:
        code = getattr(exc, "exit_code", getattr(exc, "code", 0))
        sys.exit(code or 0)
    except typer.Abort:
        _fail("forensics: aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        _fail("forensics: interrupted")
        sys.exit(130)
    except BaseException as exc:  # a bug of ours (or a panic in a native library): one line, no traceback
        if hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int):
            _fail(f"forensics: error: {exc.format_message()}")  # click's usage errors (typer may vendor its own click)
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        _fail(f"forensics: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        sys.exit(1)


if __name__ == "__main__":
    main()
