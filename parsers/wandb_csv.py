"""CSV files exported from W&B, recognised by their header (users rename them):

* **chart export** ("Export panel data"): an x-axis column, then per series ``<series> - <metric>`` with
  ``__MIN`` and ``__MAX`` twins. A series is a run's display name, or ``key: value`` / ``Group: name`` for a
  grouped panel, whose main column is the group mean. Usually sampled by the UI.
* **runs table**: one row per run (``Name`` first), system columns, then config and summary columns.
* **API history dump**: ``run.history()`` / ``scan_history()`` written by pandas: ``_step`` and user keys.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from parsers import schema as s
from parsers.textfile import InputError, json_value
from parsers.wandb_history import config_frame, history_log, metric_names, number, read_csv_text, sampling_note

CHART, RUNS_TABLE, HISTORY = "wandb-chart", "wandb-runs-table", "wandb-history"
MIN_SUFFIX, MAX_SUFFIX = "__MIN", "__MAX"
_X_AXES = {"Step": "_step", "Relative Time (Process)": "_runtime", "Relative Time (Wall)": "_absolute_runtime",
           "Wall Time": "_timestamp"}
# system columns of the runs table (whatever the user had visible)
_RUN_COLUMNS = frozenset({"Name", "State", "Notes", "User", "Tags", "Created", "Runtime", "Sweep", "End Time", "ID",
                          "Updated", "Hostname", "Group", "Job Type", "Run Path", "Agent", "GPU Type", "GPU Count"})


def header_of(text: str) -> list[str]:
    """The CSV header fields of a file's first line."""
    first = text.split("\n", 1)[0].rstrip("\r")
    try:
        return next(csv.reader(io.StringIO(first)))
    except (csv.Error, StopIteration):
        return []


def csv_kind(header: list[str]) -> str | None:
    """Which W&B export a CSV header belongs to, or None."""
    if len(header) >= 4 and any(c.endswith((MIN_SUFFIX, MAX_SUFFIX)) for c in header[1:]):
        bases = [c for c in header[1:] if not c.endswith((MIN_SUFFIX, MAX_SUFFIX))]
        if bases and all(" - " in c for c in bases):
            return CHART
    if "_step" in header:
        return HISTORY
    if header[:1] == ["Name"] and len(header) > 1:
        return RUNS_TABLE
    return None


@dataclass
class Series:
    """One run's share of a chart export: its name and canonical frames."""

    name: str
    log: s.ParsedLog


def split_series(columns: list[str]) -> dict[str, tuple[str, str]]:
    """``<series> - <metric>`` columns -> (series, metric), splitting on the `` - `` whose metric most columns share
    (run and metric names may themselves contain `` - ``)."""
    options = {c: [(c[:i], c[i + 3:]) for i in _positions(c, " - ")] for c in columns}
    shared = Counter(metric for opts in options.values() for _, metric in opts)
    return {c: max(opts, key=lambda o: (shared[o[1]], -len(o[1]))) for c, opts in options.items() if opts}


def _positions(text: str, sep: str) -> list[int]:
    found, i = [], text.find(sep)
    while i >= 0:
        found.append(i)
        i = text.find(sep, i + 1)
    return found


def read_chart_export(path: Path, shown: str) -> tuple[list[Series], list[str]]:
    """Each series of a chart export as its own run's frames, plus warnings (sampling, x-axis).

    ``__MIN``/``__MAX`` columns that differ from the main value (group spreads, or per-bucket extremes of a
    full-fidelity export) are kept as ``<metric>__min`` / ``<metric>__max``: spike evidence the mean can hide.
    """
    warnings: list[str] = []
    raw = read_csv_text(path, shown, warnings)
    x_name = raw.columns[0]
    bases = [c for c in raw.columns[1:] if not c.endswith((MIN_SUFFIX, MAX_SUFFIX))]
    parts = split_series(bases)
    by_series: dict[str, list[str]] = {}
    for column in bases:
        if column in parts:
            by_series.setdefault(parts[column][0], []).append(column)
    x = number(x_name)
    found: list[Series] = []
    for series, columns in by_series.items():
        step_column = next((c for c in columns if parts[c][1] == "_step"), None)
        if x_name == "Step":
            step = x
            warnings.append(f"{shown}: steps are the export's 'Step' column, W&B's count of log calls (one per "
                            "wandb.log unless the run passed its own step), not necessarily training iterations: a "
                            "run that logs every N iterations shows N iterations as one step")
        elif step_column is not None:
            step = number(step_column)
        else:
            step = x
            warnings.append(f"{shown}: x-axis is '{x_name}', not the training step; its values are used as steps")
        pieces = []
        for column in columns:
            metric = parts[column][1]
            if metric in {"_step", "_runtime", "_timestamp"}:
                continue
            frame = raw.select(
                step=step.round(0).cast(pl.Int64, strict=False), key=pl.lit(metric), value=number(column),
                lo=number(column + MIN_SUFFIX) if column + MIN_SUFFIX in raw.columns else pl.lit(None, pl.Float64),
                hi=number(column + MAX_SUFFIX) if column + MAX_SUFFIX in raw.columns else pl.lit(None, pl.Float64),
                wall_time=pl.lit(None, dtype=pl.Float64),
            ).filter(pl.col("value").is_not_null() | pl.col("hi").is_not_null())
            pieces.append(frame)
        long = pl.concat(pieces).sort("step", maintain_order=True) if pieces else None
        if long is None or long.height == 0:
            continue
        log = history_log(_with_extremes(long), run=series, source=shown)
        note = sampling_note(long["step"], f"{shown} ({series})", chart=True)
        if note:
            log.warnings.append(note)
        if ": " in series:  # a grouped panel: "key: value" or "Group: name"
            log.warnings.append(f"{shown} ({series}): a grouped series: values are the group's mean, "
                                "__MIN/__MAX its spread across runs")
        found.append(Series(name=series, log=log))
    if not found:
        raise InputError(f"{shown}: W&B chart export without any series")
    return found, list(dict.fromkeys(warnings))


