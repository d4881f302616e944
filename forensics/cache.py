"""The run cache: a run that has not changed since it was last read is neither parsed nor analyzed again.

Two kinds of entries, each a directory under the cache dir:

- ``frames/<input>-<code>-<name>``: a run's canonical frames as :func:`parsers.write_frames` writes them
  (:func:`cached_load_runs`);
- ``compare/<input>-<code>``: one run's ``forensics compare`` row (``row.json``) and overlay curves
  (``curves.parquet``) (:func:`result_entry`, :func:`read_result`, :func:`write_result`).

**Keys.** ``<input>`` is :func:`input_signature`: the run path's resolved location and, for every file under it, its
relative path, size, mtime and :func:`content_digest`: a SHA-256 digest of all its bytes or, for a file no reader
takes (a checkpoint beside the logs), of its first 64 KiB, all that a read looks at. The digest is what guarantees
freshness: a file rewritten in place with its size and mtime restored gives another key (the mtime is kept too, so a
touched file is read again). The file is streamed in 1 MiB blocks (bounded memory) at about 1.8 GB/s (hardware SHA
instructions; BLAKE2b does 1.3 GB/s here), 7 to 13 times faster than parsing it on two CPUs, so a cache hit still
saves most of the work (``benchmarks/cache_digest.py``: 0.27 s for a 500 MB log that parses in 1.9 to 3 s).
``<code>`` is :func:`code_signature`: the frames format version, the Polars version and the name, size and mtime of
every source file of the code that made the entry: the ``parsers`` package and this module for frames
(:data:`FRAME_CODE`), the ``parsers`` and ``forensics`` packages for compare results (:data:`RESULT_CODE`). Changing
a run's files or the code gives a new key; an entry under an old key is never read again (nor deleted: clear the
cache dir to reclaim the space).

**Stage, then publish.** An entry is written whole into a staging directory beside it (``.tmp-*``), then renamed into
place (:func:`publish`), so a reader sees a complete entry or none, also while other processes (``compare``'s
workers, a second ``forensics`` call) write the same entry; the first to publish wins and the others drop their copy.
A cache that cannot be written is skipped silently: caching never makes a command fail.

**Self-healing.** :func:`publish` seals an entry with the digest of each of its files (``digests.json``), and an
entry is read only when it is :func:`intact`: exactly the files it was published with, byte for byte (a flipped
bit in a Parquet page often decodes without error into other values, and some damage makes Polars panic). What is
then read is checked again: ``runs.json`` against the structure and format version of the frames, each frame's
columns and dtypes against the canonical schema (:func:`parsers.read_frames`), a compare row against
:class:`forensics.comparison.RunRow` and its curves against the overlay schema. An entry that fails any check is
removed and made again from the run, exactly as if it had never been there: it is never served, and never turns
into an error or an unreadable run.

**URLs.** A run at a URL (``s3://``, ``gs://``, ``memory://``: :mod:`parsers.remote`) is keyed from its listing
alone (:func:`url_signature`: each file's size and the ETag or checksum the storage lists), so a hit downloads
nothing of the run. The cache itself may be at a URL (``cache_dir="s3://bucket/cache"``, frames and compare
results alike, so that every machine of a cluster reuses them): with no rename in object storage, an entry's files
are uploaded under a fresh ``.tmp-`` prefix and its seal, naming them, is written last (:func:`publish_remote`); an
entry without its seal is never read, and one whose files do not match it is unsealed (:func:`fetch_remote`).

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
from parsers import InputError, Run, load_runs, registry, remote
from parsers.frames import FORMAT_VERSION, read_frames, write_frames
from parsers.reader import HEAD_BYTES
from parsers.textfile import json_value

PARSERS_CODE = Path(parsers.__file__).resolve().parent
FORENSICS_CODE = Path(__file__).resolve().parent
FRAME_CODE = (PARSERS_CODE, Path(__file__).resolve())  # what makes a frames entry: the readers and this module
RESULT_CODE = (FORENSICS_CODE, PARSERS_CODE)  # what makes a compare result: the readers and the analyses
CHUNK = 1 << 20  # bytes read at a time when a file is hashed
SEAL = "digests.json"  # in each entry: the digest of every other file in it (see publish and intact)


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


def content_digest(path: Path, name: str | None = None) -> str:
    """What a read of the file at ``path`` can depend on, as a hex digest: all of its bytes, or only the first
    :data:`parsers.reader.HEAD_BYTES` when no reader takes it (a checkpoint, an image: the readers are chosen from
    that head and the name ``name``, which is how :func:`parsers.load_runs` shows the file, and such a file is not
    read further). Streamed in :data:`CHUNK` blocks, so memory stays bounded whatever the size; a file that cannot
    be read is said by its error number (the read will fail the same way).

    >>> import tempfile
    >>> log = Path(tempfile.mkdtemp()) / "train.log"
    >>> _ = log.write_text(" iteration 10/100 | lm loss: 2.500000E+00 |\\n")
    >>> first = content_digest(log)
    >>> _ = log.write_text(" iteration 10/100 | lm loss: 2.400000E+00 |\\n")  # same size, one digit changed
    >>> content_digest(log) == first, len(first)
    (False, 64)
    >>> content_digest(log.parent / "gone.log")
    'unreadable:2'
    >>> shutil.rmtree(log.parent)
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
            digest = hashlib.sha256(head)
            if registry.reader_for(head, str(path) if name is None else name) is None:
                return "head:" + digest.hexdigest()
            block = bytearray(CHUNK)
            view = memoryview(block)
            while size := handle.readinto(block):
                digest.update(view[:size])
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    return digest.hexdigest()


