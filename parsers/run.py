"""Find the logs a run left behind, parse each, and join them into one run's canonical frames."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.megatron import DETECT, PDSH_CMD, ParsedLog, parse_megatron
from parsers.tensorboard import is_event_file, parse_event_file
from parsers.textfile import InputError, inspect_text


@dataclass
class Source:
    """One input file and the format it was read as."""

    path: str
    format: str


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


def load_run(path: str | Path, name: str | None = None) -> Run:
    """Read a run directory (every log in it, recognised by content) or a single log file.

    Raises :class:`InputError` with a one-line message when the path is missing or nothing in it can be read.

    >>> run = load_run("sample_logs/tr8-104B-sample")          # doctest: +SKIP
    >>> run.metrics.filter(metric="loss").select("step", "value").tail(1)   # doctest: +SKIP
    """
    root = Path(path)
    if not root.exists():
        raise InputError(f"{root}: no such file or directory")
    run_name = name or (root.resolve().name if root.is_dir() else root.stem)
    warnings: list[str] = []
    skipped: list[str] = []
    parsed: list[tuple[Path, ParsedLog]] = []
    boards: list[tuple[Path, ParsedLog]] = []
    for file in _candidate_files(root):
        shown = _display(file, root)
        if is_event_file(file):
            try:
                boards.append((file, parse_event_file(file, shown, run_name)))
            except InputError as exc:
                if root.is_file():
                    raise
                warnings.append(str(exc))
            continue
        try:
            text = inspect_text(file, shown, {"megatron": DETECT}, head_patterns={"pdsh": PDSH_CMD})
        except InputError as exc:
            if root.is_file():
                raise
            warnings.append(str(exc))
            continue
        if text.binary:
            skipped.append(f"{shown}: binary file, not a text log")
            continue
        if text.blank:
            (warnings if root.is_file() or file.suffix in {".log", ".out", ".err", ".txt"} else skipped).append(
                f"{shown}: empty file"
            )
            continue
        if text.matches["megatron"] is None:
            skipped.append(f"{shown}: no Megatron iteration lines or arguments block")
            continue
        parsed.append((file, parse_megatron(text, run=run_name, source=shown)))
    if boards:
        board_run = _join(run_name, root, boards, [], [], fmt="tensorboard")
        if not parsed:
            board_run.warnings[:0] = warnings
            board_run.skipped.extend(skipped)
            return board_run
    if not parsed:
        if root.is_file():
            reason = (warnings + skipped)[0].split(": ", 1)[-1] if warnings + skipped else "unreadable"
            raise InputError(f"{root}: not a recognised training log: {reason}")
        reasons = "; ".join(warnings + skipped) or "no files"
        raise InputError(f"{root}: no readable training logs ({reasons})")
    text_run = _join(run_name, root, parsed, warnings, skipped)
    return _merge_boards(text_run, board_run) if boards else text_run


def _merge_boards(text: Run, board: Run) -> Run:
    """One run from a text log and event files of the same training: the text log gives the arguments, events
    and attempts; TensorBoard the per-iteration scalars (a metric at a step it holds is not taken from the text).

    TensorBoard attempts map one to one onto the text log's when both saw the same number of (re)starts, and are
    kept when TensorBoard saw more; otherwise each point joins the last text attempt that began at or before its
    step.
    """
    spans = text.metrics.group_by("attempt").agg(lo=pl.col("step").min(), hi=pl.col("step").max()).sort("attempt")
    tb_attempts = sorted(board.metrics["attempt"].unique().to_list())
    if len(tb_attempts) == spans.height:
        mapping = dict(zip(tb_attempts, spans["attempt"].to_list(), strict=True))
        tb = board.metrics.with_columns(pl.col("attempt").replace_strict(mapping, return_dtype=pl.Int32))
    elif len(tb_attempts) > spans.height:  # the event files saw restarts the text log does not show
        tb = board.metrics
    else:
        starts = spans.sort("lo").select(pl.col("lo").alias("step"), pl.col("attempt").alias("text_attempt"))
        tb = (
            board.metrics.with_row_index("_row").sort("step")
            .join_asof(starts, on="step", strategy="backward", check_sortedness=False)
            .sort("_row")
            .with_columns(attempt=pl.col("text_attempt").fill_null(pl.col("attempt")).cast(pl.Int32))
            .drop("_row", "text_attempt")
        )
    covered = tb.select("metric", "step").unique()
    kept = text.metrics.join(covered, on=["metric", "step"], how="anti")
    return Run(
        name=text.name, path=text.path,
        metrics=pl.concat([kept, tb.select(kept.columns)]),
        events=text.events, configs=text.configs,
        sources=text.sources + board.sources, warnings=text.warnings + board.warnings, skipped=text.skipped,
    )


def _first_time(log: ParsedLog) -> float | None:
    times = [t for t in (log.metrics["wall_time"].min(), log.events["wall_time"].min()) if t is not None]
    return float(min(times)) if times else None  # type: ignore[arg-type]


def _is_events_only(log: ParsedLog) -> bool:
    return log.metrics.height == 0 and log.configs.height == 0


def _join(
    run_name: str, root: Path, parsed: list[tuple[Path, ParsedLog]], warnings: list[str], skipped: list[str],
    fmt: str = "megatron",
) -> Run:
    times = [_first_time(log) for _, log in parsed]
    if all(t is not None for t in times):
        parsed = [log for _, log in sorted(zip(times, parsed, strict=True), key=lambda x: x[0])]  # type: ignore[misc]
    metrics, events, configs, sources = [], [], [], []
    offset = 0
    last_attempt_of_stem: dict[str, int] = {}
    deferred: list[tuple[Path, ParsedLog]] = []
    for file, log in parsed:
        sources.append(Source(path=_display(file, root), format=fmt))
        warnings.extend(log.warnings)
        if _is_events_only(log):
            deferred.append((file, log))
            continue
        shift = pl.col("attempt") + offset
        frames = (log.metrics, log.events, log.configs)
        if offset:
            frames = tuple(f.with_columns(attempt=shift) for f in frames)
        for stacked, frame in zip((metrics, events, configs), frames, strict=True):
            stacked.append(frame)
        offset += log.n_attempts
        last_attempt_of_stem[file.with_suffix("").as_posix()] = offset
    for file, log in deferred:  # e.g. a slurm .err beside its .out: same process, so the same attempt
        target = last_attempt_of_stem.get(file.with_suffix("").as_posix(), max(offset, 1))
        events.append(log.events.with_columns(attempt=pl.lit(target, dtype=pl.Int32)))
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
        skipped=skipped,
    )
