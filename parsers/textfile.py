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
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from parsers.errors import InputError

SEPARATOR = "\x1f"  # a control byte that does not occur in logs: each line becomes one CSV field
_BLOCK_BYTES = 4 << 20
_SCAN_BLOCK_BYTES = 8 << 20  # per Polars query: fewer, larger blocks cost less time, smaller ones less memory (its CSV
# reader alone takes about 8x a block in passing: 16 MiB blocks cost 234 MB of peak RSS on a 119 MB log, 8 MiB 216-223 MB)
_BINARY_SNIFF_BYTES = 8192
MAX_LINE_BYTES = 1 << 20  # a longer line is junk, not a log line: only its head is read


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
    long_lines: list[tuple[int, int]] = field(default_factory=list)  # (byte, length) of lines cut to their head

    def note_long_line(self, byte: int, length: int) -> None:
        self.long_lines.append((byte, length))

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
        if self.long_lines:
            n, (byte, length) = len(self.long_lines), self.long_lines[0]
            longest = max(length for _, length in self.long_lines)
            where = (f"{length:,} bytes, at byte {byte:,}" if n == 1
                     else f"the longest {longest:,} bytes, the first at byte {byte:,}")
            warnings.append(f"{self.shown}: {n} line{'s' if n > 1 else ''} longer than {MAX_LINE_BYTES >> 20} MiB"
                            f" ({where}); only {'their' if n > 1 else 'its'} first {MAX_LINE_BYTES >> 20} MiB"
                            " was read")
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

    loader = _tolerant_loader()(text)
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


