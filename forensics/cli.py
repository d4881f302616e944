"""The ``forensics`` command line: each command parses its options, makes one library call and turns bad input
into one line on stderr (exit 2). Heavy modules are imported inside the commands, so ``forensics --version``
and ``--help`` start at once.

Every command is a documented library function: ``analyze`` is :func:`forensics.analyze_path` then
:func:`reports.write`; ``compare`` is :func:`forensics.compare_runs` then :func:`reports.write`; ``index`` is
:func:`forensics.fleet.index`; ``export`` is :func:`reports.export_frames`.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

# One OpenBLAS thread (unless the environment sets it): the BLAS work here is the noise fits' 2-parameter
# L-BFGS-B (forensics.detectors.noise_tail), where a pool of threads costs far more than it computes (the sample's
# nine fits: 0.29 s of CPU against 0.012 s on one thread, results identical), and compare's worker processes are
# already one per core. Set before numpy or scipy loads its OpenBLAS, which reads it once.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

from forensics import __version__

app = typer.Typer(
    help="Post-hoc forensics of large-model training runs: reads Megatron logs, TensorBoard event files, W&B "
    "exports, Hugging Face Trainer states, nanoGPT stdout and more, and writes an incident chronicle.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
_DEBUG = {"on": os.environ.get("FORENSICS_DEBUG", "") not in ("", "0")}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"forensics {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show the full traceback of an internal error "
                               "(or set FORENSICS_DEBUG=1); also taken after the command."),
) -> None:
    """Read what a training run left behind and tell its story."""
    _DEBUG["on"] = _DEBUG["on"] or debug


@app.command()
def analyze(
    run_dir: str = typer.Argument(..., metavar="RUN", help="A run directory (every log in it) or a single log file; "
                                  "a URL (s3://, gs://, hf://, file://) is read through fsspec."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    fmt: str = typer.Option("markdown", "--format", "-f", help="markdown or json."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="With -o and markdown: PNG plots beside the report."),
    perplexity: bool = typer.Option(False, "--perplexity", help="With plots: an exp(loss) (perplexity) panel under "
                                    "the loss, where a spike shows earlier and larger."),
) -> None:
    """Analyze a run and write its incident chronicle (markdown) or findings (JSON).

    Example: forensics analyze runs/tr8-104B -o tr8.md
    """
    import reports
    from forensics.analysis import analyze_path
    from reports.files import check_format, refuse_inside

    check_format(fmt)
    if output is not None:
        refuse_inside(output, [run_dir])  # before anything is read
    analysis = analyze_path(run_dir)
    if output is None:
        sys.stdout.write(reports.render(analysis, fmt))
        return
    from reports.terminal import print_summary

    print_summary(analysis.findings, reports.write(analysis, output, fmt, plots, perplexity=perplexity))


@app.command()
def compare(
    runs: list[str] = typer.Argument(..., metavar="RUNS", help="A directory of runs (each subdirectory and each log "
                                     "in it is a run), or several run paths (local paths or URLs)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the comparison here instead of stdout."),
    fmt: str = typer.Option("markdown", "--format", "-f", help="markdown or json."),
    baseline: str | None = typer.Option(None, "--baseline", "-b", help="The run others are diffed against "
                                        "(default: the healthy run that got furthest)."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Parallel processes, at least 1 (default: one per CPU); "
                                    "with --engine ray, tasks in flight."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Reuse cached frames and results of unchanged runs."),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help="Cache location (default: the user cache dir, or "
                                         "$FORENSICS_CACHE_DIR); a URL (s3://...) keeps frames and results there."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="With -o and markdown: overlay PNGs beside it."),
    engine: str = typer.Option("local", "--engine", "-e", help="local (processes) or ray."),
    address: str | None = typer.Option(None, "--address", help="With --engine ray: auto or ray://host:port "
                                       "(default: a local Ray instance)."),
) -> None:
    """Compare runs: outcome, first anomaly, spikes, losses, config differences from a baseline, top suspected
    cause; which config keys separate failed runs from healthy ones; LR sensitivity of an LR sweep.

    Example: forensics compare runs/ -o compare.md
    """
    import reports
    from forensics.compare import compare_runs
    from reports.files import check_format, refuse_inside
    from reports.terminal import print_comparison, progress

    check_format(fmt)
    if output is not None:
        refuse_inside(output, runs)
    with progress() as advance:
        result = compare_runs(runs, baseline=baseline, jobs=jobs, cache=(cache_dir or True) if cache else False,
                              progress=advance, engine=engine, address=address)
    if output is None:
        sys.stdout.write(reports.render(result, fmt))
        return
    print_comparison(result.comparison, reports.write(result, output, fmt, plots))


@app.command()
def index(
    root: str = typer.Argument(..., metavar="ROOT", help="A tree of runs: each directory with logs in it is a run."),
    output: Path = typer.Option(..., "--output", "-o", help="Directory for runs.parquet and anomalies.parquet "
                                "(kept between calls: only new and changed runs are analysed)."),
    engine: str = typer.Option("local", "--engine", "-e", help="local (processes) or ray."),
    address: str | None = typer.Option(None, "--address", help="With --engine ray: auto or ray://host:port "
                                       "(default: a local Ray instance)."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Parallel processes, at least 1 (default: one per CPU); "
                                    "with --engine ray, tasks in flight."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Reuse cached frames of unchanged runs."),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help="Cache location (default: the user cache dir, or "
                                         "$FORENSICS_CACHE_DIR); a URL (s3://...) keeps the frames there."),
) -> None:
    """Index a fleet of runs into Parquet tables (one row per run, one per anomaly) to query with Polars.

    Example: forensics index /shared/runs -o fleet/ then pl.read_parquet("fleet/runs.parquet")
    """
    from rich.console import Console

    from forensics.fleet import index as index_runs
    from reports.escape import terminal
    from reports.terminal import progress

    with progress("analysing runs") as advance:
        done = index_runs(root, output, engine=engine, jobs=jobs, address=address,
                          cache=(cache_dir or True) if cache else False, progress=advance)
    Console(highlight=False).print(terminal(f"{done.summary()}; index in {output} ({done.runs.name}, "
                                            f"{done.anomalies.name})"), soft_wrap=True)


@app.command()
def export(
    run_dir: str = typer.Argument(..., metavar="RUN", help="A run directory or a single log file (or a URL)."),
    output: Path = typer.Option(..., "--output", "-o", help="Directory for the Parquet frames."),
) -> None:
    """Write a run's canonical frames (metrics, events, configs) as Parquet for notebooks; read them back with
    parsers.read_frames(dir).

    Example: forensics export runs/tr8-104B -o frames/ then pl.read_parquet("frames/0.metrics.parquet")
    """
    from rich.console import Console

    from reports.escape import terminal
    from reports.files import export_frames

    runs, written = export_frames(run_dir, output)
    Console(highlight=False).print(terminal(f"{len(runs)} run(s) exported to {output} ({len(written)} files): "
                                        + ", ".join(r.name for r in runs)), soft_wrap=True)


def _fail(message: str) -> None:
    sys.stderr.write(" ".join(message.split()) + "\n")


def _debug_anywhere(args: list[str]) -> tuple[list[str], bool]:
    """``args`` without ``--debug``, and whether it was given: before the command or after it (``forensics analyze
    RUN --debug``, as the internal-error hint invites), never after ``--`` (what follows is arguments).

    >>> _debug_anywhere(["analyze", "runs/tr8", "--debug"])
    (['analyze', 'runs/tr8'], True)
    >>> _debug_anywhere(["--debug", "compare", "--", "--debug"])
    (['compare', '--', '--debug'], True)
    >>> _debug_anywhere(["analyze", "runs/tr8"])
    (['analyze', 'runs/tr8'], False)
    """
    end = args.index("--") if "--" in args else len(args)
    options = [a for a in args[:end] if a != "--debug"]
    return options + args[end:], len(options) < end


def main() -> None:
    """Console entry point: one clear line and exit code 2 for bad input, never a traceback (unless asked for with
    ``--debug`` or ``FORENSICS_DEBUG=1``)."""
    from parsers.errors import InputError

    args, debug = _debug_anywhere(sys.argv[1:])
    _DEBUG["on"] = _DEBUG["on"] or debug
    try:
        app(args=args, standalone_mode=False)
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
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare ``forensics``: its message is the help
            sys.stdout.write(exc.format_message().rstrip() + "\n")  # type: ignore[attr-defined]
            sys.exit(0)
        if hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int):
            _fail(f"forensics: error: {exc.format_message()}")  # click's usage errors (typer vendors its own click)
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        if _DEBUG["on"]:
            traceback.print_exc()
        said = str(exc).splitlines()[0] if str(exc).strip() else ""
        _fail(f"forensics: internal error: {type(exc).__name__}{': ' + said if said else ''}"
              + ("" if _DEBUG["on"] else " (run with --debug or FORENSICS_DEBUG=1 for the traceback)"))
        sys.exit(1)


if __name__ == "__main__":
    main()
