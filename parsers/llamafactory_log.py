"""LLaMA-Factory's ``trainer_log.jsonl``: one JSON line per logging step, ``{"current_steps": 10, "total_steps":
6566, "loss": 0.8548, "lr": 1e-05, "epoch": 0.01, "percentage": 0.15, "elapsed_time": "0:02:12", ...}`` (older
versions name the LR ``learning_rate`` and write ``null`` for what they lack), ``eval_loss`` on evaluation lines,
and a last line without a loss when training ends (its ``train_runtime`` log).

Its ``elapsed_time`` (the time since the launch's training began, to the second) gives the wall time per step
(``iteration_time_ms``): the time since the line before over the steps between them.

A relaunch appends to the same file: its ``elapsed_time`` starts again near zero, and that starts a new attempt (a
step going back alone does not: several processes may append, each a step behind another). A step logged twice in
one attempt (one line per writing process) keeps its first line. Beside a ``trainer_state.json`` (the same history,
with the Trainer's own steps) it is not read, and that is said; given alone, it is read.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/llamafactory/rameyjm7_SFT-Training-LLM/trainer_log.jsonl")
>>> log = read(path, ReadContext("trainer_log.jsonl", "r"))[0].log
>>> log.n_attempts, log.metrics.filter(metric="loss").select("step", "value").row(0)
(2, (10, 0.8548))
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.reader import NotThisFormat, Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.wandb_history import _cell, _json_lines

MIN_GAP_S = 10  # seconds between two lines' elapsed_time (whole seconds) to time the steps between: 10% at worst

FORMAT = "llamafactory"
_NAMES = {"loss": s.LOSS, "lr": s.LR, "learning_rate": s.LR, "eval_loss": s.VAL_LOSS, "epoch": s.EPOCH,
          "grad_norm": s.GRAD_NORM}
_CLOCK = re.compile(r"^(?:(\d+) days?, )?(\d+):(\d\d):(\d\d)$")
RESTART = 0.5  # an elapsed time below half the one before it (and a minute or more back): the program started again


def sniff(head: bytes, name: str) -> bool:
    return Path(name).name == "trainer_log.jsonl" and b'"current_steps"' in head[:4096]


def _seconds(clock: pl.Expr) -> pl.Expr:
    """``"4 days, 7:19:52"`` -> seconds (None when not a clock)."""
    parts = clock.str.extract_groups(_CLOCK.pattern)
    field = [parts.struct.field(str(n)).cast(pl.Int64, strict=False) for n in (1, 2, 3, 4)]
    return field[0].fill_null(0) * 86400 + field[1] * 3600 + field[2] * 60 + field[3]


def _last_step(path: Path) -> int | None:
    """The last ``current_steps`` of a trainer_log.jsonl (its last lines only), None where none is read."""
    with path.open("rb") as f:
        f.seek(max(0, f.seek(0, 2) - 65536))
        tail = f.read().decode("utf-8", "replace").splitlines()
    for line in reversed(tail):
        try:
            value = json.loads(line).get("current_steps")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, int):
            return value
    return None


def _beside_state(path: Path, state: Path, shown: str) -> str:
    """What is said of a trainer_log.jsonl not read beside a trainer_state.json: the same history, unless the log
    goes on past the state's last step (a trainer_state.json older than the log: its steps after are not read)."""
    try:
        global_step = json.loads(state.read_text(errors="replace")).get("global_step")
    except (ValueError, AttributeError, OSError):
        global_step = None
    last = _last_step(path)
    if isinstance(global_step, int) and last is not None and last > global_step:
        return (f"{shown}: LLaMA-Factory's log beside a trainer_state.json, not read, though it goes on to step "
                f"{last}, past the trainer_state.json's last step ({global_step}): its later steps are not in this "
                "chronicle (read it alone for them)")
    return (f"{shown}: LLaMA-Factory's log of the history that the trainer_state.json beside it holds: read from "
            "there, not twice")


def _step_times(rows: pl.DataFrame) -> pl.DataFrame:
    """The wall time per training step (``iteration_time_ms``) from ``elapsed_time``, the seconds since the launch's
    training began printed on each line: the time since the line before it (a training or an evaluation line: the
    evaluation's own time is not in it) over the steps between them, at each training line but an attempt's first.
    Of the lines several processes print for one step, the earliest (one process's clock, whose start was first)."""
    if "elapsed_time" not in rows.columns or "loss" not in rows.columns:
        return pl.DataFrame(schema={"line": pl.UInt32, "step": pl.Int64, "attempt": pl.Int32, "value": pl.Float64,
                                    "metric": pl.String})
    evaluated = pl.col("eval_loss").is_not_null() if "eval_loss" in rows.columns else pl.lit(False)
    kind = pl.when(pl.col("loss").cast(pl.Float64, strict=False).is_not_null()).then(pl.lit("train")) \
        .when(evaluated).then(pl.lit("eval"))
    marks = (rows.with_columns(_kind=kind).filter(pl.col("_kind").is_not_null() & pl.col("_elapsed").is_not_null())
             .group_by("attempt", "step", "_kind").agg(pl.col("line").min(), pl.col("_elapsed").min())
             .sort("line"))
    since = pl.col("_elapsed") - pl.col("_elapsed").shift(1).over("attempt")
    steps = pl.col("step") - pl.col("step").shift(1).over("attempt")
    # elapsed_time is printed in whole seconds: a gap under MIN_GAP_S seconds is too coarse to time a step by
    return (marks.with_columns(value=pl.when((steps > 0) & (since >= MIN_GAP_S)).then(since * 1000.0 / steps))
            .filter((pl.col("_kind") == "train") & pl.col("value").is_not_null())
            .select("line", "step", "attempt", pl.col("value").cast(pl.Float64), metric=pl.lit(s.ITERATION_TIME_MS)))


