"""The run cache: a run that has not changed since it was last read is neither parsed nor analyzed again.

Two kinds of entries, each a directory under the cache dir:

- ``frames/<input>-<code>-<name>``: a run's canonical frames as :func:`parsers.write_frames` writes them
  (:func:`cached_load_runs`);
- ``compare/<input>-<code>``: one run's ``forensics compare`` row (``row.json``) and overlay curves
  (``curves.parquet``) (:func:`result_entry`, :func:`read_result`, :func:`write_result`).

**Keys.** ``<input>`` is :func:`input_signature`: the run path's resolved location and every file's relative path,
size and mtime (not its content, so reading a key costs one ``stat`` per file). ``<code>`` is :func:`code_signature`:
the frames format version, the Polars version and the name, size and mtime of every source file of the code that
made the entry: the ``parsers`` package and this module for frames (:data:`FRAME_CODE`), the ``parsers`` and
``forensics`` packages for compare results (:data:`RESULT_CODE`). Changing a run's files or the code gives a new key;
an entry under an old key is never read again (nor deleted: clear the cache dir to reclaim the space).

**Stage, then publish.** An entry is written whole into a staging directory beside it (``.tmp-*``), then renamed into
place (:func:`publish`), so a reader sees a complete entry or none, also while other processes (``compare``'s
workers, a second ``forensics`` call) write the same entry; the first to publish wins and the others drop their copy.
A cache that cannot be written is skipped silently: caching never makes a command fail. An entry that cannot be
read counts as missing (a broken frames entry is removed and the run parsed again).

**Outside the runs.** The cache dir is ``$FORENSICS_CACHE_DIR``, else ``$XDG_CACHE_HOME/forensics``, else
``~/.cache/forensics`` (:func:`default_cache_dir`), or a directory the caller names; nothing is ever written into a
run directory, which may be read-only, shared or still being written by the training job.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

import parsers
from parsers import InputError, Run, load_runs
from parsers.frames import FORMAT_VERSION, read_frames, write_frames

PARSERS_CODE = Path(parsers.__file__).resolve().parent
FORENSICS_CODE = Path(__file__).resolve().parent
FRAME_CODE = (PARSERS_CODE, Path(__file__).resolve())  # what makes a frames entry: the readers and this module
RESULT_CODE = (FORENSICS_CODE, PARSERS_CODE)  # what makes a compare result: the readers and the analyses


def default_cache_dir() -> Path:
    """``$FORENSICS_CACHE_DIR``, else ``$XDG_CACHE_HOME/forensics``, else ``~/.cache/forensics``."""
    if os.environ.get("FORENSICS_CACHE_DIR"):
        return Path(os.environ["FORENSICS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "forensics"


def code_signature(*code: Path) -> str:
    """Changes whenever the code of these package directories or files (default: :data:`FRAME_CODE`), the frames
    format version or Polars changes, so stale frames or results are never reused.

    >>> code_signature() == code_signature(*FRAME_CODE) != code_signature(*RESULT_CODE)
    True
    """
    h = hashlib.sha256(f"{FORMAT_VERSION}:{pl.__version__}".encode())
    files = (f for c in code or FRAME_CODE for f in (c.rglob("*.py") if c.is_dir() else [c]))
    for p in sorted(files):
        st = p.stat()
        h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def input_signature(path: str | Path) -> str:
    """A key for a run path: its resolved location and every file's relative path, size and mtime.

    >>> import shutil, tempfile
    >>> tmp = Path(tempfile.mkdtemp())
    >>> run = shutil.copytree("sample_logs/clean-1.3B", tmp / "run")
    >>> before = input_signature(run)
    >>> before == input_signature(run), len(before)
    (True, 24)
    >>> os.utime(run / "train.log", ns=(0, 0))  # same bytes, another mtime: another key
    >>> input_signature(run) == before
    False
    >>> shutil.rmtree(tmp)
    """
    root = Path(path).resolve()
    h = hashlib.sha256(str(root).encode())
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(root) if p != root else p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def publish(entry: Path, write: Callable[[Path], object]) -> None:
    """Make cache ``entry`` appear whole or not at all: ``write`` fills a staging directory beside it, which is
    then renamed into place (or dropped when another process got there first). A cache that cannot be written is
    skipped silently.

    >>> import shutil, tempfile
    >>> tmp = Path(tempfile.mkdtemp())
    >>> publish(tmp / "entry", lambda staging: (staging / "a.txt").write_text("first"))
    >>> publish(tmp / "entry", lambda staging: (staging / "a.txt").write_text("second"))  # there already: kept
    >>> [p.name for p in tmp.iterdir()], (tmp / "entry" / "a.txt").read_text()
    (['entry'], 'first')
    >>> shutil.rmtree(tmp)
    """
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


def cached_load_runs(path: str | Path, cache_dir: str | Path | None = None, name: str | None = None) -> list[Run]:
    """:func:`parsers.load_runs`, through the frames cache: a run whose files have not changed (size and mtime)
    since it was last read is read back from ``cache_dir`` (default: :func:`default_cache_dir`) instead of being
    parsed again.

    >>> import shutil, tempfile
    >>> cache_dir = tempfile.mkdtemp()
    >>> [parsed] = cached_load_runs("sample_logs/tr8-104B-sample", cache_dir)  # parsed, then published
    >>> [p.parent.parent.name for p in Path(cache_dir).glob("*/*/runs.json")]
    ['frames']
    >>> [cached] = cached_load_runs("sample_logs/tr8-104B-sample", cache_dir)  # read back from the cache
    >>> cached.name, cached.metrics.equals(parsed.metrics), cached.configs.equals(parsed.configs)
    ('tr8-104B-sample', True, True)
    >>> shutil.rmtree(cache_dir)
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    entry = cache / "frames" / f"{input_signature(path)}-{code_signature(*FRAME_CODE)}-{name or ''}"
    if (entry / "runs.json").exists():
        try:
            return read_frames(entry)
        except (OSError, InputError, pl.exceptions.PolarsError):
            shutil.rmtree(entry, ignore_errors=True)
    runs = load_runs(path, name=name)
    publish(entry, lambda staging: write_frames(runs, staging))
    return runs