def _with_extremes(long: pl.DataFrame) -> pl.DataFrame:
    """Main values, plus ``__min``/``__max`` rows for the keys whose extremes differ from their value."""
    names = metric_names(long["key"].unique(maintain_order=True).to_list())
    spread = long.group_by("key").agg(
        lo=(pl.col("lo").is_not_null() & (pl.col("lo") != pl.col("value")).fill_null(True)).any(),
        hi=(pl.col("hi").is_not_null() & (pl.col("hi") != pl.col("value")).fill_null(True)).any(),
    )
    frames = [long.select("step", "key", "value", "wall_time")]
    for row in spread.iter_rows(named=True):
        for side in ("lo", "hi"):
            if row[side]:
                suffix = s.MIN_SUFFIX if side == "lo" else s.MAX_SUFFIX
                frames.append(long.filter(key=row["key"]).select(
                    "step", key=pl.lit(names[row["key"]] + suffix), value=pl.col(side), wall_time="wall_time"
                ))
    return pl.concat(frames).filter(pl.col("value").is_not_null()).sort("step", maintain_order=True)


def _cell_value(text: str | None) -> Any:
    if text is None or text == "":
        return None
    try:
        return json_value(text)
    except ValueError:
        return text


def read_runs_table(path: Path, shown: str, warnings: list[str] | None = None) -> list[tuple[str, pl.DataFrame]]:
    """Each row of a runs-table export as (run name, config rows).

    The export does not say which columns are config and which summary; W&B lists config keys, then summary keys,
    each alphabetically, so the first key that sorts before its predecessor starts the summary (``summary/`` keys).
    System columns (State, Created, Runtime, ...) become ``wandb/<column>``. Every row is a run of its own (W&B gives
    each its own id; a resume stays one row): rows that share a name, such as seed replicates, are told apart by the
    setting they differ in (``G1 (seed=3242)``), else by their id, else by their row.
    """
    raw = read_csv_text(path, shown, warnings)
    user = [c for c in raw.columns if c not in _RUN_COLUMNS]
    first_summary = next((i for i in range(1, len(user)) if user[i].lower() < user[i - 1].lower()), len(user))
    rename = {c: f"{s.RUN_INFO_PREFIX}{c}" for c in raw.columns if c in _RUN_COLUMNS and c != "Name"}
    rename.update({c: s.SUMMARY_PREFIX + c for c in user[first_summary:]})
    raw = raw.with_row_index("_row").with_columns(
        pl.col("Name").fill_null(s.format_text("row {}", pl.col("_row") + 1)) if "Name" in raw.columns
        else s.format_text("row {}", pl.col("_row") + 1).alias("Name")
    )
    rows = [
        (row["Name"], row["_row"], {rename.get(k, k): _cell_value(v) for k, v in row.items()
                                    if k not in {"Name", "_row"} and v is not None})
        for row in raw.iter_rows(named=True)
    ]
    names = _distinct_run_names(rows, settings=user[:first_summary])
    return [(name, config_frame(values, run=name, source=shown)) for name, (_, _, values) in zip(names, rows,
                                                                                                 strict=True)]


def _distinct_run_names(rows: list[tuple[str, int, dict[str, Any]]], settings: list[str]) -> list[str]:
    """A name per row: the row's name, with what tells it from the rows of the same name (a differing setting,
    ``seed`` first, else its W&B id, else its row number)."""
    by_name: dict[str, list[int]] = {}
    for i, (name, _, _) in enumerate(rows):
        by_name.setdefault(name, []).append(i)
    out = [name for name, _, _ in rows]
    for name, members in by_name.items():
        if len(members) < 2:
            continue
        values = [rows[i][2] for i in members]
        differing = [k for k in settings if len({json.dumps(v.get(k), default=str) for v in values}) > 1]
        key = "seed" if "seed" in differing else differing[0] if len(differing) == 1 else None
        labels = [f"{key}={_label(v.get(key))}" if key else str(v.get(f"{s.RUN_INFO_PREFIX}ID") or "")
                  for v in values]
        if len(set(labels)) < len(labels) or not all(labels):
            labels = [f"row {rows[i][1] + 1}" for i in members]
        for i, label in zip(members, labels, strict=True):
            out[i] = f"{name} ({label})"
    return out


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
