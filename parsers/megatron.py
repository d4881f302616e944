"""Megatron-LM / Megatron-DeepSpeed text logs -> canonical frames, vectorised with Polars string expressions.

One Polars query per block of the file's lines (memory stays bounded however large the file) keeps the lines that
matter, one row each: iteration lines with their step, total, flags and values, and the arguments, lifecycle, error
and validation lines with their text. A log prints the same fields in the same order on nearly every iteration
line, so values are read by position: the first iteration lines of the file give the text before each field's ':'
(the :class:`Layout`), and on a line whose cells all begin with that text each value is that cell with the text
cut off, cast to a number. Lines of another shape (a NaN line without its loss, fields a restart added, junk) keep
their text and are read field by field afterwards. Attempts are then numbered from the iteration counter and the
arguments blocks, and the values become long-form metric rows. Python only loops over the first iteration lines of
the file, the few damaged (wrapped or cut) iteration lines and the arguments blocks' few hundred values.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from parsers import megatron_patterns as p
from parsers import schema as s
from parsers.reader import NotThisFormat, Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import SEPARATOR, TextFile, inspect_text, read_blocks, scan_blocks

DETECT = re.compile(p.ITERATION_CORE.encode() + rb"|-{8,} arguments -{8,}")
ERRORS_ONLY = "text (errors only)"  # a text log with no metrics lines of a known format, read for how the run ended
# (per line: the error patterns anchored at a line's start match at every line of the text, not only its first)
# ... and the scheduler's or the system's stop (a slurm .err that holds only "CANCELLED ... DUE TO TIME LIMIT"), and a
# person's (a Ctrl-C's KeyboardInterrupt)
_ENDED_BY = s.FATAL_KINDS | s.SCHEDULER_STOP_KINDS | {s.EV_SIGTERM, s.EV_KILLED, s.EV_STACK_DUMP, s.EV_INTERRUPT}
# ... and fp16's word on the steps it skipped (DeepSpeed's "OVERFLOW! Rank 0 Skipping step", its running count
# "step=100, skipped=3", Apex's "Grad overflow on iteration"), and the end of training
_OVERFLOWS = {s.EV_OVERFLOW, s.EV_SKIPPED_COUNT, s.EV_OVERFLOW_STOP}
_NOTABLE = _ENDED_BY | _OVERFLOWS | {s.EV_TRAINING_DONE}
_FATAL = {f"fatal{n}": re.compile(rx.encode(), re.M) for n, (kind, rx) in enumerate(p.EVENT_PATTERNS)
          if kind in _NOTABLE}
PDSH_CMD = re.compile(p.PDSH_CMD)
_COUNTERS = "number of skipped iterations"
_ANY_EVENT = "|".join(f"(?:{rx})" for _, rx in p.EVENT_PATTERNS)
# a field printed without a colon: its name, then its value (a number, NaN or Inf in any case)
_BARE_KEY = r"^\s*([A-Za-z][A-Za-z _()/-]*?)\s+([-+]?(?:\d|\.\d|(?i:nan|inf))\S*)\s*$"
_BARE_FIELD = re.compile(r"(\s*([A-Za-z][A-Za-z _()/-]*?)\s+)(?=[-+]?(?:\d|\.\d|(?i:nan|inf)))")
_LINES_SCHEMA = {"line": pl.UInt32, "text": pl.String}
_VALUE = "metric:"  # the wide iteration rows hold each metric in a column named "metric:<name>"
_SAMPLE_LINES = 256  # iteration lines the layout is learned from
_SAMPLE_BLOCKS = 4  # blocks of the file's head searched for them
_CORE = re.compile(p.ITERATION_CORE.encode())
_COUNTER_CELL = re.compile(p.COUNTER_CELL)
_STREAM_NAME = re.compile(r"(?i)std(?:err|out)$")  # a file named for the stream it captured ("node1_stderr.txt")
_ENDINGS_SAID = 3  # the lines that end runs quoted from a file that was not read


FORMAT = "megatron"


def sniff(head: bytes, name: str) -> bool:
    """Any text file: a Megatron log may print its first iteration line after megabytes of start-up, so the whole
    file is looked at when it is read (this reader is asked last)."""
    return b"\x00" not in head[:8192]


def read(path: Path, context: ReadContext) -> list[Piece]:
    """A Megatron-family log; a text file without iteration lines or an arguments block is not one. A console of
    another format whose first metrics line lies beyond the head the readers were shown (a long start-up) is found
    here, in the same pass, and read by its own reader."""
    from parsers.registry import console_formats  # (the registry imports this module)

    consoles = console_formats()
    patterns = {FORMAT: DETECT, **{name: fmt.detect for name, fmt in consoles.items()}}
    text = inspect_text(path, context.shown, patterns, head_patterns={"pdsh": PDSH_CMD}, first_of=True)
    if text.binary:
        raise NotThisFormat(f"{context.shown}: binary file, not a text log")
    if text.blank:
        raise NotThisFormat(f"{context.shown}: empty file", empty=True)
    found = sorted((m.start(), name) for name, m in text.matches.items() if m is not None and name in patterns)
    if not found:
        # no metrics lines, but the errors that end runs (a hang in a collective, an OOM, a traceback): the log of a
        # run that died is read for them, and the report says no metric was read; in a directory only a job's log
        # file is (a note beside the logs may quote a traceback that is not this run's)
        read = context.single or path.suffix.lower() in {".log", ".out", ".err"}
        # (another text file is looked at only when named for the stream it captured: GPT-NeoX's log_dir holds
        # "<host>_<host>_stdout.txt" and "_stderr.txt")
        fatal = inspect_text(path, context.shown, _FATAL, first_of=True) \
            if read or _STREAM_NAME.search(path.stem) else None
        if fatal is not None and any(m is not None for m in fatal.matches.values()):
            log = parse_megatron(fatal, run=context.run, source=context.shown)
            kinds = set(log.events.filter(pl.col("kind").is_in(list(_NOTABLE)))["kind"].unique().to_list())
            ended = log.events.filter(pl.col("kind").is_in(list(_ENDED_BY))).unique("text", maintain_order=True)
            if ended.height and not read:
                # not read (its launches cannot be told apart from the logs' without times: a launch that died
                # before it logged, then the training's end), but not passed over in silence either
                said = ", ".join(f"“{text.strip()[:120]}” (line {line})"
                                 for text, line in ended.select("text", "line").head(_ENDINGS_SAID).iter_rows())
                more = f" and {ended.height - _ENDINGS_SAID} more" if ended.height > _ENDINGS_SAID else ""
                context.warnings.append(f"{context.shown}: not read (no metrics lines; a text file beside the logs "
                                        f"may hold another launch's output), though it holds lines that end runs: "
                                        f"{said}{more}; how the run ended may be there")
            elif read and (kinds & (_ENDED_BY | _OVERFLOWS) - {s.EV_INTERRUPT}
                           or (s.EV_INTERRUPT in kinds and (context.single or _beside_its_job(path)))):
                # (a Ctrl-C alone is a job's end only in its own stream: tensorboard.log or a notebook's log beside
                # the training's holds the Ctrl-C of another program)
                read_for = "errors, stops and fp16 overflow lines" if kinds & _OVERFLOWS else "errors and stops"
                if log.metrics.height:  # (the LR of DeepSpeed's progress lines)
                    read_for += ", and the learning rate of DeepSpeed's step=N lines,"
                context.warnings.append(f"{context.shown}: no metrics lines of a text format it knows; read for its "
                                        f"{read_for} only")
                return [Piece(path, ERRORS_ONLY, log)]
        raise NotThisFormat(f"{context.shown}: no metrics lines of a text format it knows ({', '.join(patterns)})")
    name = found[0][1]
    if name != FORMAT:
        return [Piece(path, name, consoles[name].parse(text, run=context.run, source=context.shown))]
    return [Piece(path, FORMAT, parse_megatron(text, run=context.run, source=context.shown))]


def _beside_its_job(path: Path) -> bool:
    """A job's stream beside its other one: ``job.err`` beside ``job.out`` (or ``.log``)."""
    return any(path.with_suffix(ext).is_file() for ext in (".out", ".log", ".err") if ext != path.suffix.lower())


