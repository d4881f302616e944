"""``forensics compare``: read many runs in parallel (processes), analyze each, and set them side by side.

Each run's canonical frames are cached as Parquet (see :mod:`parsers.cache`) and its comparison row and overlay
curves beside them, keyed by every input file's size and mtime and by the code's own signature, so comparing the
same runs again reads a few kilobytes per run. Only the rows and small binned curves come back to the parent
process, so memory does not grow with the number of runs beyond what is being compared.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

import parsers.cache as cache_module
from forensics.analyze import analyze_run
from forensics.comparison import Comparison, RunRow, compare_rows, summarize
from forensics.findings import Outcome
from forensics.timeline import by_step, step_bins
from parsers import InputError, load_runs
from parsers import schema as s
from parsers.cache import cached_load_runs, code_signature, default_cache_dir, input_signature, publish

CURVE_BINS = 1000  # points per run and metric in the overlay curves
CURVE_METRICS = (s.LOSS, s.GRAD_NORM)
CURVE_SCHEMA = {"run": pl.String, "metric": pl.String, "step": pl.Int64, "low": pl.Float64, "mid": pl.Float64,
                "high": pl.Float64, "samples": pl.Float64, "tokens": pl.Float64}


@dataclass
class RunResult:
    """What the parent keeps of one run: its row and its overlay curves."""

    row: RunRow
    curves: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CURVE_SCHEMA))


def discover(paths: Iterable[str | Path]) -> list[tuple[str, Path]]:
    """The runs to compare, named by their directory: one path that holds run subdirectories gives one run per
    subdirectory (hidden ones skipped); otherwise each path is a run. Raises InputError for a missing path.

    >>> discover(["runs/"])                                          # doctest: +SKIP
    [('lr-1e-4', PosixPath('runs/lr-1e-4')), ('lr-3e-4', PosixPath('runs/lr-3e-4'))]
    """
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
    if len(paths) == 1 and paths[0].is_dir():
        subdirs = sorted(d for d in paths[0].iterdir() if d.is_dir() and not d.name.startswith("."))
        if subdirs:
            return [(d.name, d) for d in subdirs]
    names = [p.name if p.is_dir() else p.stem for p in paths]
    if len(set(names)) < len(names):  # same directory names under different parents: name by the parent too
        names = [f"{p.parent.name}/{n}" for p, n in zip(paths, names, strict=True)]
    return list(zip(names, paths, strict=True))


def curves(name: str, metrics: pl.DataFrame, bins: int = CURVE_BINS) -> pl.DataFrame:
    """Binned loss and grad norm along the path the run finally took, with consumed samples and tokens at each
    bin's step when they were logged (for overlays on a samples or tokens axis)."""
    axes = {col: by_step(metrics, axis).select("step", pl.col("value").alias(col))
            for col, axis in (("samples", s.CONSUMED_SAMPLES), ("tokens", s.CONSUMED_TOKENS))}
    parts = []
    for metric in CURVE_METRICS:
        binned = step_bins(by_step(metrics, metric).with_columns(attempt=pl.lit(0, pl.Int32)), bins)
        if binned.height == 0:
            continue
        binned = binned.drop("attempt").with_columns(run=pl.lit(name), metric=pl.lit(metric))
        for col, x in axes.items():
            binned = binned.join_asof(x, on="step") if x.height else binned.with_columns(pl.lit(None).alias(col))
        parts.append(binned)
    if not parts:
        return pl.DataFrame(schema=CURVE_SCHEMA)
    return pl.concat([p.select(list(CURVE_SCHEMA)).cast(CURVE_SCHEMA) for p in parts])  # type: ignore[arg-type]


_PACKAGES = (Path(__file__).resolve().parent, Path(cache_module.__file__).resolve().parent)  # forensics, parsers


def _result_path(cache: Path, path: Path) -> Path:
    return cache / "compare" / f"{input_signature(path)}-{code_signature(*_PACKAGES)}"


