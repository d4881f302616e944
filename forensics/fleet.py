"""``forensics index``: a fleet index, one Parquet row per run and one per anomaly, for questions across many runs.

:func:`index` walks a tree of runs (:func:`find_runs`), analyses each run that is new or has changed since the last
index in ``output`` (through the frames cache, on the local or the Ray engine, :mod:`forensics.engines`) and
writes two tables that plain Polars answers questions on:

- ``runs.parquet`` (:data:`RUN_SCHEMA`): one row per run (a path that holds several runs, a W&B folder of
  ``run-*`` folders or a chart export, has one for each, named ``<path name>/<run name>`` as ``forensics compare``
  names them): where it is, what it was read from, how far it got and how
  it ended, its first anomaly, spike count and OLMo spike score, min/final loss, the top suspected cause, the model
  size from its shape, as printed and as named, and the key settings (lr, batch size, sequence length, precision)
  and schedule (LR peak, end of warm-up);
- ``anomalies.parquet`` (:data:`ANOMALY_SCHEMA`): one row per anomaly of every run, with its run's name.

**What changed.** Each row keeps its path's :func:`forensics.cache.input_signature` (every file's size, mtime and
content digest; for a URL, its size and ETag or checksum) and the signature of the code that analysed it. A path
whose signatures are both unchanged keeps its rows (all of its runs') without being read; a new path, a changed path
and every path after a code change are read and analysed again; a run no longer in the tree leaves the index.
:class:`Indexed` says how many runs were each.

**Writing.** ``output`` must lie outside the tree (nothing is written into what is read). Each table is written to a
temporary file beside it and renamed into place, anomalies first: a reader never sees half a table, and an index
interrupted between the two renames is made whole by the next run (the runs table decides what is reanalysed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from forensics.engines import Engine, checked, run_all
from forensics.findings import Findings, Outcome, first_anomaly

if TYPE_CHECKING:
    from forensics.comparison import RunRow

RUN_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String(), "path": pl.String(), "signature": pl.String(), "code": pl.String(),
    "formats": pl.List(pl.String()), "steps": pl.Int64(), "attempts": pl.Int64(),
    "outcome": pl.String(), "outcome_step": pl.Int64(),
    "first_anomaly": pl.String(), "first_anomaly_step": pl.Int64(), "spikes": pl.Int64(), "spike_score": pl.Float64(),
    "initial_loss": pl.Float64(), "min_loss": pl.Float64(), "final_loss": pl.Float64(), "top_cause": pl.String(),
    "params_from_shape": pl.Float64(), "params_logged": pl.Float64(), "params_stated": pl.Float64(),
    "size_mismatch": pl.Boolean(),
    "lr": pl.Float64(), "global_batch_size": pl.Int64(), "micro_batch_size": pl.Int64(), "seq_length": pl.Int64(),
    "precision": pl.String(), "lr_peak": pl.Float64(), "lr_peak_step": pl.Int64(), "warmup_end_step": pl.Int64(),
    "started": pl.Datetime("ms", "UTC"), "ended": pl.Datetime("ms", "UTC"), "error": pl.String(),
}
ANOMALY_SCHEMA: dict[str, pl.DataType] = {
    "run": pl.String(), "attempt": pl.Int64(), "kind": pl.String(), "metric": pl.String(), "step": pl.Int64(),
    "end_step": pl.Int64(), "value": pl.Float64(), "baseline": pl.Float64(), "recovered_step": pl.Int64(),
    "warning_step": pl.Int64(), "warning_lead_steps": pl.Int64(), "detail": pl.String(),
}
RUNS_FILE, ANOMALIES_FILE = "runs.parquet", "anomalies.parquet"

# subdirectories that belong to the run above them: a Trainer's checkpoint-N/ and runs/ folders, a wandb/ folder,
# TensorBoard and log folders, an MLflow run's metrics/, params/ and tags/. A directory whose subdirectories with
# logs are all of these is a run, even with no log of its own.
RUN_PARTS = re.compile(r"^(checkpoint-\d+|last-checkpoint|global_step\d+|runs|wandb|tensorboard|tb|tb_logs|logs?|events"
                       r"|metrics|params|tags|artifacts)$", re.I)
# code and notes beside runs (a generator script, a README with pasted log lines) do not make a directory a run,
# though they are read with the run they sit in
NOT_EVIDENCE = frozenset({".py", ".md", ".rst", ".ipynb", ".sh", ".yaml", ".yml", ".toml", ".cfg", ".ini",
                          ".html"})


@dataclass
class Indexed:
    """What :func:`index` did: the tables' paths and how many runs (rows of ``runs.parquet``, known by name; a path
    that holds several runs counts each) were new (not in the last index), changed (in it, and analysed again because
    their path's files or the code changed), unchanged (kept without being read) and removed (in the last index, not
    in this one: their path is gone, or the run from its path), and how many of this index's rows are unreadable. So
    new + changed + unchanged is the rows now, and changed + unchanged + removed the rows before."""

    runs: Path
    anomalies: Path
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    unreadable: int = 0

    def summary(self) -> str:
        """One line: "12 new, 3 changed, 2,480 unchanged, 1 removed (2 unreadable)"."""
        said = f"{self.new:,} new, {self.changed:,} changed, {self.unchanged:,} unchanged, {self.removed:,} removed"
        return said + (f" ({self.unreadable:,} unreadable)" if self.unreadable else "")


@dataclass
class _Tree:
    """A tree of runs listed once: each directory's subdirectories and files (hidden ones left out), by its path
    relative to the root ("" for the root), and how to read a file's head."""

    subdirs: dict[str, list[str]]
    files: dict[str, list[str]]
    head: Callable[[str], bytes]
    listing: Any = None  # a URL tree's listing (parsers.remote.Listing): its runs' signatures come from it
    taken: dict[str, bool] = field(default_factory=dict)  # files judged so far: whether a reader takes each
    by_folder: dict[str, list[Any]] | None = None  # the listing's files under each folder (runs' signatures)

    def signature(self, url: str, run: str) -> str:
        """The cache key of the run at ``url`` (``run`` under the root), from the tree's listing when it has one
        (no request per run), else :func:`forensics.cache.input_signature`."""
        from forensics.cache import input_signature, url_signature
        from parsers import remote

        if self.listing is None or run in self.files.get("", []):  # (a file at the root: a run of its own)
            return input_signature(url)
        if not run:
            return url_signature(url, self.listing)
        prefix, shown = f"{run}/", f"{remote.shown(url)}/"
        files = [replace(f, relative=f.relative[len(prefix):]) for f in self.files_of(run)]
        warnings = [w for w in self.listing.warnings if w.startswith(shown)]
        return url_signature(url, replace(self.listing, url=url, path=f"{self.listing.path.rstrip('/')}/{run}",
                                          files=files, warnings=warnings))

    def files_of(self, run: str) -> list[Any]:
        """The listing's files under the folder ``run``, the listing grouped by folder once (not scanned per run)."""
        if self.by_folder is None:  # each file under every folder above it: files x depth, once
            self.by_folder = {}
            for f in self.listing.files:
                parts = f.relative.split("/")[:-1]
                for depth in range(1, len(parts) + 1):
                    self.by_folder.setdefault("/".join(parts[:depth]), []).append(f)
        return self.by_folder.get(run, [])

    def has_log(self, folder: str) -> bool:
        """Whether a reader takes a file directly in ``folder`` (code and notes aside)."""
        return next(self.logs(folder), None) is not None

    def logs(self, folder: str) -> Iterator[str]:
        """The files directly in ``folder`` that a reader takes (code and notes aside), by name, judged as asked."""
        for name in self.files.get(folder, []):
            if Path(name).suffix.lower() not in NOT_EVIDENCE:
                relative = _joined(folder, name)
                if relative not in self.taken:
                    self.taken[relative] = _takes(self.head(relative), name)
                if self.taken[relative]:
                    yield name

    def runs(self, folder: str = "") -> Iterator[str]:
        holds: dict[str, bool] = {}

        def holds_log(d: str) -> bool:
            if d not in holds:
                holds[d] = self.has_log(d) or any(holds_log(_joined(d, s)) for s in self.subdirs.get(d, []))
            return holds[d]

        holding = [s for s in self.subdirs.get(folder, []) if holds_log(_joined(folder, s))]
        parts = bool(holding) and all(RUN_PARTS.match(s) for s in holding)
        if not folder and ((holding and not parts and self.has_log(folder))
                           or (not holding and len(list(self.logs(folder))) > 1)):
            # the root holds runs, and logs beside them, or logs only: each log is a run of its own, not the root one
            # run of everything under it (a stray notes.txt is an unreadable row, not the fleet merged into one run;
            # a folder of logs is a folder of runs, as forensics.compare.discover reads it)
            yield from self.logs(folder)
        elif self.has_log(folder) or parts:
            yield folder
            return
        for s in holding:
            yield from self.runs(_joined(folder, s))


