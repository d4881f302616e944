"""Plain step tables: the CSV / TSV or JSON-lines files custom training loops write themselves (``csv.writer`` with a
``step,loss,lr,grad_norm`` header, ``json.dumps({"step": 100, "loss": 2.31, "lr": 3e-4})`` a line; ``train_log.csv``,
``log.csv``, ``metrics.jsonl``, ``history.jsonl``), appended to across restarts.

A file is one when its header (CSV / TSV) or its first records' keys (JSON lines) hold a step column (``step``,
``global_step``, ``iter``, ``iteration``, ``Step``, ``steps``, ``train/global_step``, ...; the most specific one is the
axis, another one is not read) and at least one column whose canonical name (:func:`parsers.metric_names.canonical`)
is a training metric the detectors use (loss, lr, grad norm, loss scale, val loss, val ppl). A table with no such
metric is not one (the registry's one-line reason says what it looks like).

**An epoch-only table** (``Epoch,Train Loss,Validation Loss``, Keras's ``CSVLogger``): read with **the epochs as its
steps**, as the Keras console reader does, and said in a warning; an epoch column holding fractions (0.25, 0.5) is
no axis (the table is not read).

The rows go through the W&B history machinery (:func:`parsers.wandb_history.wide_to_long`,
:func:`~parsers.wandb_history.history_log`): a step that goes back starts a new attempt, and so do a step logged again
with the training metrics the row before it at that step logged (a relaunch that logged that step again; an
evaluation's row at a training row's step logs other keys, an LR beside them at most; where a fifth of the rows or
more do so, they are several rows a step, said, not relaunches) and the header written again (a relaunch appending to
the file). A step column that counts again in each epoch (``epoch,step,loss``; ``epoch,batch,loss``) gives derived
steps, said; a negative step (``-1`` at an epoch's end) is not read. Wall time: a ``timestamp`` / ``time`` /
``datetime`` column of clock times (ISO text, Unix seconds or milliseconds); an elapsed-time column (``elapsed_min``,
``runtime``) counts from a launch, not the clock: it is read as a scalar under its own name, not as wall time (that
would print 1970 dates), and where it goes back the program was relaunched (said), if it rises on most rows (else it
is a duration per interval).

What is read as what: canonical names where :func:`~parsers.metric_names.canonical` knows the column (the chronicle
says which column a metric came from), else the column's own name (listed among the other scalars); a ``val_loss``
beside a policy loss is the value head's (``value_loss``); in a file named for an evaluation (``eval_loss.csv``) the
loss is the validation loss. Columns of text (``phase``, ``split``), of JSON lists or objects, empty ones and a second
step count are said to be not read.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/step_table/akawslearn-ai+slm_training__metrics.jsonl")
>>> log = read(path, ReadContext("metrics.jsonl", "slm", head=path.read_bytes()[:65536]))[0].log
>>> log.n_attempts, log.metrics.filter(metric="loss", attempt=3).select("step", "value").row(0)
(5, (20, 8.552507877349854))
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.config_names import normal_name
from parsers.console.engine import UNREAD_FIELDS_NOTE
from parsers.metric_names import VALIDATION_FOLDERS, canonical
from parsers.reader import NotThisFormat, Piece, ReadContext, head_of
from parsers.textfile import CUT_LAST_ROW, InputError, ends_its_last_line, json_value
from parsers.wandb_history import (
    HISTORY_META,
    empty_cells_note,
    flatten,
    history_log,
    number,
    read_history_file,
    runs_of,
    wide_to_long,
)

FORMAT = "step-table"

# step columns, the most specific first (a per-epoch "step" gives way to "global_step"); names compared lower-cased,
# with "-" and " " as "_"
STEP_COLUMNS: tuple[str, ...] = (
    "trainer/global_step", "train/global_step", "global_step", "globalstep", "total_step", "train/step", "step",
    "steps", "iter", "iters", "iteration", "iterations", "train/iter", "update", "updates",
)
EPOCH_COLUMNS: tuple[str, ...] = ("epoch", "epochs", "train/epoch")
# counters of the batches within an epoch, beside an epoch-only axis
WITHIN_EPOCH: tuple[str, ...] = ("batch", "batch_idx", "batch_id", "batch_num", "step_in_epoch", "epoch_step",
                                 "iter_in_epoch", "local_step", "minibatch", "mini_batch")
# rows that log their step again with the same metrics, beyond which they are several rows a step, not relaunches
_MOST_RELAUNCHES = 0.2
# columns that may hold clock times (checked by their values: ISO text, Unix seconds or milliseconds)
TIME_COLUMNS: tuple[str, ...] = ("timestamp", "time_stamp", "wall_time", "walltime", "datetime", "date_time", "time",
                                 "created_at", "logged_at", "ts")
# columns of the time since a launch (cumulative: one that goes back is a relaunch's)
ELAPSED_COLUMNS: tuple[str, ...] = ("elapsed", "elapsed_s", "elapsed_sec", "elapsed_secs", "elapsed_seconds",
                                    "elapsed_min", "elapsed_mins", "elapsed_minutes", "elapsed_h", "elapsed_hours",
                                    "elapsed_time", "time_elapsed", "runtime", "wall_clock", "total_time")
# the canonical metrics whose column makes a table a training log
TRAINING: frozenset[str] = frozenset({s.LOSS, s.GRAD_NORM, s.LR, s.LOSS_SCALE, s.VAL_LOSS, s.VAL_PPL})
# a policy loss beside a "val_loss": the value head's loss (AlphaZero, actor-critic), not a validation loss
_POLICY = frozenset({"pol_loss", "policy_loss", "pi_loss", "loss_policy", "loss_pi", "actor_loss"})
_VALUE = frozenset({"val_loss", "value_loss", "v_loss", "loss_value", "loss_v"})
_UNIX_S = (1e9, 1e10)    # Unix seconds: 2001-09-09 .. 2286
_UNIX_MS = (1e12, 1e13)


def _first(columns: list[str], names: tuple[str, ...]) -> str | None:
    """The column among ``columns`` whose name comes first in ``names``."""
    found = {normal_name(c): c for c in reversed(columns)}
    return next((found[n] for n in names if n in found), None)


def _value_head(columns: list[str]) -> list[str]:
    """The ``val_loss`` columns that are a value head's loss (a policy loss is logged beside them)."""
    normed = {normal_name(c) for c in columns}
    return [c for c in columns if normal_name(c) in _VALUE] if normed & _POLICY else []