def _read_result(entry: Path, name: str) -> RunResult | None:
    try:
        row = json.loads((entry / "row.json").read_text(encoding="utf-8"))
        frame = pl.read_parquet(entry / "curves.parquet")
    except (OSError, ValueError, pl.exceptions.PolarsError):
        return None
    row["name"] = name
    return RunResult(RunRow(**row), frame.with_columns(run=pl.lit(name)))


def _write_result(entry: Path, result: RunResult) -> None:
    def write(staging: Path) -> None:
        (staging / "row.json").write_text(json.dumps(dict(vars(result.row)), default=str), encoding="utf-8")
        result.curves.write_parquet(staging / "curves.parquet")

    publish(entry, write)


def ingest(name: str, path: Path, cache_dir: Path | None = None) -> RunResult:
    """Read (through the frame cache), analyze and summarize one run; an unreadable run gives a row with its error.
    A path that holds several runs (a W&B runs table) is compared as its first run, with the others noted."""
    try:
        runs = cached_load_runs(path, cache_dir) if cache_dir is not None else load_runs(path)
        run = runs[0]
        findings = analyze_run(run)
        row = summarize(findings, run.metrics)
        row.name, row.path = name, str(path)
        if len(runs) > 1:
            row.error = f"{len(runs)} runs inside; compared the first ({run.name})"
        return RunResult(row, curves(name, run.metrics))
    except InputError as exc:
        return RunResult(RunRow(name=name, path=str(path), error=str(exc)))
    except Exception as exc:
        return RunResult(RunRow(name=name, path=str(path), error=f"internal error: {type(exc).__name__}: {exc}"))


def _ingest_and_cache(name: str, path: Path, cache_dir: Path | None) -> RunResult:
    result = ingest(name, path, cache_dir)
    if cache_dir is not None and result.row.outcome != Outcome.UNREADABLE:
        _write_result(_result_path(cache_dir, path), result)
    return result


def compare_runs(
    paths: Iterable[str | Path], baseline: str | None = None, jobs: int | None = None,
    cache_dir: str | Path | None = "default", progress: Callable[[str], None] | None = None,
) -> tuple[Comparison, pl.DataFrame]:
    """Compare runs: returns the comparison and the overlay curves of every run (long form: run, metric, step,
    low, mid, high, samples, tokens). ``cache_dir=None`` reads everything afresh and caches nothing; the default
    is the user cache dir. ``progress`` is called with each run's name as it finishes.

    >>> comparison, overlay = compare_runs(["runs/"])                 # doctest: +SKIP
    >>> [(r.name, r.outcome, r.outcome_step) for r in comparison.rows]  # doctest: +SKIP
    [('lr-1e-3', 'diverged', 3120), ('lr-1e-4', 'completed', 20000), ('lr-3e-4', 'completed', 20000)]
    """
    found = discover(paths)
    cache = default_cache_dir() if cache_dir == "default" else (Path(cache_dir) if cache_dir is not None else None)
    results: dict[str, RunResult] = {}
    todo: list[tuple[str, Path]] = []
    for name, path in found:
        cached = _read_result(_result_path(cache, path), name) if cache is not None else None
        if cached is not None:
            results[name] = cached
            if progress:
                progress(name)
        else:
            todo.append((name, path))
    workers = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
    if workers == 1:
        for name, path in todo:
            results[name] = _ingest_and_cache(name, path, cache)
            if progress:
                progress(name)
    elif todo:
        context = multiprocessing.get_context("spawn")  # Polars is not fork-safe
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {pool.submit(_ingest_and_cache, name, path, cache): name for name, path in todo}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                if progress:
                    progress(futures[future])
    ordered = [results[name] for name, _ in found]
    comparison = compare_rows([r.row for r in ordered], baseline)
    overlay = pl.concat([r.curves for r in ordered]) if ordered else pl.DataFrame(schema=CURVE_SCHEMA)
    return comparison, overlay
