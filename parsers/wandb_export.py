"""Reader for W&B exports recognised by content: API history dumps (CSV, JSON, JSON lines, Parquet), chart exports
and runs tables (CSV), and a run directory's lone ``config.yaml`` / ``wandb-summary.json``."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.reader import NotThisFormat, Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import CUT_LAST_ROW, ends_its_last_line
from parsers.wandb_csv import CHART, HISTORY, RUNS_TABLE, csv_kind, header_of, read_chart_export, read_runs_table
from parsers.wandb_history import (
    config_frame,
    empty_cells_note,
    history_log,
    read_history_file,
    runs_of,
    sampling_note,
    wide_to_long,
)
from parsers.wandb_run import is_wandb_config, read_config_yaml, read_summary_json, summary_values

FORMAT = HISTORY
SIDECARS = {"config.yaml": "config", "wandb-summary.json": "summary"}


def _kind(head: bytes, name: str) -> str | None:
    suffix = Path(name).suffix.lower()
    if head.startswith(b"PAR1") or (suffix in {".json", ".jsonl", ".ndjson"} and b'"_step"' in head):
        return HISTORY
    return csv_kind(header_of(head.decode("utf-8", errors="replace")))


def sniff(head: bytes, name: str) -> bool:
    """A W&B history dump, chart export or runs table, or a W&B ``config.yaml`` / ``wandb-summary.json``."""
    if Path(name).name in SIDECARS:
        return Path(name).name == "wandb-summary.json" or head.startswith(b"wandb_version") or b"_wandb:" in head
    return _kind(head, name) is not None


def read(path: Path, context: ReadContext) -> list[Piece]:
    shown, run_name = context.shown, context.run
    if path.name in SIDECARS:
        if path.name == "config.yaml" and not is_wandb_config(path):
            raise NotThisFormat(f"{shown}: a config.yaml that W&B did not write")
        values = (read_config_yaml(path, shown) if path.suffix == ".yaml"
                  else summary_values(read_summary_json(path, shown)))
        prefix = s.SUMMARY_PREFIX if path.suffix == ".json" else ""
        log = ParsedLog(s.empty(s.METRICS_SCHEMA), s.empty(s.EVENTS_SCHEMA),
                        config_frame(values, run=run_name, source=shown, prefix=prefix))
        return [Piece(path, "wandb-" + SIDECARS[path.name], log, config_only=True)]
    kind = _kind(context.head, path.name)
    if kind == CHART:
        series, notes = read_chart_export(path, shown)
        context.warnings.extend(notes)
        return [Piece(path, CHART, x.log, x.name, sampled=any("sampled" in w for w in x.log.warnings))
                for x in series]
    if kind == RUNS_TABLE:
        return [Piece(path, RUNS_TABLE, ParsedLog(s.empty(s.METRICS_SCHEMA), s.empty(s.EVENTS_SCHEMA), configs),
                      run, config_only=True) for run, configs in read_runs_table(path, shown, context.warnings)]
    wide = read_history_file(path, shown, context.warnings, numbers=True)
    if path.suffix.lower() == ".csv" and wide.height and not ends_its_last_line(path):
        # (pandas ends a history dump's last line; the W&B UI's chart exports and runs tables, read above, do not)
        wide = wide.slice(0, wide.height - 1)
        context.warnings.append(f"{shown}: {CUT_LAST_ROW}")
    # dumps of run.history() come in no particular order; JSON lines are written as logged (a step going back
    # there is a restart)
    in_order = path.suffix.lower() in {".jsonl", ".ndjson"}
    runs = runs_of(wide)
    if runs is None:
        return [_history_piece(wide, path, shown, run_name, in_order)]
    column, parts = runs
    context.warnings.append(f"{shown}: {len(parts)} runs, told apart by its {column} column: each read as a run of "
                            "its own")
    return [_history_piece(part, path, shown, label, in_order, named=True) for label, part in parts.items()]


def _history_piece(wide: pl.DataFrame, path: Path, shown: str, run: str, in_order: bool,
                   named: bool = False) -> Piece:
    """One run's piece of a history dump (``named``: one of several runs in the file, named by ``run``)."""
    long, steps = wide_to_long(wide, shown)
    log = history_log(long, run=run, source=shown, sort=not in_order)
    where = f"{shown} ({run})" if named else shown
    note = sampling_note(steps, where)
    if path.suffix.lower() == ".csv" and (empty := empty_cells_note(wide, where, bool(long["value"].is_nan().any()))):
        log.warnings.append(empty)
    if note:
        log.warnings.append(note)
    return Piece(path, HISTORY, log, run if named else None, sampled=note is not None)
