"""Canonical frames on disk as Parquet: ``forensics export`` writes them for notebooks, and the run cache
(:mod:`forensics.cache`) keeps them so that an unchanged run is not parsed twice.

A frames directory holds ``runs.json`` (each run's name, path, sources, warnings, skipped files and tags, with the
format version) and ``<n>.metrics.parquet``, ``<n>.events.parquet``, ``<n>.configs.parquet`` per run ``n``.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.run import Run, Source
from parsers.textfile import InputError, _oserror, json_value

FORMAT_VERSION = 2  # of a frames directory; part of the run cache's code signature
_SOURCE_FIELDS = {f.name for f in fields(Source)}
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
    """Read runs written by :func:`write_frames` (or ``forensics export``). Raises :class:`parsers.InputError`, with
    one line that names the file, when ``directory`` holds no ``runs.json`` or anything in it is not what
    :func:`write_frames` of this version writes: ``runs.json`` not JSON, of another frames format version or
    another structure; a Parquet file missing or unreadable; a frame whose columns or dtypes are not exactly its
    canonical schema (:data:`parsers.schema.METRICS_SCHEMA`, ``EVENTS_SCHEMA``, ``CONFIGS_SCHEMA``).

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
    >>> original.metrics.with_columns(pl.col("step").cast(pl.Float64)).write_parquet(Path(out) / "0.metrics.parquet")
    >>> read_frames(out)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    parsers.errors.InputError: .../0.metrics.parquet: not a metrics frame of forensics (column step is Float64, not Int64)
    >>> shutil.rmtree(out)
    """
    root = Path(directory)
    index = root / "runs.json"
    try:
        meta = json_value(index.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{root}: not a frames directory (no runs.json)") from None
    except OSError as exc:
        raise _oserror(index, exc) from None
    except ValueError as exc:  # not JSON (json.JSONDecodeError), not UTF-8 (UnicodeDecodeError), nested too deep
        raise InputError(f"{index}: not a frames index ({_first_line(exc)})") from None
    runs = []
    for i, info in enumerate(_index_runs(meta, index)):
        frames = {name: _read_frame(root / f"{i}.{name}.parquet", name, schema) for name, schema in _FRAMES}
        runs.append(Run(name=info["name"], path=info["path"], sources=[Source(**src) for src in info["sources"]],
                        warnings=list(info["warnings"]), skipped=list(info["skipped"]), tags=list(info["tags"]),
                        **frames))
    return runs


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _index_runs(meta: object, index: Path) -> list[dict]:
    """The runs ``runs.json`` describes, once its format version and structure are those :func:`write_frames`
    writes (else :class:`InputError` naming the file and what is wrong)."""

    def wrong(what: str) -> InputError:
        return InputError(f"{index}: not a frames index ({what})")

    if not isinstance(meta, dict):
        raise wrong(f"a JSON {type(meta).__name__}, not an object")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise InputError(f"{index}: frames format version {version!r}; this version of forensics reads version "
                         f"{FORMAT_VERSION} (export the run again)")
    runs = meta.get("runs")
    if not isinstance(runs, list) or not runs:
        raise wrong("no list of runs")
    for i, info in enumerate(runs):
        if not isinstance(info, dict):
            raise wrong(f"run {i} is not an object")
        for key in ("name", "path"):
            if not isinstance(info.get(key), str):
                raise wrong(f"run {i}: {key} is not a string")
        for key in ("warnings", "skipped"):
            if not _strings(info.get(key)):
                raise wrong(f"run {i}: {key} is not a list of strings")
        sources, tags = info.get("sources"), info.get("tags")
        if not isinstance(sources, list) or not all(
            isinstance(src, dict) and set(src) == _SOURCE_FIELDS and isinstance(src["path"], str)
            and isinstance(src["format"], str) and isinstance(src["sampled"], bool) for src in sources
        ):
            raise wrong(f"run {i}: sources is not a list of sources")
        if not isinstance(tags, list) or not all(
            isinstance(tag, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in tag.items())
            for tag in tags
        ):
            raise wrong(f"run {i}: tags is not a list of name mappings")
    return runs


def _read_frame(path: Path, name: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """One frame, whose columns and dtypes must be exactly ``schema`` (in any order; returned in schema order)."""
    try:
        frame = pl.read_parquet(path)
    except OSError as exc:
        raise _oserror(path, exc) from None
    # what Polars raises on a damaged file: ComputeError ("File out of specification", a truncated or garbage
    # file), other PolarsErrors while decoding, and for some damaged pages a Rust panic (PanicException, which is
    # a BaseException: a broad ``except Exception`` would not stop it)
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({_first_line(exc)})") from None
    got = dict(frame.schema)
    if got != schema:
        missing = [c for c in schema if c not in got]
        extra = [c for c in got if c not in schema]
        wrong = [f"column {c} is {got[c]}, not {schema[c]}"
                 for c in schema if c in got and got[c] != schema[c]]
        said = ", ".join(([f"no column {', '.join(missing)}"] if missing else [])
                         + ([f"other columns {', '.join(extra)}"] if extra else []) + wrong)
        raise InputError(f"{path}: not a {name} frame of forensics ({said})")
    return frame.select(list(schema))
