"""``forensics compare``: read many runs in parallel (local processes or Ray tasks), analyze each, and set them side
by side.

Each run's canonical frames are cached as Parquet and its comparison row and overlay curves beside them (see
:mod:`forensics.cache`), keyed by every input file's size, mtime and content digest and by the code's signature, so comparing
the same runs again reads a few kilobytes per run. The runs not in the cache are read and analyzed by
:func:`forensics.engines.run_all` (``engine="local"``: processes on this machine; ``"ray"``: tasks on a Ray cluster);
only the rows and small binned curves come back to the driver, so its memory does not grow with the runs' sizes. A
run whose worker died twice is a row with that error, never a hang.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from forensics.analysis import analyze_run
from forensics.cache import cached_load_runs, default_cache_dir, input_signature, read_result, result_entry, write_result
from forensics.comparison import Comparison, RunRow, compare_rows, summarize
from forensics.engines import Engine, checked, run_all
from forensics.findings import Outcome
from forensics.fleet import NOT_EVIDENCE
from forensics.timeline import by_step, step_bins
from parsers import InputError, load_runs
from parsers import schema as s

CURVE_BINS = 1000  # points per run and metric in the overlay curves
CURVE_METRICS = (s.LOSS, s.GRAD_NORM)
CURVE_SCHEMA = {"run": pl.String, "metric": pl.String, "step": pl.Int64, "low": pl.Float64, "mid": pl.Float64,
                "high": pl.Float64, "samples": pl.Float64, "tokens": pl.Float64}


@dataclass
class RunResult:
    """What the parent keeps of one path: its run's row and overlay curves; a path that holds several runs (a W&B
    runs table, a chart export of eight runs) has a row for each (``others``, named ``<path name>/<run name>``, as
    ``inner`` names them inside the path)."""

    row: RunRow
    curves: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CURVE_SCHEMA))
    others: list[RunRow] = field(default_factory=list)
    inner: list[str] = field(default_factory=list)  # each row's run name inside the path (empty: one run)

    @property
    def rows(self) -> list[RunRow]:
        return [self.row, *self.others]

    @classmethod
    def cached(cls, cache_dir: Path | str, name: str, path: str | Path, signature: str) -> RunResult | None:
        """The result kept in the cache for the run at ``path`` (named ``name`` in this comparison), if any."""
        stored = read_result(result_entry(cache_dir, path, signature))
        if stored is None:
            return None
        row, frame = stored
        others, inner = row.pop(OTHERS, []), row.pop(INNER, [])
        if not inner:
            row["name"] = name
            return cls(RunRow(**row), frame.with_columns(run=pl.lit(name)))
        rows = [RunRow(**{**r, "name": f"{name}/{n}"}) for r, n in zip([row, *others], inner, strict=True)]
        return cls(rows[0], frame.with_columns(run=pl.lit(f"{name}/") + pl.col("run")), rows[1:], inner)

    def keep(self, cache_dir: Path | str, path: str | Path, signature: str) -> None:
        """Keep this result in the cache for the run at ``path`` whose files had ``signature`` before it was read
        (several runs' curves under their names inside the path)."""
        row: dict[str, object] = dict(vars(self.row))
        curves = self.curves
        if self.inner:
            row |= {OTHERS: [vars(r) for r in self.others], INNER: self.inner}
            prefix = self.row.name.removesuffix(self.inner[0])
            curves = curves.with_columns(run=pl.col("run").str.strip_prefix(prefix))
        write_result(result_entry(cache_dir, path, signature), row, curves)


OTHERS, INNER = "_others", "_inner"  # (the cached row's keys for a path's other runs and the names inside it)


@dataclass
class Compared:
    """What :func:`compare_runs` returns: the comparison, the overlay curves of every run (long form: run, metric,
    step, low, mid, high, samples, tokens) and the paths that were read (which nothing may be written into: each
    path given, and each run found in them, so a run reached through a symlink is protected where it lies).
    :func:`reports.write` writes it. It unpacks as ``comparison, overlay``."""

    comparison: Comparison
    overlay: pl.DataFrame
    read: tuple[str | Path, ...] = ()

    def __iter__(self) -> Iterator[Any]:
        return iter((self.comparison, self.overlay))


def cache_location(cache: bool | str | Path | None) -> str | Path | None:
    """The cache dir that ``cache`` names: True the user cache dir (:func:`forensics.cache.default_cache_dir`),
    False or None none, else the path or URL given (see :mod:`forensics.cache`)."""
    from parsers import remote

    if cache in (False, None):
        return None
    if cache is True:
        return default_cache_dir()
    return str(cache) if remote.is_url(cache) else Path(cache)  # type: ignore[arg-type]


def _where(path: str | Path) -> tuple[str | Path, bool, bool]:
    """A run path as compare keeps it (a local path, or a URL that is not ``file://``), whether it exists and
    whether it is a directory."""
    from parsers import remote

    if remote.is_url(path):
        local = remote.local_path(str(path))
        if local is None:
            url = str(path)
            there = remote.exists(url)
            return url, there, there and remote.is_dir(url)
        path = local
    path = Path(path)
    return path, path.exists(), path.is_dir()


def discover(paths: Iterable[str | Path]) -> list[tuple[str, str | Path]]:
    """The runs to compare, named by their directory: one path that holds runs gives one run per entry, each
    subdirectory and each file beside them (hidden ones, code and notes skipped: :data:`forensics.fleet.NOT_EVIDENCE`;
    a file named by its stem), or each file when it holds two or more and no subdirectory (a folder of logs is a
    folder of runs, not one run of unrelated logs); otherwise each path is a run. A path may be a URL (see
    :mod:`parsers.remote`). Raises InputError for a missing path.

    >>> discover(["sample_logs"])  # (generate.py beside them is code, not a run)
    [('clean-1.3B', PosixPath('sample_logs/clean-1.3B')), ('tr8-104B-sample', PosixPath('sample_logs/tr8-104B-sample'))]
    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/exp/lr-1e-3/train.log", b"iteration 1/10 | lm loss: 2.5 |\\n")
    >>> discover(["memory://exp"])
    [('lr-1e-3', 'memory://exp/lr-1e-3')]
    >>> fsspec.filesystem("memory").rm("/exp", recursive=True)
    """
    from parsers import remote
    from parsers.errors import named

    for given in paths:
        named(given)
    found = [_where(p) for p in paths]
    for given, (p, there, _) in zip(paths, found, strict=True):
        if not there:
            raise remote.missing(str(given)) if remote.is_url(given) else InputError(f"{p}: no such file or directory")
    if len(found) == 1 and found[0][2]:
        root = found[0][0]
        inside: list[tuple[str | Path, bool]]
        if isinstance(root, str):
            inside = remote.entries(root)
        else:
            inside = [(e, e.is_dir()) for e in sorted(root.iterdir()) if not e.name.startswith(".")
                      and (e.is_dir() or e.is_file())]
        # code and notes beside the runs are not runs (a generator script, a README)
        inside = [(e, d) for e, d in inside if d or PurePosixPath(str(e)).suffix.lower() not in NOT_EVIDENCE]
        if any(d for _, d in inside) or len(inside) > 1:
            names = [remote.run_name(e, directory=d) if isinstance(e, str) else e.name if d else e.stem
                     for e, d in inside]
            seen = Counter(names)  # a file whose stem is another entry's name (run1/, run1.log) keeps its suffix
            return [(n if seen[n] == 1 or d else (e.rsplit("/", 1)[-1] if isinstance(e, str) else e.name), e)
                    for n, (e, d) in zip(names, inside, strict=True)]
    names = [remote.run_name(p, directory=d) if isinstance(p, str) else p.name if d else p.stem for p, _, d in found]
    if len(set(names)) < len(names):  # same directory names under different parents: name by the parent too
        names = [f"{remote.parent_name(p) if isinstance(p, str) else p.parent.name}/{n}"
                 for (p, _, _), n in zip(found, names, strict=True)]
    return [(n, p) for n, (p, _, _) in zip(names, found, strict=True)]


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


def ingest(name: str, path: str | Path, cache_dir: str | Path | None = None, signature: str | None = None
           ) -> RunResult:
    """Read (through the frame cache), analyze and summarize one path; an unreadable path gives a row with its
    error. A path that holds several runs (a W&B runs table, a chart export) gives a row for each, named
    ``<name>/<run name>``."""
    try:
        runs = cached_load_runs(path, cache_dir, signature=signature) if cache_dir is not None else load_runs(path)
        rows, frames = [], []
        for run in runs:
            label = name if len(runs) == 1 else f"{name}/{run.name}"
            row = summarize(analyze_run(run), run.metrics)
            row.name, row.path = label, str(path)
            rows.append(row)
            frames.append(curves(label, run.metrics))
        return RunResult(rows[0], pl.concat(frames), rows[1:], [r.name for r in runs] if len(runs) > 1 else [])
    except InputError as exc:
        return RunResult(RunRow(name=name, path=str(path), error=str(exc)))
    except Exception as exc:
        return RunResult(RunRow(name=name, path=str(path), error=f"internal error: {type(exc).__name__}: {exc}"))


def _results_dir(cache_dir: str | Path | None) -> str | Path | None:
    """Where compare results are kept: the cache dir (a ``file://`` URL as its local path)."""
    from parsers import remote

    if cache_dir is None or not remote.is_url(cache_dir):
        return Path(cache_dir) if cache_dir is not None else None
    return remote.local_path(str(cache_dir)) or str(cache_dir)


def _ingest_and_cache(name: str, path: str | Path, cache_dir: str | Path | None, signature: str | None) -> RunResult:
    """:func:`ingest`, its result kept under the key its files had before they were read (one hashing per run,
    and a file changed while it was read never leaves its old result under its new content's key)."""
    result = ingest(name, path, cache_dir, signature)
    cache_dir = _results_dir(cache_dir)
    if cache_dir is not None and signature is not None and result.row.outcome != Outcome.UNREADABLE:
        result.keep(cache_dir, path, signature)
    return result


def _worker_died(item: tuple[str, str | Path, str | Path | None, str | None], message: str) -> RunResult:
    """The row of a run whose worker died (killed, out of memory, crashed) twice: its error, nothing cached."""
    name, path, _, _ = item
    return RunResult(RunRow(name=name, path=str(path), error=message))


def compare_runs(
    paths: Iterable[str | Path], baseline: str | None = None, jobs: int | None = None,
    cache: bool | str | Path = True, progress: Callable[[str, int], None] | None = None,
    engine: Engine | str = Engine.LOCAL, address: str | None = None,
) -> Compared:
    """Compare runs (see :func:`discover` for how ``paths`` name them). ``cache``: True keeps frames and results
    in the user cache dir (:func:`forensics.cache.default_cache_dir`), a path keeps them there, False reads
    everything afresh and caches nothing. ``engine``: "local" (processes on this machine) or "ray" (tasks on the
    Ray cluster at ``address``, or a local Ray instance; see :mod:`forensics.engines`); ``jobs``: worker processes
    (default: one per CPU), or Ray tasks in flight. ``progress`` is called with each run's name and the number of
    runs as each finishes. Raises :class:`parsers.InputError` for a missing path, an unknown ``baseline`` or
    ``engine``, ``jobs`` below 1, an ``address`` without Ray, a Ray that cannot be started or reached, or when no
    run could be read.

    >>> result = compare_runs(["tests/fixtures/real/nanogpt", "sample_logs/clean-1.3B"], cache=False, jobs=1)
    >>> [(r.name, str(r.outcome)) for r in result.comparison.rows]
    [('nanogpt', 'nan'), ('clean-1.3B', 'completed')]
    >>> sorted(result.overlay["metric"].unique())
    ['grad_norm', 'loss']
    >>> [str(p) for p in result.read]  # (nothing may be written into them, see reports.write)
    ['tests/fixtures/real/nanogpt', 'sample_logs/clean-1.3B']
    """
    engine = checked(engine, jobs, address)
    paths = list(paths)
    found = discover(paths)
    names = {name for name, _ in found}
    # (a run inside a path that holds several is named <path>/<run>: known once the path is read)
    if baseline is not None and baseline not in names and baseline.partition("/")[0] not in names:
        raise InputError(f"--baseline {baseline}: no such run (runs: {', '.join(n for n, _ in found)})")
    where = cache_location(cache)
    results: dict[str, RunResult] = {}
    todo: list[tuple[str, str | Path, str | Path | None, str | None]] = []

    def done(name: str, result: RunResult) -> None:
        results[name] = result
        if progress:
            progress(name, len(found))

    for name, path in found:
        signature = input_signature(path) if where is not None else None
        kept = _results_dir(where)
        cached = RunResult.cached(kept, name, path, signature) if kept is not None and signature else None
        if cached is not None:
            done(name, cached)
        else:
            todo.append((name, path, where, signature))
    run_all(_ingest_and_cache, todo, engine=engine, jobs=jobs, address=address, failed=_worker_died,
            done=lambda i, result: done(todo[i][0], result))
    ordered = [results[name] for name, _ in found]
    if all(r.row.outcome == Outcome.UNREADABLE for r in ordered):
        raise InputError("no readable runs: " + "; ".join(r.row.error or r.row.name for r in ordered))
    rows = [row for r in ordered for row in r.rows]
    if baseline is not None and baseline not in {r.name for r in rows}:  # a path of several runs: name one of them
        raise InputError(f"--baseline {baseline}: no such run (runs: {', '.join(r.name for r in rows)})")
    comparison = compare_rows(rows, baseline)
    return Compared(comparison, pl.concat([r.curves for r in ordered]), _read(paths, found))


def _read(paths: list[str | Path], found: list[tuple[str, str | Path]]) -> tuple[str | Path, ...]:
    """What a comparison read: each path given and each run :func:`discover` found in them (a local one as a
    :class:`~pathlib.Path`), once each.

    >>> _read(["sample_logs"], discover(["sample_logs"]))
    (PosixPath('sample_logs'), PosixPath('sample_logs/clean-1.3B'), PosixPath('sample_logs/tr8-104B-sample'))
    """
    from parsers import remote

    given = [p if remote.is_url(p) else Path(p) for p in paths]
    return tuple(dict.fromkeys([*given, *(path for _, path in found)]))
