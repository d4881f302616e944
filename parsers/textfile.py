"""Read a text log into a Polars frame of lines, as far as it is sound, with warnings for what was damaged."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

_SEPARATOR = b"\x1f"  # a control byte that does not occur in logs: each line becomes one field
_BINARY_SNIFF_BYTES = 8192


class InputError(Exception):
    """A file or directory that cannot be analyzed; the message is one line that names the path."""


@dataclass
class TextLog:
    """The lines of one text file (``line`` column, null for empty lines) and what was wrong with it."""

    path: Path
    lines: pl.DataFrame
    size: int
    warnings: list[str] = field(default_factory=list)
    ends_with_newline: bool = True


def read_bytes(path: Path) -> bytes:
    """Read a file, turning OS errors into one-line :class:`InputError` messages."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file or directory") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def looks_binary(data: bytes) -> bool:
    """True for data with NUL bytes near the start: event files, checkpoints, archives."""
    return b"\x00" in data[:_BINARY_SNIFF_BYTES]


def decode_lines(path: Path, data: bytes) -> TextLog:
    """Split ``data`` into a frame of lines; invalid UTF-8 is replaced (and reported), nothing is dropped."""
    warnings: list[str] = []
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        warnings.append(f"{path}: bytes that are not valid UTF-8 (first at byte {exc.start}); replaced with U+FFFD")
    if b"\x00" in data:
        warnings.append(f"{path}: NUL bytes in the file (damaged or partly overwritten); they were removed")
        data = data.replace(b"\x00", b"")
    if _SEPARATOR in data:  # keep the one-field-per-line trick sound
        data = data.replace(_SEPARATOR, b" ")
    ends_with_newline = data.endswith(b"\n")
    if not data:
        frame = pl.DataFrame(schema={"line": pl.String})
    else:
        frame = pl.read_csv(
            io.BytesIO(data),
            has_header=False,
            separator=_SEPARATOR.decode(),
            quote_char=None,
            encoding="utf8-lossy",
            schema={"line": pl.String},
        )
    return TextLog(path=path, lines=frame, size=len(data), warnings=warnings, ends_with_newline=ends_with_newline)