@cache
def _tolerant_loader() -> type:
    r"""The safe loader, reading a node with a tag it does not know (Lightning's ``!!python/object:...`` for a saved
    tokenizer, ``!!python/object/apply:logging.getLogger``) as the plain mapping, list or text it holds: nothing is
    instantiated, and the rest of the document is not lost.

    >>> safe_yaml("lr: 0.1\nlog: !!python/object/apply:logging.getLogger [x]\ntok: !!python/object:a.B {n: 3}")
    {'lr': 0.1, 'log': ['x'], 'tok': {'n': 3}}
    """
    import yaml

    # libyaml's parser where PyYAML was built with it (the same safe constructors; 5-10x faster on a W&B config)
    class Tolerant(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    def plain_node(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)  # type: ignore[arg-type]

    Tolerant.add_multi_constructor("", plain_node)
    return Tolerant


CUT_LAST_ROW = ("its last line has no line end: cut short by the end of the file (a table still being written, or a "
                "cut copy), so its values may be cut too: not read")


def ends_its_last_line(path: Path) -> bool:
    """Whether the file is empty or ends with a line end (a table written row by row, or by pandas, does; one cut
    while it was written, or copied cut, may end inside a value)."""
    with path.open("rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return True
        f.seek(-1, 2)
        return f.read(1) == b"\n"


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


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"\s*")


def json_array_items(text: str, start: int) -> tuple[list[Any], list[int], int]:
    r"""The items of the JSON array that opens at ``text[start]``, read one by one, so that damage costs only the
    items it touches: ``(items, offsets of the damaged stretches, offset after the closing "]" or -1)``.

    After a damaged item, reading resumes at the next item that starts the way the first one did: an object on a
    line of the same indentation (``json.dump(indent=...)``), or after a comma in a one-line array. An item found
    that way is kept only when it shares a key with the first, so an object nested in the damaged one is not taken
    for an item.

    >>> json_array_items('[{"step": 1}, {"step": 2}, {"st', 0)  # cut short
    ([{'step': 1}, {'step': 2}], [27], -1)
    >>> json_array_items('[\n  {"step": 1},\n  {"step": 2, "loss": nope},\n  {"step": 3}\n]', 0)
    ([{'step': 1}, {'step': 3}], [19], 61)
    """
    items: list[Any] = []
    bad: list[int] = []
    pos = _SPACE.match(text, start + 1).end()
    if text.startswith("]", pos):
        return items, bad, pos + 1
    line_start = text.rfind("\n", 0, pos) + 1
    resume = (re.compile("\n" + re.escape(text[line_start:pos]) + r"(?=\{)") if text[line_start:pos].isspace()
              else re.compile(r",\s*(?=\{)"))
    resumed = False
    while pos < len(text):
        try:
            item, end = _DECODER.raw_decode(text, pos)
            fits = not resumed or not isinstance(items[:1] and items[0], dict) or (
                isinstance(item, dict) and not item.keys().isdisjoint(items[0]))
            if fits:
                items.append(item)
                pos = _SPACE.match(text, end).end()
                if text.startswith(",", pos):
                    pos, resumed = _SPACE.match(text, pos + 1).end(), False
                    continue
                if text.startswith("]", pos):
                    return items, bad, pos + 1
        except (ValueError, RecursionError):
            pass
        if not resumed:
            bad.append(pos)
        found = resume.search(text, pos + 1)
        if found is None:
            return items, bad, -1
        pos, resumed = _SPACE.match(text, found.end()).end(), True
    bad.append(pos)
    return items, bad, -1


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


def read_blocks(path: Path, shown: str | None = None, block_bytes: int = _BLOCK_BYTES,
                info: TextFile | None = None) -> Iterator[bytes]:
    r"""The file's bytes in blocks that end at a line end (except the last), so no line or character is split.

    A block's cut-off last line is read again at the start of the next one (a seek back, not a copy). A line longer
    than :data:`MAX_LINE_BYTES` keeps only its head (noted in ``info``), so memory stays bounded whatever the
    line lengths: such a line is junk (a dumped array, a binary blob, a corrupted stretch), not a log line.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "log.txt"
    >>> _ = path.write_bytes(b"loss 2.5\n" + b"x" * (3 << 20) + b"\r\nloss 2.4\n")
    >>> info = TextFile(path, "log.txt")
    >>> [len(line) for block in read_blocks(path, block_bytes=1 << 20, info=info) for line in block.splitlines()]
    [8, 1048576, 8]
    >>> info.damage()
    ['log.txt: 1 line longer than 1 MiB (3,145,728 bytes, at byte 9); only its first 1 MiB was read']
    """
    try:
        with path.open("rb") as f:
            while True:
                start = f.tell()
                if not (block := f.read(block_bytes)):
                    break
                while (cut := _last_line_end(block)) == 0:
                    if len(block) > MAX_LINE_BYTES:  # one line, and too long: keep its head, skip to its end
                        block = _long_line_head(f, block, block_bytes, start, info)
                        cut = len(block)
                        break
                    if not (more := f.read(block_bytes)):
                        break
                    block += more
                if 0 < cut < len(block):
                    f.seek(cut - len(block), os.SEEK_CUR)
                    block = block[:cut]
                if len(block) > MAX_LINE_BYTES // 2:
                    block = _cap_lines(block, start, info)
                yield block
    except OSError as exc:
        raise _oserror(shown or path, exc) from None


def _last_line_end(block: bytes) -> int:
    """Where ``block``'s last complete line ends (0: it holds none). A CR alone ends a line too, unless it is the
    block's last byte (the first half of a CRLF, maybe)."""
    cut = block.rfind(b"\n") + 1
    return cut or block.rfind(b"\r", 0, len(block) - 1) + 1


def _long_line_head(f: BinaryIO, block: bytes, block_bytes: int, start: int, info: TextFile | None) -> bytes:
    """The first :data:`MAX_LINE_BYTES` of a line that fills ``block`` and goes on, with its line end; the file is
    left after that line end."""
    head, length = block[:MAX_LINE_BYTES], len(block)
    while more := f.read(block_bytes):
        ends = [i for i in (more.find(b"\n"), more.find(b"\r")) if i >= 0]
        if not ends:
            length += len(more)
            continue
        end = min(ends)
        length += end
        stop = end + 1 + (more[end:end + 2] == b"\r\n")
        f.seek(stop - len(more), os.SEEK_CUR)
        head += more[end:stop]
        break
    if info is not None:
        info.note_long_line(start, length)
    return head


def _cap_lines(block: bytes, start: int, info: TextFile | None) -> bytes:
    """``block`` with each line longer than :data:`MAX_LINE_BYTES` cut to that length. A quick look first: a line
    that long spans a whole aligned window of half that length with no line end in it."""
    window = MAX_LINE_BYTES // 2
    if all(block.find(b"\n", i, i + window) >= 0 or block.find(b"\r", i, i + window) >= 0
           for i in range(0, len(block) - window + 1, window)):
        return block
    import numpy as np

    raw = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero((raw == 10) | (raw == 13))
    starts = np.concatenate(([0], ends + 1))
    stops = np.concatenate((ends, [len(block)]))
    long = np.flatnonzero(stops - starts > MAX_LINE_BYTES)
    if not len(long):
        return block
    pieces, pos = [], 0
    for n in long.tolist():
        head_end = int(starts[n]) + MAX_LINE_BYTES
        pieces += [block[pos:head_end]]
        pos = int(stops[n])
        if info is not None:
            info.note_long_line(start + int(starts[n]), int(stops[n] - starts[n]))
    return b"".join([*pieces, block[pos:]])


def inspect_text(
    path: Path,
    shown: str,
    patterns: dict[str, re.Pattern[bytes]] | None = None,
    head_patterns: dict[str, re.Pattern[bytes]] | None = None,
    first_of: bool = False,
) -> TextFile:
    """Look at ``path`` until every pattern is found: binary or blank, and the first match of each pattern.

    ``patterns`` are looked for in the whole file (reading stops once all are found), ``head_patterns`` in its
    first block (a few MB) only. With ``first_of`` only the earliest match counts: reading stops at the first block
    where any pattern matches, and a pattern is looked for there only up to the earliest match found so far (the
    patterns' matches that begin there or before are all found, the later ones are not looked for). A file with NUL
    bytes near its start is taken as binary and not read further.
    """
    info = TextFile(path=path, shown=shown)
    pending = dict(patterns or {})
    info.matches = {name: None for name in [*pending, *(head_patterns or {})]}
    for n, block in enumerate(read_blocks(path)):
        if n == 0 and b"\x00" in block[:_BINARY_SNIFF_BYTES]:
            info.binary = True
            return info
        info.blank = info.blank and block.isspace()
        earliest: int | None = None
        for name, rx in pending.items():
            found = _match_by(rx, block, earliest) if first_of and earliest is not None else search(rx, block)
            if found:
                info.matches[name] = found
                earliest = found.start() if earliest is None else min(earliest, found.start())
        for name, rx in (head_patterns or {}).items() if n == 0 else ():
            info.matches[name] = search(rx, block)
        for name in [name for name in pending if info.matches[name] is not None]:
            pending.pop(name)
        if (not pending or (first_of and len(pending) < len(patterns or {}))) and not info.blank:
            break
    return info


def search(rx: re.Pattern[bytes], data: bytes) -> re.Match[bytes] | None:
    """``rx.search(data)``, skipped where it cannot match: where none of its alternatives' required literals is in
    ``data`` (:func:`required_literals`; ``bytes in bytes`` scans a 64 KB head in microseconds, where a search of a
    pattern that starts with ``\\b`` or ``(?:^|\\n)`` tries each alternative at every position: milliseconds).

    >>> rx = re.compile(rb"\\biter \\d+: loss |(?:^|\\n)step \\d+ \\| |(?i:killed)")
    >>> search(rx, b"x\\nstep 3 | loss 2").span(), search(rx, b"iteration 3 | lm loss: 2"), required_literals(rx)
    ((1, 11), None, ((b': loss ', False), (b'step ', False), (b'killed', True)))
    """
    return rx.search(data) if may_match(rx, data) else None


def may_match(rx: re.Pattern[bytes], data: bytes) -> bool:
    """False where ``rx`` cannot match in ``data``: none of its alternatives' required literals is in it."""
    literals = required_literals(rx)
    if literals is None:
        return True
    lowered = data.lower() if any(folded for _, folded in literals) else data
    return any(literal in (lowered if folded else data) for literal, folded in literals)


@cache
def required_literals(rx: re.Pattern[bytes]) -> tuple[tuple[bytes, bool], ...] | None:
    """For each alternative of ``rx`` (at its top level, or inside a group that is a whole alternative), its
    longest run of literal bytes outside any other group or repeat, and whether it is matched ignoring case (then
    lowered): a match of that alternative holds it. None where an alternative has no run of 3 bytes or more: only
    where none of them is in the text can the pattern not match."""
    import re._constants as sre  # (the parser of the re module: the pattern's own structure, not a guess from text)
    import re._parser as sre_parse

    if not isinstance(rx.pattern, bytes) or rx.flags & re.LOCALE:
        return None
    parsed = sre_parse.parse(rx.pattern.decode("latin-1"), rx.flags)

    def literals(items: list, folded: bool) -> list[tuple[bytes, bool]] | None:
        if len(items) == 1 and items[0][0] is sre.BRANCH:
            found = [literals(list(branch), folded) for branch in items[0][1][1]]
            return None if any(f is None for f in found) else [x for f in found for x in f]  # type: ignore[union-attr]
        if len(items) == 1 and items[0][0] is sre.SUBPATTERN:
            _, added, removed, inner = items[0][1]
            return literals(list(inner), (folded or bool(added & re.IGNORECASE)) and not removed & re.IGNORECASE)
        best, run = b"", bytearray()
        for op, value in [*items, (None, None)]:
            if op is sre.LITERAL:
                run.append(value)
                continue
            best, run = max(best, bytes(run), key=len), bytearray()
        return [(best.lower() if folded else best, folded)] if len(best) >= 3 else None

    found = literals(list(parsed), bool(parsed.state.flags & re.IGNORECASE))
    return tuple(dict.fromkeys(found)) if found else None


_MATCH_BY_LIMIT = 16384  # start positions tried one by one; a search past a later earliest match costs less


def _match_by(rx: re.Pattern[bytes], block: bytes, stop: int) -> re.Match[bytes] | None:
    """The first match of ``rx`` in ``block`` that begins at ``stop`` or before (``rx.search``'s match when it
    does): a log's first match is usually in its first lines, and a search would go through the whole block.

    >>> _match_by(re.compile(rb"b+"), b"aabbb ab", 3).span(), _match_by(re.compile(rb"c"), b"aabbb ab c", 6)
    ((2, 5), None)
    """
    if stop > _MATCH_BY_LIMIT or not may_match(rx, block):
        found = search(rx, block)
        return found if found is not None and found.start() <= stop else None
    return next((found for at in range(stop + 1) if (found := rx.match(block, at)) is not None), None)


def _note_damage(info: TextFile, block: bytes, offset: int) -> None:
    info.has_nul = info.has_nul or b"\x00" in block
    if info.first_bad_utf8 is None and not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError as exc:
            info.first_bad_utf8 = offset + exc.start


def _count_newlines(block: bytes) -> int:
    """``block.count(b"\\n")``, five times faster (``bytes.count`` goes byte by byte for one byte).

    >>> _count_newlines(b"a\\nb\\n\\n"), _count_newlines(b"")
    (3, 0)
    """
    import numpy as np

    raw = np.frombuffer(block, dtype=np.uint8)
    step = 1 << 20  # a slice at a time: the comparison's mask stays small
    return sum(int(np.count_nonzero(raw[i:i + step] == 10)) for i in range(0, raw.size, step))


def scan_blocks(info: TextFile, block_bytes: int = _SCAN_BLOCK_BYTES) -> Iterator[pl.LazyFrame]:
    """The file as lazy frames of ``line`` (1-based, counted across blocks) and ``text`` (null for an empty line),
    one per block of about ``block_bytes``, noting the damage found in ``info``.

    NUL bytes are removed and the separator byte becomes a space; invalid UTF-8 is replaced.
    """
    first, offset, ends_with_newline = 1, 0, True
    info.long_lines.clear()
    for block in read_blocks(info.path, info.shown, block_bytes, info):
        _note_damage(info, block, offset)
        # offsets are the file's: add back what this block's long lines lost
        offset += len(block) + sum(length - MAX_LINE_BYTES for byte, length in info.long_lines if byte >= offset)
        # a carriage return alone ends a line too (old Mac files, progress bars redrawn in place); CRLF files, where
        # every CR is followed by LF, skip the regex pass
        if b"\r" in block and block.count(b"\r") != block.count(b"\r\n"):
            block = _LONE_CR.sub(b"\n", block)
        ends_with_newline = block.endswith(b"\n")
        if b"\x00" in block or SEPARATOR.encode() in block:
            block = block.replace(b"\x00", b"").replace(SEPARATOR.encode(), b" ")
        n_lines = _count_newlines(block) + (not block.endswith(b"\n"))
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
