"""Find the logs a run left behind, parse each, and join them into canonical frames, one set per run.

Every file is recognised by its content: Megatron text logs, TensorBoard event files, and W&B exports (the
``.wandb`` log of a local run directory, API history dumps, chart and runs-table CSVs). A directory is one run,
except that W&B files name their runs: when they name several (a chart export of three runs, a sweep's
``wandb/`` folder), each named run is its own run. Within a run, full-resolution sources are preferred: TensorBoard
and W&B history replace the text log's values at the same (metric, step), and a sampled W&B export contributes
only metrics that no full-resolution source holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.config_names import canonical_configs
from parsers.megatron import DETECT, PDSH_CMD, ParsedLog, parse_megatron
from parsers.tensorboard import is_event_file, parse_event_file
from parsers.textfile import InputError, TextFile, inspect_text, scan_blocks
from parsers.wandb_csv import CHART, HISTORY, RUNS_TABLE, csv_kind, header_of, read_chart_export, read_runs_table
from parsers.wandb_history import config_frame, history_log, read_history_file, sampling_note, wide_to_long
from parsers.wandb_log import is_wandb_log
from parsers.wandb_run import (
    WandbRun,
    attach_configs,
    is_wandb_config,
    read_config_yaml,
    read_summary_json,
    read_wandb_run,
    summary_values,
)

WANDB_LOG = "wandb"
_SIDECARS = {"config.yaml": "config", "wandb-summary.json": "summary"}
_TEXT_SUFFIXES = {".log", ".out", ".err", ".txt"}


@dataclass
class Source:
    """One input file, the format it was read as, and whether it holds only a sample of the points."""

    path: str
    format: str
    sampled: bool = False


@dataclass
class Run:
    """The canonical frames of one training run, plus what was read, skipped and found damaged."""

    name: str
    path: str
    metrics: pl.DataFrame
    events: pl.DataFrame
    configs: pl.DataFrame
    sources: list[Source] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    tags: list[dict[str, str]] = field(default_factory=list)  # {source, tag, metric}: names as the sources wrote them

    @property
    def attempts(self) -> list[int]:
        """Attempt numbers present in any frame, in order."""
        found: set[int] = set()
        for frame in (self.metrics, self.events, self.configs):
            found.update(frame["attempt"].drop_nulls().unique().to_list())
        return sorted(found)


def _natural_key(path: Path) -> list[object]:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", str(path))]


def _candidate_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    files = [
        f for f in root.rglob("*")
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(root).parts)
    ]
    return sorted(files, key=_natural_key)


def _display(path: Path, root: Path) -> str:
    return str(path) if path == root else str(path.relative_to(root))


@dataclass
class Piece:
    """One parsed input: its frames, the run it names (None: the directory's run) and how it joins the others."""

    file: Path
    fmt: str
    log: ParsedLog
    run: str | None = None
    sampled: bool = False
    config_only: bool = False


def load_runs(path: str | Path, name: str | None = None) -> list[Run]:
    """Read a run directory (every log in it, recognised by content) or a single file into one run per training
    run it holds (see the module docstring for when that is more than one).

    Raises :class:`InputError` with a one-line message when the path is missing or nothing in it can be read.

    >>> [run.name for run in load_runs("wandb_export.csv")]         # doctest: +SKIP
    ['cycle_val_975', 'cycle_val_65', 'cycle_val_0']
    """
    root = Path(path)
    if not root.exists():
        raise InputError(f"{root}: no such file or directory")
    dir_name = name or (root.resolve().name if root.is_dir() else root.stem)
    warnings: list[str] = []
    skipped: list[str] = []
    files = _candidate_files(root)
    wandb_runs, consumed, run_dirs = _read_wandb_logs(files, root, warnings)
    pieces = [Piece(r.file, WANDB_LOG, r.log, r.name) for r in wandb_runs]
    for file in files:
        if file in consumed or _wandb_housekeeping(file, run_dirs):
            continue
        shown = _display(file, root)
        try:
            found = _read_file(file, shown, dir_name, root.is_file(), skipped, warnings)
        except InputError as exc:
            if root.is_file():
                raise
            warnings.append(str(exc))
            continue
        hint = next((run_dirs[d] for d in file.parents if d in run_dirs), None)
        for piece in found:
            piece.run = piece.run or hint
        pieces.extend(found)
    if not any(not p.config_only or p.fmt == RUNS_TABLE for p in pieces):
        if root.is_file():
            reason = (warnings + skipped)[0].split(": ", 1)[-1] if warnings + skipped else "unreadable"
            raise InputError(f"{root}: not a recognised training log: {reason}")
        reasons = "; ".join(warnings + skipped) or "no files"
        raise InputError(f"{root}: no readable training logs ({reasons})")
    named = list(dict.fromkeys(p.run for p in pieces if p.run is not None))
    unnamed = [p for p in pieces if p.run is None]
    if len(named) == 1 and not unnamed and name is None:
        groups = {named[0]: pieces}
    elif len(named) <= 1:
        groups = {dir_name: pieces}
    else:
        groups = {run: [p for p in pieces if p.run == run] for run in named}
        if unnamed:
            groups = {dir_name: unnamed} | groups
    runs = [_assemble(run, root, group) for run, group in groups.items()]
    for run in runs:
        run.configs, disagreements = canonical_configs(run.configs)
        run.warnings.extend(disagreements)
    runs[0].warnings[:0] = warnings
    runs[0].skipped.extend(skipped)
    return runs


def load_run(path: str | Path, name: str | None = None) -> Run:
    """Read a run directory (every log in it, recognised by content) or a single log file as one run.

    Raises :class:`InputError` when nothing can be read, or when the input holds several runs (use
    :func:`load_runs` for those).

    >>> run = load_run("sample_logs/tr8-104B-sample")          # doctest: +SKIP
    >>> run.metrics.filter(metric="loss").select("step", "value").tail(1)   # doctest: +SKIP
    """
    runs = load_runs(path, name)
    if len(runs) > 1:
        listed = ", ".join(r.name for r in runs[:5]) + (", ..." if len(runs) > 5 else "")
        raise InputError(f"{path}: holds {len(runs)} runs ({listed}); read them with load_runs()")
    return runs[0]


def _read_wandb_logs(
    files: list[Path], root: Path, warnings: list[str]
) -> tuple[list[WandbRun], set[Path], dict[Path, str]]:
    """Every ``.wandb`` log with its run directory's config/summary files; which files they used; and each run
    directory's run name (for the other files in it, such as ``files/output.log``)."""
    runs: list[WandbRun] = []
    consumed: set[Path] = set()
    run_dirs: dict[Path, str] = {}
    for file in files:
        if not _is_wandb_log(file):
            continue
        sidecars = {kind: file.parent / "files" / fname for fname, kind in _SIDECARS.items()}
        sidecars = {k: p for k, p in sidecars.items() if p.is_file()}
        consumed.update({file, *sidecars.values()})
        try:
            run = read_wandb_run(file, _display(file, root), sidecars)
        except InputError as exc:
            if root.is_file():
                raise
            warnings.append(str(exc))
            continue
        console = file.parent / "files" / "output.log"
        if console.is_file() and _console_events(run, console, _display(console, root), warnings):
            consumed.add(console)
        runs.append(run)
    _distinct_names(runs)
    run_dirs.update({r.file.parent: r.name for r in runs})
    runs.sort(key=lambda r: (r.start_time is None, r.start_time or 0.0))
    for run_name in dict.fromkeys(r.name for r in runs):
        attach_configs([r for r in runs if r.name == run_name])
    return runs, consumed, run_dirs


def _distinct_names(runs: list[WandbRun]) -> None:
    """Runs are told apart by their W&B id (a resume keeps it): runs that share a display name but not an id get
    the id beside the name."""
    ids: dict[str, set[str]] = {}
    for r in runs:
        ids.setdefault(r.name, set()).add(r.run_id)
    for r in runs:
        if len(ids[r.name]) > 1:
            r.name = f"{r.name} ({r.run_id})"
            r.log.metrics = r.log.metrics.with_columns(run=pl.lit(r.name, dtype=s.METRICS_SCHEMA["run"]))
            r.log.events = r.log.events.with_columns(run=pl.lit(r.name))
            r.log.configs = r.log.configs.with_columns(run=pl.lit(r.name))


def _console_events(run: WandbRun, console: Path, shown: str, warnings: list[str]) -> bool:
    """A W&B run's ``files/output.log`` (what the program printed) read for its errors, stops and tracebacks, which
    join the run's last attempt, so its end is told by what the program said, not by its exit code alone. A console
    that holds a Megatron log is left to the text reader (it is a full source). Returns whether it was read here."""
    try:
        text = inspect_text(console, shown, {"megatron": DETECT}, head_patterns={"pdsh": PDSH_CMD})
    except InputError as exc:
        warnings.append(str(exc))
        return False
    if text.binary or text.matches.get("megatron") is not None:
        return False
    if text.blank:
        return True
    printed = parse_megatron(text, run=run.name, source=shown)
    warnings.extend(printed.warnings)
    if printed.events.height:
        # each line's step is the last one the program printed before it ("iter 1330: loss ..."), when the run
        # logged its own step to W&B (else its steps count log calls, and the console's are on another axis)
        own_axis = s.STEP_AXIS in run.log.tags.values()
        progress = console_steps(text) if own_axis else pl.DataFrame(schema={"line": pl.Int64, "printed_step": pl.Int64})
        events = printed.events.sort("line").join_asof(progress, on="line", strategy="backward").with_columns(
            step=pl.coalesce("step", "printed_step"), attempt=pl.lit(run.log.n_attempts, dtype=pl.Int32))
        run.log.events = pl.concat([run.log.events, events.select(run.log.events.columns)], how="vertical_relaxed")
    return True


CONSOLE_STEP = r"^\s*(?i:iter|iteration|step)\s+(\d+)\s*[:|,/]"  # "iter 1330: loss 1.8209", "step 40 | loss"


def console_steps(text: TextFile) -> pl.DataFrame:
    """``line``, ``printed_step``: the lines of a console that say which step the training is at, in order."""
    found = [
        block.filter(pl.col("text").str.contains(CONSOLE_STEP))
        .select(pl.col("line").cast(pl.Int64), printed_step=pl.col("text").str.extract(CONSOLE_STEP, 1).cast(pl.Int64))
        .collect()
        for block in scan_blocks(text)
    ]
    return pl.concat(found) if found else pl.DataFrame(schema={"line": pl.Int64, "printed_step": pl.Int64})


def _wandb_housekeeping(file: Path, run_dirs: dict[Path, str]) -> bool:
    """W&B's own files beside the logs (debug logs, requirements.txt, metadata): not evidence of the training.
    ``files/output.log`` (the console) is kept, since it may hold the Megatron log."""
    if any(d in run_dirs for d in file.parents):
        return file.name != "output.log" and file.suffix != ".wandb"
    return file.name.startswith("debug") and file.suffix == ".log" and any(d.parent == file.parent for d in run_dirs)


def _is_wandb_log(file: Path) -> bool:
    """A ``.wandb`` file (a wrong header is reported when it is read), or any file with the W&B log header."""
    if file.suffix == ".wandb":
        return True
    try:
        with file.open("rb") as handle:
            return is_wandb_log(handle.read(7))
    except OSError:
        return False  # reported as unreadable by the text path


def _head(file: Path) -> bytes:
    try:
        with file.open("rb") as handle:
            return handle.read(65536)
    except OSError:
        return b""


def _read_file(
    file: Path, shown: str, run_name: str, single: bool, skipped: list[str], warnings: list[str]
) -> list[Piece]:
    """The pieces one file contributes (none when it is not a training log: then ``skipped`` says why)."""
    if is_event_file(file):
        return [Piece(file, "tensorboard", parse_event_file(file, shown, run_name))]
    head = _head(file)
    wandb = _read_wandb_export(file, shown, head, run_name, warnings)
    if wandb is not None:
        return wandb
    text = inspect_text(file, shown, {"megatron": DETECT}, head_patterns={"pdsh": PDSH_CMD})
    if text.binary:
        skipped.append(f"{shown}: binary file, not a text log")
        return []
    if text.blank:
        (warnings if single or file.suffix in _TEXT_SUFFIXES else skipped).append(f"{shown}: empty file")
        return []
    if text.matches["megatron"] is None:
        skipped.append(f"{shown}: no Megatron iteration lines or arguments block")
        return []
    return [Piece(file, "megatron", parse_megatron(text, run=run_name, source=shown))]


def _read_wandb_export(
    file: Path, shown: str, head: bytes, run_name: str, warnings: list[str]
) -> list[Piece] | None:
    """A W&B export recognised by content, or None when the file is something else."""
    if file.name in _SIDECARS and (file.name == "wandb-summary.json" or is_wandb_config(file)):
        values = (read_config_yaml(file, shown) if file.suffix == ".yaml"
                  else summary_values(read_summary_json(file, shown)))
        prefix = s.SUMMARY_PREFIX if file.suffix == ".json" else ""
        log = ParsedLog(s.empty(s.METRICS_SCHEMA), s.empty(s.EVENTS_SCHEMA),
                        config_frame(values, run=run_name, source=shown, prefix=prefix))
        return [Piece(file, "wandb-" + _SIDECARS[file.name], log, config_only=True)]
    is_parquet = head.startswith(b"PAR1")
    is_json = file.suffix.lower() in {".json", ".jsonl", ".ndjson"} and b'"_step"' in head
    kind = HISTORY if is_parquet or is_json else csv_kind(header_of(head.decode("utf-8", errors="replace")))
    if kind is None:
        return None
    if kind == CHART:
        series, notes = read_chart_export(file, shown)
        warnings.extend(notes)
        return [Piece(file, CHART, x.log, x.name, sampled=any("sampled" in w for w in x.log.warnings))
                for x in series]
    if kind == RUNS_TABLE:
        return [Piece(file, RUNS_TABLE, ParsedLog(s.empty(s.METRICS_SCHEMA), s.empty(s.EVENTS_SCHEMA), configs),
                      run, config_only=True) for run, configs in read_runs_table(file, shown, warnings)]
    long = wide_to_long(read_history_file(file, shown, warnings), shown)
    # dumps of run.history() come in no particular order; JSON lines are written as logged (a step going back
    # there is a restart)
    in_order = file.suffix.lower() in {".jsonl", ".ndjson"}
    log = history_log(long, run=run_name, source=shown, sort=not in_order)
    note = sampling_note(long["step"], shown)
    if file.suffix.lower() == ".csv":
        log.warnings.append(f"{shown}: pandas writes NaN as an empty cell, so a NaN here reads as 'not logged'")
    if note:
        log.warnings.append(note)
    return [Piece(file, HISTORY, log, sampled=note is not None)]


def _assemble(name: str, root: Path, pieces: list[Piece]) -> Run:
    """One run from its pieces: text logs first, then full-resolution scalars over them, then what only a sampled
    export holds; config-only pieces (runs table, lone config/summary files) join the last attempt."""
    full = [p for p in pieces if not p.sampled and not p.config_only]
    order = ("megatron", WANDB_LOG, HISTORY, "tensorboard", CHART)  # base first, then what overlays it
    layers = [
        _join(name, root, group, parallel=fmt == CHART)
        for fmt in order
        if (group := [p for p in full if p.fmt == fmt])
    ]
    run = layers[0] if layers else _join(name, root, [p for p in pieces if p.sampled], parallel=True)
    for layer in layers[1:]:
        run = _overlay(run, layer)
    sampled = [p for p in pieces if p.sampled]
    if layers and sampled:
        thin = _join(name, root, sampled, parallel=True)
        have = set(run.metrics["metric"].unique().cast(pl.String).to_list())
        dropped = sorted(set(thin.metrics["metric"].unique().cast(pl.String).to_list()) & have)
        if dropped:
            thin.warnings.append(
                f"{name}: sampled W&B values of {', '.join(dropped)} not used; a full-resolution source has them"
            )
        thin.metrics = thin.metrics.filter(~pl.col("metric").cast(pl.String).is_in(dropped))
        run = _overlay(run, thin)
    for piece in (p for p in pieces if p.config_only):
        configs = piece.log.configs.with_columns(run=pl.lit(name))
        if piece.fmt != RUNS_TABLE or run.metrics.height:  # a runs-table row numbers its own attempt
            configs = configs.with_columns(attempt=pl.lit(max(run.attempts, default=1), dtype=pl.Int32))
        run.configs = pl.concat([run.configs, configs])
        run.sources.append(Source(path=_display(piece.file, root), format=piece.fmt))
    run.sources = list({(src.path, src.format): src for src in run.sources}.values())
    return run


def _overlay(base: Run, top: Run) -> Run:
    """One run from a base (text log) and a full-resolution layer of the same training (TensorBoard, W&B): the base
    gives the attempts; the top layer's points replace the base's at the same (metric, step).

    The top layer's attempts map one to one onto the base's when both saw the same number of (re)starts, and are
    kept when the top saw more; otherwise each row joins the last base attempt that began at or before its step.
    """
    if base.metrics.height == 0 and base.events.height == 0:
        return Run(name=base.name, path=base.path, metrics=top.metrics, events=top.events,
                   configs=pl.concat([base.configs, top.configs]), sources=base.sources + top.sources,
                   warnings=base.warnings + top.warnings, skipped=base.skipped + top.skipped,
                   tags=base.tags + top.tags)
    spans = base.metrics.group_by("attempt").agg(lo=pl.col("step").min(), hi=pl.col("step").max()).sort("attempt")
    top_attempts = sorted(set(top.metrics["attempt"].unique().to_list()) | set(top.events["attempt"].unique().to_list()))
    top_attempts = [a for a in top_attempts if a is not None]

    def remap(frame: pl.DataFrame) -> pl.DataFrame:
        if len(top_attempts) == spans.height:
            mapping = dict(zip(top_attempts, spans["attempt"].to_list(), strict=True))
            return frame.with_columns(pl.col("attempt").replace_strict(mapping, default=None, return_dtype=pl.Int32))
        if len(top_attempts) > spans.height or "step" not in frame.columns:
            return frame
        starts = spans.sort("lo").select(pl.col("lo").alias("step"), pl.col("attempt").alias("_base"))
        return (
            frame.with_row_index("_row").sort("step", nulls_last=True)
            .join_asof(starts, on="step", strategy="backward", check_sortedness=False)
            .sort("_row")
            .with_columns(attempt=pl.col("_base").fill_null(pl.col("attempt")).cast(pl.Int32))
            .drop("_row", "_base")
        )

    metrics = remap(top.metrics)
    covered = metrics.select("metric", "step").unique()
    kept = base.metrics.join(covered, on=["metric", "step"], how="anti", maintain_order="left")
    return Run(
        name=base.name, path=base.path,
        metrics=pl.concat([kept, metrics.select(kept.columns)]),
        events=pl.concat([base.events, remap(top.events).select(base.events.columns)]),
        configs=pl.concat([base.configs, top.configs.select(base.configs.columns)]),
        sources=base.sources + top.sources, warnings=base.warnings + top.warnings,
        skipped=base.skipped + top.skipped, tags=base.tags + top.tags,
    )


def _named(frame: pl.DataFrame, run_name: str) -> bool:
    """Whether every row already carries the run's name (so no column needs rewriting)."""
    return frame.height == 0 or frame["run"].unique().cast(pl.String).to_list() == [run_name]


def _first_time(log: ParsedLog) -> float | None:
    times = [t for t in (log.metrics["wall_time"].min(), log.events["wall_time"].min()) if t is not None]
    return float(min(times)) if times else None  # type: ignore[arg-type]


def _is_events_only(log: ParsedLog) -> bool:
    return log.metrics.height == 0 and log.configs.height == 0


def _join(run_name: str, root: Path, pieces: list[Piece], parallel: bool = False) -> Run:
    """One run from pieces of one kind: in time order, each file's attempts after the previous file's (a restart
    writes a new log), or side by side with ``parallel`` (chart exports: one file per metric of the same run).
    A file with only events (a slurm ``.err`` beside its ``.out``) joins the attempt of the log it belongs to."""
    times = [_first_time(p.log) for p in pieces]
    if not parallel and all(t is not None for t in times):
        pieces = [p for _, p in sorted(zip(times, pieces, strict=True), key=lambda x: x[0])]  # type: ignore[misc]
    metrics, events, configs, sources, warnings = [], [], [], [], []
    tags: list[dict[str, str]] = []
    offset = 0
    last_attempt_of_stem: dict[str, int] = {}
    deferred: list[Piece] = []
    for piece in pieces:
        log = piece.log
        sources.append(Source(path=_display(piece.file, root), format=piece.fmt, sampled=piece.sampled))
        warnings.extend(log.warnings)
        tags += [{"source": sources[-1].path, "tag": tag, "metric": metric} for tag, metric in log.tags.items()]
        if _is_events_only(log):
            deferred.append(piece)
            continue
        frames = (log.metrics, log.events, log.configs)
        if offset and not parallel:
            frames = tuple(f.with_columns(attempt=pl.col("attempt") + offset) for f in frames)
        frames = tuple(f if _named(f, run_name) else f.with_columns(run=pl.lit(run_name)) for f in frames)
        for stacked, frame in zip((metrics, events, configs), frames, strict=True):
            stacked.append(frame)
        offset = max(offset, log.n_attempts) if parallel else offset + log.n_attempts
        last_attempt_of_stem[piece.file.with_suffix("").as_posix()] = offset
    for piece in deferred:  # e.g. a slurm .err beside its .out: same process, so the same attempt
        target = last_attempt_of_stem.get(piece.file.with_suffix("").as_posix(), max(offset, 1))
        events.append(piece.log.events.with_columns(attempt=pl.lit(target, dtype=pl.Int32), run=pl.lit(run_name)))
        offset = max(offset, 1)

    def stack(frames: list[pl.DataFrame], schema: dict[str, pl.DataType]) -> pl.DataFrame:
        frames = [s.conform(f, schema) for f in frames if f.height]
        return pl.concat(frames) if frames else s.empty(schema)

    return Run(
        name=run_name,
        path=str(root),
        metrics=stack(metrics, s.METRICS_SCHEMA),
        events=stack(events, s.EVENTS_SCHEMA),
        configs=stack(configs, s.CONFIGS_SCHEMA),
        sources=sources,
        warnings=warnings,
        skipped=[],
        tags=tags,
    )

