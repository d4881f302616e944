"""Text files in bounded blocks: a quick look at the head (is it text, does it hold what a parser wants), then the
lines as Polars frames, one block at a time, noting damage (NUL bytes, invalid UTF-8, a cut last line) on the way.

A file of hundreds of MB is never held in memory whole, neither as Python bytes nor in Polars' buffers.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from parsers.errors import InputError

SEPARATOR = "\x1f"  # a control byte that does not occur in logs: each line becomes one CSV field
_BLOCK_BYTES = 4 << 20
_SCAN_BLOCK_BYTES = 16 << 20  # per Polars query: fewer, larger blocks cost less time, smaller ones less memory
_BINARY_SNIFF_BYTES = 8192


@dataclass
class TextFile:
    """What a look at a text file found (``matches``: the first match of each pattern asked for), and the damage
    that reading its lines with :func:`scan_blocks` found."""

    path: Path
    shown: str
    binary: bool = False
    blank: bool = True
    matches: dict[str, re.Match[bytes] | None] = field(default_factory=dict)
    has_nul: bool = False
    first_bad_utf8: int | None = None
    ends_with_newline: bool = True
    lines: int = 0  # how many lines :func:`scan_blocks` read

    def damage(self) -> list[str]:
        """Warnings about the damage found so far (complete once the lines have been read)."""
        warnings = []
        if self.first_bad_utf8 is not None:
            warnings.append(
                f"{self.shown}: bytes that are not valid UTF-8 (first at byte {self.first_bad_utf8}); "
                "replaced with U+FFFD"
            )
        if self.has_nul:
            warnings.append(f"{self.shown}: NUL bytes in the file (damaged or partly overwritten); they were removed")
        return warnings


def _oserror(path: Path | str, exc: OSError) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{path}: no such file or directory")
    if isinstance(exc, PermissionError):
        return InputError(f"{path}: permission denied")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{path}: is a directory")
    return InputError(f"{path}: cannot read ({exc.strerror or exc})")


_LONE_CR = re.compile(rb"\r(?!\n)")
MAX_YAML_NODES = 1_000_000  # values a YAML document may expand to (aliases counted each time they are used)


def safe_yaml(text: str) -> Any:
    r"""The value of a YAML document, with the safe loader only, refusing one whose aliases expand past
    :data:`MAX_YAML_NODES` values (a "billion laughs" alias bomb hangs any walk over the value).

    >>> safe_yaml("lr: 0.001\nbetas: [0.9, 0.95]")
    {'lr': 0.001, 'betas': [0.9, 0.95]}
    >>> bomb = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    ...     f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))
    >>> safe_yaml(bomb)
    Traceback (most recent call last):
    yaml.error.YAMLError: the document expands to more than 1000000 values (an alias bomb?)
    """
    import yaml  # (only the readers of YAML files need it)

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        sizes: dict[int, int] = {}

        def size(n: yaml.Node) -> int:
            if id(n) not in sizes:
                children = ([c for pair in n.value for c in pair] if isinstance(n, yaml.MappingNode)
                            else n.value if isinstance(n, yaml.SequenceNode) else [])
                sizes[id(n)] = 1 + sum(size(c) for c in children)
                if sizes[id(n)] > MAX_YAML_NODES:
                    raise yaml.YAMLError(f"the document expands to more than {MAX_YAML_NODES} values (an alias bomb?)")
            return sizes[id(n)]

        size(node)
        try:
            return plain(loader.construct_document(node))
        except ValueError as exc:  # e.g. an integer of more than 4,300 digits, which Python refuses to read
            raise yaml.YAMLError(str(exc).split(";")[0]) from None
    finally:
        loader.dispose()


def json_value(text: str | bytes) -> Any:
    """``json.loads``, with nesting too deep for Python's decoder a ``ValueError`` like any other bad JSON.

    >>> json_value('{"loss": 2.5}'), json_value("NaN")
    ({'loss': 2.5}, nan)
    >>> json_value("[" * 100_000 + "]" * 100_000)
    Traceback (most recent call last):
    ValueError: nested too deeply to read
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def plain(value: Any) -> Any:
    """A loaded YAML value as JSON can hold it: dates as ISO text, sets as sorted lists, bytes said by their size,
    integers of more than 300 digits said by their length (Python will not even print them).

    >>> import datetime
    >>> plain({"when": datetime.date(2024, 1, 1), "tags": {"b", "a"}, "blob": b"hi", "big": 10**400})
    {'when': '2024-01-01', 'tags': ['a', 'b'], 'blob': '<2 bytes>', 'big': '<an integer of 401 digits>'}
    """
    if isinstance(value, dict):
        return {str(plain(k)) if not isinstance(k, str | int | float | bool) else k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v) for v in value), key=str)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 997:  # ~300 digits
        digits = len(str(abs(value))) if value.bit_length() < 13_000 else int(value.bit_length() * 0.30103) + 1
        return f"<an integer of {digits} digits>"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def read_yaml_mapping(path: Path, shown: str, what: str) -> dict:
    """A YAML file that holds a mapping (safe loader; anything else reads as empty), errors as one line naming
    ``what`` the file is ("hparams", "MLflow meta.yaml")."""
    import yaml

    try:
        data = safe_yaml(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, yaml.YAMLError, RecursionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{shown}: cannot read {what} ({reason})") from None
    return data if isinstance(data, dict) else {}


def read_all(path: Path) -> bytes:
    """The whole file (for binary formats that are decoded in one piece), OS errors as one-line messages."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise _oserror(path, exc) from None


def read_blocks(path: Path, shown: str | None = None, block_bytes: int = _BLOCK_BYTES) -> Iterator[bytes]:
    """The file's bytes in blocks that end at a newline (except the last), so no line or character is split.

    A block's cut-off last line is read again at the start of the next one (a seek back, not a copy).
    """
    try:
        with path.open("rb") as f:
            while block := f.read(block_bytes):
                while (cut := block.rfind(b"\n") + 1) == 0 and (more := f.read(block_bytes)):
                    block += more  # a line longer than a block
                if 0 < cut < len(block):
                    f.seek(cut - len(block), os.SEEK_CUR)
                    block = block[:cut]
                yield block
    except OSError as exc:
        raise _oserror(shown or path, exc) from None


def inspect_text(
    path: Path,
    shown: str,
    patterns: dict[str, re.Pattern[bytes]] | None = None,
    head_patterns: dict[str, re.Pattern[bytes]] | None = None,
    first_of: bool = False,
) -> TextFile:
    """Look at ``path`` until every pattern is found: binary or blank, and the first match of each pattern.

    ``patterns`` are looked for in the whole file (reading stops once all are found, or with ``first_of`` once
    any is: the matches then all lie in one block), ``head_patterns`` in its first block (a few MB) only. A file
    with NUL bytes near its start is taken as binary and not read further.
    """
    info = TextFile(path=path, shown=shown)
    pending = dict(patterns or {})
    info.matches = {name: None for name in [*pending, *(head_patterns or {})]}
    for n, block in enumerate(read_blocks(path)):
        if n == 0 and b"\x00" in block[:_BINARY_SNIFF_BYTES]:
            info.binary = True
            return info
        info.blank = info.blank and block.isspace()
        for name, rx in [*pending.items(), *((head_patterns or {}).items() if n == 0 else [])]:
            if found := rx.search(block):
                info.matches[name] = found
                pending.pop(name, None)
        if (not pending or (first_of and len(pending) < len(patterns or {}))) and not info.blank:
            break
    return info


def _note_damage(info: TextFile, block: bytes, offset: int) -> None:
    info.has_nul = info.has_nul or b"\x00" in block
    if info.first_bad_utf8 is None and not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError as exc:
            info.first_bad_utf8 = offset + exc.start


def scan_blocks(info: TextFile, block_bytes: int = _SCAN_BLOCK_BYTES) -> Iterator[pl.LazyFrame]:
    """The file as lazy frames of ``line`` (1-based, counted across blocks) and ``text`` (null for an empty line),
    one per block of about ``block_bytes``, noting the damage found in ``info``.

    NUL bytes are removed and the separator byte becomes a space; invalid UTF-8 is replaced.
    """
    first, offset, ends_with_newline = 1, 0, True
    for block in read_blocks(info.path, info.shown, block_bytes):
        _note_damage(info, block, offset)
        offset += len(block)
        # a carriage return alone ends a line too (old Mac files, progress bars redrawn in place); CRLF files, where
        # every CR is followed by LF, skip the regex pass
        if b"\r" in block and block.count(b"\r") != block.count(b"\r\n"):
            block = _LONE_CR.sub(b"\n", block)
        ends_with_newline = block.endswith(b"\n")
        if b"\x00" in block or SEPARATOR.encode() in block:
            block = block.replace(b"\x00", b"").replace(SEPARATOR.encode(), b" ")
        n_lines = block.count(b"\n") + (not block.endswith(b"\n"))
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
    info.ends_with_newline = ends_with_newline
    info.lines = first - 1