def input_signature(path: str | Path) -> str:
    """A key for a run path: its resolved location and every file's relative path, size, mtime and
    :func:`content_digest`. A URL is keyed without downloading anything (:func:`url_signature`).

    >>> import tempfile
    >>> tmp = Path(tempfile.mkdtemp())
    >>> run = shutil.copytree("sample_logs/clean-1.3B", tmp / "run")
    >>> before = input_signature(run)
    >>> before == input_signature(run), len(before)
    (True, 24)
    >>> log = run / "train.log"
    >>> os.utime(log, ns=(0, 0))  # same bytes, another mtime: another key (the mtime is kept in the key)
    >>> input_signature(run) == before
    False
    >>> after_touch, stamp = input_signature(run), log.stat()
    >>> text = log.read_text()
    >>> _ = log.write_text(text.replace("lm loss: 1.0", "lm loss: 9.0", 1))  # same size: one digit changed
    >>> os.utime(log, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # and the mtime restored
    >>> log.stat().st_size == stamp.st_size, input_signature(run) == after_touch
    (True, False)
    >>> shutil.rmtree(tmp)
    """
    if remote.is_url(path):
        return url_signature(str(path))
    given = Path(path)
    root = given.resolve()
    h = hashlib.sha256(os.fsencode(root))  # (a name that is not UTF-8 is bytes the OS gave: hashed as they are)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for p in files:
        relative = p.name if p == root else str(p.relative_to(root))
        try:
            st = p.stat()
            stamp = f"{st.st_size}:{st.st_mtime_ns}"
        except OSError as exc:  # gone since it was listed
            stamp = f"unreadable:{exc.errno}"
        # the name the readers are shown: the path as given for a single file, else the path inside the run
        shown = str(given) if p == root else relative
        h.update(f"{relative}\0{stamp}\0{content_digest(p, shown)}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:24]


VERSION_MARKS = ("ETag", "etag", "md5Hash", "crc32c", "generation", "VersionId", "version_id", "blob_id", "sha256",
                 "checksum", "LastModified", "last_modified", "updated", "mtime", "modified", "created")


def url_signature(url: str, found: remote.Listing | None = None) -> str:
    """A key for the run at ``url``, from its listing alone (nothing is downloaded): the URL and, for every file
    (hidden ones left out, as a read leaves them), its relative path, size and the version marks the storage
    lists of it: those of :data:`VERSION_MARKS` it gives (S3: ``ETag``, ``LastModified``; GCS: ``md5Hash``,
    ``crc32c``, ``generation``, ``updated``; Hugging Face: ``blob_id``; fsspec's memory store: ``created``). A
    file with none of them is keyed by a digest of its bytes, streamed. A ``file://`` URL is keyed as its local
    path (content digests), and apart from it; a URL that cannot be listed gets a key of its error, under which
    nothing is kept (its read fails the same way). ``found``: the run's listing when the caller has it already
    (:func:`forensics.fleet.index` lists a whole tree once), so nothing is asked of the storage.

    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> fs.pipe("/sig/tr8/train.log", b"iteration 1/10 | lm loss: 2.5 |\\n")
    >>> first = url_signature("memory://sig/tr8")
    >>> first == input_signature("memory://sig/tr8/"), len(first)
    (True, 24)
    >>> fs.pipe("/sig/tr8/train.log", b"iteration 1/10 | lm loss: 2.4 |\\n")  # rewritten: same size, new mark
    >>> url_signature("memory://sig/tr8") == first
    False
    >>> fs.rm("/sig", recursive=True)
    """
    h = hashlib.sha256(remote.shown(url).encode("utf-8", "surrogateescape"))
    try:
        local = remote.local_path(url)
        if local is not None:
            h.update(f"\0{input_signature(local)}".encode())
            return h.hexdigest()[:24]
        found = found or remote.listing(url)
    except InputError as exc:
        h.update(f"\0unreadable:{exc}".encode("utf-8", "surrogateescape"))
        return h.hexdigest()[:24]
    for file in found.files:
        marks = {key: str(file.info[key]) for key in VERSION_MARKS if file.info.get(key) is not None}
        stamp = json.dumps(marks or {"sha256": _remote_digest(found.fs, file.path)}, sort_keys=True)
        h.update(f"{file.relative}\0{file.info.get('size')}\0{stamp}\0".encode("utf-8", "surrogateescape"))
    for warning in found.warnings:
        h.update(f"{warning}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:24]


def _remote_digest(fs: Any, path: str) -> str:
    """The SHA-256 of a remote file's bytes, streamed in :data:`CHUNK` blocks; an error's name when it cannot be
    read (the read will fail too)."""
    digest = hashlib.sha256()
    try:
        with fs.open(path, "rb") as handle:
            while block := handle.read(CHUNK):
                digest.update(block)
    except Exception as exc:  # any storage error: the key says so, the read reports it
        return f"unreadable:{type(exc).__name__}"
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _seal(directory: Path) -> None:
    """Write :data:`SEAL` into ``directory``: the digest of each file in it."""
    digests = {p.name: _file_digest(p) for p in sorted(directory.iterdir()) if p.name != SEAL}
    (directory / SEAL).write_text(json.dumps(digests, indent=1), encoding="utf-8")


def intact(entry: Path) -> bool:
    """Whether cache ``entry`` holds exactly the files :func:`publish` sealed it with, each byte for byte.

    >>> import tempfile
    >>> tmp = Path(tempfile.mkdtemp())
    >>> publish(tmp / "entry", lambda staging: (staging / "a.txt").write_text("first"))
    >>> intact(tmp / "entry"), intact(tmp / "missing")
    (True, False)
    >>> _ = (tmp / "entry" / "a.txt").write_text("frist")  # same size, other bytes
    >>> intact(tmp / "entry")
    False
    >>> shutil.rmtree(tmp)
    """
    try:
        sealed = json_value((entry / SEAL).read_bytes())
        present = sorted(p.name for p in entry.iterdir() if p.name != SEAL)
        # OSError: a file gone, unreadable or a directory; ValueError: the seal is not JSON (or not UTF-8)
        return (isinstance(sealed, dict) and sorted(sealed) == present
                and all(sealed[name] == _file_digest(entry / name) for name in present))
    except (OSError, ValueError):
        return False


def discard(entry: Path) -> None:
    """Remove a cache entry that cannot be used, whatever is there (a directory, a file), so that a fresh one can
    be published in its place; a cache that cannot be changed is left as it is."""
    try:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink(missing_ok=True)
    except OSError:
        pass


def publish(entry: Path, write: Callable[[Path], object]) -> None:
    """Make cache ``entry`` appear whole or not at all: ``write`` fills a staging directory beside it, which is
    sealed (:func:`intact`) and then renamed into place (or dropped when another process got there first). A
    cache that cannot be written is skipped silently.

    >>> import tempfile
    >>> tmp = Path(tempfile.mkdtemp())
    >>> publish(tmp / "entry", lambda staging: (staging / "a.txt").write_text("first"))
    >>> publish(tmp / "entry", lambda staging: (staging / "a.txt").write_text("second"))  # there already: kept
    >>> [p.name for p in tmp.iterdir()], (tmp / "entry" / "a.txt").read_text()
    (['entry'], 'first')
    >>> sorted(p.name for p in (tmp / "entry").iterdir())
    ['a.txt', 'digests.json']
    >>> shutil.rmtree(tmp)
    """
    staging = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
        write(staging)
        _seal(staging)
        if not entry.exists():
            os.replace(staging, entry)
            staging = None
    except OSError:
        pass
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def cached_load_runs(path: str | Path, cache_dir: str | Path | None = None, name: str | None = None,
                     signature: str | None = None) -> list[Run]:
    """:func:`parsers.load_runs`, through the frames cache: a run whose files have not changed (see
    :func:`input_signature`) since it was last read is read back from ``cache_dir`` (default:
    :func:`default_cache_dir`) instead of being parsed again. An entry that is not :func:`intact` or that
    :func:`parsers.read_frames` refuses is removed and made again from the run.

    >>> import tempfile
    >>> cache_dir = tempfile.mkdtemp()
    >>> [parsed] = cached_load_runs("sample_logs/tr8-104B-sample", cache_dir)  # parsed, then published
    >>> [entry] = [p.parent for p in Path(cache_dir).glob("*/*/runs.json")]
    >>> entry.parent.name
    'frames'
    >>> [cached] = cached_load_runs("sample_logs/tr8-104B-sample", cache_dir)  # read back from the cache
    >>> cached.name, cached.metrics.equals(parsed.metrics), cached.configs.equals(parsed.configs)
    ('tr8-104B-sample', True, True)
    >>> _ = (entry / "0.metrics.parquet").write_bytes(b"garbage")  # a damaged entry: parsed again, and replaced
    >>> [healed] = cached_load_runs("sample_logs/tr8-104B-sample", cache_dir)
    >>> healed.metrics.equals(parsed.metrics), intact(entry)
    (True, True)
    >>> shutil.rmtree(cache_dir)
    """
    if cache_dir is not None and remote.is_url(cache_dir):
        return _cached_load_runs_remote(path, str(cache_dir), name, signature)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    # the key is taken before the run is read: a file that changes while it is parsed leaves the entry under the
    # key of the old content, which is not looked up again
    entry = cache / "frames" / f"{signature or input_signature(path)}-{code_signature(*FRAME_CODE)}-{name or ''}"
    if entry.exists() or entry.is_symlink():
        if intact(entry):
            try:
                return read_frames(entry)
            except InputError:  # read_frames says so for anything it cannot read exactly (see there)
                pass
        discard(entry)
    runs = load_runs(path, name=name)
    publish(entry, lambda staging: write_frames(runs, staging))
    return runs


def _cached_load_runs_remote(path: str | Path, cache: str, name: str | None, signature: str | None) -> list[Run]:
    """:func:`cached_load_runs` with the cache at a URL (``s3://bucket/forensics-cache``): the entry is fetched
    (:func:`fetch_remote`) into a private temp dir and read from there; a run read afresh is published there
    (:func:`publish_remote`), replacing an entry that could not be used."""
    key = f"{signature or input_signature(path)}-{code_signature(*FRAME_CODE)}-{name or ''}"
    entry = f"{cache.rstrip('/')}/frames/{key}"
    with tempfile.TemporaryDirectory(prefix="forensics-cache-") as tmp:
        local = Path(tmp) / "entry"
        found = fetch_remote(entry, local)
        if found:
            try:
                return read_frames(local)
            except InputError:  # see cached_load_runs
                pass
    runs = load_runs(path, name=name)
    publish_remote(entry, lambda staging: write_frames(runs, staging), replace=found is not None)
    return runs


def fetch_remote(entry: str, local: Path) -> bool | None:
    """Download the cache entry at URL ``entry`` into the local directory ``local``, streamed: True when it is
    whole (every file its seal names, each byte for byte), None when it has no seal (not published, or still being
    published: never read), False when it cannot be used (damaged, or unreadable storage).

    A remote entry is ``<entry>/digests.json`` (the seal: ``{"staged": ".tmp-<id>", "digests": {name: sha256}}``)
    naming the ``<entry>/.tmp-<id>/`` prefix that holds its files (see :func:`publish_remote`).
    """
    try:
        fs, where = remote.filesystem(entry)
        try:
            sealed = json_value(fs.cat_file(f"{where}/{SEAL}"))
        except FileNotFoundError:
            return None
        staged, digests = sealed["staged"], sealed["digests"]  # (TypeError, KeyError: not a seal)
        names = list(digests)
        if not (isinstance(staged, str) and staged.startswith(".tmp-") and "/" not in staged and names
                and all(isinstance(n, str) and n and "/" not in n and not n.startswith(".") for n in names)):
            return False
        local.mkdir(parents=True, exist_ok=True)
        for name in names:
            fs.get_file(f"{where}/{staged}/{name}", str(local / name))  # streamed to disk in blocks
            if _file_digest(local / name) != digests[name]:
                return False
        return True
    except Exception:  # any storage or decoding error: the entry is not used, the run is read instead
        return False


def publish_remote(entry: str, write: Callable[[Path], object], replace: bool = False) -> None:
    """Publish cache entry ``entry`` (a URL) with the stage-then-publish rule of object storage, which has no
    rename: ``write`` fills a local temp dir, its files are uploaded under a fresh ``<entry>/.tmp-<id>/`` prefix,
    then the seal (:data:`SEAL`, naming that prefix and each file's digest) is written last, in one request, so a
    reader sees a whole entry or none. An entry already sealed is kept (first to publish wins) unless ``replace``
    (it could not be used). A cache that cannot be written is skipped silently.

    >>> import fsspec
    >>> publish_remote("memory://cachedoc/frames/k", lambda staging: (staging / "a.txt").write_text("first"))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     fetch_remote("memory://cachedoc/frames/k", Path(tmp) / "e"), (Path(tmp) / "e" / "a.txt").read_text()
    (True, 'first')
    >>> print(fetch_remote("memory://cachedoc/frames/unpublished", Path("unused")))
    None
    >>> fsspec.filesystem("memory").rm("/cachedoc", recursive=True)
    """
    import uuid

    try:
        fs, where = remote.filesystem(entry)
        if not replace and fs.exists(f"{where}/{SEAL}"):
            return
        with tempfile.TemporaryDirectory(prefix="forensics-cache-") as tmp:
            staging = Path(tmp)
            write(staging)
            digests = {p.name: _file_digest(p) for p in sorted(staging.iterdir())}
            staged = f".tmp-{uuid.uuid4().hex}"
            for name in digests:
                fs.put_file(str(staging / name), f"{where}/{staged}/{name}")
            fs.pipe_file(f"{where}/{SEAL}", json.dumps({"staged": staged, "digests": digests}).encode())
    except Exception:  # caching never makes a command fail
        pass


def unseal_remote(entry: str) -> None:
    """Remove the seal of cache entry ``entry`` (a URL) that cannot be used, so that a fresh one is published in
    its place (:func:`publish_remote` keeps a sealed entry); a cache that cannot be changed is left as it is."""
    try:
        fs, where = remote.filesystem(entry)
        fs.rm_file(f"{where}/{SEAL}")
    except Exception:
        pass


def result_entry(cache_dir: Path | str, path: str | Path, signature: str | None = None) -> Path | str:
    """Where the ``forensics compare`` result of the run at ``path`` is kept in ``cache_dir`` (a directory, or a
    URL: then the entry is one too); ``signature``: its :func:`input_signature`, when the caller took it already,
    before reading the run."""
    key = f"{signature or input_signature(path)}-{code_signature(*RESULT_CODE)}"
    if remote.is_url(cache_dir):
        return f"{str(cache_dir).rstrip('/')}/compare/{key}"
    return Path(cache_dir) / "compare" / key


def write_result(entry: Path | str, row: Mapping[str, Any], curves: pl.DataFrame) -> None:
    """Publish one run's compare row (as JSON; values JSON cannot hold are written as text) and overlay curves.

    >>> import tempfile
    >>> from forensics.compare import CURVE_SCHEMA
    >>> from forensics.comparison import RunRow
    >>> tmp = Path(tempfile.mkdtemp())
    >>> curves = pl.DataFrame({"run": ["a"], "metric": ["loss"], "step": [10]}, schema_overrides=CURVE_SCHEMA)
    >>> write_result(tmp / "entry", {**vars(RunRow("a")), "final_loss": 2.5}, curves.with_columns(
    ...     [pl.lit(None, dtype).alias(c) for c, dtype in CURVE_SCHEMA.items() if c not in curves.columns]))
    >>> row, back = read_result(tmp / "entry")
    >>> row["name"], row["final_loss"], back.select("run", "metric", "step").rows()
    ('a', 2.5, [('a', 'loss', 10)])
    >>> read_result(tmp / "missing") is None
    True
    >>> shutil.rmtree(tmp)
    """
    def write(staging: Path) -> None:
        (staging / "row.json").write_text(json.dumps(dict(row), default=str), encoding="utf-8")
        curves.write_parquet(staging / "curves.parquet")

    if isinstance(entry, str):  # at a URL (see result_entry)
        publish_remote(entry, write)
    else:
        publish(entry, write)


def read_result(entry: Path | str) -> tuple[dict[str, Any], pl.DataFrame] | None:
    """The row and curves :func:`write_result` kept in ``entry``, or None when it is missing or cannot be used:
    not :func:`intact`, a row that is not a JSON object :class:`forensics.comparison.RunRow` takes, or curves whose
    columns and dtypes are not exactly :data:`forensics.compare.CURVE_SCHEMA` (such an entry is removed, so the
    result computed again can take its place). An entry at a URL is fetched whole first (:func:`fetch_remote`)."""
    if isinstance(entry, str):
        with tempfile.TemporaryDirectory(prefix="forensics-cache-") as tmp:
            found = fetch_remote(entry, Path(tmp) / "entry")
            kept = _result_files(Path(tmp) / "entry") if found else None
        if kept is None and found is not None:  # sealed but not usable: unsealed, so a fresh one is published
            unseal_remote(entry)
        return kept
    if not (entry.exists() or entry.is_symlink()):
        return None
    kept = _result_files(entry) if intact(entry) else None
    if kept is None:
        discard(entry)
    return kept


def _result_files(entry: Path) -> tuple[dict[str, Any], pl.DataFrame] | None:
    """The row and curves in the complete entry ``entry``, when they pass :func:`read_result`'s checks."""
    from forensics.compare import CURVE_SCHEMA  # (imported here: forensics.compare imports this module)
    from forensics.comparison import RunRow

    try:
        row = json_value((entry / "row.json").read_bytes())
        # TypeError: not a mapping, or not RunRow's fields; ValueError: an unknown outcome (a path of several
        # runs keeps the others' rows beside the first, see forensics.compare.RunResult)
        for one in [row, *(row.get("_others", []) if isinstance(row, dict) else [])]:
            if not isinstance(one, dict):
                raise TypeError("a row that is not a JSON object")
            RunRow(**{k: v for k, v in one.items() if k not in ("_others", "_inner")})
        frame = pl.read_parquet(entry / "curves.parquet")
        if dict(frame.schema) == CURVE_SCHEMA:
            return row, frame.select(list(CURVE_SCHEMA))
    # OSError: a file gone or unreadable; ValueError: not JSON, not UTF-8, nested too deep; TypeError: see
    # above; PolarsError, PanicException: a damaged Parquet file (see parsers.frames._read_frame)
    except (OSError, ValueError, TypeError, pl.exceptions.PolarsError, pl.exceptions.PanicException):
        pass
    return None
