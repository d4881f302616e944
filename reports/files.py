"""Writing a report to disk: the document, and for markdown its plots in ``<report>_files/`` beside it."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from forensics.comparison import Comparison
from forensics.findings import Findings, Outcome
from reports.compare_report import render_compare_json, render_compare_markdown
from reports.json_report import render_json
from reports.markdown import render_markdown


def write_report(
    findings: Findings, metrics: dict[str, pl.DataFrame], output: Path, fmt: str = "markdown", plots: bool = True,
) -> list[Path]:
    """Write ``findings`` to ``output`` (markdown or json). For markdown with ``plots``, each run's PNGs go to
    ``<output stem>_files/`` and the chronicle links them by relative path. Returns the files written.

    >>> import parsers, forensics
    >>> runs = parsers.load_runs("sample_logs/tr8-104B-sample")                         # doctest: +SKIP
    >>> write_report(forensics.analyze(*runs), {r.name: r.metrics for r in runs}, Path("out/tr8.md"))  # doctest: +SKIP
    [PosixPath('out/tr8.md'), PosixPath('out/tr8_files/tr8-104B-sample-overview.png'), ...]
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
            drawn = plot_run(frame, run, directory)
            written += drawn.values()
            images[run.name] = {k: f"{directory.name}/{p.name}" for k, p in drawn.items()}
    text = render_markdown(findings, images) if fmt == "markdown" else render_json(findings)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return [output, *written]


def write_comparison(
    comparison: Comparison, overlay: pl.DataFrame, output: Path, fmt: str = "markdown", plots: bool = True,
) -> list[Path]:
    """Write a comparison to ``output`` (markdown or json); for markdown with ``plots``, the overlay PNGs go to
    ``<output stem>_files/``. Returns the files written.

    >>> from forensics.compare import compare_runs
    >>> comparison, overlay = compare_runs(["runs/"])                     # doctest: +SKIP
    >>> write_comparison(comparison, overlay, Path("out/compare.md"))     # doctest: +SKIP
    """
    written: list[Path] = []
    images: dict[str, str] = {}
    if fmt == "markdown" and plots and overlay.height:
        from reports.plots import plot_overlay

        directory = output.parent / f"{output.stem}_files"
        markers = {r.name: r.outcome_step for r in comparison.rows if r.outcome in {Outcome.DIVERGED, Outcome.NAN}}
        for label, path in plot_overlay(overlay, markers, directory).items():
            written.append(path)
            images[label] = f"{directory.name}/{path.name}"
    text = render_compare_markdown(comparison, images) if fmt == "markdown" else render_compare_json(comparison)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return [output, *written]
