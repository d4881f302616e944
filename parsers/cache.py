"""Canonical frames on disk as Parquet: ``forensics export`` writes them for notebooks, and the run cache keeps
them outside the run directory (a user cache dir) keyed by every input file's size and mtime, so a second read of
an unchanged run skips parsing.

A frames directory holds ``runs.json`` (each run's name, path, sources, warnings, skipped files) and
``<n>.metrics.parquet``, ``<n>.events.parquet``, ``<n>.configs.parquet`` per run ``n``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.run import Run, Source, load_runs
from parsers.textfile import InputError

FORMAT_VERSION = 2
_FRAMES = (("metrics", s.METRICS_SCHEMA), ("events", s.EVENTS_SCHEMA), ("configs", s.CONFIGS_SCHEMA))


def default_cache_dir() -> Path:
    """``$FORENSICS_CACHE_DIR``, else ``$XDG_CACHE_HOME/forensics``, else ``~/.cache/forensics``."""
    if os.environ.get("FORENSICS_CACHE_DIR"):
        return Path(os.environ["FORENSICS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "forensics"


def code_signature(*packages: Path) -> str:
    """Changes whenever the code of these package directories (default: the parsers) or Polars changes, so stale
    frames or results are never reused."""
    h = hashlib.sha256(f"{FORMAT_VERSION}:{pl.__version__}".encode())
    for p in sorted(f for pkg in packages or (Path(__file__).resolve().parent,) for f in pkg.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def input_signature(path: str | Path) -> str:
    """A key for a run path: its resolved location and every file's relative path, size and mtime."""
    root = Path(path).resolve()
    h = hashlib.sha256(str(root).encode())
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(root) if p != root else p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def write_frames(runs: list[Run], directory: str | Path) -> list[Path]:
    """Write the runs' canonical frames as Parquet (plus ``runs.json``) into ``directory``; returns the files.

    >>> write_frames(load_runs("sample_logs/tr8-104B-sample"), "frames/")          # doctest: +SKIP
    [PosixPath('frames/runs.json'), PosixPath('frames/0.metrics.parquet'), ...]
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
    """Read runs written by :func:`write_frames` (or ``forensics export``).

    >>> runs = read_frames("frames/")                                             # doctest: +SKIP
    >>> runs[0].metrics.filter(metric="loss").head()                               # doctest: +SKIP
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


def cached_load_runs(path: str | Path, cache_dir: str | Path | None = None, name: str | None = None) -> list[Run]:
    """:func:`parsers.load_runs`, through the Parquet cache: a run whose files have not changed (size and mtime)
    since it was last read is read back from ``cache_dir`` instead of being parsed again. The cache lives outside
    the run directory; a cache that cannot be written is skipped silently."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    entry = cache / "frames" / f"{input_signature(path)}-{code_signature()}-{name or ''}"
    if (entry / "runs.json").exists():
        try:
            return read_frames(entry)
        except (OSError, InputError, pl.exceptions.PolarsError):
            shutil.rmtree(entry, ignore_errors=True)
    runs = load_runs(path, name=name)
    publish(entry, lambda staging: write_frames(runs, staging))
    return runs


def publish(entry: Path, write: Callable[[Path], object]) -> None:
    """Make cache ``entry`` appear whole or not at all: ``write`` fills a staging directory beside it, which is
    then renamed into place (or dropped when another process got there first). A cache that cannot be written is
    skipped silently."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
        write(staging)
        if entry.exists():
            shutil.rmtree(staging, ignore_errors=True)
        else:
            os.replace(staging, entry)
    except OSError:
        pass