def read(path: Path, context: ReadContext) -> list[Piece]:
    beside = path.parent / "trainer_state.json"
    if beside.is_file() and not context.single:  # (given alone, it is read)
        context.skipped.append(_beside_state(path, beside, context.shown))
        return []
    # line by line with the standard decoder: a line nested a million deep is refused, never a crash (polars'
    # NDJSON reader recurses on it); these logs hold one line per logging step
    said: list[str] = []
    try:
        sound = [r for r in _json_lines(path, context.shown, said) if isinstance(r, dict)]
    except ValueError as exc:  # no line is JSON
        raise NotThisFormat(f"{context.shown}: not JSON lines ({exc})") from None
    context.warnings.extend(said)
    # as text, each value read below (a number beyond 64 bits, a string where a number was: that value only)
    keys = ["current_steps", "total_steps", "elapsed_time", *_NAMES]
    rows = pl.DataFrame({k: [_cell(r.get(k)) for r in sound] for k in keys if any(k in r for r in sound)},
                        schema_overrides={k: pl.String for k in keys})
    if "current_steps" not in rows.columns:
        raise NotThisFormat(f"{context.shown}: JSON lines without current_steps")
    step = pl.col("current_steps").cast(pl.Int64, strict=False)
    elapsed = _seconds(pl.col("elapsed_time").cast(pl.String)) if "elapsed_time" in rows.columns else pl.lit(None)
    rows = rows.with_row_index("line", offset=1).with_columns(step=step, _elapsed=elapsed).filter(
        pl.col("step").is_not_null())
    before = pl.col("_elapsed").shift(1)
    restart = (pl.col("_elapsed") < RESTART * before) & (before - pl.col("_elapsed") >= 60)
    rows = rows.with_columns(attempt=(1 + restart.fill_null(False).cast(pl.Int32).cum_sum()).cast(pl.Int32))
    values = [c for c in rows.columns if c in _NAMES]
    long = (rows.select("line", "step", "attempt", *(pl.col(c).cast(pl.Float64, strict=False) for c in values))
            .unpivot(index=["line", "step", "attempt"], on=values, variable_name="key", value_name="value")
            .filter(pl.col("value").is_not_null())
            .with_columns(value=pl.col("value").cast(pl.Float64), metric=pl.col("key").replace_strict(_NAMES))
            .sort("line")
            .unique(["attempt", "step", "metric"], keep="first", maintain_order=True))
    n_attempts = int(rows["attempt"].max() or 1)  # type: ignore[arg-type]
    labels = {"run": pl.lit(context.run), "source": pl.lit(context.shown)}
    long = pl.concat([long.select("line", "step", "attempt", "value", "metric"), _step_times(rows)])
    metrics = s.conform(long.with_columns(**labels), s.METRICS_SCHEMA).sort("attempt", "metric", "step")
    events = [rows.filter(pl.col("attempt") > 1).group_by("attempt", maintain_order=True).first().select(
        "line", "step", "attempt", kind=pl.lit(s.EV_PROCESS_START),
        text=pl.format("elapsed_time starts again ({}): the program was started again", pl.col("elapsed_time")))]
    # its last line, with no loss after the last one that has it, is the Trainer's end-of-training log
    lossy = [c for c in ("loss", "eval_loss") if c in rows.columns]
    last = rows.tail(1)
    if lossy and last.height and last.select(pl.all_horizontal(pl.col(c).is_null() for c in lossy)).item():
        events.append(last.select("line", "step", "attempt", kind=pl.lit(s.EV_TRAINING_ENDED),
                                  text=pl.format("training finished: its last log line has no loss (step {} of {})",
                                                 "current_steps", "total_steps")))
    events_frame = s.conform(pl.concat(events, how="diagonal_relaxed").with_columns(**labels), s.EVENTS_SCHEMA)
    configs = s.empty(s.CONFIGS_SCHEMA)
    if "total_steps" in rows.columns:  # the planned steps, as the Trainer's max_steps
        total = pl.col("total_steps").cast(pl.Int64, strict=False)
        totals = rows.group_by("attempt", maintain_order=True).agg(total.drop_nulls().last()).drop_nulls()
        configs = s.conform(totals.select("attempt", key=pl.lit("train_iters"), value=total.cast(pl.String),
                                          typed=total.cast(pl.String)).with_columns(**labels), s.CONFIGS_SCHEMA)
    tags = {k: _NAMES[k] for k in values} | (
        {"elapsed_time": s.ITERATION_TIME_MS} if (metrics["metric"] == s.ITERATION_TIME_MS).any() else {})
    log = ParsedLog(metrics, events_frame, configs, n_attempts=n_attempts, tags=tags)
    return [Piece(path, FORMAT, log)]