def _trained(columns: list[str]) -> list[str]:
    """The columns whose canonical name is a training metric the detectors use."""
    heads = set(_value_head(columns))
    return [c for c in columns if c not in heads and canonical(c)[0] in TRAINING]


def _layout(columns: list[str]) -> str | None:
    """The axis column of a step table with these columns, or None when it is not one."""
    axis = _first(columns, STEP_COLUMNS) or _first(columns, EPOCH_COLUMNS)
    return axis if axis is not None and _trained([c for c in columns if c != axis]) else None


def _is_json(text: str) -> bool:
    return text.lstrip().startswith("{")


def _head_columns(head: bytes) -> tuple[list[str], bool, str, list[dict[str, object]]]:
    """The column names the head shows, whether it is JSON lines, its CSV separator, and its first records."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    records: list[dict[str, object]] = []
    if _is_json(text):
        for line in text.splitlines()[:20]:  # (a config record may come first)
            try:
                record = json_value(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(flatten(record))
        return list(dict.fromkeys(k for r in records for k in r)), True, ",", records
    first = text.split("\n", 1)[0].rstrip("\r")
    separator = "\t" if "\t" in first else ","
    try:
        lines = text.splitlines()[:21]
        rows = list(csv.reader(io.StringIO("\n".join(lines[:-1] if len(lines) > 2 else lines)), delimiter=separator))
    except csv.Error:
        return [], False, separator, []
    header = rows[0] if rows else []
    # column names, not a line of log text that has commas
    # (pandas' to_csv writes its index under an empty name first)
    named = len(header) > 1 and all(re.fullmatch(r"[\w .:/()%\[\]@#+-]{1,80}", c.strip()) or (n == 0 and not c)
                                    for n, c in enumerate(header))
    records = [dict(zip(header, row, strict=False)) for row in rows[1:]]
    return (header if named else []), False, separator, records


def _stepped(records: list[dict[str, object]], axis: str) -> bool:
    """Whether the axis values of the first records are whole numbers (an epoch of 0.25 is no axis)."""
    values = [r.get(axis) for r in records if r.get(axis) not in (None, "")]
    try:
        return all(float(v).is_integer() for v in values if not isinstance(v, bool))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def sniff(head: bytes, name: str) -> bool:
    """A CSV / TSV whose header, or JSON lines whose first records, hold a step (or epoch) column of whole numbers and
    a training metric the detectors use (``step,loss,lr``; ``{"step": 100, "loss": 2.31}``)."""
    if b"\x00" in head[:8192]:
        return False
    columns, lines, _, records = _head_columns(head)
    if lines and len(records) < 2 and Path(name).suffix.lower() == ".json":
        return False  # one JSON object (args.json: {"lr": 0.1, "epochs": 3}) is settings, not rows of steps
    axis = _layout(columns)
    return axis is not None and _stepped(records, axis)


def read(path: Path, context: ReadContext) -> list[Piece]:
    shown = context.shown
    head = context.head or head_of(path)
    _, lines, separator, _ = _head_columns(head)
    try:
        wide = read_history_file(path, shown, context.warnings, json_lines=lines, separator=separator)
    except InputError as exc:
        raise NotThisFormat(str(exc)) from None
    if _layout([c for c in wide.columns if c not in HISTORY_META]) is not None and (runs := runs_of(wide)) is not None:
        # several runs' rows in one table, told apart by a run column (a sweep's results concatenated): a run each
        column, parts = runs
        context.warnings.append(f"{shown}: {len(parts)} runs, told apart by its {column} column: each read as a run "
                                "of its own")
        return [_table(part, path, context, lines, label) for label, part in parts.items()]
    return [_table(wide, path, context, lines)]


def _table(wide: pl.DataFrame, path: Path, context: ReadContext, lines: bool, run: str | None = None) -> Piece:
    """The piece of one run's table (``run``: its label where the file holds several runs)."""
    shown = context.shown
    notes: list[str] = []
    columns = [c for c in wide.columns if c not in HISTORY_META]
    axis = _layout(columns)
    if axis is None:
        raise NotThisFormat(f"{shown}: no step column and training metric in the table")
    if not lines and wide.height and not ends_its_last_line(path):
        # a table still being written, or copied cut: its last line may end inside a value ("2,2." of "2,2.1456",
        # read as 2.0); W&B's own exports end without a line end, but they are not step tables
        wide = wide.slice(0, wide.height - 1)
        notes.append(CUT_LAST_ROW)
    if wide.height == 0:
        raise NotThisFormat(f"{shown}: a step table's header with no rows", empty=True)
    step = _numbers(wide, axis)
    # the header written again by a relaunch that opened the file to append (its rows are no values)
    headers = wide.select(pl.all_horizontal([pl.col(c).cast(pl.String) == c for c in columns]).fill_null(False)
                          .alias("header")).to_series() if not lines else pl.Series("header", [False] * wide.height)
    if repeats := int(headers.sum()):
        at = [n + 2 for n in headers.arg_true().to_list()]
        notes.append(f"its header again at line{'s' if repeats != 1 else ''} {', '.join(map(str, at[:5]))}"
                     f"{', ...' if repeats > 5 else ''}: a relaunch wrote it; a new attempt starts after each")
    epochs = normal_name(axis) in EPOCH_COLUMNS
    fractions = (step.drop_nulls() % 1 != 0).sum()
    if fractions:
        raise NotThisFormat(f"{shown}: its {'epoch' if epochs else 'step'} column {axis} holds fractions "
                            f"({fractions} rows): no step axis")
    if negative := int((step < 0).sum()):  # (sentence-transformers writes -1 at an epoch's end)
        step = pl.Series(step.name, step).set(step < 0, None)  # type: ignore[arg-type]
        notes.append(f"{negative} row{'s' if negative != 1 else ''} whose {axis} is negative (-1: an epoch's end?): "
                     "not read")
    step, inner = _per_epoch(wide, axis, columns, step, notes)
    if epochs and inner is None:
        notes.append(f"it has no step column: the steps here are its {axis} column's epochs (each row one epoch's "
                     "values, as the program logged them)")
    if unstepped := int(step.is_null().sum()) - negative - repeats:
        notes.append(f"{unstepped} row{'s' if unstepped != 1 else ''} without a {axis} value: not read")
    if inner is not None and epochs:  # (the epoch is in the steps; the counter too)
        columns = [c for c in columns if c != inner]
    elif inner is not None:
        axis = inner
    others = [c for c in columns if c != axis and normal_name(c) in STEP_COLUMNS]
    if others:
        notes.append(f"{', '.join(others)} (another step count beside {axis}): {UNREAD_FIELDS_NOTE}")
    clock, wall = _wall_time(wide, [c for c in columns if c not in others and c != axis], notes)
    keys = [c for c in columns if c not in {axis, clock, *others}]
    texts = _text_columns(wide.filter(~headers) if repeats else wide, keys)
    if blank := [c for c in keys if wide[c].null_count() == wide.height]:  # (JSON lists and objects are no cells)
        what = "lists or objects, no number" if lines else "empty in every row"
        notes.append(f"{_listed(blank)}: {what}: {UNREAD_FIELDS_NOTE}")
    if texts:
        said = "; ".join(f"{c} ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''})" for c, v in texts.items())
        notes.append(f"column{'s' if len(texts) != 1 else ''} holding text, {said}: {UNREAD_FIELDS_NOTE}")
    # ("val_loss" is the validation loss's canonical name too: the value head's is read as "value_loss")
    heads = {c: "value_loss" if normal_name(c) == "val_loss" else c for c in _value_head(keys)}
    for column, name in heads.items():
        notes.append(f"{column} is the value head's loss beside its policy loss, not a validation loss: read as "
                     f"{name}, a scalar of its own")
    table = wide.select(pl.lit(step).cast(pl.Int64).alias("_step"), pl.lit(wall).alias("_timestamp"),
                        *[pl.col(c) for c in keys if c not in texts])
    long, _ = wide_to_long(table, shown, with_row=True)
    restart = _relaunched(table, _trained([c for c in keys if c not in texts]))
    if (again := int(restart.sum())) > 10 and again > _MOST_RELAUNCHES * table.height:
        restart = restart.clear().extend_constant(False, table.height)
        notes.append(f"{again} rows log the step of the row before them again, with the same metrics: several rows "
                     "a step (per batch or per process?), not relaunches: read as logged, at the same step")
    if repeats:  # (the first row after a header written again: a header at the end starts nothing)
        restart = restart | headers.shift(1, fill_value=False)
    if (elapsed := _first(keys, ELAPSED_COLUMNS)) is not None:
        since = _numbers(wide, elapsed)
        again = (since < since.forward_fill().shift(1)).fill_null(False)  # (a cumulative time never goes back)
        # (only a column that rises on most rows is a cumulative time: one that goes back on a fifth of them or more,
        # or mostly stays where it was, is a duration per interval or per step, whose going back is no relaunch)
        moves = since.drop_nulls().diff().drop_nulls()
        if moves.len() and ((moves < 0).mean() >= 0.2 or (moves > 0).mean() < 0.5):  # type: ignore[operator]
            again = again.clear().extend_constant(False, wide.height)
        if again.any():
            at = [n + (1 if lines else 2) for n in again.arg_true().to_list()]
            notes.append(f"its {elapsed} starts again at line{'s' if len(at) != 1 else ''} "
                         f"{', '.join(map(str, at[:5]))}{', ...' if len(at) > 5 else ''}: a relaunch")
            restart = restart | again
    first_line = 1 if lines else 2  # the file's line of row 0 (JSON lines: only where every line is a record)
    exact = run is None and (not lines or path.read_bytes().count(b"\n") in {wide.height, wide.height - 1})
    # (a row's cells are consecutive: its first one starts the attempt)
    first_cell = (pl.col("row") != pl.col("row").shift(1)).fill_null(True)
    long = long.with_columns(restart=pl.lit(restart.gather(long["row"])) & first_cell,
                             row=(pl.col("row") + first_line) if exact else pl.lit(None, dtype=pl.Int64))
    # a file named for an evaluation (eval_loss.csv, valid_log.jsonl): its loss is the validation loss
    evaluated: dict[str, str] = {}
    # (not one named for training too, "train_val_log.csv", nor a table with a validation loss of its own)
    words = set(re.split(r"[\W_]+", path.stem.lower()))
    if words & VALIDATION_FOLDERS and not words & {"train", "training"} \
            and not any(canonical(c)[0] == s.VAL_LOSS for c in keys if c not in heads):
        evaluated = {c: s.VAL_LOSS for c in keys if c not in heads and canonical(c)[0] == s.LOSS}
        if evaluated:
            notes.append(f"its name says it is an evaluation's: {', '.join(evaluated)} read as the validation loss")
    log = history_log(long, run=run or context.run, source=shown, names=heads | evaluated)
    where = shown if run is None else f"{shown} ({run})"
    if not lines and (empty := empty_cells_note(table, where, bool(long["value"].is_nan().any()))):
        log.warnings.append(empty)
    log.warnings.extend(f"{where}: {note}" for note in notes)
    return Piece(path, FORMAT, log, run)


