"""Canonical frames on disk as Parquet: ``forensics export`` writes them for notebooks, and the run cache
(:mod:`forensics.cache`) keeps them so that an unchanged run is not parsed twice.

A frames directory holds ``runs.json`` (each run's name, path, sources, warnings, skipped files and tags, with the
format version) and ``<n>.metrics.parquet``, ``<n>.events.parquet``, ``<n>.configs.parquet`` per run ``n``.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.run import Run, Source
from parsers.textfile import InputError

FORMAT_VERSION = 2  # of a frames directory; part of the run cache's code signature
_FRAMES = (("metrics", s.METRICS_SCHEMA), ("events", s.EVENTS_SCHEMA), ("configs", s.CONFIGS_SCHEMA))


def write_frames(runs: list[Run], directory: str | Path) -> list[Path]:
    """Write the runs' canonical frames as Parquet (plus ``runs.json``) into ``directory``; returns the files.

    >>> import shutil, tempfile
    >>> from parsers import load_runs
    >>> out = tempfile.mkdtemp()
    >>> [p.name for p in write_frames(load_runs("sample_logs/tr8-104B-sample"), out)]
    ['runs.json', '0.metrics.parquet', '0.events.parquet', '0.configs.parquet']
    >>> shutil.rmtree(out)
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    meta = []
    written: list[Path] = [out / "runs.json"]
    for i, run in enumerate(runs):
        for name, _ in _FRAMES:
            target = out / f"{i}.{name}.parquet"
            getattr(run, name).write_parquet(target, statistics=False)
            written.append(target)
        meta.append({"name": run.name, "path": run.path, "warnings": run.warnings, "skipped": run.skipped,
                     "sources": [vars(src) for src in run.sources], "tags": run.tags})
    (out / "runs.json").write_text(json.dumps({"format_version": FORMAT_VERSION, "runs": meta}, indent=1),
                                   encoding="utf-8")
    return written


def read_frames(directory: str | Path) -> list[Run]:
    """Read runs written by :func:`write_frames` (or ``forensics export``); raises :class:`parsers.InputError`
    when ``directory`` holds no ``runs.json``.

    >>> import shutil, tempfile
    >>> from parsers import load_runs
    >>> out = tempfile.mkdtemp()
    >>> [original] = load_runs("sample_logs/clean-1.3B")
    >>> _ = write_frames([original], out)
    >>> [run] = read_frames(out)
    >>> run.name, run.metrics.equals(original.metrics), run.events.equals(original.events)
    ('clean-1.3B', True, True)
    >>> run.metrics.filter(metric="loss").select("step", "value").head(2).rows()
    [(1, 10.91159), (2, 10.5636)]
    >>> shutil.rmtree(out)
    """
    root = Path(directory)
    try:
        meta = json.loads((root / "runs.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{root}: not a frames directory ({exc})") from None
    runs = []
    for i, info in enumerate(meta["runs"]):
        frames = {name: s.conform(pl.read_parquet(root / f"{i}.{name}.parquet"), schema) for name, schema in _FRAMES}
        runs.append(Run(name=info["name"], path=info["path"], sources=[Source(**src) for src in info["sources"]],
                        warnings=list(info["warnings"]), skipped=list(info["skipped"]),
                        tags=list(info.get("tags", [])), **frames))
    return runs
