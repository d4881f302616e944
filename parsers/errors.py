"""The one error that bad input raises (its own module: the command line imports it before anything heavy)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class InputError(Exception):
    """A file or directory that cannot be analyzed; the message is one line that names the path."""


def named(path: str | Path) -> None:
    """Refuses an empty path ("" is ``Path(".")``: the working directory, which nobody named).

    >>> named("")
    Traceback (most recent call last):
    parsers.errors.InputError: an empty path: name a run directory or a log file
    """
    if not str(path).strip():
        raise InputError("an empty path: name a run directory or a log file")


@contextmanager
def cannot_write(output: str | Path) -> Iterator[None]:
    """Turn a failed write in the block into an :class:`InputError` of one line that names the file (the one the
    system named, else ``output``): what every writer of reports, frames and indexes says.

    >>> import tempfile
    >>> blocker = Path(tempfile.mkdtemp()) / "file.txt"
    >>> _ = blocker.write_text("x")
    >>> with cannot_write(blocker / "out"):
    ...     (blocker / "out").mkdir()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    parsers.errors.InputError: /.../file.txt/out: cannot write (Not a directory)
    """
    try:
        yield
    except OSError as exc:
        raise InputError(f"{exc.filename or output}: cannot write ({exc.strerror or exc})") from None


def shown_path(path: object) -> str:
    r"""``path`` as text that any writer can take: bytes of a file name that are not UTF-8 (Python holds them as
    lone surrogates, which Polars, JSON and UTF-8 files refuse) are shown as ``\xNN``.

    >>> import os
    >>> shown_path(os.fsdecode(b"runs/train\xff.log"))
    'runs/train\\xff.log'
    """
    import os

    return os.fsencode(path).decode("utf-8", "backslashreplace")  # type: ignore[arg-type]