def _numbers(wide: pl.DataFrame, column: str) -> pl.Series:
    return wide.select(number(column)).to_series()


def _listed(names: list[str], most: int = 8) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _per_epoch(wide: pl.DataFrame, axis: str, columns: list[str], step: pl.Series,
               notes: list[str]) -> tuple[pl.Series, str | None]:
    """The steps, and the column that counts within each epoch (None: no such column). A step (or batch) column that
    does not go on where the epoch column rises (at most of its rises) counts within the epoch (``epoch,step,loss``
    with ``step`` from 0 in each epoch): the steps are then derived, ``(epoch - first) * span + counter``, the span
    one more than the most it counts in an epoch; said in a note. (Where it goes back while the epoch does not rise, or the
    epoch goes back too, the run was relaunched.)"""
    if normal_name(axis) in EPOCH_COLUMNS:
        epoch, inner = axis, _first([c for c in columns if c != axis], WITHIN_EPOCH)
    else:
        epoch, inner = _first([c for c in columns if c != axis], EPOCH_COLUMNS), axis
    if epoch is None or inner is None:
        return step, None
    counter = step if inner == axis else _numbers(wide, inner)
    frame = pl.DataFrame({"e": _numbers(wide, epoch), "i": counter})
    held = frame.drop_nulls()  # (the rows with both: a row without a step is not read)
    whole = held.select(pl.all().mod(1).eq(0).all()).row(0)
    rises = (pl.col("e") > pl.col("e").shift(1)).fill_null(False)
    stays = (pl.col("i") <= pl.col("i").shift(1)).fill_null(False)
    # (most of the epoch's rises leave the counter where it was or take it back: a global step goes on across them)
    rose, back_then = held.select(rises.sum(), (stays & rises).sum()).row(0)
    if not all(whole) or not back_then or back_then < rose / 2:
        return step, None
    hi, first = held["i"].max(), held["e"].min()
    span = int(hi) + 1  # type: ignore[arg-type]
    notes.append(f"its {inner} column counts again in each {epoch}: the steps here are derived, ({epoch} - "
                 f"{first:g}) x {span} + {inner} ({span}: one more than the most it counts in an {epoch})")
    return frame.select((pl.col("e") - first) * span + pl.col("i")).to_series().alias("_step"), inner


