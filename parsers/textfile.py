"""Look at a text file once, in bounded blocks: is it text, is it damaged, does it hold what a parser wants.

The parsers then read the lines with Polars' streaming CSV reader (one field per line), so a file of hundreds of
MB is never held in memory as Python bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

SEPARATOR = "\x1f"  # a control byte that does not occur in logs: each line becomes one CSV field
_BLOCK_BYTES = 4 << 20
_BINARY_SNIFF_BYTES = 8192


class InputError(Exception):
    """A file or directory that cannot be analyzed; the message is one line that names the path."""


@dataclass
class TextFile:
    """What one pass over a text file found; ``matches`` holds the first match of each pattern asked for."""

    path: Path
    shown: str
    size: int = 0
    binary: bool = False
    blank: bool = True
    ends_with_newline: bool = True
    has_nul: bool = False
    has_separator: bool = False
    matches: dict[str, re.Match[bytes] | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _oserror(path: Path | str, exc: OSError) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{path}: no such file or directory")
    if isinstance(exc, PermissionError):
        return InputError(f"{path}: permission denied")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{path}: is a directory")
    return InputError(f"{path}: cannot read ({exc.strerror or exc})")


def read_all(path: Path) -> bytes:
    """The whole file (for binary formats that are decoded in one piece), OS errors as one-line messages."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise _oserror(path, exc) from None


def read_blocks(path: Path, shown: str | None = None, block_bytes: int = _BLOCK_BYTES) -> Iterator[bytes]:
    """The file's bytes in blocks that end at a newline (except the last), so no line or character is split."""
    try:
        with path.open("rb") as f:
            carry = b""
            while chunk := f.read(block_bytes):
                chunk = carry + chunk
                cut = chunk.rfind(b"\n") + 1
                if cut == 0:
                    carry = chunk
                    continue
                carry = chunk[cut:]
                yield chunk[:cut]
            if carry:
                yield carry
    except OSError as exc:
        raise _oserror(shown or path, exc) from None


def inspect_text(
    path: Path,
    shown: str,
    patterns: dict[str, re.Pattern[bytes]] | None = None,
    head_patterns: dict[str, re.Pattern[bytes]] | None = None,
) -> TextFile:
    """One bounded-memory pass over ``path``: size, binary or blank, damage warnings, first pattern matches.

    ``patterns`` are looked for in the whole file, ``head_patterns`` in its first block (a few MB) only. A file
    with NUL bytes near its start is taken as binary and not read further.
    """
    info = TextFile(path=path, shown=shown)
    pending = dict(patterns or {})
    info.matches = {name: None for name in [*pending, *(head_patterns or {})]}
    for name, rx in (head_patterns or {}).items():
        pending[name] = rx
    first_bad_utf8: int | None = None
    last = b""
    for block in read_blocks(path):
        if info.size == 0 and b"\x00" in block[:_BINARY_SNIFF_BYTES]:
            info.binary = True
            info.size = len(block)
            return info
        if first_bad_utf8 is None and not block.isascii():
            try:
                block.decode("utf-8")
            except UnicodeDecodeError as exc:
                first_bad_utf8 = info.size + exc.start
        info.has_nul = info.has_nul or b"\x00" in block
        info.has_separator = info.has_separator or SEPARATOR.encode() in block
        info.blank = info.blank and block.isspace()
        for name, rx in list(pending.items()):
            if found := rx.search(block):
                info.matches[name] = found
                del pending[name]
        for name in head_patterns or {}:
            pending.pop(name, None)
        info.size += len(block)
        last = block
    info.ends_with_newline = last.endswith(b"\n") or not last
    if first_bad_utf8 is not None:
        info.warnings.append(
            f"{shown}: bytes that are not valid UTF-8 (first at byte {first_bad_utf8}); replaced with U+FFFD"
        )
    if info.has_nul:
        info.warnings.append(f"{shown}: NUL bytes in the file (damaged or partly overwritten); they were removed")
    return info


def scan_blocks(info: TextFile) -> Iterator[pl.LazyFrame]:
    """The file as lazy frames of ``line`` (1-based, counted across blocks) and ``text`` (null for an empty line).

    A clean file is one frame, streamed from disk by Polars. A file with NUL or separator bytes comes in blocks of
    about 4 MB, cleaned first, so memory stays bounded. Invalid UTF-8 is replaced in both.
    """
    if not (info.has_nul or info.has_separator):  # clean: one lazy scan that Polars streams from disk
        yield pl.scan_csv(
            info.path, has_header=False, separator=SEPARATOR, quote_char=None, encoding="utf8-lossy",
            schema={"text": pl.String},
        ).with_row_index("line", offset=1)
        return
    first = 1
    for block in read_blocks(info.path, info.shown):
        if info.has_nul or info.has_separator:
            block = block.replace(b"\x00", b"").replace(SEPARATOR.encode(), b" ")
        n_lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
        if block:
            yield pl.scan_csv(
                block,
                has_header=False,
                separator=SEPARATOR,
                quote_char=None,
                encoding="utf8-lossy",
                schema={"text": pl.String},
            ).with_row_index("line", offset=first)
        first += n_lines
