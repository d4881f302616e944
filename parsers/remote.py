"""Runs in object storage and on shared file systems: any path with a scheme (``s3://bucket/runs/tr8/``, ``gs://``,
``hf://``, ``memory://``, ``file://``) goes through fsspec (``s3fs`` and ``gcsfs`` are optional extras).

**Reading a URL run** (:func:`staged`): its files are listed (hidden ones left out, as on a local disk), each
file's head (:data:`parsers.reader.HEAD_BYTES`) is read with one ranged read, and the registry decides from it
which reader takes the file. Only those files are copied, streamed in :data:`BLOCK` blocks (bounded memory),
:data:`WORKERS` at a time, into a private local directory that keeps their relative paths (under ``$TMPDIR``,
which needs room for the run's logs). A file that no reader takes is never downloaded: its head alone is staged,
all that a read looks at, so it is skipped with the same words as on a local disk. The readers then read the
staging directory as they read any local run (:func:`parsers.load_runs` does this, and removes it afterwards);
every name they show is the URL's, never the staging directory's. A ``file://`` URL is its local path
(:func:`local_path`): nothing is copied.

**Errors** are one-line :class:`parsers.InputError` s naming the URL and the cause (:func:`failure`): a scheme
without its package (``s3://b/x: needs s3fs (pip install 'forensics[s3]')``), an unknown scheme, no credentials,
no such bucket or path, permission denied.

:func:`exists`, :func:`is_dir`, :func:`subdirectories`, :func:`run_name` and :func:`parent_name` are what a caller
that takes several runs (``forensics compare``'s discovery) asks of a URL.

>>> import fsspec
>>> fsspec.filesystem("memory").pipe("/docs/runs/a/train.log", b"iteration 1/10 | lm loss: 2.5 |\\n")
>>> is_url("memory://docs/runs"), is_url("C:/runs"), subdirectories("memory://docs/runs")
(True, False, ['memory://docs/runs/a'])
>>> with staged("memory://docs/runs/a") as stage:
...     sorted(p.name for p in stage.root.iterdir()), stage.root.name
(['train.log'], 'a')
>>> fsspec.filesystem("memory").rm("/docs", recursive=True)
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parsers.errors import InputError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

BLOCK = 4 << 20  # bytes copied at a time when a file is staged
WORKERS = 8  # files staged at once
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+(::[A-Za-z][A-Za-z0-9+.-]+)*://")  # 2+ chars: C:/ is a drive letter
_EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}  # pyproject's optional extras
_NO_CREDENTIALS = {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
                   "DefaultCredentialsError", "RefreshError", "LocalTokenNotFoundError", "Unauthorized"}
_MISSING = {"NoSuchBucket", "NoSuchKey", "NotFound", "RepositoryNotFoundError", "EntryNotFoundError",
            "RevisionNotFoundError"}  # (by class name: botocore, google, huggingface_hub)


def is_url(path: object) -> bool:
    """Whether ``path`` is a URL: a scheme of two or more characters (chained ones too, ``simplecache::s3://``)
    followed by ``://``. A Windows drive letter is not a scheme; a :class:`~pathlib.Path` is never a URL.

    >>> is_url("s3://bucket/runs/tr8/"), is_url("file:///tmp/run"), is_url("C://runs"), is_url("runs/tr8")
    (True, True, False, False)
    """
    return isinstance(path, str) and _URL.match(path) is not None


def shown(url: str) -> str:
    """``url`` as names show it: without a trailing slash (as a local ``runs/tr8/`` shows as ``runs/tr8``).

    >>> shown("s3://bucket/runs/tr8/"), shown("memory://")
    ('s3://bucket/runs/tr8', 'memory://')
    """
    stripped = url.rstrip("/")
    return stripped if not stripped.endswith(":") else url


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].rsplit("::", 1)[-1]


def _one_line(text: str, most: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 3] + "..."


def failure(url: str, exc: BaseException) -> InputError:
    """The one-line :class:`InputError` for a failed storage call on ``url``: the cause told by the exception's
    class (botocore's and google-auth's by name, so neither is imported) and its message.

    >>> str(failure("s3://b/runs", FileNotFoundError("b/runs")))
    's3://b/runs: no such file or directory'
    >>> NoCredentialsError = type("NoCredentialsError", (Exception,), {})  # botocore's, by its name
    >>> str(failure("s3://b/runs", NoCredentialsError("Unable to locate credentials")))
    's3://b/runs: no credentials (Unable to locate credentials)'
    >>> str(failure("gs://b/x", PermissionError(403, "Forbidden")))
    'gs://b/x: permission denied ([Errno 403] Forbidden)'
    """
    names = {kind.__name__ for kind in type(exc).__mro__}
    detail = _one_line(str(exc))
    said = f" ({detail})" if detail and detail.strip("'\"/") not in url else ""
    if names & _NO_CREDENTIALS or "Anonymous caller" in detail:  # (gcsfs falls back to anonymous access)
        return InputError(f"{url}: no credentials{said}")
    if isinstance(exc, FileNotFoundError) or names & _MISSING:
        return InputError(f"{url}: no such file or directory")
    if isinstance(exc, PermissionError) or "AccessDenied" in detail or "Forbidden" in names:
        return InputError(f"{url}: permission denied{said}")
    return InputError(f"{url}: cannot read ({type(exc).__name__}{': ' + detail if detail else ''})")


def filesystem(url: str) -> tuple[AbstractFileSystem, str]:
    """The fsspec filesystem of ``url`` and the path inside it; a scheme whose package is missing or that fsspec
    does not know is a one-line :class:`InputError` naming the package to install.

    >>> fs, path = filesystem("memory://runs/tr8/")
    >>> type(fs).__name__, path
    ('MemoryFileSystem', '/runs/tr8')
    >>> filesystem("nosuch://bucket/run")
    Traceback (most recent call last):
    parsers.errors.InputError: nosuch://bucket/run: unknown URL scheme 'nosuch' (no fsspec filesystem for it)
    """
    from fsspec.core import url_to_fs
    from fsspec.registry import known_implementations

    scheme = _scheme(url)
    try:
        return url_to_fs(url)
    except ImportError as exc:
        package = known_implementations.get(scheme, {}).get("class", "").split(".")[0]
        if not package:
            raise InputError(f"{url}: {_one_line(str(exc))}") from None
        hint = f"pip install 'forensics[{_EXTRAS[scheme]}]'" if scheme in _EXTRAS else f"pip install {package}"
        raise InputError(f"{url}: needs {package} ({hint})") from None
    except ValueError as exc:
        if "Protocol not known" in str(exc):
            raise InputError(f"{url}: unknown URL scheme '{scheme}' (no fsspec filesystem for it)") from None
        raise failure(url, exc) from None
    except Exception as exc:  # a filesystem's own constructor: bad options, credentials looked up at once
        raise failure(url, exc) from None


def local_path(url: str) -> Path | None:
    """The local path a ``file://`` URL names (read in place, nothing copied); None for any other URL.

    >>> local_path("file:///tmp/runs/tr8"), local_path("memory://runs/tr8")
    (PosixPath('/tmp/runs/tr8'), None)
    """
    from fsspec.implementations.local import LocalFileSystem

    fs, path = filesystem(url)
    return Path(path) if isinstance(fs, LocalFileSystem) else None


def afresh(url: str) -> tuple[AbstractFileSystem, str]:
    """:func:`filesystem`, its listing cache cleared first: s3fs (as gcsfs) keeps every directory it listed and
    answers ``ls``, and ``info`` under it, from there for as long as the process lives, so a run written since
    (by another process, a training job) would be missing, and one removed still there. Every listing here asks
    the storage again; a file read after a listing is not asked twice."""
    fs, path = filesystem(url)
    fs.invalidate_cache()
    return fs, path


def _info(url: str, fs: AbstractFileSystem, path: str) -> dict[str, Any] | None:
    """``fs.info`` of ``path``, None when there is nothing there; any other failure is an InputError."""
    try:
        return fs.info(path)
    except FileNotFoundError:
        return None
    except Exception as exc:
        error = failure(url, exc)
        if str(error).endswith(": no such file or directory"):
            return None
        raise error from None


_BUCKETED = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "oci"})  # the path's first part is a bucket


def missing(url: str) -> InputError:
    """The one-line error for nothing at ``url``: in object storage, ``no such bucket 'b'`` when the bucket itself
    is not there (one more ``info`` call), else ``no such file or directory``.

    >>> str(missing("memory://no/such/run"))
    'memory://no/such/run: no such file or directory'
    """
    fs, path = filesystem(url)
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    parts = path.strip("/").split("/", 1)
    if protocols & _BUCKETED and parts[0] and (len(parts) == 1 or _info(url, fs, parts[0]) is None):
        return InputError(f"{shown(url)}: no such bucket '{parts[0]}'")
    return InputError(f"{shown(url)}: no such file or directory")


def exists(url: str) -> bool:
    """Whether anything is at ``url`` (no credentials or no permission is an :class:`InputError`, not False)."""
    fs, path = afresh(url)
    return _info(url, fs, path) is not None


def is_dir(url: str) -> bool:
    """Whether ``url`` is a directory (a prefix, in object storage)."""
    fs, path = afresh(url)
    info = _info(url, fs, path)
    return info is not None and info.get("type") == "directory"


def subdirectories(url: str) -> list[str]:
    """The URLs of the directories directly under ``url``, hidden ones left out, sorted by name."""
    return [u for u, is_dir in entries(url) if is_dir]


def entries(url: str) -> list[tuple[str, bool]]:
    """The URLs of the directories and files directly under ``url``, hidden ones left out, sorted by name, each
    with whether it is a directory."""
    fs, path = afresh(url)
    try:
        listed = fs.ls(path, detail=True)
    except Exception as exc:
        error = failure(url, exc)
        raise (missing(url) if str(error).endswith(": no such file or directory") else error) from None
    kinds: dict[str, bool] = {}
    for e in listed:  # (an object store can hold an object "x" beside a prefix "x/": the prefix is a directory)
        name = posixpath.basename(e["name"].rstrip("/"))
        kinds[name] = kinds.get(name, False) or e.get("type") == "directory"
    base = url if url.endswith("/") else url + "/"
    return [(base + n, kinds[n]) for n in sorted(kinds) if n and not n.startswith(".")]


def _url_path(url: str) -> str:
    """The part of ``url`` after its scheme, without trailing slashes (``bucket/runs/tr8``)."""
    return url.split("://", 1)[-1].rstrip("/")


def _basename(url: str) -> str:
    return posixpath.basename(_url_path(url)) or _scheme(url)


def run_name(url: str, directory: bool | None = None) -> str:
    """The name of the run at ``url``, as a local run is named: a directory's name, a file's stem.
    ``directory``: whether it is one, when the caller knows already (else it is asked).

    >>> run_name("s3://bucket/runs/tr8/", directory=True), run_name("gs://b/logs/train.log", directory=False)
    ('tr8', 'train')
    """
    name = _basename(url)
    if directory is None:
        directory = is_dir(url)
    return name if directory else posixpath.splitext(name)[0]


def parent_name(url: str) -> str:
    """The name of the directory that holds ``url`` (to tell apart runs of the same name).

    >>> parent_name("s3://bucket/exp1/tr8/")
    'exp1'
    """
    return posixpath.basename(posixpath.dirname(_url_path(url)))


@dataclass
class RemoteFile:
    """One file of a URL run: its path in the filesystem, its path inside the run, and what ``fs`` said of it."""

    path: str
    relative: str
    info: dict[str, Any]


@dataclass
class Listing:
    """What is at a URL: the filesystem, the path in it, whether it is a single file, and its files."""

    url: str
    fs: AbstractFileSystem
    path: str
    single: bool
    files: list[RemoteFile] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _natural_key(text: str) -> list[object]:
    """Names in natural order (run2 before run10), whatever characters they hold.

    >>> sorted(["run10", "run2", "run1\u00b22"], key=_natural_key)
    ['run1\u00b22', 'run2', 'run10']
    """
    return [int(t) if t.isdecimal() else t.lower() for t in re.split(r"(\d+)", text)]


def listing(url: str) -> Listing:
    """The files of the run at ``url`` (a file: itself), hidden ones left out, in natural order; a name that cannot
    be a local path (``..``, an empty part) is said in ``warnings``. Raises :class:`InputError` when nothing is
    there or it cannot be listed."""
    fs, path = afresh(url)
    info = _info(url, fs, path)
    if info is None:
        raise missing(url)
    if info.get("type") != "directory":
        return Listing(url, fs, path, True, [RemoteFile(path, _basename(url), info)])
    try:
        found = fs.find(path, detail=True, withdirs=False)
    except Exception as exc:
        raise failure(shown(url), exc) from None
    prefix = path.rstrip("/") + "/"
    result = Listing(url, fs, path, False)
    for name, meta in found.items():
        relative = name[len(prefix):] if name.startswith(prefix) else ""
        parts = relative.split("/")
        if meta.get("type", "file") != "file" or any(p.startswith(".") for p in parts if p):
            continue
        if not relative or any(p in ("", ".", "..") for p in parts):
            result.warnings.append(f"{shown(url)}/{relative}: not read (not a name a local file can have)")
            continue
        result.files.append(RemoteFile(name, relative, meta))
    result.files.sort(key=lambda f: _natural_key(f.relative))
    return result


@dataclass
class Staged:
    """A URL run copied for reading: ``root`` (the local file or directory to read), the ``url`` it stands for,
    and ``warnings`` about files that could not be copied."""

    root: Path
    url: str
    warnings: list[str] = field(default_factory=list)


def _open(fs: AbstractFileSystem, path: str) -> Any:
    """``path`` opened for reading with no read-ahead cache, so that a read of n bytes fetches n bytes."""
    try:
        return fs.open(path, "rb", block_size=BLOCK, cache_type="none")
    except TypeError:  # a filesystem whose files take no cache options
        return fs.open(path, "rb")


def _stage_file(fs: AbstractFileSystem, source: str, target: Path, name: str, whole: bool = False) -> Any:
    """Copy ``source`` to ``target``: whole when a reader takes it (its head and ``name``, as the readers will
    be shown it, decide) or when ``whole``, else only its head. The reader that takes it, or None."""
    from parsers import registry
    from parsers.reader import HEAD_BYTES

    target.parent.mkdir(parents=True, exist_ok=True)
    with _open(fs, source) as src, target.open("wb") as out:
        head = src.read(HEAD_BYTES)
        out.write(head)
        reader = registry.reader_for(head, name)
        needs_body = reader is not None and not getattr(reader, "NAME_ONLY", False)  # (a checkpoint: its name)
        if len(head) == HEAD_BYTES and (whole or needs_body):
            while block := src.read(BLOCK):
                out.write(block)
    return reader


@dataclass
class _Job:
    """One file to stage: where it is, where it goes, the name the readers are shown and the URL messages show."""

    source: str
    target: Path
    name: str
    url: str
    whole: bool = False


def _stage_all(fs: AbstractFileSystem, jobs: list[_Job], stage: Staged, single: bool) -> list[Any]:
    """Stage every job, :data:`WORKERS` at a time (object storage answers each request after a round trip); the
    reader that took each file (None: none, or not read). A file that cannot be read is said in
    ``stage.warnings``, in listing order; missing credentials, or any failure of a file given on its own, raise."""

    top = str(stage.root.parent if single else stage.root)

    def attempt(job: _Job) -> tuple[Any, InputError | None]:
        try:
            return _stage_file(fs, job.source, job.target, job.name, job.whole), None
        except Exception as exc:
            with contextlib.suppress(OSError):
                job.target.unlink(missing_ok=True)
            if isinstance(exc, OSError) and str(exc.filename or "").startswith(top):  # (never show the local copy)
                return None, InputError(f"{job.url}: cannot be copied to a local file ({exc.strerror or exc})")
            return None, failure(job.url, exc)

    for job in jobs:  # folders first, in listing order: a name that is both a file and a folder fails the same way
        with contextlib.suppress(OSError):
            job.target.parent.mkdir(parents=True, exist_ok=True)
    if len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(jobs))) as pool:
            outcomes = list(pool.map(attempt, jobs))
    else:
        outcomes = [attempt(job) for job in jobs]
    for job, (_, error) in zip(jobs, outcomes, strict=True):
        if error is not None and (single or str(error).startswith(f"{job.url}: no credentials")):
            raise error
    stage.warnings.extend(str(error) for _, error in outcomes if error is not None)
    return [reader for reader, _ in outcomes]


# what a reader reads beside a file given on its own (on a local disk it finds them there), relative to the file's
# folder: a .wandb log's sidecars, a Lightning metrics.csv's hparams.yaml, an MLflow meta.yaml's whole run folder
_BESIDE = {"wandb": ("files/config.yaml", "files/wandb-summary.json", "files/output.log"),
           "lightning": ("hparams.yaml",), "mlflow": ("",)}


def _beside(found: Listing, reader: Any, root: Path, url: str) -> list[_Job]:
    """The files ``reader`` reads beside the single file ``found``, staged beside its copy ``root``."""
    folder = posixpath.dirname(found.path.rstrip("/"))
    folder_url = url.rsplit("/", 1)[0]
    jobs = []
    for relative in _BESIDE.get(getattr(reader, "FORMAT", ""), ()):
        where = posixpath.join(folder, relative) if relative else folder
        try:
            entries = found.fs.find(where, detail=True, withdirs=False)
        except Exception:  # (nothing there: the reader finds nothing either, as on a local disk)
            continue
        for path, meta in entries.items():
            inside = path[len(folder) + 1:] if path.startswith(folder + "/") else ""
            parts = inside.split("/")
            if (path == found.path or meta.get("type", "file") != "file" or not inside
                    or any(p in ("", ".", "..") or p.startswith(".") for p in parts)):
                continue
            jobs.append(_Job(path, root.parent / inside, inside, f"{folder_url}/{inside}", whole=True))
    return jobs


@contextlib.contextmanager
def staged(url: str) -> Iterator[Staged]:
    """The run at ``url`` copied into a private local directory (see the module docstring), removed on exit. A
    directory is staged as ``<tmp>/<its name>``, a file as ``<tmp>/<its folder's name>/<its name>`` (with what its
    reader reads beside it: a ``.wandb`` log's ``files/``, an MLflow run's folder), so the readers see the names
    they would see on a local disk. A file that cannot be read is said in ``warnings``; missing credentials stop
    the whole read (:class:`InputError`)."""
    from parsers.reader import display_path

    found = listing(url)
    tmp = Path(tempfile.mkdtemp(prefix="forensics-"))
    try:
        if found.single:
            root = tmp / (parent_name(url) or "run") / found.files[0].relative
        else:
            root = tmp / _basename(url)
            root.mkdir(parents=True)
        stage = Staged(root, shown(url), list(found.warnings))
        jobs = [_Job(f.path, root, display_path(root, root), stage.url) if found.single else
                _Job(f.path, root / f.relative, f.relative, f"{stage.url}/{f.relative}") for f in found.files]
        readers = _stage_all(found.fs, jobs, stage, found.single)
        if found.single and (beside := _beside(found, readers[0], root, stage.url)):
            _stage_all(found.fs, beside, stage, False)
        yield stage
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
