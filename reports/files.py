"""Rendering a report, and writing it to disk: the document, and for markdown its plots in ``<report>_files/``
beside it.

:func:`render` is the one place that picks the renderer for a format (markdown or json, of an analysis or a
comparison). :func:`write` is the one entry point for files (the CLI's and a notebook's): it refuses to write into
what was read, checks the format, and turns a failed write into a one-line :class:`parsers.InputError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from forensics.findings import Findings, Outcome
from parsers.errors import cannot_write
from parsers.textfile import InputError
from reports.json_report import render_json
from reports.markdown import render_markdown

if TYPE_CHECKING:
    from forensics.analysis import Analysis
    from forensics.compare import Compared
    from forensics.comparison import Comparison
    from parsers import Run

FORMATS = ("markdown", "json")


def write(result: Analysis | Compared, output: str | Path, fmt: str = "markdown", plots: bool = True,
          protect: Iterable[str | Path] = (), perplexity: bool = False) -> list[Path]:
    """Write an analysis (:func:`forensics.analyze_path`) or a comparison (:func:`forensics.compare_runs`) to
    ``output`` as ``markdown`` (with PNG plots in ``<output stem>_files/`` when ``plots``) or ``json``; returns the
    files written. ``perplexity``: an analysis's loss plot gets an exp(loss) panel under the loss (where a spike
    shows earlier and larger). Nothing is written inside what was read (the analysis's path, the comparison's
    paths and runs, and every path in ``protect``): a single log protects only itself, a directory everything under
    it.

    >>> import tempfile, forensics
    >>> analysis = forensics.analyze_path("sample_logs/clean-1.3B")
    >>> out = Path(tempfile.mkdtemp()) / "clean.md"
    >>> [p.name for p in write(analysis, out, plots=False)]
    ['clean.md']
    >>> try:
    ...     write(analysis, "sample_logs/clean-1.3B/report.md")
    ... except InputError as exc:
    ...     print(exc)  # doctest: +ELLIPSIS
    sample_logs/clean-1.3B/report.md: inside sample_logs/clean-1.3B, the run being read; forensics never writes ...
    """
    output = Path(output)
    check_format(fmt)
    refuse_inside(output, [*protect, *_read(result)])
    with cannot_write(output):
        if hasattr(result, "findings"):
            return _write_report(result.findings, result.metrics, output, fmt, plots, perplexity)
        return _write_comparison(result.comparison, result.overlay, output, fmt, plots)


def export_frames(path: str | Path, output: str | Path) -> tuple[list[Run], list[Path]]:
    """Load the run(s) at ``path`` (:func:`parsers.load_runs`: a run directory, a log file or a URL) and write their
    canonical frames as Parquet into the directory ``output`` (:func:`parsers.write_frames`; read them back with
    :func:`parsers.read_frames`): the library call behind ``forensics export``. Returns the runs and the files
    written. As :func:`write`: nothing is written inside ``path`` (checked before anything is read), and a failed
    write is a one-line :class:`parsers.InputError` that names the file.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "frames"
    >>> runs, written = export_frames("sample_logs/tr8-104B-sample", out)
    >>> [r.name for r in runs], [p.name for p in written]
    (['tr8-104B-sample'], ['runs.json', '0.metrics.parquet', '0.events.parquet', '0.configs.parquet'])
    >>> export_frames("sample_logs/clean-1.3B", out / "runs.json" / "frames")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    parsers.errors.InputError: /.../frames/runs.json/frames: cannot write (Not a directory)
    """
    from parsers import load_runs, write_frames

    refuse_inside(output, [path])
    runs = load_runs(path)
    with cannot_write(output):
        return runs, write_frames(runs, output)


def _read(result: Analysis | Compared) -> list[str | Path]:
    """What ``result`` was read from: an analysis's path (:attr:`forensics.Analysis.read`), a comparison's paths
    and runs (:attr:`forensics.Compared.read`)."""
    read = result.read
    return list(read) if isinstance(read, tuple) else [read] if read is not None else []


def render(result: Findings | Analysis | Comparison | Compared, fmt: str = "markdown",
           images: dict[str, Any] | None = None) -> str:
    """Render findings (or an analysis, :func:`forensics.analyze_path`) or a comparison (or what
    :func:`forensics.compare_runs` returns) as ``markdown`` or ``json``; ``images``: the plots the markdown links
    (relative paths: per run for findings, per overlay for a comparison). An unknown format raises
    :class:`parsers.InputError`. (A comparison's renderers are imported only when one is rendered.)

    >>> import forensics, json
    >>> analysis = forensics.analyze_path("sample_logs/clean-1.3B")
    >>> render(analysis, "markdown") == render(analysis.findings)
    True
    >>> json.loads(render(forensics.compare_runs(["sample_logs"], cache=False, jobs=1), "json"))["baseline"]
    'clean-1.3B'
    >>> render(analysis, "html")
    Traceback (most recent call last):
    parsers.errors.InputError: --format html: unknown format (choose from markdown, json)
    """
    check_format(fmt)
    findings = getattr(result, "findings", result)
    if isinstance(findings, Findings):
        return render_markdown(findings, images) if fmt == "markdown" else render_json(findings)
    from forensics.comparison import Comparison
    from reports.compare_report import render_compare_json, render_compare_markdown

    comparison = getattr(result, "comparison", result)
    if not isinstance(comparison, Comparison):
        raise TypeError(f"cannot render a {type(result).__name__}: findings, an analysis or a comparison")
    return render_compare_markdown(comparison, images) if fmt == "markdown" else render_compare_json(comparison)


def check_format(fmt: str) -> None:
    """Raise :class:`parsers.InputError` unless ``fmt`` is one of :data:`FORMATS`."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt}: unknown format (choose from {', '.join(FORMATS)})")


