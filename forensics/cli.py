"""The ``forensics`` command line: thin wrappers over library functions usable from Python."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

import forensics
import reports
from forensics.findings import INSTABILITY_KINDS, Findings
from parsers import InputError, load_runs

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
    try:
        child.resolve().relative_to(parent.resolve() if parent.is_dir() else parent.resolve().parent)
    except ValueError:
        return False
    return True


def print_summary(findings: Findings, written: list[Path], console: Console | None = None) -> None:
    """The terminal summary after a report is written: per run, the headline, an attempts table and the top
    findings and suspected causes."""
    console = console or Console(highlight=False)
    for run in findings.runs:
        headline = next((n for n in run.model.notes if n.startswith("this is a ~")), None)
        if headline:
            console.print(Text(headline, style="bold red"))
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
        firsts = {}
        for x in run.anomalies:
            if x.kind in INSTABILITY_KINDS:
                firsts.setdefault(x.attempt, x)
        for x in firsts.values():
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
        raise InputError(f"{output}: inside the run directory {run_dir}; forensics never writes into what it reads")
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
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        _fail(f"forensics: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        sys.exit(1)


if __name__ == "__main__":
    main()
