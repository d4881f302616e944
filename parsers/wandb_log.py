"""The ``run-<id>.wandb`` binary log of a local or offline W&B run, read without importing wandb.

The file is a LevelDB-style log: a 7-byte header (``:W&B``, ``0xBEE1``, version 0), then 32 KiB blocks of chunks,
each with a 7-byte header (IEEE CRC-32 of type byte + payload, uint16 length, type 1 FULL / 2 FIRST / 3 MIDDLE /
4 LAST). Chunks never cross a block; fewer than 7 bytes left in a block are padding. A record is one FULL chunk or
FIRST MIDDLE* LAST, and its payload is a ``wandb_internal.Record`` protobuf (see :mod:`parsers.wandb_proto`).

Damage is survived: a chunk with a bad CRC skips the rest of its block (the next block starts on a chunk boundary)
with a warning, and a cut tail (a crashed or still-running run) is reported as such. Everything before and after
the damage is kept.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from google.protobuf.message import DecodeError

from parsers.textfile import InputError, json_value, read_all
from parsers.wandb_proto import Record

MAGIC = b":W&B\xe1\xbe\x00"
_BLOCK = 32768
_HEADER = struct.Struct("<IHB")
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def is_wandb_log(head: bytes) -> bool:
    """Whether a file's first bytes are a ``.wandb`` log header."""
    return head[:7] == MAGIC


def _chunks(buf: bytes, shown: str, warnings: list[str]) -> list[bytes]:
    """The record payloads of a ``.wandb`` file, skipping damaged blocks and noting a cut tail."""
    records: list[bytes] = []
    pos, end, pending = 7, len(buf), None
    crc32 = zlib.crc32
    type_crc = {t: zlib.crc32(bytes([t])) for t in (_FULL, _FIRST, _MIDDLE, _LAST)}
    while True:
        room = _BLOCK - pos % _BLOCK
        if room < 7:
            pos += room
            continue
        if pos + 7 > end:
            if pos < end and buf[pos:end].strip(b"\x00"):
                warnings.append(f"{shown}: partial last record at byte {pos} (the run was cut off or still writing)")
            break
        crc, length, kind = _HEADER.unpack_from(buf, pos)
        if crc == length == kind == 0:  # zeroed rest of a block
            pos += room
            continue
        start = pos + 7
        if length > room - 7 or kind not in type_crc:
            warnings.append(f"{shown}: bad chunk header at byte {pos}; skipped to the next 32 KiB block")
            pos, pending = pos + room, None
            continue
        if start + length > end:
            warnings.append(f"{shown}: partial last record at byte {pos} (the run was cut off or still writing)")
            break
        data = buf[start:start + length]
        pos = start + length
        if crc32(data, type_crc[kind]) != crc:
            warnings.append(f"{shown}: bad CRC at byte {start - 7}; skipped the rest of that 32 KiB block")
            pos, pending = pos + (_BLOCK - pos % _BLOCK) % _BLOCK, None
            continue
        if kind == _FULL:
            records.append(data)
        elif kind == _FIRST:
            pending = [data]
        elif pending is not None:
            pending.append(data)
            if kind == _LAST:
                records.append(b"".join(pending))
                pending = None
    if pending is not None and not any("partial last record" in w for w in warnings):
        warnings.append(f"{shown}: a record split over blocks ends without its last part")
    return records


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


def read_wandb_log(path: str | Path, shown: str) -> WandbLog:
    """Decode a ``run-<id>.wandb`` file.

    >>> log = read_wandb_log("tests/fixtures/real/wandb/jackokeefe11__nanoGPT/wandb/"
    ...                      "run-20240215_023758-f656tyfr/run-f656tyfr.wandb", "run-f656tyfr.wandb")
    >>> sorted(log.history["key"].unique())
    ['iter', 'lr', 'mfu', 'train/loss', 'val/loss']
    """
    buf = read_all(Path(path))
    if not is_wandb_log(buf):
        raise InputError(f"{shown}: not a W&B run log (no ':W&B' header)")
    warnings: list[str] = []
    keys: list[str] = []
    values: list[str] = []
    rows: list[int] = []
    row_steps: list[str | None] = []  # per history row: the _step text, the record's step number, _timestamp
    row_nums: list[int | None] = []
    row_stamps: list[str | None] = []
    log = WandbLog(history=pl.DataFrame())
    record = Record()
    for payload in _chunks(buf, shown, warnings):
        try:
            record.ParseFromString(payload)
        except DecodeError:
            warnings.append(f"{shown}: a record that is not a valid W&B protobuf was skipped")
            continue
        if record.HasField("history"):
            items = {_key(i): i.value_json for i in record.history.item}
            n = len(row_steps)
            row_steps.append(items.pop("_step", None))
            row_nums.append(record.history.step.num if record.history.HasField("step") else None)
            row_stamps.append(items.pop("_timestamp", None))
            items.pop("_runtime", None)
            keys.extend(items)
            values.extend(items.values())
            rows.extend([n] * len(items))
        elif record.HasField("summary"):
            _fold(record.summary.update, log.summary, record.summary.remove)
        elif record.HasField("config"):
            _fold(record.config.update, log.config, record.config.remove)
            _note_config(log, len(row_steps))
        elif record.HasField("run"):
            run = record.run
            log.run_id, log.display_name, log.project = run.run_id, run.display_name, run.project
            log.resumed, log.starting_step = run.resumed, run.starting_step
            if run.HasField("start_time"):
                log.start_time = run.start_time.seconds + run.start_time.nanos / 1e9
            _fold(run.config.update, log.config)
            _fold(run.summary.update, log.summary)
            _note_config(log, len(row_steps))
        elif record.HasField("exit"):
            log.exit_code, log.runtime = record.exit.exit_code, record.exit.runtime or None
        elif record.HasField("metric") and record.metric.step_metric:
            log.step_metrics[record.metric.name or record.metric.glob_name] = record.metric.step_metric
        elif record.HasField("output_raw"):
            log.console.append(record.output_raw.line)
    log.config = {k: _json(v) for k, v in log.config.items() if k != "_wandb"}
    log.summary = {k: _json(v) for k, v in log.summary.items() if k != "_wandb"}
    row_meta = _row_steps(row_steps, row_nums, row_stamps, shown, warnings)
    log.history = (
        pl.DataFrame({"key": keys, "value_json": values, "row": rows},
                     schema={"key": pl.String, "value_json": pl.String, "row": pl.Int64})
        .join(row_meta, on="row", how="inner", maintain_order="left")
        .select("step", "key", "value_json", "wall_time", "row")
    )
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
