"""MLflow's file store: ``mlruns/<experiment>/<run_id>/`` with ``meta.yaml`` (run id, name, start and end time,
status), ``metrics/<name>`` (one ``timestamp value step`` line per logged value; nested names are folders),
``params/<name>`` (one value each: the config) and ``tags/`` (``mlflow.runName``). Each run directory is one run.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> meta = Path("tests/fixtures/real/mlflow/swahili_stt_keras/mlruns/1/ed05f9cd599442fe9a0c9222184710b8/meta.yaml")
>>> piece = read(meta, ReadContext("meta.yaml", "r"))[0]
>>> piece.run, piece.log.metrics.filter(metric="loss").select("step", "value").row(0)
('ed05f9cd599442fe9a0c9222184710b8', (0, 332.6841735839844))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from parsers import schema as s
from parsers.metric_names import canonical
from parsers.reader import NotThisFormat, Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import read_yaml_mapping
from parsers.wandb_history import config_frame

FORMAT = "mlflow"
FIRST = True  # a run's meta.yaml claims the files of its run directory
_STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}


def sniff(head: bytes, name: str) -> bool:
    """A run's ``meta.yaml`` (it names ``run_id``) or an experiment's (``experiment_id`` and
    ``artifact_location``)."""
    head = b"\n" + head
    return Path(name).name == "meta.yaml" and (b"\nrun_id:" in head or (
        b"\nexperiment_id:" in head and b"\nartifact_location:" in head))


def read(path: Path, context: ReadContext) -> list[Piece]:
    root = path.parent
    meta = read_yaml_mapping(path, context.shown, "MLflow meta.yaml")
    if not meta.get("run_id"):  # an experiment: its runs are read from their own meta.yaml
        if any((d / "meta.yaml").is_file() for d in root.iterdir() if d.is_dir()):
            return []
        raise NotThisFormat(f"{context.shown}: an MLflow experiment with no runs")
    name = _text(root / "tags" / "mlflow.runName") or str(meta.get("run_name") or meta.get("name") or meta["run_id"])
    files = [f for f in (root / "metrics").rglob("*") if f.is_file()] if (root / "metrics").is_dir() else []
    context.consumed.update(f for f in root.rglob("*") if f.is_file())
    context.owners[root] = name
    frames = [_metric_file(f, (root / "metrics"), context) for f in sorted(files)]
    metrics = pl.concat(frames) if frames else s.empty(s.METRICS_SCHEMA)
    metrics = metrics.with_columns(run=pl.lit(name, dtype=s.METRICS_SCHEMA["run"]))
    params = {f.name: _text(f) for f in sorted((root / "params").glob("*"))} if (root / "params").is_dir() else {}
    configs = config_frame(params, run=name, source=context.shown)
    status = meta.get("status")
    events = _events(meta, name, context.shown, metrics, _STATUS.get(status, str(status)) if status else None)
    log = ParsedLog(metrics, events, configs, n_attempts=1)
    return [Piece(path, FORMAT, log, run=name)]


def ignores(path: Path, owners: dict[Path, str]) -> bool:
    """An experiment's own ``meta.yaml`` beside its run directories."""
    return path.name == "meta.yaml" and any(d.parent == path.parent for d in owners)


def _metric_file(path: Path, base: Path, context: ReadContext) -> pl.DataFrame:
    key = path.relative_to(base).as_posix()
    try:
        rows = pl.read_csv(path, has_header=False, separator=" ", new_columns=["ms", "value", "step"],
                           schema_overrides={"ms": pl.Float64, "value": pl.String, "step": pl.Int64},
                           truncate_ragged_lines=True)
    except (pl.exceptions.PolarsError, OSError) as exc:
        context.warnings.append(f"{context.display(path)}: cannot read MLflow metric ({str(exc).splitlines()[0]})")
        return s.empty(s.METRICS_SCHEMA)
    metric, _ = canonical(key)
    frame = rows.filter(pl.col("step").is_not_null()).select(
        attempt=pl.lit(1), step="step", metric=pl.lit(metric), value=pl.col("value").cast(pl.Float64, strict=False),
        wall_time=pl.col("ms") / 1000.0, source=pl.lit(context.shown))
    return s.conform(frame, s.METRICS_SCHEMA)


def _events(meta: dict[str, Any], run: str, source: str, metrics: pl.DataFrame, status: str | None) -> pl.DataFrame:
    rows = []
    start, end = meta.get("start_time"), meta.get("end_time")
    first = metrics["step"].min() if metrics.height else None
    last = metrics["step"].max() if metrics.height else None
    if isinstance(start, int | float):
        rows.append({"kind": s.EV_PROCESS_START, "step": first, "wall_time": start / 1000.0,
                     "text": f"MLflow run {meta.get('run_id')} started"})
    if isinstance(end, int | float) and status in {"FAILED", "KILLED"}:
        rows.append({"kind": s.EV_ERROR if status == "FAILED" else s.EV_KILLED, "step": last, "wall_time": end / 1000.0,
                     "text": f"MLflow run status {status}"})
    elif isinstance(end, int | float) and status == "FINISHED":  # the program ended its run without an error
        rows.append({"kind": s.EV_TRAINING_ENDED, "step": last, "wall_time": end / 1000.0,
                     "text": "MLflow run status FINISHED (the program ended its run without an error)"})
    frame = pl.DataFrame(rows, schema={"kind": pl.String, "step": pl.Int64, "wall_time": pl.Float64, "text": pl.String})
    return s.conform(frame.with_columns(run=pl.lit(run), source=pl.lit(source), attempt=pl.lit(1)), s.EVENTS_SCHEMA)


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip() if path.is_file() else None
    except OSError:
        return None