def _takes(head: bytes, name: str) -> bool:
    """Whether a reader takes the file (an empty file is no log)."""
    from parsers import registry

    return bool(head.strip()) and registry.reader_for(head, name) is not None


def _joined(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _local_tree(root: Path) -> _Tree:
    from parsers.reader import head_of

    subdirs: dict[str, list[str]] = {}
    files: dict[str, list[str]] = {}
    seen: set[str] = set()  # real paths walked: a link to a run (wandb's latest-run) or to a parent is walked once
    for folder, dirs, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        # real folders before links to them, so a run is named where it lies
        dirs[:] = sorted((d for d in dirs if not d.startswith(".")),
                         key=lambda d: (os.path.islink(os.path.join(folder, d)), d))
        key = Path(folder).relative_to(root).as_posix().removeprefix(".")
        subdirs[key] = dirs
        files[key] = sorted(n for n in names if not n.startswith("."))
    return _Tree(subdirs, files, lambda relative: head_of(root / relative))


def _url_tree(url: str) -> _Tree:
    """One listing of everything under ``url`` (object stores list files, their folders are implied)."""
    from parsers import remote
    from parsers.reader import HEAD_BYTES

    found = remote.listing(url)
    subdirs: dict[str, set[str]] = {"": set()}
    files: dict[str, list[str]] = {}
    for f in found.files:
        folder, _, name = f.relative.rpartition("/")
        files.setdefault(folder, []).append(name)
        parts = folder.split("/") if folder else []
        for i, part in enumerate(parts):
            subdirs.setdefault("/".join(parts[:i]), set()).add(part)
            subdirs.setdefault("/".join(parts[:i + 1]), set())

    def read(relative: str) -> bytes:
        try:
            return found.fs.cat_file(f"{found.path.rstrip('/')}/{relative}", start=0, end=HEAD_BYTES)
        except Exception:  # unreadable: not a log (the read of the run says why, if it is one)
            return b""

    files = {k: sorted(v) for k, v in files.items()}
    tree = _Tree({k: sorted(v) for k, v in subdirs.items()}, files, read, found)
    # the file that usually decides a folder (its first that may be a log) is judged for every folder at once,
    # remote.WORKERS heads at a time: one request's latency, not one per folder in turn; the rest when asked for
    first = [_joined(folder, candidates[0]) for folder, names in files.items()
             if (candidates := [n for n in names if Path(n).suffix.lower() not in NOT_EVIDENCE])]
    with ThreadPoolExecutor(max_workers=remote.WORKERS) as pool:
        tree.taken.update(zip(first, pool.map(lambda rel: _takes(read(rel), rel.rpartition("/")[2]), first),
                              strict=True))
    return tree


def _local(root: str | Path) -> Path:
    """A local root as a path (a ``file://`` URL is its path)."""
    from parsers import remote

    return (remote.local_path(str(root)) or Path(root)) if remote.is_url(root) else Path(root)


def find_runs(root: str | Path) -> list[tuple[str, str | Path]]:
    """The runs in a tree (a local path or a URL, see :mod:`parsers.remote`), named by their path under ``root``: a
    directory is a run when a reader takes a file directly in it (code and notes aside: :data:`NOT_EVIDENCE`), or
    when every subdirectory with logs in it is a run-part folder (:data:`RUN_PARTS`: ``checkpoint-N/``, ``runs/``,
    ``wandb/``, ``logs/``..., a Trainer's output dir); a run's subdirectories are part of it. The root itself is a
    folder of runs when it holds runs and logs beside them, or two or more logs and no folder with logs: each of
    its logs is then a run of its own (as :func:`forensics.compare.discover` reads it). Files are recognised by
    their first 64 KiB only, and the tree is listed once. A single log file is one run. Raises
    :class:`parsers.InputError` for a missing root.

    >>> find_runs("sample_logs")
    [('clean-1.3B', PosixPath('sample_logs/clean-1.3B')), ('tr8-104B-sample', PosixPath('sample_logs/tr8-104B-sample'))]
    >>> import fsspec
    >>> memory = fsspec.filesystem("memory")
    >>> memory.pipe("/fleet/a/tr8/train.log", Path("sample_logs/tr8-104B-sample/main_log.txt").read_bytes()[:65536])
    >>> memory.pipe("/fleet/b/out/checkpoint-10/trainer_state.json", b'{"log_history": [{"loss": 2.0, "step": 10}]}')
    >>> memory.pipe("/fleet/b/notes.md", b"iteration 1/10 | lm loss: 2.5 |")
    >>> find_runs("memory://fleet")
    [('a/tr8', 'memory://fleet/a/tr8'), ('b/out', 'memory://fleet/b/out')]
    >>> memory.rm("/fleet", recursive=True)
    """
    return [(name, path) for name, path, _ in _discover(root)]


def _discover(root: str | Path) -> list[tuple[str, str | Path, Callable[[], str]]]:
    """:func:`find_runs`, each run with how to get its cache key (from the tree's listing for a URL tree)."""
    from forensics.cache import input_signature
    from parsers import InputError, remote

    if remote.is_url(root) and remote.local_path(str(root)) is None:
        url = str(root).rstrip("/")
        if not remote.is_dir(url):
            if not remote.exists(url):
                raise remote.missing(url)
            return [(remote.run_name(url, directory=False), url, lambda: input_signature(url))]
        tree = _url_tree(url)
        found = [(r or remote.run_name(url, directory=True), f"{url}/{r}" if r else url, r) for r in tree.runs()]
        return [(name, path, lambda path=path, r=r: tree.signature(path, r)) for name, path, r in found]
    top = _local(root)
    if not top.exists():
        raise InputError(f"{top}: no such file or directory")
    runs = [(top.stem, top)] if top.is_file() else [
        (r or top.resolve().name, top / r if r else top) for r in _local_tree(top).runs()]
    return [(name, path, lambda path=path: input_signature(path)) for name, path in runs]


def _precision(config: dict[str, Any]) -> str | None:
    if config.get("bf16") is True:
        return "bf16"
    if config.get("fp16") is True:
        return "fp16"
    return "fp32" if "fp16" in config or "bf16" in config else None


def _number(value: Any, kind: type) -> Any:
    try:
        return kind(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError, OverflowError):
        return None


def index_one(name: str, path: str | Path, cache_dir: str | Path | None, signature: str, code: str
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Read (through the frames cache), analyse and summarise the runs at one path: a ``runs`` row for each and
    their ``anomalies`` rows. A path that holds several runs (a W&B folder of ``run-*`` folders, a chart export)
    gives a row for each, named ``<name>/<run name>`` as ``forensics compare`` names them
    (:func:`forensics.compare.ingest`). An unreadable path is one row with its error and no anomalies (the
    engines' task, so top-level)."""
    from forensics.analysis import analyze_run
    from forensics.cache import cached_load_runs
    from forensics.comparison import summarize
    from forensics.findings import Outcome
    from parsers import InputError, load_runs

    where: dict[str, Any] = {"name": name, "path": str(path), "signature": signature, "code": code}
    try:
        runs = cached_load_runs(path, cache_dir, signature=signature) if cache_dir is not None else load_runs(path)
        analysed = []
        for run in runs:
            findings = analyze_run(run)
            analysed.append((name if len(runs) == 1 else f"{name}/{run.name}", findings,
                             summarize(findings, run.metrics)))
    except InputError as exc:
        return [where | {"outcome": str(Outcome.UNREADABLE), "error": str(exc)}], []
    except Exception as exc:  # a bug of ours: the path's row says so, the index goes on
        error = f"internal error: {type(exc).__name__}: {exc}"
        return [where | {"outcome": str(Outcome.UNREADABLE), "error": error}], []
    rows = [where | {"name": label} | _row(findings, summary) for label, findings, summary in analysed]
    return rows, [a for label, findings, _ in analysed for a in _anomaly_rows(label, findings)]


def _row(findings: Findings, summary: RunRow) -> dict[str, Any]:
    """A run's ``runs`` columns (all but where it was read from) from its findings and its comparison row."""
    first = first_anomaly(findings.anomalies)  # (the one the summary's first_anomaly_step is the step of)
    config, model, schedule = findings.config, findings.model, findings.schedule
    starts = [a.started_at or a.first_seen_at for a in findings.attempts]
    ends = [a.ended_at or a.last_line_at for a in findings.attempts]
    return {
        "formats": sorted({src["format"] for src in findings.sources}),
        "steps": summary.steps_reached, "attempts": len(findings.attempts),
        "outcome": str(summary.outcome), "outcome_step": summary.outcome_step,
        "first_anomaly": str(first.kind) if first else None, "first_anomaly_step": summary.first_anomaly_step,
        "spikes": summary.spikes, "spike_score": summary.spike_score,
        "initial_loss": summary.initial_loss, "min_loss": summary.min_loss, "final_loss": summary.final_loss,
        "top_cause": summary.top_cause,
        "params_from_shape": model.parameters_from_shape, "params_logged": model.parameters_logged,
        "params_stated": model.parameters_stated, "size_mismatch": model.size_mismatch,
        "lr": _number(config.get("lr"), float), "global_batch_size": _number(config.get("global_batch_size"), int),
        "micro_batch_size": _number(config.get("micro_batch_size"), int),
        "seq_length": _number(config.get("seq_length"), int), "precision": _precision(config),
        "lr_peak": schedule.lr_peak, "lr_peak_step": schedule.lr_peak_step, "warmup_end_step": schedule.warmup_end_step,
        "started": _ms(min((t for t in starts if t is not None), default=None)),
        "ended": _ms(max((t for t in ends if t is not None), default=None)),
    }


def _anomaly_rows(name: str, findings: Findings) -> list[dict[str, Any]]:
    """The ``anomalies`` rows of the run called ``name``, in the order of its attempts and steps."""
    return [{
        "run": name, "attempt": a.attempt, "kind": str(a.kind), "metric": a.metric, "step": a.step,
        "end_step": a.end_step, "value": a.value, "baseline": a.baseline, "recovered_step": a.recovered_step,
        "warning_step": (a.warning or {}).get("step"), "warning_lead_steps": (a.warning or {}).get("lead_steps"),
        "detail": a.detail,
    } for a in sorted(findings.anomalies, key=lambda a: (a.attempt, a.step, a.end_step))]


def _ms(seconds: float | None) -> int | None:
    return round(seconds * 1000) if seconds is not None else None


def _frame(rows: list[dict[str, Any]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    from forensics.findings import finite_or_none

    clean = [{k: finite_or_none(v) if isinstance(v, float) else v for k, v in r.items()} for r in rows]
    if not clean:
        return pl.DataFrame(schema=schema)
    frame = pl.DataFrame(clean, schema_overrides=schema, infer_schema_length=None)
    return frame.select(pl.col(c).cast(t) if c in frame.columns else pl.lit(None, t).alias(c)
                        for c, t in schema.items())


def _previous(output: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The tables of the last index in ``output``; empty ones when there is none or it cannot be read."""
    try:
        runs = pl.read_parquet(output / RUNS_FILE)
        anomalies = pl.read_parquet(output / ANOMALIES_FILE)
        if runs.schema == pl.Schema(RUN_SCHEMA) and anomalies.schema == pl.Schema(ANOMALY_SCHEMA):
            return runs, anomalies
    except Exception:  # missing, damaged or from another version: index everything afresh
        pass
    return _frame([], RUN_SCHEMA), _frame([], ANOMALY_SCHEMA)


def _write(frame: pl.DataFrame, path: Path) -> None:
    staging = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        frame.write_parquet(staging)
        os.replace(staging, path)
    finally:
        staging.unlink(missing_ok=True)


def index(
    root: str | Path, output: str | Path, *, engine: Engine | str = Engine.LOCAL, jobs: int | None = None,
    address: str | None = None, cache: bool | str | Path = True,
    progress: Callable[[str, int], None] | None = None,
) -> Indexed:
    """Index the runs under ``root`` (see :func:`find_runs`) into ``output``/runs.parquet and
    ``output``/anomalies.parquet, analysing only runs that are new or changed since the last index there (or all,
    when the code changed). ``engine``, ``jobs`` and ``address`` are those of :func:`forensics.engines.run_all`;
    ``cache`` that of :func:`forensics.compare_runs`. ``progress`` is called with the name of each path read (a run,
    or a path of several: :func:`index_one`) and the number of paths to read. The summary counts runs, not paths
    (:class:`Indexed`). Raises :class:`parsers.InputError` for a missing root or an ``output`` inside it.

    >>> import tempfile, polars as pl
    >>> out = Path(tempfile.mkdtemp()) / "fleet"
    >>> index("sample_logs", out, jobs=1, cache=False).summary()
    '2 new, 0 changed, 0 unchanged, 0 removed'
    >>> pl.read_parquet(out / "runs.parquet").select("name", "outcome", "steps", "params_from_shape").rows()
    [('clean-1.3B', 'completed', 3000, 1315819520.0), ('tr8-104B-sample', 'diverged', 7360, 57534480384.0)]
    >>> index("sample_logs", out, jobs=1, cache=False).summary()  # again: nothing is read
    '0 new, 0 changed, 2 unchanged, 0 removed'
    >>> pl.read_parquet(out / "anomalies.parquet").filter(kind="divergence").select("run", "attempt", "step").rows()
    [('tr8-104B-sample', 1, 7010), ('tr8-104B-sample', 2, 6930), ('tr8-104B-sample', 3, 4960)]
    """
    from forensics.cache import RESULT_CODE, code_signature
    from forensics.compare import cache_location
    from parsers import InputError
    from parsers.errors import cannot_write, named
    from reports.files import refuse_inside

    engine = checked(engine, jobs, address)
    output = Path(output)
    named(root)
    refuse_inside(output, [_local(root)])  # (a URL root is not a local directory)
    found = _discover(root)
    if not found:
        raise InputError(f"{root}: no runs found (no file in it that a reader takes)")
    code = code_signature(*RESULT_CODE)
    where = cache_location(cache)
    before, before_anomalies = _previous(output)
    # (a path that holds several runs has a row for each, all with the path's signature and code)
    known = {r["path"]: r for r in before.select("path", "signature", "code").iter_rows(named=True)}
    keep: list[str] = []
    todo: list[tuple[str, str | Path, str | Path | None, str, str]] = []
    for name, path, key in found:
        signature = key()
        old = known.get(str(path))
        if old is not None and old["signature"] == signature and old["code"] == code:
            keep.append(str(path))
        else:
            todo.append((name, path, where, signature, code))

    def done(i: int, result: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
        if progress:
            progress(todo[i][0], len(todo))

    def failed(item: tuple, message: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        name, path, _, signature, code = item
        return [{"name": name, "path": str(path), "signature": signature, "code": code,
                 "outcome": str(Outcome.UNREADABLE), "error": message}], []

    results = run_all(index_one, todo, engine=engine, jobs=jobs, address=address, failed=failed, done=done)
    kept = before.filter(pl.col("path").is_in(keep))
    fresh = _frame([row for rows, _ in results for row in rows], RUN_SCHEMA)
    order = {str(path): i for i, (_, path, _) in enumerate(found)}
    # (stable: a path's runs stay in the order its read gave them)
    runs = pl.concat([kept, fresh]).sort(pl.col("path").replace_strict(order, return_dtype=pl.Int64),
                                         maintain_order=True)
    anomalies = pl.concat([before_anomalies.filter(pl.col("run").is_in(kept["name"].implode())),
                           _frame([a for _, rows in results for a in rows], ANOMALY_SCHEMA)])
    changed = fresh["name"].is_in(before["name"].implode()).sum()
    report = Indexed(output / RUNS_FILE, output / ANOMALIES_FILE, new=fresh.height - changed, changed=changed,
                     unchanged=kept.height, removed=before.filter(~pl.col("name").is_in(runs["name"].implode())).height,
                     unreadable=runs.filter(pl.col("outcome") == Outcome.UNREADABLE).height)
    with cannot_write(output):
        output.mkdir(parents=True, exist_ok=True)
        _write(anomalies, report.anomalies)
        _write(runs, report.runs)
    return report