def result_entry(cache_dir: Path, path: str | Path) -> Path:
    """Where the ``forensics compare`` result of the run at ``path`` is kept in ``cache_dir``."""
    return cache_dir / "compare" / f"{input_signature(path)}-{code_signature(*RESULT_CODE)}"


def write_result(entry: Path, row: Mapping[str, Any], curves: pl.DataFrame) -> None:
    """Publish one run's compare row (as JSON; values JSON cannot hold are written as text) and overlay curves.

    >>> import shutil, tempfile
    >>> tmp = Path(tempfile.mkdtemp())
    >>> write_result(tmp / "entry", {"name": "a", "final_loss": 2.5}, pl.DataFrame({"run": ["a"], "step": [10]}))
    >>> row, curves = read_result(tmp / "entry")
    >>> row, curves.rows()
    ({'name': 'a', 'final_loss': 2.5}, [('a', 10)])
    >>> read_result(tmp / "missing") is None
    True
    >>> shutil.rmtree(tmp)
    """
    def write(staging: Path) -> None:
        (staging / "row.json").write_text(json.dumps(dict(row), default=str), encoding="utf-8")
        curves.write_parquet(staging / "curves.parquet")

    publish(entry, write)


def read_result(entry: Path) -> tuple[dict[str, Any], pl.DataFrame] | None:
    """The row and curves :func:`write_result` kept in ``entry``, or None when it is missing or unreadable (an
    unreadable entry is removed, so the result computed again can take its place)."""
    try:
        row = json.loads((entry / "row.json").read_text(encoding="utf-8"))
        frame = pl.read_parquet(entry / "curves.parquet")
    except (OSError, ValueError, pl.exceptions.PolarsError):
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        return None
    return row, frame