def _wall_time(wide: pl.DataFrame, columns: list[str], notes: list[str]) -> tuple[str | None, pl.Series]:
    """The column of clock times (None: none) and each row's time in Unix seconds."""
    none = pl.Series("_timestamp", [None] * wide.height, dtype=pl.Float64)
    for name in TIME_COLUMNS:
        column = _first(columns, (name,))
        if column is None:
            continue
        cells = wide[column].cast(pl.String).str.strip_chars()
        held = int(cells.is_not_null().sum())
        numbers = cells.cast(pl.Float64, strict=False)
        if held and numbers.is_not_null().sum() == held:
            for (lo, hi), scale in ((_UNIX_S, 1.0), (_UNIX_MS, 1e-3)):
                if numbers.drop_nulls().is_between(lo, hi).all():
                    return column, (numbers * scale).alias("_timestamp")
            continue  # a number that is no clock time (seconds per step, elapsed): a scalar of its own
        try:
            stamps = cells.str.to_datetime(strict=False)
        except (pl.exceptions.PolarsError, ValueError):
            continue
        if held and stamps.is_not_null().sum() == held:
            dtype = stamps.dtype
            if getattr(dtype, "time_zone", None):
                stamps = stamps.dt.convert_time_zone("UTC")
            else:
                notes.append(f"its {column} times carry no time zone: read as UTC")
            return column, (stamps.dt.epoch("us") / 1e6).alias("_timestamp")
    return None, none


