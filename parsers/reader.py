"""The one interface every format's reader keeps: ``FORMAT``, ``sniff`` and ``read``.

A reader is any object (a module is one) with:

* ``FORMAT``: the format's name, as the run's sources list it (``"tensorboard"``);
* ``sniff(head: bytes, name: str) -> bool``: whether the file is this format, from its first bytes (up to
  :data:`HEAD_BYTES`) and its name alone;
* ``read(path: Path, context: ReadContext) -> list[Piece]``: the pieces the file contributes to its run. A reader
  that finds on reading that the file is not its format after all raises :class:`NotThisFormat` with the reason.

Optional: ``FIRST = True`` (read before every other file: a W&B run directory's ``.wandb`` log, which claims its
sidecar files and names the run of everything in its directory), ``combine(pieces, context) -> list[Piece]`` (the
reader's pieces of one input, once all are read: W&B runs told apart, configs merged across resumes) and
``ignores(path, owners) -> bool`` (a file beside a claimed run that is not evidence of the training, such as W&B's
debug logs).

:mod:`parsers.registry` lists the readers, built-in ones first, then those of the ``forensics.readers``
entry-point group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from parsers.errors import shown_path
from parsers.schema import ParsedLog

HEAD_BYTES = 65536


def head_of(path: Path) -> bytes:
    """The file's first :data:`HEAD_BYTES` bytes (empty when it cannot be read)."""
    try:
        with path.open("rb") as handle:
            return handle.read(HEAD_BYTES)
    except OSError:
        return b""


class NotThisFormat(Exception):
    """Raised by ``read`` when the file turns out not to be the reader's format; the message says what it is.
    ``empty``: the file holds nothing at all (worth a warning where a log was expected)."""

    def __init__(self, message: str, *, empty: bool = False) -> None:
        super().__init__(message)
        self.empty = empty


@dataclass
class Piece:
    """One parsed input: its frames, the run it names (None: the directory's run) and how it joins the others."""

    file: Path
    fmt: str
    log: ParsedLog
    run: str | None = None
    sampled: bool = False
    config_only: bool = False
    meta: object = None  # what the reader keeps for its ``combine`` step


@dataclass
class ReadContext:
    """What a reader is told about the file it reads, and where it reports back.

    ``shown``: the file's name as messages show it; ``run``: the name of the run it belongs to unless it names one;
    ``single``: the file was given on its own (not found in a directory); ``head``: its first bytes, already read.
    ``warnings`` (damage: read anyway) and ``skipped`` (not a training log) collect one-line messages; ``consumed``
    (other files this read used, not to be read again) and ``owners`` (directories whose files belong to a named
    run) are for readers that read a run directory's files together."""

    shown: str
    run: str
    single: bool = False
    root: Path = Path(".")
    head: bytes = b""  # the file's first HEAD_BYTES, as the readers were shown them
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    consumed: set[Path] = field(default_factory=set)
    owners: dict[Path, str] = field(default_factory=dict)

    def display(self, path: Path) -> str:
        """How messages name another file of the same input."""
        return display_path(path, self.root)


def display_path(path: Path, root: Path) -> str:
    """How messages name ``path``, a file of the input ``root``: relative to it (a sidecar beside a file given on
    its own: relative to that file's folder), with bytes that are not UTF-8 as ``\\xNN``.

    >>> display_path(Path("runs/a/files/output.log"), Path("runs/a/run-1.wandb"))
    'files/output.log'
    """
    if path == root:
        return shown_path(path)
    for base in (root, root.parent):
        if path.is_relative_to(base):
            return shown_path(path.relative_to(base))
    return shown_path(path)


@runtime_checkable
class Reader(Protocol):
    """What :mod:`parsers.registry` asks of a reader (see the module docstring). A reader that needs only a file's
    name (a checkpoint's ``epoch=E-step=S.ckpt``) says so with a module constant ``NAME_ONLY = True``: a copy from
    object storage then takes the file's head only."""

    FORMAT: str

    def sniff(self, head: bytes, name: str) -> bool: ...

    def read(self, path: Path, context: ReadContext) -> list[Piece]: ...