def parse_megatron(text: TextFile, run: str, source: str) -> ParsedLog:
    """Parse a Megatron-family training log that :func:`parsers.textfile.inspect_text` has looked at.

    >>> from pathlib import Path
    >>> from parsers.textfile import inspect_text
    >>> log = inspect_text(Path("sample_logs/clean-1.3B/train.log"), "train.log", head_patterns={"pdsh": PDSH_CMD})
    >>> parsed = parse_megatron(log, run="clean", source="train.log")
    >>> parsed.metrics.filter(metric="loss").select("step", "value").row(0)
    (1, 10.91159)
    """
    prefix = _prefix_pattern(text.matches.get("pdsh"))
    layout = learn_layout(text, prefix)
    # split block by block: a filter of the whole file's rows at once would copy them twice (rechunk, then filter)
    parts = [_split_rows(rows) for rows in _blocks(text, prefix, lambda lines: _line_rows(lines, prefix, layout))]
    iters = pl.concat([part[0] for part in parts], rechunk=True)
    others = pl.concat([part[1] for part in parts], rechunk=True).with_columns(in_args=_inside_arguments())
    del parts
    warnings = text.damage()  # complete now that every line has been read
    iters, others, cut = _repair_wrapped(iters, others, text, prefix, layout, warnings)
    iters = _read_odd_lines(iters, prefix)
    unnumbered = iters.filter(pl.col("step").is_null())
    if unnumbered.height:  # e.g. an iteration beyond 2**63 - 1: a step that cannot be placed is not a point
        warnings.append(f"{text.shown}: {unnumbered.height} iteration line(s) whose iteration number is not a 64-bit "
                        f"integer were left out (first at line {unnumbered['line'].min()})")
        iters = iters.filter(pl.col("step").is_not_null())
    others = relaunched_usage(with_event_kinds(others))
    bounds = attempt_bounds(iters, others)
    iters, others = (with_attempt(f, bounds) for f in (iters, others))
    iters = _without_placeholders(iters, text.shown, warnings)

    extra = pl.concat([_log_interval(iters), _validation_metrics(others, iters)]
                      + ([] if _has_values(iters, s.LR) else [_deepspeed_lr(others)]), how="diagonal_relaxed")
    values = _long_metrics(iters)
    # the metrics with rows, from the value columns (not a unique over millions of rows)
    present = [c[len(_VALUE):] for c in iters.columns if c.startswith(_VALUE) and iters[c].null_count() < iters.height]
    present += [m for m in extra["metric"].unique(maintain_order=True).to_list() if m not in present]
    # same dtypes, so the millions of value rows are not cast or copied
    metrics = pl.concat([values, s.conform(extra, s.METRICS_SCHEMA).select(values.columns)], rechunk=False)
    events = pl.concat(
        [line_events(others, iters), _iteration_events(iters, cut, text, prefix), _process_starts(others),
         progress_events(others)],
        how="diagonal_relaxed",
    )
    last = _last_timed_line(text, prefix, events)
    if last.height:
        last = with_attempt(last, bounds)
        events = pl.concat([events, last.with_columns(step=_last_step(last, iters))], how="diagonal_relaxed")
    planned = _planned_steps(others)
    configs = _configs(others, iters, planned)
    warnings += [f"{text.shown}: attempt {a}: planned to end at DeepSpeed's step {n}: the {total} \"Total optimization "
                 f"steps\" it printed, of {script} batch(es) each (\"Gradient Accumulation steps = {script}\"), are {n} of "
                 f"DeepSpeed's steps, of {ds} batches each (its gradient_accumulation_steps)"
                 for a, n, total, script, ds in planned.rows() if n != total]

    def finish(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        labels = {name: pl.lit(value, dtype=schema["run"]) for name, value in (("run", run), ("source", source))}
        return s.conform(frame.with_columns(**labels), schema)

    return ParsedLog(
        metrics=finish(metrics, s.METRICS_SCHEMA),  # each metric's rows in (attempt, step) order
        events=finish(events, s.EVENTS_SCHEMA).sort("line", maintain_order=True),
        configs=finish(configs, s.CONFIGS_SCHEMA),
        warnings=warnings,
        n_attempts=max(int(bounds["attempt"].max() or 0), 1),  # type: ignore[arg-type]
        tags=_tags(layout, present),
    )


# --- the usual iteration line -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """The usual iteration line of a log, split at '|': which cell holds the counter, and for every other cell the
    text up to and including its ':' with the key it names (``None`` for a cell without one, such as the blank
    after the last '|'). The first cell's text keeps the launcher prefix it was printed with."""

    counter: int
    heads: tuple[tuple[str, str] | None, ...]

    def fields(self) -> list[tuple[int, str, str, float]]:
        """(position, text before the value, metric name, scale) of each named field."""
        out = []
        for position, cell in enumerate(self.heads):
            name = _metric_names([cell[1]])[cell[1]] if cell else ""
            if cell and name:  # a cell with nothing before its ':' names no metric
                out.append((position, cell[0], name, 1000.0 if cell[1] in p.SECONDS_KEYS else 1.0))
        return out


def layout_of(line: str, prefix: str = "^") -> Layout | None:
    """The layout of one iteration line (None when it has no counter), ``prefix`` the launcher-prefix pattern.

    >>> layout_of("[default7]: iteration 10/ 100 | lm loss: 2.5E+00 | grad norm: 1.0 |").fields()
    [(1, ' lm loss:', 'loss', 1.0), (2, ' grad norm:', 'grad_norm', 1.0)]
    >>> layout_of("samples/sec: 7.8 | iteration 10/ 100 | lm_loss: 2.5 |").fields()
    [(0, 'samples/sec:', 'samples_per_second', 1.0), (2, ' lm_loss:', 'loss', 1.0)]
    """
    cells = line.split("|")
    counter = next((n for n, cell in enumerate(cells) if _COUNTER_CELL.search(cell)), None)
    if counter is None:
        return None
    heads: list[tuple[str, str] | None] = []
    for n, cell in enumerate(cells):
        # the first cell's key starts after launcher prefixes, escape codes and a timestamp, as field by field
        start = re.match(prefix + p.LEADING[1:], cell).end() if n == 0 else 0  # type: ignore[union-attr]
        colon = cell.find(":", start)
        colon = cell.find("=", start) if colon < 0 else colon  # (key=value fields: argonne-lcf's fork)
        bare = _BARE_FIELD.match(cell, start) if colon < 0 and n != counter else None
        if bare:  # the oldest Megatron: "learning rate 1.500E-04 | lm loss 7.124311E+00 |", no colons
            heads.append((cell[: bare.end(1)], bare.group(2)))
            continue
        heads.append((cell[: colon + 1], cell[start:colon].strip()) if colon >= 0 and n != counter else None)
    return Layout(counter, tuple(heads))


def common_layout(lines: list[str], prefix: str) -> Layout | None:
    """The most common layout among these iteration lines (None when none has a counter)."""
    layouts = Counter(layout for layout in (layout_of(line, prefix) for line in lines) if layout is not None)
    return layouts.most_common(1)[0][0] if layouts else None


def learn_layout(text: TextFile, prefix: str) -> Layout | None:
    """The most common layout among the first iteration lines of the file."""
    lines: list[str] = []
    for n, block in enumerate(read_blocks(text.path, text.shown)):
        starts: set[int] = set()
        for found in _CORE.finditer(block):
            starts.add(max(block.rfind(b"\n", 0, found.start()), block.rfind(b"\r", 0, found.start())) + 1)
            if len(starts) >= _SAMPLE_LINES:
                break
        for start in sorted(starts):
            end = min((i for i in (block.find(b"\n", start), block.find(b"\r", start)) if i >= 0), default=len(block))
            raw = block[start:end].replace(b"\x00", b"")
            lines.append(raw.replace(SEPARATOR.encode(), b" ").decode("utf-8", errors="replace"))
        if len(lines) >= _SAMPLE_LINES or n + 1 >= _SAMPLE_BLOCKS:
            break
    return common_layout(lines, prefix)


# --- one pass over the lines --------------------------------------------------------------------------------------
def _prefix_pattern(pdsh_cmd: re.Match[bytes] | None) -> str:
    hosts = [h for h in pdsh_cmd.group(1).decode(errors="replace").split(",") if h] if pdsh_cmd else []
    alternatives = p.SRUN_OR_TORCHRUN + "|" + p.HOST_LIKE + "".join(f"|{re.escape(h)}: " for h in hosts)
    return f"^(?:{alternatives})*"


_IN_MEMORY_BYTES = 1 << 20  # logs up to this size are parsed without the streaming engine (see _blocks)


def _blocks(text: TextFile, prefix: str, query: Callable[[pl.LazyFrame], pl.LazyFrame]) -> Iterator[pl.DataFrame]:
    """``query`` run on each block of classified lines, in line order (an empty file gives one empty result)."""
    empty = True
    # Polars' streaming engine bounds the memory of a block's query, at a start-up cost of tens of milliseconds each
    # time: a log of less than a megabyte (a block's query holds a few times its bytes) is read in memory
    try:
        engine = "streaming" if text.path.stat().st_size > _IN_MEMORY_BYTES else "in-memory"
    except OSError:
        engine = "streaming"
    for block in scan_blocks(text):
        empty = False
        yield query(_classify(block, prefix)).collect(engine=engine)  # type: ignore[arg-type]
    if empty:
        yield query(_classify(pl.LazyFrame(schema=_LINES_SCHEMA), prefix)).collect()


def _lines_at(text: TextFile, prefix: str, wanted: list[int]) -> pl.DataFrame:
    """The classified lines with these numbers (a second pass over the file, for the few lines that need it)."""
    return pl.concat(_blocks(text, prefix, lambda lines: lines.filter(pl.col("line").is_in(wanted))))


def _classify(scan: pl.LazyFrame, prefix: str) -> pl.LazyFrame:
    """Flags for iteration lines and the arguments block; ``body``: the other lines without launcher prefixes.

    Iteration lines, nearly every line of a long log, are recognised with the prefix folded into the pattern and
    keep their text as it is: stripping prefixes would copy every line.
    """
    is_iter = pl.col("text").fill_null("").str.contains(prefix + p.ITERATION_LINE_AFTER_PREFIX)
    body = pl.when(~pl.col("is_iter")).then(pl.col("text").fill_null("")).str.replace(prefix, "")
    return scan.with_columns(is_iter=is_iter).with_columns(body=body).with_columns(
        is_args_start=pl.col("body").str.contains(p.ARGS_START).fill_null(False),
        is_args_end=pl.col("body").str.contains(p.ARGS_END).fill_null(False),
    )


TAIL_BYTES = 1 << 16  # the end of a file read again for its last timed line


def _last_timed_line(text: TextFile, prefix: str, events: pl.DataFrame) -> pl.DataFrame:
    """The file's last line that prints a time, from its last ``TAIL_BYTES``: a full date, or a glog stamp (month and
    day: its year is that of the last full time read before, a year on where that would go back). Columns line, kind,
    wall_time, text; no row when no such line is there, or when it is no later than the events' last time."""
    known = events["wall_time"].drop_nulls() if "wall_time" in events.columns else pl.Series([], dtype=pl.Float64)
    if not text.lines or not known.len():
        return pl.DataFrame()
    with text.path.open("rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - TAIL_BYTES))
        tail = f.read().replace(b"\x00", b"").decode("utf-8", errors="replace").splitlines()
    tail = tail[1:] if size > TAIL_BYTES else tail  # (the first line read may be cut)
    lines = pl.DataFrame({"line": pl.int_range(text.lines - len(tail) + 1, text.lines + 1, eager=True),
                          "text": tail}).with_columns(is_iter=pl.lit(False))
    year = datetime.fromtimestamp(float(known.max()), tz=UTC).year  # type: ignore[arg-type]
    glog = [pl.col("text").str.extract(prefix + p.GLOG_STAMP_AFTER_PREFIX, i) for i in (1, 2, 3, 4)]
    dated = pl.format("{}-{}-{} {}{}", pl.lit(str(year)), glog[0].str.zfill(2), glog[1], glog[2], glog[3].fill_null(""))
    in_year = dated.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us").dt.epoch("us") / 1e6
    timed = lines.with_columns(wall_time=pl.coalesce(_wall_time(prefix), in_year)).drop_nulls("wall_time")
    if not timed.height:
        return pl.DataFrame()
    row = timed.tail(1).with_columns(
        wall_time=pl.when(pl.col("wall_time") < float(known.max()) - 183 * 86400)  # type: ignore[arg-type]
        .then(pl.col("wall_time") + 365 * 86400).otherwise("wall_time"))  # (December's log, January's stamp)
    if row["wall_time"][0] <= float(known.max()):  # type: ignore[arg-type]
        return pl.DataFrame()
    return row.select(pl.col("line").cast(pl.Int64), "wall_time", "text", kind=pl.lit(s.EV_LAST_TIMED_LINE))


def _wall_time(prefix: str) -> pl.Expr:
    """The time a line was printed: a leading timestamp, or (other lines only) a bare leading date or the
    ``datetime:`` of Megatron's lifecycle lines."""
    lead = pl.col("text").str.extract(prefix + p.TIMESTAMP_AFTER_PREFIX)
    other = pl.when(~pl.col("is_iter")).then(pl.col("text"))
    stamp = pl.coalesce(
        lead, other.str.extract(prefix + p.BARE_TIMESTAMP_AFTER_PREFIX), other.str.extract(p.DATETIME_FIELD)
    )
    ts = stamp.str.replace(",", ".").str.replace("T", " ")
    return ts.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us").dt.epoch("us") / 1e6


def _line_rows(lines: pl.LazyFrame, prefix: str, layout: Layout | None) -> pl.LazyFrame:
    """The lines that matter, one row each: iteration lines (step, total, flags, a ``metric:<name>`` column per field
    of the layout, ``odd`` when the line does not fit it) and the other lines worth keeping (arguments and lines that
    may be, events, validation) with their text.

    Whether a line lies inside an arguments block is decided after the pass, on the kept lines (a running count
    over the whole file would make the streaming engine hold every line).
    """
    iteration = pl.col("is_iter")
    rest = pl.when(~iteration).then(pl.col("body"))  # null on iteration lines: the regexes below skip them
    other = (
        pl.col("is_args_start") | pl.col("is_args_end") | rest.str.contains(p.ARGS_CANDIDATE)
        | rest.str.contains(_ANY_EVENT) | rest.str.contains(" loss at ", literal=True) | kept_bar(rest)
        | rest.str.contains(_USAGE)  # (argparse's usage: a relaunch where it follows its error, relaunched_usage)
    ).fill_null(False)
    def cell(position: int) -> pl.Expr:
        return pl.col(f"_cell{position}")

    def after(position: int) -> pl.Expr:
        return pl.col(f"_after{position}")

    read: dict[str, pl.Expr] = {}  # each field's value, by position
    unfit: list[pl.Expr] = [pl.lit(layout is None), pl.col("step").is_null()]
    columns: dict[str, list[str]] = {}  # metric column -> the positions it is read from
    width = len(layout.heads) if layout is not None else 1
    fields = layout.fields() if layout is not None else []
    if layout is not None:
        unfit.append(cell(width).is_not_null())  # more cells than the layout has
        named = {position for position, *_ in fields}
        for position, head in enumerate(layout.heads):  # a cell with no ':' there must have none here
            if position == layout.counter:
                continue
            if head is None:
                unfit.append(cell(position).str.contains(":", literal=True))
            elif position not in named:
                unfit.append(cell(position).is_not_null() & ~cell(position).str.starts_with(head[0]))
        for position, _, name, scale in fields:
            # the cell begins with the head when stripping it shortened the cell
            unfit.append(after(position).str.len_bytes() == cell(position).str.len_bytes())
            value = after(position).str.strip_chars().cast(pl.Float64, strict=False)
            read[f"_at{position}"] = value * scale if scale != 1.0 else value
            columns.setdefault(_VALUE + name, []).append(f"_at{position}")
            # a value that is not a plain number is read again with the line
            unfit.append(cell(position).is_not_null() & pl.col(f"_at{position}").is_null())
    counter_cell = cell(layout.counter if layout is not None else 0)
    counter = counter_cell.str.split_exact("/", 1)
    has_counter = counter_cell.str.contains(p.COUNTER_CELL)  # then the digits around the '/' are the step and total
    # the cells split at '|', one more than the layout has (a sign that the line has more): a struct, not a list
    cells = pl.when(iteration).then(pl.col("text")).str.split_exact("|", width)
    last = pl.coalesce(*[cell(n) for n in reversed(range(width + 1))])
    # a line with more cells: its last is beyond those split off, and blank when the line ends with '|'
    beyond = pl.when(cell(width).is_not_null()).then(pl.col("text")).str.strip_chars_end().str.ends_with("|")
    return (
        lines.filter(iteration | other)
        .with_columns(_cells=cells)
        .with_columns(**{f"_cell{n}": pl.col("_cells").struct.field(f"field_{n}") for n in range(width + 1)})
        .with_columns(**{f"_after{position}": cell(position).str.strip_prefix(head) for position, head, *_ in fields})
        .with_columns(
            step=pl.when(has_counter).then(
                counter.struct.field("field_0").str.strip_chars_end().str.replace("=", " ", literal=True)
                .str.split(" ").list.last()
            ).cast(pl.Int64, strict=False),
            total=pl.when(has_counter).then(counter.struct.field("field_1").str.strip_chars())
            .cast(pl.Int64, strict=False),
            **read,
        )
        .select(
            "line", "is_iter", "is_args_start", "is_args_end", "step", "total",
            odd=pl.when(iteration).then(pl.any_horizontal(*unfit).fill_null(False)).fill_null(False),
            ends_pipe=pl.coalesce(beyond, last.str.strip_chars() == "").fill_null(False),
            has_counters=pl.col("text").str.contains(_COUNTERS, literal=True) & iteration,
            text=pl.col("text"),
            body=pl.when(~iteration).then(pl.col("body") + ""),
            wall_time=_wall_time(prefix),
            **{column: pl.coalesce(at) for column, at in columns.items()},
        )
        # "+ ''" copies the few kept strings out of the file-sized buffers their views would otherwise pin (after
        # the when: the copy is made of those strings only)
        .with_columns(text=pl.when(~iteration | pl.col("odd")).then(pl.col("text")) + "")
    )


def _split_rows(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Iteration rows and other rows of :func:`_line_rows`."""
    iters = rows.filter("is_iter").select(
        "line", "step", "total", "wall_time", "ends_pipe", "has_counters", "odd", "text", pl.col(f"^{_VALUE}.*$")
    )
    others = rows.filter(~pl.col("is_iter")).select("line", "is_args_start", "is_args_end", "text", "body", "wall_time")
    return iters, others


def _inside_arguments() -> pl.Expr:
    """On the kept lines in file order: the line lies between an arguments header and its end."""
    depth = pl.col("is_args_start").cast(pl.Int32).cum_sum() - pl.col("is_args_end").cast(pl.Int32).cum_sum()
    return (depth > 0) & ~pl.col("is_args_start")


# --- iteration lines of another shape ------------------------------------------------------------------------------
def _odd_fields(odd: pl.DataFrame, prefix: str) -> pl.DataFrame:
    """``line``, ``metric``, ``value`` of each field of these iteration lines, read one '|'-separated cell at a time.

    Keys never hold ':' or '|', so a split at '|' and then at the first ':' does what a regex would. Values that are
    not plain numbers are read again: NaN and Inf spelled any way, else the number they begin with.
    """
    # at the first ':' (at the first '=' in a key=value field)
    halves = pl.when(pl.col("segment").str.contains(":", literal=True)).then(pl.col("segment")).otherwise(
        pl.col("segment").str.replace("=", ":", literal=True)).str.split_exact(":", 1)
    cells = (
        odd.select(
            "line",
            segment=pl.col("text").str.replace(prefix, "").str.replace(p.LEADING, "")
            .str.replace(p.ITERATION_CORE, "|").str.split("|"),
        )
        .explode("segment")
        .select(
            "line",
            key=halves.struct.field("field_0").str.strip_chars(),
            raw=halves.struct.field("field_1").str.strip_chars(),
        )
    )
    bare = cells.filter(pl.col("raw").is_null()).select(  # a cell with no ':' (the oldest Megatron's fields)
        "line",
        key=pl.col("key").str.extract(_BARE_KEY, 1).str.strip_chars(),
        raw=pl.col("key").str.extract(_BARE_KEY, 2),
    )
    cells = pl.concat([cells.drop_nulls("raw"), bare.drop_nulls("raw")])
    names = _metric_names(cells["key"].unique().to_list())
    raw = pl.col("raw")
    leading = raw.str.extract(r"^([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)").cast(pl.Float64, strict=False)
    reread = pl.when(raw.str.contains(r"(?i)nan")).then(float("nan")).when(raw.str.contains(r"(?i)inf")).then(
        pl.when(raw.str.starts_with("-")).then(float("-inf")).otherwise(float("inf"))
    ).otherwise(leading)
    scale = pl.when(pl.col("key").is_in(list(p.SECONDS_KEYS))).then(1000.0).otherwise(1.0)
    return cells.select(
        "line",
        metric=pl.col("key").replace_strict(names, return_dtype=pl.Categorical),
        value=pl.coalesce(raw.cast(pl.Float64, strict=False), pl.when(raw != "").then(reread)) * scale,
    ).filter((pl.col("metric") != "") & pl.col("value").is_not_null())


def _read_odd_lines(iters: pl.DataFrame, prefix: str, rounds: int = 3) -> pl.DataFrame:
    """The iteration rows with the lines that did not fit the layout read again: first by the layouts most common
    among them (a long NaN stretch prints lines without a loss, all alike), then the rest field by field.

    Takes the step, total and value columns out of ``iters`` to rewrite them in place: use the frame returned."""
    odd = iters.filter("odd").select("line", "text")
    if odd.height == 0:
        return iters
    values = [c for c in iters.columns if c.startswith(_VALUE)]
    read: list[pl.DataFrame] = []
    for _ in range(rounds):
        layout = common_layout(odd["text"].head(_SAMPLE_LINES).to_list(), prefix)
        if layout is None:
            break
        again = _split_rows(_line_rows(_classify(odd.lazy(), prefix), prefix, layout).collect())[0]  # (a few lines)
        read.append(again.filter(~pl.col("odd")).select("line", "step", "total", pl.col(f"^{_VALUE}.*$")))
        odd = again.filter("odd").select("line", "text")
        if odd.height == 0:
            break
    if odd.height:
        read.append(_field_by_field(odd, prefix))
    found = pl.concat(read, how="diagonal_relaxed").sort("line")
    at = iters["line"].search_sorted(found["line"])  # the odd lines' rows, whose values are all replaced
    fresh = [c for c in found.columns if c.startswith(_VALUE) and c not in values]
    order = [*iters.columns, *fresh]
    replaced = {}
    for column in ["step", "total", *values, *fresh]:
        # taken out of the frame, the column is the only owner of its buffer, so scatter writes in place (a copy
        # of every value column otherwise)
        if column in iters.columns:
            old = iters.drop_in_place(column)
        else:
            old = pl.Series(column, [None] * iters.height, pl.Float64)
        new = found[column] if column in found.columns else pl.Series(column, [None] * found.height, old.dtype)
        replaced[column] = old.scatter(at, new.cast(old.dtype))
    return iters.with_columns(**replaced).select(order)


def _field_by_field(odd: pl.DataFrame, prefix: str) -> pl.DataFrame:
    """``line``, ``step``, ``total`` and a ``metric:<name>`` column per key of these lines, read field by field."""
    counter = pl.col("text").str.replace(prefix, "").str.extract_groups(p.ITERATION)
    steps = odd.select(
        "line",
        step=counter.struct.field("1").cast(pl.Int64, strict=False),
        total=counter.struct.field("2").cast(pl.Int64, strict=False),
    )
    fields = _odd_fields(odd, prefix).unique(["line", "metric"], keep="first", maintain_order=True)
    wide = fields.pivot(on="metric", index="line", values="value", maintain_order=True)
    wide = wide.rename({c: _VALUE + c for c in wide.columns if c != "line"})
    return steps.join(wide, on="line", how="left", maintain_order="left")


def _long_metrics(iters: pl.DataFrame) -> pl.DataFrame:
    """One metric row per value of the iteration rows, each metric's rows in line order.

    The columns every metric shares (attempt, step, time) are the same buffers in every part when nothing is missing.
    """
    shared = iters.select("attempt", "step", "wall_time")
    parts = []
    for column in (c for c in iters.columns if c.startswith(_VALUE)):
        part = shared.with_columns(metric=pl.lit(column[len(_VALUE):], dtype=pl.Categorical), value=iters[column])
        parts.append(part.filter(pl.col("value").is_not_null()) if iters[column].has_nulls() else part)
    if not parts:
        return s.empty(s.METRICS_SCHEMA).select("attempt", "step", "wall_time", "metric", "value")
    return pl.concat(parts, rechunk=False).select("attempt", "step", "wall_time", "metric", "value")


# lines an attempt must print its grad norm as 0 on (with a loss) before the 0 is a placeholder, not a value
PLACEHOLDER_LINES = 3


def _without_placeholders(iters: pl.DataFrame, shown: str, warnings: list[str]) -> pl.DataFrame:
    """The iteration rows without the values Megatron prints where it has none (Megatron-DeepSpeed with DeepSpeed's
    engine owning the optimizer prints "loss scale: -1.0 | grad norm: 0.000" on every line), each said in a warning:
    a loss scale below 0 (a scale is above 0), and a grad norm of exactly 0 at every line of an attempt that prints it
    (at least ``PLACEHOLDER_LINES``, each with a loss above 0, which has a gradient) beside that loss-scale
    placeholder. A grad norm of 0 at some steps of an attempt is a value, and so is one of 0 at every step with a real
    loss scale or none (a model frozen by mistake).

    >>> rows = pl.DataFrame({"attempt": [1, 1, 1], "metric:loss": [12.4, 41.0, 9.4], "metric:grad_norm": [0.0] * 3,
    ...                      "metric:loss_scale": [-1.0] * 3})
    >>> said: list[str] = []
    >>> _without_placeholders(rows, "x.out", said).null_count().row(0)
    (0, 0, 3, 3)
    >>> said[1]  # doctest: +NORMALIZE_WHITESPACE
    'x.out: grad norm printed as 0 on all 3 lines of attempt 1, with a loss above 0 (which has a gradient): a
     placeholder, no grad norm was logged'
    """
    scale, grad, loss = (_VALUE + m for m in (s.LOSS_SCALE, s.GRAD_NORM, s.LOSS))
    marked: list[int] = []  # the attempts that print the loss-scale placeholder
    if scale in iters.columns and (negative := iters.filter(pl.col(scale) < 0)).height:
        marked = negative["attempt"].unique().to_list()
        shown_as = "/".join(f"{v:g}" for v in negative[scale].unique().sort().to_list()[:3])
        warnings.append(f"{shown}: loss scale printed as {shown_as} on {negative.height} line(s): a loss scale is "
                        "above 0; a placeholder, not read as a loss scale")
        iters = iters.with_columns(pl.when(pl.col(scale) >= 0).then(pl.col(scale)).alias(scale))
    if grad not in iters.columns or loss not in iters.columns:
        return iters
    per_attempt = iters.group_by("attempt", maintain_order=True).agg(
        zero=(pl.col(grad) == 0).all(), lines=pl.col(grad).is_not_null().sum(),
        with_loss=(pl.col(grad).is_not_null() & (pl.col(loss) > 0)).sum(),
    ).filter(pl.col("zero") & (pl.col("with_loss") >= PLACEHOLDER_LINES) & pl.col("attempt").is_in(marked))
    if not per_attempt.height:
        return iters
    warnings += [f"{shown}: grad norm printed as 0 on all {n} lines of attempt {a}, with a loss above 0 (which has a "
                 "gradient): a placeholder, no grad norm was logged"
                 for a, n in per_attempt.select("attempt", "lines").rows()]
    placeholder = pl.col("attempt").is_in(per_attempt["attempt"].implode())
    return iters.with_columns(pl.when(~placeholder).then(pl.col(grad)).alias(grad))


# --- damaged iteration lines --------------------------------------------------------------------------------------
def _repair_wrapped(
    iters: pl.DataFrame, others: pl.DataFrame, text: TextFile, prefix: str, layout: Layout | None,
    warnings: list[str],
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Join iteration lines hard-wrapped over a few lines; report the lines that stay cut short.

    Returns the frames with the joined lines parsed again, and the cut lines (``line``, ``past``: whether the
    cut fell after the place where the loss is printed, so a missing loss is still evidence; ``cut_text``: the
    line as read here, so the events need not read the file again for it).
    """
    has_counters = bool(iters["has_counters"].any())
    complete = pl.col("ends_pipe") & (pl.col("has_counters") if has_counters else pl.lit(True))
    broken = iters.filter(~complete)["line"].to_list()
    no_cut = pl.DataFrame(schema={"line": pl.UInt32, "past": pl.Boolean, "cut_text": pl.String})
    if not broken:
        return iters, others, no_cut
    wanted = sorted({n + k for n in broken for k in range(4)})
    texts = dict(_lines_at(text, prefix, wanted).select("line", pl.col("text").fill_null("")).iter_rows())
    is_iter = re.compile(p.ITERATION_CORE)
    patches: dict[int, str] = {}
    swallowed: set[int] = set()
    cut: dict[int, bool] = {}
    for line_no in broken:
        joined = texts.get(line_no, "")
        for k in range(1, 4):
            following = texts.get(line_no + k)
            if following is None or is_iter.search(following) or line_no + k in patches:
                break
            joined = _join_wrapped(joined, following)
            if joined.rstrip().endswith("|") and (not has_counters or _COUNTERS in joined):
                patches[line_no] = joined
                swallowed.update(range(line_no + 1, line_no + k + 1))
                warnings.append(f"{text.shown}: line {line_no}: iteration line wrapped over {k + 1} lines; joined")
                break
        if line_no not in patches:
            cut[line_no] = bool(re.search(r"loss scale:|grad norm:|number of skipped", texts.get(line_no, "")))
            last = line_no == int(iters["line"].max()) and not text.ends_with_newline  # type: ignore[arg-type]
            where = "last line" if last else f"line {line_no}"
            said = texts.get(line_no, "")
            if "|" in said and said[said.rfind("|") + 1:].strip():
                # the cut fell inside a field (the end of the file, or a paste cut there: "lm loss: 8." of a 13B
                # run's 8.1E+00 in FZJ-JSC/jubench-megatron-lm's README): its value may be cut too
                patches[line_no] = said[: said.rfind("|") + 1]
                warnings.append(f"{text.shown}: {where}: iteration line cut short{' by the end of the file' * last}; "
                                f"the field it cut ({said[said.rfind('|') + 1:].strip()[:40]!r}) and those after it "
                                "are missing")
                continue
            warnings.append(f"{text.shown}: {where}: iteration line cut short; fields after the cut are missing")
    cut_frame = pl.DataFrame(
        {"line": list(cut), "past": list(cut.values()), "cut_text": [texts.get(n) for n in cut]}, schema=no_cut.schema
    )
    if not patches:
        return iters, others, cut_frame
    fixed = _classify(
        pl.LazyFrame({"line": list(patches), "text": list(patches.values())}, schema=_LINES_SCHEMA),
        prefix,
    )
    new_iters = _split_rows(_line_rows(fixed, prefix, layout).collect())[0]
    drop = pl.col("line").is_in(list(patches) + sorted(swallowed))

    merged = pl.concat([iters.filter(~drop), new_iters], how="vertical_relaxed").sort("line", maintain_order=True)
    return merged, others.filter(~drop), cut_frame


def _join_wrapped(head: str, tail: str) -> str:
    """Two pieces of a hard-wrapped line, with the space the wrap took back where it split a field's label between
    two words ('| number of nan' + 'iterations:  0 |': a wrap that kept its space leaves it on one side).

    >>> _join_wrapped("| number of nan", "iterations:  0 |"), _join_wrapped("| lm lo", "ss: 2.3 |")
    ('| number of nan iterations:  0 |', '| lm loss: 2.3 |')
    """
    if head[-1:].isalnum() and tail[:1].isalnum():
        label, rest = head[head.rfind("|") + 1:].strip(), tail.split(":", 1)[0].strip()
        if f"{label} {rest}" in p.FIELD_NAMES and f"{label}{rest}" not in p.FIELD_NAMES:
            return f"{head} {tail}"
    return head + tail


# --- attempts ---------------------------------------------------------------------------------------------------
# Up to this many lines, event kinds are read with Python's ``re`` (each pattern compiled once per process); above it
# with Polars. Polars compiles a pattern each time it meets it unless its small cache of compiled patterns still holds
# it, and the ~60 event patterns cycle through that cache: about 70 ms a call however few the lines, where Python
# takes about 70 us a line (the same at about 1,000 lines). The two engines agree on the real fixtures' lines
# (tests/test_megatron_parser.py); they can differ at the edges of Unicode: Python's \s takes \x1c-\x1f, and \b next
# to combining marks.
PYTHON_MAX_LINES = 1_000
_EVENT_RX = [(name, re.compile(rx)) for name, rx in p.EVENT_PATTERNS]
_KIND_OF = {rx: name for name, rx in reversed(_EVENT_RX)}  # (a pattern listed twice: its first kind)
_ARGS_RX = (re.compile(p.ARGS_LINE), re.compile(p.ARGS_LONG_LINE))


def with_event_kinds(others: pl.DataFrame, *, in_python: bool | None = None) -> pl.DataFrame:
    """``kind`` (the first event pattern a line matches; null for other lines and the arguments block) and ``raw``
    (group 1 of the first of that kind's patterns the line matches, as printed). ``in_python``: read with Python's
    ``re`` (the default up to :data:`PYTHON_MAX_LINES` lines) or with Polars.

    >>> frame = pl.DataFrame({"line": [1, 2], "body": ["saving checkpoint at iteration 300 to /ck", "lr 0.1"],
    ...                       "in_args": False, "is_args_start": False, "is_args_end": False})
    >>> for in_python in (True, False):
    ...     print(with_event_kinds(frame, in_python=in_python).select("kind", "raw").rows())
    [('checkpoint_saving', '300'), (None, None)]
    [('checkpoint_saving', '300'), (None, None)]
    """
    if in_python is None:
        in_python = others.height <= PYTHON_MAX_LINES
    if in_python:
        return _kinds_in_python(others)
    kind: pl.Expr = pl.lit(None, dtype=pl.String)
    for name, rx in reversed(p.EVENT_PATTERNS):  # built inside out, so the first pattern wins
        kind = pl.when(pl.col("body").str.contains(rx)).then(pl.lit(name)).otherwise(kind)
    # an argument's line is not an event ("exit_signal_handler ... False"); any other line is, even inside a block
    # (one whose end line is missing runs to the end of the file)
    argument = pl.col("in_args") & (pl.col("body").str.contains(p.ARGS_LINE) | pl.col("body").str.contains(p.ARGS_LONG_LINE))
    plain = ~argument & ~pl.col("is_args_start") & ~pl.col("is_args_end")
    out = others.with_columns(kind=pl.when(plain).then(kind))
    # group 1 of the pattern that gave each line its kind, read on that kind's lines only
    parts = []
    for name in dict.fromkeys(n for n, rx in p.EVENT_PATTERNS if re.compile(rx).groups):
        mine = out.filter(pl.col("kind") == name)
        if mine.height:
            value: pl.Expr = pl.lit(None, dtype=pl.String)
            for rx in reversed([rx for n, rx in p.EVENT_PATTERNS if n == name]):
                got = pl.col("body").str.extract(rx, 1) if re.compile(rx).groups else pl.lit(None, dtype=pl.String)
                value = pl.when(pl.col("body").str.contains(rx)).then(got).otherwise(value)
            parts.append(mine.select("line", raw=value))
    raw = pl.concat(parts) if parts else pl.DataFrame(schema={"line": out.schema["line"], "raw": pl.String})
    return out.join(raw, on="line", how="left", maintain_order="left")


_USAGE = r"^\s*usage: (\S+)"
_ARGPARSE_ERROR = r"^\s*(\S+): error: "


def relaunched_usage(others: pl.DataFrame) -> pl.DataFrame:
    """argparse's ``usage: P ...`` on the line right after ``P: error: ...`` (the same program) is a new process of
    it: the one before exited (status 2) on its error. Those lines become :data:`parsers.schema.EV_RELAUNCH` (a usage
    printed anywhere else is no start: a helper's, mid-run).

    >>> frame = pl.DataFrame({"line": [1, 9, 10, 11], "kind": [None, "error", None, None], "body": [
    ...     "usage: train.py [-h]", "train.py: error: argument --fp16: bad", "usage: train.py [-h]", "usage: x.py"]})
    >>> relaunched_usage(frame)["kind"].to_list()
    [None, 'error', 'relaunch', None]
    """
    if "body" not in others.columns or not others.height:
        return others
    body = pl.col("body").fill_null("")
    before = pl.col("body").shift(1).fill_null("")
    relaunch = (pl.col("kind").is_null() & body.str.contains(_USAGE) & (pl.col("kind").shift(1) == s.EV_ERROR)
                & (pl.col("line").shift(1) == pl.col("line") - 1)
                & (before.str.extract(_ARGPARSE_ERROR, 1) == body.str.extract(_USAGE, 1))).fill_null(False)
    return others.with_columns(kind=pl.when(relaunch).then(pl.lit(s.EV_RELAUNCH)).otherwise("kind"))


def _kinds_in_python(others: pl.DataFrame) -> pl.DataFrame:
    """:func:`with_event_kinds` with Python's ``re``, line by line (for the few lines of a short log)."""
    kinds: list[str | None] = []
    raws: list[str | None] = []
    columns = ("body", "in_args", "is_args_start", "is_args_end")
    for body, in_args, start, end in zip(*(others[c].to_list() for c in columns), strict=True):
        kind = raw = None
        if body is not None and not start and not end and not (in_args and any(rx.search(body) for rx in _ARGS_RX)):
            # (the first pattern that matches is also the first of its kind's: its group 1 is the raw value)
            found = next((found for _, rx in _EVENT_RX if (found := rx.search(body))), None)
            if found is not None:
                kind = _KIND_OF[found.re]
                raw = found.group(1) if found.re.groups else None
        kinds.append(kind)
        raws.append(raw)
    return others.with_columns(kind=pl.Series(kinds, dtype=pl.String), raw=pl.Series(raws, dtype=pl.String))


def attempt_bounds(iters: pl.DataFrame, others: pl.DataFrame) -> pl.DataFrame:
    """Where each attempt (one launch of the program, or a stretch whose counter went back) begins: ``start`` line.

    See :func:`launch_starts` for the launches; within one, a counter that goes back starts another attempt (a
    relaunch whose start-up was not logged). A stretch with no content (nothing but lines that say nothing of a
    launch) joins the next attempt.
    """
    lines = iters["line"].cast(pl.Int64).to_numpy()
    steps = iters["step"].to_numpy()
    # the length an iteration line says it trains to ("iteration 2400/ 8247"): one launch trains to one, so a line
    # whose length differs from the line before's is another launch's (a 10-iteration benchmark, then a pasted line
    # of the real run), also where its counter went on
    totals = (iters["total"].cast(pl.Float64).fill_null(np.nan).to_numpy() if "total" in iters.columns
              else np.full(lines.size, np.nan))
    # only the lines that can start or end a launch (not overflows or checkpoint saves: many, and they change nothing)
    # (a console format's line printed once as each launch of its program begins is a process start, as an arguments
    # block is: nanochat's "Autodetected device type: cuda")
    deciding = list(s.STARTUP_KINDS | s.ENDING_KINDS | s.FATAL_KINDS
                    | {s.EV_TRACEBACK, s.EV_CHECKPOINT_LOAD, s.EV_PROCESS_START, s.EV_RELAUNCH, s.EV_TRAINING_LOOP})
    marks = others.filter(pl.col("is_args_start") | pl.col("kind").is_in(deciding)).select(
        pl.col("line").cast(pl.Int64), kind=pl.when("is_args_start").then(pl.lit(s.EV_PROCESS_START)).otherwise("kind")
    )
    marks = _new_trainings_only(marks, others)
    starts, content = launch_starts(lines, steps, marks["line"].to_numpy(), marks["kind"].to_list())
    process = np.searchsorted(starts, lines, side="right") - 1
    if lines.size < 2 or bool((np.diff(lines) >= 0).all()):
        # lines in order, so each launch's lines are one stretch: the counter goes back where a line's step is at
        # most the one before it in the same launch, and each such line begins an attempt (NumPy: no frame of
        # every line, nor a window over the launches)
        other_length = (totals[1:] != totals[:-1]) & ~np.isnan(totals[1:]) & ~np.isnan(totals[:-1])
        back = (process[1:] == process[:-1]) & ((steps[1:] <= steps[:-1]) | other_length)
        firsts = pl.DataFrame({"start": lines[1:][back], "content": True},
                              schema={"start": pl.Int64, "content": pl.Boolean})
    else:
        segments = (
            pl.DataFrame({"line": lines, "process": process, "step": iters["step"], "total": totals})
            .with_columns(back=((pl.col("step") <= pl.col("step").shift(1).over("process"))
                                | ((pl.col("total") != pl.col("total").shift(1).over("process"))
                                   & pl.col("total").is_not_nan() & pl.col("total").shift(1).over("process").is_not_nan())
                                ).fill_null(False))
            .with_columns(segment=pl.col("back").cast(pl.Int32).cum_sum().over("process"))
        )
        firsts = segments.filter(pl.col("segment") > 0).group_by("process", "segment").agg(
            start=pl.col("line").min(), content=pl.lit(True)
        ).select("start", "content")
    process_starts = pl.DataFrame({"start": starts, "content": content},
                                  schema={"start": pl.Int64, "content": pl.Boolean})
    bounds = pl.concat([process_starts, firsts], how="vertical_relaxed").sort("start")
    numbered = pl.when("content").then(pl.col("content").cast(pl.Int32).cum_sum())
    return bounds.with_columns(
        attempt=numbered.backward_fill().forward_fill().fill_null(1).cast(pl.Int32)
    ).select("start", "attempt")


_BAR_AT_ZERO = r"\|\s*0/\d+ \["  # a progress bar drawn at its start ("  0%|    | 0/132 [00:00<?, ?it/s]")


def _new_trainings_only(marks: pl.DataFrame, others: pl.DataFrame) -> pl.DataFrame:
    """The marks without the training-loop frames that show no new training: one counts only after a training's
    summary (training done) and a progress bar drawn at 0 since (a next trainer.train() began: Clemens66666/Trainer-
    New's 0/132). Another rank's copy of a crash, or a failure in the same training's teardown (on_train_end runs
    inside the loop too), is the ended training's.

    >>> marks = pl.DataFrame({"line": [5, 9, 20], "kind": ["training_done", "training_loop", "training_loop"]})
    >>> others = pl.DataFrame({"line": [5, 12], "kind": ["training_done", None], "bar": [None, "  0%| | 0/9 [00:00<?]"]})
    >>> _new_trainings_only(marks, others)["line"].to_list()
    [5, 20]
    """
    loops = marks.filter(pl.col("kind") == s.EV_TRAINING_LOOP)
    if not loops.height:
        return marks
    done = np.sort(others.filter(pl.col("kind") == s.EV_TRAINING_DONE)["line"].cast(pl.Int64).to_numpy())
    zero = (np.sort(others.filter(pl.col("bar").str.contains(_BAR_AT_ZERO))["line"].cast(pl.Int64).to_numpy())
            if "bar" in others.columns else np.zeros(0, dtype=np.int64))
    at = loops["line"].to_numpy()
    last_done = np.searchsorted(done, at, side="left") - 1  # the summary before each frame
    since = np.where(last_done >= 0, done[np.clip(last_done, 0, None)] if done.size else 0, np.iinfo(np.int64).max)
    bar_after = np.searchsorted(zero, since, side="right")  # the first 0-bar after that summary
    new = (last_done >= 0) & (bar_after < zero.size) & (zero[np.clip(bar_after, 0, max(zero.size - 1, 0))] < at
                                                         if zero.size else False)
    keep = set(at[new].tolist())
    return marks.filter((pl.col("kind") != s.EV_TRAINING_LOOP) | pl.col("line").is_in(list(keep)))


def launch_starts(
    lines: np.ndarray, steps: np.ndarray, mark_lines: np.ndarray, mark_kinds: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The lines where each launch of the program begins (the first is line 1), and whether each launch shows
    anything of itself (iterations, start-up lines or how it ended).

    ``lines``/``steps``: the iteration lines in order; ``mark_*``: the other lines that matter, in order, with
    their event kind (``process_start`` for an arguments block). A launch begins:

    * at an arguments block, unless the launch before has shown nothing but start-up lines (its own block comes
      after them: "using world size" is printed first);
    * at a start-up line once the launch before has logged iterations or ended;
    * at a checkpoint-load line after the launch before ended (the next launch, its start-up not shown);
    * at a relaunch line (argparse's usage right after its error: the process before exited);
    * at the first iteration line after the launch before ended: a planned exit, a kill, SIGTERM, a scheduler's
      cancel, Ctrl-C, "after training is done", or a fatal error. An error is fatal unless the iterations carry
      on right after it (the next iteration continues the counter within two log intervals) or, in a launch that
      shows its start-up and has not iterated yet, iterations follow it (a warning during start-up). In a log that
      begins without a start-up, an error before any iteration is fatal when a traceback or a CUDA / NCCL / memory
      / host error shows it.

    >>> import numpy as np
    >>> lines, steps = np.array([10, 11, 30]), np.array([100, 110, 120])
    >>> launch_starts(lines, steps, np.array([12]), ["exit"])[0].tolist()   # an exit, then iterations again
    [1, 30]
    >>> launch_starts(lines, steps, np.array([12]), ["error"])[0].tolist()  # a warning the run carried on after
    [1]
    """
    forward = np.diff(steps)[np.diff(steps) > 0] if steps.size > 1 else np.array([])
    usual = _quartile(forward) if forward.size else 1.0  # the log interval, whatever the gaps
    starts: list[int] = [1]
    content: list[bool] = []
    state = {"start": 1, "marked": False, "args": False, "ended": None, "traceback": None}

    def iterations_between(lo: int, hi: int) -> int:
        return int(np.searchsorted(lines, hi, side="left") - np.searchsorted(lines, lo, side="left"))

    def begin(line: int) -> None:
        content.append(bool(state["marked"] or state["ended"] is not None
                            or iterations_between(state["start"], line)))
        starts.append(line)
        state.update(start=line, marked=False, args=False, ended=None, traceback=None)

    def after_ending(before: int) -> None:  # the launch ended: its first iteration line after that begins another
        if state["ended"] is None:
            return
        nxt = int(np.searchsorted(lines, state["ended"], side="right"))
        if nxt < lines.size and lines[nxt] < before:
            begin(int(lines[nxt]))

    def fatal(line: int, kind: str) -> bool:
        at = int(np.searchsorted(lines, line, side="left"))  # the first iteration line after the error
        prev = at - 1 if at > 0 and lines[at - 1] >= state["start"] else None
        nxt = at if at < lines.size else None
        if prev is not None:
            before = steps[prev] - steps[prev - 1] if prev > 0 and lines[prev - 1] >= state["start"] else usual
            return nxt is None or not 0 < steps[nxt] - steps[prev] <= 2 * max(min(before, usual), 1)
        if state["marked"]:
            return nxt is None
        return state["traceback"] is not None or kind != s.EV_ERROR

    for line, kind in zip(mark_lines.tolist(), mark_kinds, strict=True):
        after_ending(line)
        if kind == s.EV_PROCESS_START:
            if state["args"] or state["ended"] is not None or iterations_between(state["start"], line):
                begin(line)
            state.update(args=True, marked=True)
        elif kind == s.EV_RELAUNCH:  # the process before exited on its error (argparse's): a new one begins
            state["ended"] = line - 1 if state["ended"] is None else state["ended"]
            begin(line)
            state["marked"] = True
        elif kind in s.STARTUP_KINDS:
            if state["ended"] is not None or iterations_between(state["start"], line):
                begin(line)
            state["marked"] = True
        elif kind == s.EV_CHECKPOINT_LOAD:
            # a checkpoint loaded after the launch ended is how the next launch starts (nanoGPT's "Resuming training
            # from out" after a traceback, its banner not in the log), not how the ended one began
            if state["ended"] is not None:
                begin(line)
                state["marked"] = True
        elif kind == s.EV_TRAINING_LOOP:
            # a traceback through a training loop after the launch's training ended: a next training in the same
            # program failed (a second trainer.train() whose first batch raised), not the ended one
            if state["ended"] is not None and state["ended"] < line:
                begin(line)
                state["marked"] = True
        elif kind == s.EV_TRACEBACK:
            state["traceback"] = line
        elif state["ended"] is None and (
            kind in s.ENDING_KINDS or (kind in s.FATAL_KINDS and fatal(line, kind))
        ):
            state["ended"] = line
    after_ending(int(lines[-1]) + 1 if lines.size else 0)
    content.append(bool(state["marked"] or state["ended"] is not None
                        or iterations_between(state["start"], int(lines[-1]) + 1 if lines.size else 0)))
    return np.array(starts, dtype=np.int64), np.array(content, dtype=bool)


def _quartile(values: np.ndarray) -> float:
    """The first quartile (as ``np.percentile(values, 25)``, linear), by partition: no sort, no slow first call."""
    at = 0.25 * (values.size - 1)
    lo = int(at)
    hi = min(lo + 1, values.size - 1)
    part = np.partition(values, [lo, hi])
    return float(part[lo] + (part[hi] - part[lo]) * (at - lo))


def with_attempt(frame: pl.DataFrame, bounds: pl.DataFrame) -> pl.DataFrame:
    if bounds["attempt"].n_unique() == 1:
        return frame.with_columns(attempt=pl.lit(bounds["attempt"][0], dtype=pl.Int32))
    at = bounds["start"].cast(pl.UInt32).search_sorted(frame["line"].cast(pl.UInt32), side="right")
    return frame.with_columns(attempt=bounds["attempt"].gather((at.cast(pl.Int64) - 1).clip(0, None)))


# --- iteration lines ----------------------------------------------------------------------------------------------
def _tags(layout: Layout | None, present: list[str]) -> dict[str, str]:
    """Each field's key as printed (``lm loss``) -> its metric; fields outside the usual layout by their metric name
    (``present``: the metrics that have rows)."""
    tags = {cell[1]: _metric_names([cell[1]])[cell[1]] for cell in (layout.heads if layout else ()) if cell}
    tags = {k: v for k, v in tags.items() if v}
    named = set(tags.values())
    return tags | {m: m for m in present if m not in named and m != s.LOG_INTERVAL}


def _metric_names(keys: list[str]) -> dict[str, str]:
    return {k: p.FIELD_NAMES.get(k) or _slug_text(k) for k in keys}


def _slug_text(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def _log_interval(iters: pl.DataFrame) -> pl.DataFrame:
    """The iteration delta between consecutive lines of an attempt (the printed loss is a mean over it)."""
    delta = pl.col("step") - pl.col("step").shift(1).over("attempt")
    out = iters.select("attempt", "step", "wall_time", value=delta.cast(pl.Float64))
    out = out.with_columns(pl.col("value").backward_fill().over("attempt"))
    return out.drop_nulls("value").with_columns(metric=pl.lit(s.LOG_INTERVAL))


def _last_step(frame: pl.DataFrame, iters: pl.DataFrame, strategy: str = "backward") -> pl.Series:
    """The step of the iteration line printed before (or after) each row of ``frame``, in the same attempt."""
    steps = iters.select("line", "attempt", found=pl.col("step")).sort("line")
    joined = frame.select("line", "attempt").with_row_index("_row").sort("line").join_asof(
        steps, on="line", by="attempt", strategy=strategy, check_sortedness=False  # type: ignore[arg-type]
    )
    return joined.sort("_row")["found"]


def _has_values(iters: pl.DataFrame, metric: str) -> bool:
    column = _VALUE + metric
    return column in iters.columns and iters[column].null_count() < iters.height


def _deepspeed_lr(others: pl.DataFrame) -> pl.DataFrame:
    """The LR of DeepSpeed's progress lines ("[Rank 0] step=524, skipped=0, lr=[5e-05, 5e-05], mom=[...]"), for a log
    that prints no other: the first param group's (the canonical LR), at DeepSpeed's own step, once a step."""
    groups = pl.col("body").str.extract_groups(p.DEEPSPEED_LR)
    return others.filter(pl.col("kind") == s.EV_SKIPPED_COUNT).select(
        "attempt", "wall_time", step=groups.struct.field("1").cast(pl.Int64, strict=False), metric=pl.lit(s.LR),
        value=groups.struct.field("2").cast(pl.Float64, strict=False),
    ).drop_nulls(["step", "value"]).unique(["attempt", "step"], keep="first", maintain_order=True)


def _validation_metrics(others: pl.DataFrame, iters: pl.DataFrame) -> pl.DataFrame:
    val = others.filter(pl.col("body").str.contains(" loss at ", literal=True)).with_columns(
        g=pl.col("body").str.extract_groups(p.VALIDATION)
    )
    val = val.filter(pl.col("g").struct.field("5").is_not_null())
    if val.height == 0:
        return pl.DataFrame()
    which = pl.coalesce(pl.col("g").struct.field("2"), pl.col("g").struct.field("3")).fill_null("")
    val = val.with_columns(
        step=pl.col("g").struct.field("1").cast(pl.Int64, strict=False).fill_null(_last_step(val, iters)),
        key=pl.col("g").struct.field("4"),
        test=which.str.contains(r"\btest\b"),  # a test set's loss is not a validation loss
    )
    names = {
        k: "val_loss" if k in ("lm loss", "lm-loss", "lm_loss") else f"val_{_slug_text(k)}"
        for k in val["key"].unique().to_list()
    }
    val_name = pl.col("key").replace_strict(names, return_dtype=pl.String)
    loss_name = pl.when("test").then(pl.lit("test_") + val_name.str.strip_prefix("val_")).otherwise(val_name)
    ppl_name = (pl.when(val_name == s.VAL_LOSS).then(pl.lit(s.VAL_PPL)).otherwise(val_name + "_ppl"))
    ppl_name = pl.when("test").then(pl.lit("test_") + ppl_name.str.strip_prefix("val_")).otherwise(ppl_name)
    losses = val.select(
        "attempt", "step", "wall_time", metric=loss_name,
        value=pl.col("g").struct.field("5").cast(pl.Float64, strict=False),
    )
    ppls = val.select(
        "attempt", "step", "wall_time", metric=ppl_name,
        value=pl.col("g").struct.field("6").cast(pl.Float64, strict=False),
    ).drop_nulls("value")
    return pl.concat([losses, ppls])


def _iteration_events(iters: pl.DataFrame, cut: pl.DataFrame, text: TextFile, prefix: str) -> pl.DataFrame:
    """Loss missing (NaN or a fully skipped interval), stale grad norms, and cut-short lines."""
    wanted = (s.LOSS, s.GRAD_NORM, s.LOSS_SCALE, s.SKIPPED_ITERATIONS)
    wide = iters.select(
        "line", "attempt", "step", "wall_time", "text",
        *[pl.col(_VALUE + m).alias(m) if _VALUE + m in iters.columns else pl.lit(None, pl.Float64).alias(m)
          for m in wanted],
    )
    if cut.height:
        wide = wide.join(cut, on="line", how="left", maintain_order="left").with_columns(
            text=s.coalesce_text("text", "cut_text"))
    else:  # the usual case: no join and no new text column, which would copy every row
        wide = wide.with_columns(past=pl.lit(None, dtype=pl.Boolean), cut_text=pl.lit(None, dtype=pl.String))
    wide = wide.with_columns(has_loss=pl.col(s.LOSS).is_not_null(), cut=pl.col("past").is_not_null())
    # a cut line still shows a missing loss when it was cut after the place where the loss is printed
    missing = wide.filter(~pl.col("has_loss") & (~pl.col("cut") | pl.col("past"))).select(
        "line", "attempt", "step", "wall_time", kind=pl.lit(s.EV_LOSS_MISSING), value=pl.col(s.SKIPPED_ITERATIONS),
    )
    prev = pl.col(s.GRAD_NORM).shift(1).over("attempt")
    skipping = (
        ~pl.col("has_loss")
        | (pl.col(s.LOSS_SCALE) < pl.col(s.LOSS_SCALE).shift(1).over("attempt"))
        | (pl.col(s.SKIPPED_ITERATIONS) > 0)
    ).fill_null(False)
    stale = wide.filter(
        (pl.col(s.GRAD_NORM) == prev) & (pl.col(s.GRAD_NORM) != 0) & skipping & ~pl.col("cut")
    ).select("line", "attempt", "step", "wall_time", kind=pl.lit(s.EV_STALE_GRAD_NORM), value=pl.col(s.GRAD_NORM))
    truncated = wide.filter("cut").select(
        "line", "attempt", "step", "wall_time", kind=pl.lit(s.EV_TRUNCATED), value=pl.lit(None, dtype=pl.Float64)
    )
    out = pl.concat([missing, stale, truncated])
    out = out.join(wide.select("line", "text"), on="line", how="left", maintain_order="left")
    unread = out.filter(pl.col("text").is_null())["line"].unique().to_list()  # lines that fit the layout
    if not unread:
        return out
    texts = _lines_at(text, prefix, unread).select("line", read=pl.col("text"))
    out = out.join(texts, on="line", how="left", maintain_order="left")
    return out.with_columns(s.coalesce_text("text", "read")).drop("read")


# --- other lines --------------------------------------------------------------------------------------------------
def kept_bar(text: pl.Expr) -> pl.Expr:
    """Whether a line is a progress bar worth keeping (:data:`parsers.megatron_patterns.PROGRESS_BAR`): of a run of
    lines that are bars one after another (tqdm redrawing in place), only the first and the last; the lines of the
    frame are the file's lines in order (a block of them)."""
    bar = text.str.contains(p.PROGRESS_BAR_ANYWHERE).fill_null(False)
    return bar & ~(bar.shift(1).fill_null(False) & bar.shift(-1).fill_null(False))


INNER_BAR = r"\]\x1b\[A"  # tqdm moves the cursor back up after a bar drawn under another


def progress_events(others: pl.DataFrame, outer_only: bool = False) -> pl.DataFrame:
    """A :data:`parsers.schema.EV_PROGRESS` event for each kept line that holds a progress bar (alone, or glued in
    front of another line: an error printed over the bar), from its last bar: step = its count, value = its total.
    ``outer_only``: not the bars tqdm draws under another, the cursor moved back up after them ("238/984
    [01:09<03:34,  3.47it/s]\x1b[A": an evaluation's under the training's), which count another loop."""
    if not others.height:
        return pl.DataFrame()
    last = pl.col("body").str.extract_all(p.PROGRESS_BAR + r"[^\]]*\]?").list.last()
    # (a console reader may have read the bar before it cut a long line to its event: its "bar" column)
    attempt = pl.col("attempt") if "attempt" in others.columns else pl.lit(None, dtype=pl.Int32)
    bars = others.select("line", attempt.alias("attempt"), "wall_time",
                         bar=pl.coalesce("bar", last) if "bar" in others.columns else last)
    if outer_only and "text" in others.columns:  # (tqdm moves the cursor back up after an inner bar)
        bars = bars.filter(~others["text"].fill_null("").str.contains(INNER_BAR))
    bars = bars.filter(pl.col("bar").is_not_null()).with_columns(
        step=pl.col("bar").str.extract(p.PROGRESS_BAR, 1).cast(pl.Int64, strict=False),
        value=pl.col("bar").str.extract(p.PROGRESS_BAR, 2).cast(pl.Float64, strict=False))
    return bars.filter(pl.col("step").is_not_null() & (pl.col("step") <= pl.col("value"))).select(
        "line", "attempt", "step", kind=pl.lit(s.EV_PROGRESS), value="value", wall_time="wall_time",
        text=pl.col("bar").str.extract(r"(\d{1,3}%\|.*)$", 1))


_CAUGHT_WITHIN = 3  # lines from an out-of-memory error within which the program's word that it caught one counts


def line_events(others: pl.DataFrame, iters: pl.DataFrame, own_steps: bool = True,
                placed: pl.DataFrame | None = None, bar_counts: bool = False) -> pl.DataFrame:
    """The events of the lines that are not metrics lines, each at its step. ``own_steps``: the metrics lines print
    their step (a console whose lines are counted does not: a step printed on an event line, such as DeepSpeed's
    ``step=N``, is on another axis, and the event gets the counted step before it). ``placed``: every metrics line
    with its step (an evaluation printed at a later step than the last iteration line: an event after it is after
    that step), where not only ``iters`` place an event. ``bar_counts``: the steps are the counts of the progress bar
    (the Trainer's dicts): an overflow printed after a bar is in the step after its count (Apex's "Gradient
    overflow" glued to "  0%|  | 4/1000 [...]": step 5)."""
    candidates = others.filter(pl.col("kind").is_not_null())
    if candidates.height == 0:
        return pl.DataFrame()
    ev = candidates.with_columns(
        value=pl.col("raw").cast(pl.Float64, strict=False)
        * pl.when((pl.col("kind") == s.EV_PARAMETER_COUNT) & pl.col("body").str.contains("|".join(p.BILLIONS)))
        .then(1e9)
        .when((pl.col("kind") == s.EV_PARAMETER_COUNT) & pl.col("body").str.contains(p.MILLIONS))
        .then(1e6)
        .otherwise(1.0)
    )
    # the step of an event: the iteration it names, else the last iteration printed before it in the attempt
    # (an overflow belongs to the iteration being computed: the next one printed)
    last, after = _last_step(ev, iters), _last_step(ev, iters, "forward")
    if placed is not None and placed.height:
        # a metrics line at a later step (an evaluation) places an event printed after it when no iteration line
        # follows (the stop after the last evaluation), and a save (nanoGPT saves after "step 3000: ... val loss",
        # before "iter 3000"); an error there is still before the iteration line that follows it
        later = pl.DataFrame({"a": last, "b": _last_step(ev, placed)}).select(pl.max_horizontal("a", "b")).to_series()
        saves = ev["kind"].is_in([s.EV_CHECKPOINT_SAVE, s.EV_CHECKPOINT_SAVING])
        last = pl.select(pl.when(after.is_null() | saves).then(later).otherwise(last)).to_series()
    bar = (pl.col("bar").str.extract(p.PROGRESS_BAR, 1).cast(pl.Int64, strict=False) if "bar" in ev.columns
           else pl.lit(None, dtype=pl.Int64))
    ev = ev.with_columns(last=last, next=after, _bar=bar).with_columns(
        step=pl.when(pl.col("kind").is_in(list(p.STEP_VALUED)) & pl.col("value").is_not_null())
        .then(pl.coalesce(pl.col("value").cast(pl.Int64, strict=False), "last"))  # an iteration beyond int64: unknown
        .when((pl.col("kind") == s.EV_OVERFLOW) & pl.lit(bar_counts) & pl.col("_bar").is_not_null())
        .then(pl.col("_bar") + 1)
        .when(pl.col("kind") == s.EV_OVERFLOW)
        .then(pl.coalesce("next", pl.col("last") + 1))
        .when((pl.col("kind") == s.EV_SKIPPED_COUNT) & own_steps)  # DeepSpeed's own step (it counts skipped ones)
        .then(pl.coalesce(pl.col("body").str.extract(r"\bstep=(\d+), skipped=", 1).cast(pl.Int64, strict=False),
                          "last"))
        .otherwise(pl.col("last"))
    )
    # an out-of-memory report next to the program's word that it caught one (a few lines either side: stderr and
    # stdout interleave) was survived; never a raised exception ("RuntimeError: CUDA out of memory": another rank's,
    # or the one that ended the run)
    caught = [(pl.col("kind").shift(d) == s.EV_OOM_RECOVERED) & ((pl.col("line").shift(d) - pl.col("line")).abs()
                                                                 <= _CAUGHT_WITHIN) for d in (-1, 1)]
    raised = pl.col("text").fill_null("").str.contains(r"\b[A-Za-z_]\w*(?:Error|Exception):")
    ev = ev.sort("line").with_columns(kind=pl.when((pl.col("kind") == s.EV_OOM) & ~raised
                                                   & pl.any_horizontal(caught).fill_null(False))
                                      .then(pl.lit(s.EV_OOM_RECOVERED)).otherwise("kind"))
    # a file that failed in the shared memory: the DataLoader workers' /dev/shm, not a disk
    in_shm = (pl.col("kind") == s.EV_STORAGE_ERROR) & pl.col("body").str.contains(p.SHARED_MEMORY)
    ev = ev.with_columns(kind=pl.when(in_shm).then(pl.lit(s.EV_SHARED_MEMORY_ERROR)).otherwise("kind"))
    # an overflow that did not lower the scale (at its minimum, or held by DeepSpeed's hysteresis, which may say so
    # instead of printing the scale it set: no value then)
    tried, to = (pl.col("body").str.extract(p.ATTEMPTED_SCALE, n).cast(pl.Float64, strict=False) for n in (1, 2))
    kept = (tried == to).fill_null(False) | pl.col("body").str.contains(p.HYSTERESIS_HELD)
    ev = ev.with_columns(kind=pl.when((pl.col("kind") == s.EV_OVERFLOW) & kept)
                         .then(pl.lit(s.EV_OVERFLOW_SCALE_KEPT)).otherwise("kind"))
    # a traceback logged as one list is quoted by the error it ends with
    listed = pl.coalesce(pl.col("body").str.extract(p.LISTED_ERROR, 1), pl.col("body").str.extract(p.LISTED_ERROR, 2))
    ev = ev.with_columns(text=pl.when(pl.col("kind") == s.EV_ERROR).then(pl.coalesce(listed, "text")).otherwise("text"))
    # a sweep's job is its number (the value) and its overrides as printed ("hidden_dim=1028")
    ev = ev.with_columns(text=pl.when(pl.col("kind") == s.EV_SWEEP_JOB)
                         .then(pl.coalesce(pl.col("body").str.extract(p.SWEEP_JOB, 2), "text")).otherwise("text"))
    # a line that is also an event of a second kind, beside its own: one that says the optimizer state was not
    # loaded; a CUDA or NCCL error that names the hardware (ECC, Xid); an error that says a connection could not be
    # made (a wrong address, or the network); an out-of-memory NCCL printed
    text = pl.col("text").fill_null("")
    also = [ev.filter(when).with_columns(kind=pl.lit(kind), value=pl.lit(None, pl.Float64)) for kind, when in (
        (s.EV_OPTIMIZER_NOT_LOADED, text.str.contains(p.NO_OPTIMIZER_STATE)),
        (s.EV_HARDWARE_NAMED, pl.col("kind").is_in([s.EV_CUDA_ERROR, s.EV_NCCL_ERROR])
         & text.str.contains(p.NAMES_HARDWARE)),
        (s.EV_UNREACHABLE, pl.col("kind").is_in(list(s.ERROR_KINDS)) & text.str.contains(p.UNREACHABLE)),
        (s.EV_NETWORK_DROPPED, (pl.col("kind") == s.EV_ERROR) & text.str.contains(p.NETWORK_DROPPED)),
        (s.EV_NETWORK_ERROR, (pl.col("kind") == s.EV_ERROR) & text.str.contains(p.NETWORK_ERROR)),
        (s.EV_NCCL_OUT_OF_MEMORY, (pl.col("kind") == s.EV_OOM) & text.str.contains(p.NCCL_NAMED)))]
    # an fp16 overflow line that names its iteration ("Grad overflow on iteration: 8"): that iteration, as a second event
    named = ev.filter(pl.col("kind").is_in(list(s.OVERFLOW_KINDS)) & text.str.contains(p.OVERFLOW_ITERATION)).with_columns(
        kind=pl.lit(s.EV_OVERFLOW_ITERATION),
        value=pl.col("text").str.extract(p.OVERFLOW_ITERATION, 1).cast(pl.Float64, strict=False))
    ev = pl.concat([ev, *(a for a in (*also, named) if a.height)], how="vertical_relaxed")
    return ev.select("line", "attempt", "step", "kind", "value", "wall_time", "text").pipe(_shard_totals)


def _shard_totals(ev: pl.DataFrame) -> pl.DataFrame:
    """Per-rank parameter counts become one summed count per attempt (one line per model-parallel rank)."""
    is_shard = (
        (pl.col("kind") == s.EV_PARAMETER_COUNT)
        & pl.col("text").str.contains("model parallel rank")
        & ~pl.col("text").str.contains("Billion")  # DeepSpeedExamples printed the whole model's size per rank
    )
    shards = ev.filter(is_shard)
    if shards.height == 0:
        return ev
    # ranks' output interleaves: one line may hold several reports ("...rank (1, 40): 805433344 > number of ...")
    shards = (
        shards.with_columns(report=pl.col("text").str.extract_all(p.RANK_COUNT)).explode("report")
        .filter(pl.col("report").is_not_null())
        .with_columns(rank=pl.col("report").str.extract(r"rank (\([\d, ]+\)|\d+)", 1),
                      value=pl.col("report").str.extract(r"(\d+)$", 1).cast(pl.Float64, strict=False))
        .drop("report")
    )
    totals = (
        shards.unique(["attempt", "rank"], keep="first")
        .group_by("attempt")
        .agg(
            pl.col("line").min(), pl.col("step").first(), pl.col("wall_time").first(),
            pl.col("value").sum(), pl.len().alias("n"),
        )
        .with_columns(
            kind=pl.lit(s.EV_PARAMETER_COUNT_SUM),
            text=s.format_text("sum of the parameter counts of {} model-parallel ranks", "n"),
        )
    )
    ranks = totals.with_columns(kind=pl.lit(s.EV_PARAMETER_COUNT_RANKS), value=pl.col("n").cast(pl.Float64))
    kept = ev.with_columns(kind=pl.when(is_shard).then(pl.lit(s.EV_PARAMETER_COUNT_SHARD)).otherwise("kind"))
    return pl.concat([kept, totals.select(kept.columns), ranks.select(kept.columns)], how="vertical_relaxed")


def _process_starts(others: pl.DataFrame) -> pl.DataFrame:
    return others.filter("is_args_start").select(
        "line", "attempt", "wall_time", "text", kind=pl.lit(s.EV_PROCESS_START),
        step=pl.lit(None, dtype=pl.Int64), value=pl.lit(None, dtype=pl.Float64),
    )


# --- arguments ----------------------------------------------------------------------------------------------------
def typed_value(text: str) -> object:
    """The Python value of an argument as Megatron printed it (``str(value)``); unknown text stays a string."""
    if text in ("None", "True", "False") or text[:1] in "-+.0123456789[({'\"":
        try:
            return ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # TypeError: {[1]: 2}
            return text
    return text


def _typed_json(text: str) -> str:
    """An argument's typed value as JSON; its text when the value has no JSON form (``{(1, 2): 3}``)."""
    try:
        return json.dumps(typed_value(text), default=str)
    except (TypeError, ValueError):
        return json.dumps(text)


_ANSI = re.compile(p.ANSI)
# where text another process printed into the line begins: DeepSpeed's op report ("[NO] ....... [OKAY]"), its dotted
# leaders, its warnings, the install paths and versions of its environment report ("['/usr/lib/python3/torch']")
_GLUED = re.compile(r"\s*(?:\.{3,}|\[(?:NO|YES|OKAY|WARNING|FAIL|FAILED|ERROR)\]).*$|(?<=\S)\['/.*$"
                    r"|(?<=[A-Za-z])\d+\.\d+(?:\.\d+)?\+(?:cu|rocm|cpu)\w*$")  # a torch version: 2.9.1+cu128
_LITERAL = re.compile(r"None|True|False|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def argument_value(text: str | None) -> str | None:
    """An argument's value as printed, without what other processes' output glued onto it; None when nothing of
    the value is left (it was printed on another line, or not at all).

    >>> argument_value("1.0\x1b[93m[NO]\x1b[0m"), argument_value("1...................."), argument_value("False")
    ('1.0', '1', 'False')
    >>> argument_value("Falsefused_adam"), argument_value("0.1torch install path"), argument_value("7b_ckpt")
    ('False', '0.1', '7b_ckpt')
    >>> argument_value("0['/home/sd/.local/lib/python3.10/site-packages/torch']"), argument_value("['/data/a']")
    ('0', "['/data/a']")
    >>> argument_value("[NO] ....... [OKAY]") is None, argument_value("none2.9.1+cu128")
    (True, 'none')
    """
    if text is None:
        return None
    value = _GLUED.sub("", _ANSI.sub("", text)).strip()
    literal = _LITERAL.match(value)
    if literal and literal.end() < len(value):
        rest = value[literal.end():]
        # a literal run into a word: None/True/False never continue; a number only into words with a space between
        if rest[0].isalpha() and (literal.group()[0].isalpha() or " " in rest):
            value = literal.group()
    return value or None


def _planned_steps(others: pl.DataFrame) -> pl.DataFrame:
    """Per attempt, the last step a script's header plans on DeepSpeed's step axis (``train_iters``), with what it is
    from: its "Total optimization steps = N" times its "Gradient Accumulation steps = g" are batches, of which
    DeepSpeed's step takes the ``gradient_accumulation_steps`` of its config (the Trainer sets both alike: N; a script
    whose own accumulation is not DeepSpeed's plans N * g // that). Empty without all three."""
    found = others.select("attempt", **{name: pl.col("body").str.extract(rx, 1).cast(pl.Int64, strict=False)
                                        for name, rx in (("total", p.PLANNED_STEPS), ("script", p.SCRIPT_ACCUMULATION),
                                                         ("deepspeed", p.DEEPSPEED_ACCUMULATION))})
    per = found.group_by("attempt", maintain_order=True).agg(pl.all().drop_nulls().first())
    return per.drop_nulls().filter(pl.col("deepspeed") > 0).select(
        "attempt", steps=pl.col("total") * pl.col("script") // pl.col("deepspeed"), total="total", script="script",
        deepspeed="deepspeed")


def _configs(others: pl.DataFrame, iters: pl.DataFrame, planned: pl.DataFrame) -> pl.DataFrame:
    body = pl.col("body").str.replace_all(p.ANSI, "")
    kv = others.filter("in_args").select(
        "attempt", g=body.str.extract_groups(p.ARGS_LINE), long=body.str.extract_groups(p.ARGS_LONG_LINE)
    ).select(
        "attempt",
        key=pl.coalesce(pl.col("g").struct.field("1"), pl.col("long").struct.field("1")),
        value=pl.when(pl.col("g").struct.field("1").is_not_null())
        .then(pl.col("g").struct.field("2")).otherwise(pl.col("long").struct.field("2")),
    ).drop_nulls("key")
    # GPT-NeoX's "updated"/"default" tag is no part of the value, also where no dots part them
    neox = pl.col("value").str.contains(p.NEOX_DOTTED_TAG).any().over("attempt")
    kv = kv.with_columns(value=pl.when(neox).then(pl.col("value").str.replace(p.NEOX_ARG_TAG, ""))
                         .otherwise(pl.col("value")),
                         # ... and its "warmup" is the fraction of lr_decay_iters Megatron calls lr_warmup_fraction
                         key=pl.when(neox & (pl.col("key") == "warmup")).then(pl.lit("lr_warmup_fraction"))
                         .otherwise(pl.col("key")))
    values = [argument_value(v) for v in kv["value"].to_list()]
    kv = kv.with_columns(value=pl.Series(values, dtype=pl.String)).drop_nulls("value")
    kv = kv.unique(["attempt", "key"], keep="first", maintain_order=True)
    # the iteration line states the target length; keep it when the arguments do not
    totals = iters.group_by("attempt", maintain_order=True).agg(pl.col("total").last()).select(
        "attempt", key=pl.lit("train_iters"), value=pl.col("total").cast(pl.String)
    ).drop_nulls("value")  # (a total beyond int64 was not read)
    known = kv.filter((pl.col("key") == "train_iters") & (pl.col("value") != "None")).select("attempt")
    # else the steps a script's header plans (see :func:`_planned_steps`)
    totals = pl.concat([totals, planned.select("attempt", key=pl.lit("train_iters"),
                                               value=pl.col("steps").cast(pl.String))], how="vertical_relaxed")
    totals = totals.join(known, on="attempt", how="anti").unique("attempt", keep="first", maintain_order=True)
    kv = pl.concat([kv.filter(~((pl.col("key") == "train_iters") & (pl.col("value") == "None"))), totals])
    typed = [_typed_json(v) for v in kv["value"].to_list()]
    return kv.with_columns(typed=pl.Series(typed, dtype=pl.String))