def _text_columns(wide: pl.DataFrame, keys: list[str]) -> dict[str, list[str]]:
    """The columns none of whose cells is a number (or NaN / Inf, or a JSON boolean), with their first values."""
    out: dict[str, list[str]] = {}
    for key in keys:
        cells = wide[key]
        if cells.dtype != pl.String:
            continue
        cells = cells.drop_nulls()
        # (a column with a number among its first cells is a column of numbers: the whole of it is read only then)
        if cells.len() and all(c.str.strip_chars().cast(pl.Float64, strict=False).is_null().all()
                               for c in (cells.head(100), cells)):
            out[key] = cells.unique(maintain_order=True).head(4).to_list()
    return out


def _relaunched(table: pl.DataFrame, trained: list[str]) -> pl.Series:
    """Per row: the step of the row before it logged again, with the training metrics that row logged (a relaunch
    that logged that step again; an evaluation's row at a training row's step logs other keys)."""
    if not trained:
        return pl.Series("restart", [False] * table.height)
    held = [pl.col(c).is_not_null() for c in trained]
    again = (pl.col("_step") == pl.col("_step").shift(1)).fill_null(False)
    # (the same training columns as the row before, not one of them: an evaluation's row that carries the LR beside
    # its validation loss shares the LR column with the training row before it, and is no relaunch)
    shared = pl.any_horizontal(held) & pl.all_horizontal([h == h.shift(1).fill_null(False) for h in held])
    return table.select((again & shared).alias("restart")).to_series()

