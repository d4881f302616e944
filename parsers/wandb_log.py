"""The ``run-<id>.wandb`` binary log of a local or offline W&B run, read without importing wandb.

The file is a LevelDB-style log of ``wandb_internal.Record`` protobufs (:mod:`parsers.wandb_wire` holds its wire
layers, :mod:`parsers.wandb_proto` the messages). Damage is survived: a chunk with a bad CRC skips the rest of its
block (the next block starts on a chunk boundary) with a warning, and a cut tail (a crashed or still-running run) is
reported as such. Everything before and after the damage is kept.

Reading is in bulk, with NumPy: an undamaged file's blocks are framed all at once (a damaged one is walked chunk by
chunk, which says what it found), then the history and summary records, the bulk of a file (the 0.31 client writes a
summary record per step), are decoded one protobuf field of every record per step. Only their ordinary shape is
taken; every other record, and any record with something odd in it, is decoded by the protobuf runtime
(:class:`_Records`), so the result is the runtime's, record for record: ``read_wandb_log(..., bulk=False)`` reads
every record that way (about 4x slower on a 100k-step log).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from parsers.textfile import InputError, json_value
from parsers.wandb_wire import _ITEMS, _ROWS, _bulk, _chunks, _frame, _laid, _read, is_wandb_log


def _key(item: Any) -> str:
    return item.key or ".".join(item.nested_key)


def _json(text: str) -> Any:
    try:
        return json_value(text)
    except ValueError:
        return text


def _fold(items: Any, into: dict[str, Any], remove: Any = ()) -> None:
    """Apply config/summary updates, keeping the JSON text (decoded once, at the end)."""
    for item in items:
        into[_key(item)] = item.value_json
    for item in remove:
        into.pop(_key(item), None)


@dataclass
class WandbLog:
    """What one ``.wandb`` file holds: history in long form (step, key, value_json, wall_time) and run metadata."""

    history: pl.DataFrame
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    display_name: str = ""
    project: str = ""
    resumed: bool = False
    starting_step: int = 0
    start_time: float | None = None
    exit_code: int | None = None
    runtime: int | None = None  # seconds the run lasted, as its exit record says
    step_metrics: dict[str, str] = field(default_factory=dict)  # define_metric: metric (or glob) -> its step metric
    console: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # the config as it stood whenever it changed: (history rows logged before the change, raw config then)
    config_updates: list[tuple[int, dict[str, str]]] = field(default_factory=list)

    def config_before(self, row: int) -> dict[str, Any]:
        """The config as it stood when history row ``row`` (counted from 0, as W&B's ``_step``) was logged: what a
        notebook's successive trainers each pushed before they logged."""
        raw = next((c for seen, c in reversed(self.config_updates) if seen <= row), {})
        return {k: _json(v) for k, v in raw.items() if k != "_wandb"}


class _Records:
    """The per-record decoder: each record parsed by the protobuf runtime, its history row kept in lists, its
    summary, config and run metadata applied to ``log``. Reads whole small logs, and the records the bulk decoder
    leaves to the runtime."""

    def __init__(self, shown: str, warnings: list[str], log: WandbLog) -> None:
        # (the protobuf runtime loads here, when a .wandb file is read: not on every start)
        from google.protobuf.message import DecodeError

        from parsers.wandb_proto import Record

        self.shown, self.warnings, self.log = shown, warnings, log
        self.record, self.decode_error = Record(), DecodeError
        self.keys: list[str] = []
        self.values: list[str] = []
        self.rows: list[int] = []  # per item: its history row (among the rows read here)
        self.steps: list[str | None] = []  # per history row: the _step text, the record's step number, _timestamp
        self.nums: list[int | None] = []
        self.stamps: list[str | None] = []
        self.at: list[int] = []  # per history row: its record's index in the file

    def take(self, payload: bytes, index: int = 0, rows_before: int = 0) -> None:
        """Decode record ``index``; ``rows_before``: history rows read elsewhere (the bulk decoder) before it."""
        record, log, shown = self.record, self.log, self.shown
        try:
            record.ParseFromString(payload)
        except self.decode_error:
            self.warnings.append(f"{shown}: a record that is not a valid W&B protobuf was skipped")
            return
        if record.HasField("history"):
            items = {_key(i): i.value_json for i in record.history.item}
            n = len(self.steps)
            self.steps.append(items.pop("_step", None))
            self.nums.append(record.history.step.num if record.history.HasField("step") else None)
            self.stamps.append(items.pop("_timestamp", None))
            self.at.append(index)
            items.pop("_runtime", None)
            self.keys.extend(items)
            self.values.extend(items.values())
            self.rows.extend([n] * len(items))
        elif record.HasField("summary"):
            _fold(record.summary.update, log.summary, record.summary.remove)
        elif record.HasField("config"):
            _fold(record.config.update, log.config, record.config.remove)
            _note_config(log, rows_before + len(self.steps))
        elif record.HasField("run"):
            run = record.run
            log.run_id, log.display_name, log.project = run.run_id, run.display_name, run.project
            log.resumed, log.starting_step = run.resumed, run.starting_step
            if run.HasField("start_time"):
                log.start_time = run.start_time.seconds + run.start_time.nanos / 1e9
            _fold(run.config.update, log.config)
            _fold(run.summary.update, log.summary)
            _note_config(log, rows_before + len(self.steps))
        elif record.HasField("exit"):
            log.exit_code, log.runtime = record.exit.exit_code, record.exit.runtime or None
        elif record.HasField("metric") and record.metric.step_metric:
            log.step_metrics[record.metric.name or record.metric.glob_name] = record.metric.step_metric
        elif record.HasField("output_raw"):
            log.console.append(record.output_raw.line)

    def items(self) -> pl.DataFrame:
        """``key, value_json, row`` of the history items read here (rows counted among those read here)."""
        return pl.DataFrame({"key": self.keys, "value_json": self.values, "row": self.rows}, schema=_ITEMS)

    def row_meta(self) -> pl.DataFrame:
        """``text, num, stamp`` per history row read here."""
        return pl.DataFrame({"text": self.steps, "num": self.nums, "stamp": self.stamps}, schema=_ROWS)




def read_wandb_log(path: str | Path, shown: str, bulk: bool = True) -> WandbLog:
    """Decode a ``run-<id>.wandb`` file: its history and summary records in bulk (:func:`parsers.wandb_wire._bulk`),
    the other records (and, with ``bulk=False``, every record) one by one with the protobuf runtime; the same result
    either way.

    >>> log = read_wandb_log("tests/fixtures/real/wandb/jackokeefe11__nanoGPT/wandb/"
    ...                      "run-20240215_023758-f656tyfr/run-f656tyfr.wandb", "run-f656tyfr.wandb")
    >>> sorted(log.history["key"].unique())
    ['iter', 'lr', 'mfu', 'train/loss', 'val/loss']
    """
    buf, padded = _read(Path(path))
    if not is_wandb_log(buf):
        raise InputError(f"{shown}: not a W&B run log (no ':W&B' header)")
    warnings: list[str] = []
    log = WandbLog(history=pl.DataFrame())
    records = _Records(shown, warnings, log)
    framed = _frame(buf, padded) if bulk else None
    if framed is None:  # damage (or bulk=False): the chunk walk, with its warnings
        payloads = _chunks(bytes(buf), shown, warnings)
        framed = _laid(payloads) if bulk else None
    if framed is not None:
        items, rows = _bulk(*framed, records)
    else:
        for payload in payloads:
            records.take(payload)
        items, rows = records.items(), records.row_meta()
    log.config = {k: _json(v) for k, v in log.config.items() if k != "_wandb"}
    log.summary = {k: _json(v) for k, v in log.summary.items() if k != "_wandb"}
    row_meta = _row_steps(rows["text"], rows["num"], rows["stamp"], shown, warnings)
    # each item with its row's step and wall time (rows left out take their items along)
    every = pl.DataFrame({"row": pl.int_range(rows.height, eager=True, dtype=pl.Int64)})
    row_meta = every.join(row_meta, on="row", how="left", maintain_order="left")
    log.history = items.select(
        step=row_meta["step"].gather(items["row"]), key="key", value_json="value_json",
        wall_time=row_meta["wall_time"].gather(items["row"]), row="row",
    ).filter(pl.col("step").is_not_null())
    log.warnings = warnings
    return log


def _row_steps(steps: list[str | None], nums: list[int | None], stamps: list[str | None], shown: str,
               warnings: list[str]) -> pl.DataFrame:
    """Each history row's step and wall time (``row, step, wall_time``), checked: ``_step`` must be a finite number
    within 64 bits (else the record's own step number is used, else the row is left out with a warning), and a
    ``_timestamp`` that is not a finite number leaves the row's wall time unknown (with a warning).

    >>> w = []
    >>> _row_steps(["0", "null", "1e30", '"x"'], [None, 1, None, None], ["1.7e9", "NaN", "5", "now"], "f", w).rows()
    [(0, 0, 1700000000.0), (1, 1, None)]
    >>> w  # doctest: +NORMALIZE_WHITESPACE
    ['f: _step is not a step number (e.g. 1e30) in 2 history rows; left out',
     'f: _timestamp is not a time (e.g. NaN) in 1 history row; wall time unknown there']
    """
    meta = pl.DataFrame({"text": steps, "num": nums, "stamp": stamps},
                        schema={"text": pl.String, "num": pl.Int64, "stamp": pl.String}).with_row_index("row")
    value = pl.col("text").cast(pl.Float64, strict=False)
    sound = value.is_finite() & (value.abs() < 2.0**63)
    time = pl.col("stamp").cast(pl.Float64, strict=False)
    meta = meta.with_columns(
        step=pl.when(sound).then(value.cast(pl.Int64, strict=False)).otherwise(pl.col("num")),
        wall_time=pl.when(time.is_finite()).then(time),
        bad_time=pl.col("stamp").is_not_null() & ~time.is_finite().fill_null(False),
    )
    lost = meta.filter(pl.col("step").is_null())
    if lost.height:
        example = lost["text"].drop_nulls().head(1).to_list()
        warnings.append(f"{shown}: _step is not a step number{f' (e.g. {example[0][:40]})' if example else ''}"
                        f" in {_rows(lost.height)}; left out")
    meta = meta.filter(pl.col("step").is_not_null())
    bad_time = meta.filter("bad_time")
    if bad_time.height:
        warnings.append(f"{shown}: _timestamp is not a time (e.g. {bad_time['stamp'][0][:40]})"
                        f" in {_rows(bad_time.height)}; wall time unknown there")
    return meta.select(pl.col("row").cast(pl.Int64), "step", "wall_time")


def _rows(n: int) -> str:
    return f"{n} history row{'' if n == 1 else 's'}"


def _note_config(log: WandbLog, n_rows: int) -> None:
    """Keep the config as it stands after an update, once per history row it precedes."""
    if log.config_updates and log.config_updates[-1][1] == log.config:
        return
    if log.config_updates and log.config_updates[-1][0] == n_rows:
        log.config_updates.pop()
    log.config_updates.append((n_rows, dict(log.config)))


def config_values(config: dict[str, Any]) -> dict[str, Any]:
    """W&B config entries unwrapped: ``{"lr": {"value": 3e-4, "desc": None}}`` -> ``{"lr": 3e-4}``."""
    out: dict[str, Any] = {}
    for key, entry in config.items():
        if key in {"_wandb", "wandb_version"}:
            continue
        if isinstance(entry, dict) and "value" in entry and set(entry) <= {"value", "desc"}:
            entry = entry["value"]
        out[key] = entry
    return out


def finite_or_text(value: Any) -> Any:
    """JSON-safe form of a config value: NaN and infinities as the strings W&B writes for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value