def refuse_inside(output: str | Path, read: Iterable[str | Path]) -> None:
    """Raise :class:`parsers.InputError` when ``output`` lies inside any path in ``read`` (see :func:`inside`); a
    ``file://`` URL is its local path, other URLs are not on this machine's disks.

    >>> refuse_inside("sample_logs/clean-1.3B/report.md", ["file://" + str(Path("sample_logs").resolve())])
    Traceback (most recent call last):
    parsers.errors.InputError: sample_logs/clean-1.3B/report.md: inside /.../sample_logs, the run being read; ...
    """
    from parsers import remote

    for given in read:
        path = (remote.local_path(str(given)) if remote.is_url(given) else Path(given))
        if path is not None and path.exists() and inside(Path(output), path):
            raise InputError(f"{output}: inside {path}, the run being read; forensics never writes into what it reads")


def link(directory: Path, file: Path) -> str:
    """The relative link to a plot, percent-encoded: a report named ``my run (v2).md`` or with bytes that are not
    UTF-8 in its name still links its plots.

    >>> link(Path("/tmp/my run (v2)_files"), Path("loss.png"))
    'my%20run%20%28v2%29_files/loss.png'
    """
    import os
    from urllib.parse import quote

    return quote(os.fsencode(f"{directory.name}/{file.name}"))


def inside(child: Path, parent: Path) -> bool:
    """Whether writing ``child`` would write into ``parent``: inside it when it is a directory; a file given on its
    own is only that file (a report beside a log in ~/Downloads writes nothing that was read)."""
    if not parent.is_dir():
        return child.resolve() == parent.resolve()
    try:
        child.resolve().relative_to(parent.resolve())
    except ValueError:
        return False
    return True


def _write_report(
    findings: Findings, metrics: dict[str, pl.DataFrame], output: Path, fmt: str = "markdown", plots: bool = True,
    perplexity: bool = False,
) -> list[Path]:
    """Write ``findings`` to ``output`` (markdown or json). For markdown with ``plots``, each run's PNGs go to
    ``<output stem>_files/`` (with ``perplexity``, the loss plot has an exp(loss) panel) and the chronicle links
    them by relative path. Returns the files written.

    >>> import tempfile, parsers, forensics
    >>> runs = parsers.load_runs("sample_logs/tr8-104B-sample")
    >>> out = Path(tempfile.mkdtemp()) / "tr8.md"
    >>> [p.name for p in _write_report(forensics.analyze(*runs), {r.name: r.metrics for r in runs}, out)]
    ['tr8.md', 'tr8-104B-sample-overview.png', 'tr8-104B-sample-attempts.png']
    """
    written: list[Path] = []
    images: dict[str, dict[str, str]] = {}
    if fmt == "markdown" and plots:
        from reports.plots import plot_run

        directory = output.parent / f"{output.stem}_files"
        for run in findings.runs:
            frame = metrics.get(run.name)
            if frame is None or frame.height == 0:
                continue
            drawn = plot_run(frame, run, directory, perplexity)
            written += drawn.values()
            images[run.name] = {k: link(directory, p) for k, p in drawn.items()}
    text = render(findings, fmt, images)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return [output, *written]


def _write_comparison(
    comparison: Comparison, overlay: pl.DataFrame, output: Path, fmt: str = "markdown", plots: bool = True,
) -> list[Path]:
    """Write a comparison to ``output`` (markdown or json); for markdown with ``plots``, the overlay PNGs go to
    ``<output stem>_files/``. Returns the files written.

    >>> import tempfile
    >>> from forensics.compare import compare_runs
    >>> comparison, overlay = compare_runs(["sample_logs"], cache=False, jobs=1)
    >>> out = Path(tempfile.mkdtemp()) / "compare.md"
    >>> [p.name for p in _write_comparison(comparison, overlay, out, plots=False)]
    ['compare.md']
    """
    written: list[Path] = []
    images: dict[str, str] = {}
    if fmt == "markdown" and plots and overlay.height:
        from reports.plots import plot_overlay

        directory = output.parent / f"{output.stem}_files"
        markers = {r.name: r.outcome_step for r in comparison.rows if r.outcome in {Outcome.DIVERGED, Outcome.NAN}}
        for label, path in plot_overlay(overlay, markers, directory).items():
            written.append(path)
            images[label] = link(directory, path)
    text = render(comparison, fmt, images)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return [output, *written]
