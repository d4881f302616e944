"""TFRecord framing: find every sound record in a file, skip damaged ones, resynchronise after a bad header.

A record is ``uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)``. Records follow
each other, so the walk is a loop: in Python (~0.45 us a record) or, for a file of :data:`COMPILED_MIN_BYTES` or
more, compiled with numba (~25 ns a record); decoding the payloads is vectorised in :mod:`parsers.tensorboard`.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import numpy as np

try:  # hardware CRC-32C: ~free per byte; without it records are framed by length only (see Framing.checked)
    from crc32c import crc32c as _crc32c
except ImportError:  # pragma: no cover - the dependency is declared, this keeps a broken install readable
    _crc32c = None

_LEN = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_MAX_RECORD = 1 << 31


def masked_crc(data: bytes | memoryview) -> int:
    """TFRecord's masked CRC-32C."""
    crc = _crc32c(data)  # type: ignore[misc]
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


@dataclass
class Framing:
    """Payload ``starts``/``ends`` (byte offsets) of the sound records, and what was wrong with the rest."""

    starts: np.ndarray
    ends: np.ndarray
    problems: list[str] = field(default_factory=list)
    checked: bool = True  # CRCs verified


def _header_ok(buf: bytes, pos: int) -> bool:
    if pos + 12 > len(buf):
        return False
    (length,) = _LEN.unpack_from(buf, pos)
    return length < _MAX_RECORD and masked_crc(buf[pos : pos + 8]) == _U32.unpack_from(buf, pos + 8)[0]


def _resync(buf: bytes, pos: int, window: int = 1 << 20) -> int | None:
    """The next offset after ``pos`` where a header with a valid CRC starts, or None.

    Vectorised over windows of offsets (garbage of tens of MB took seconds per MB as a Python loop): an offset is a
    candidate when its length field is below :data:`_MAX_RECORD` (bytes 3-7 say so), and the candidates' header
    CRCs are computed at once from per-byte tables (CRC-32C is affine in its input for a fixed length).

    >>> record = _LEN.pack(3) + _U32.pack(masked_crc(_LEN.pack(3))) + b"abc" + _U32.pack(masked_crc(b"abc"))
    >>> _resync(b"garbage" + record, 0)
    7
    """
    tables, zero = _header_crc_tables()
    a = np.frombuffer(buf, dtype=np.uint8)
    last = len(buf) - 12  # the last offset a 12-byte header fits at
    empty_crc = masked_crc(bytes(8))  # the header of an empty record (zero-filled stretches are all candidates)
    lo, size = pos + 1, min(window, 4096)  # small first: damage is often a record or two (a window costs ~15 passes)
    while lo <= last:
        m = min(size, last + 1 - lo)
        w = a[lo : lo + m + 11]
        high = (w[4 : 4 + m] == 0) & (w[5 : 5 + m] == 0) & (w[6 : 6 + m] == 0) & (w[7 : 7 + m] == 0)
        low = (w[0:m] == 0) & (w[1 : 1 + m] == 0) & (w[2 : 2 + m] == 0) & (w[3 : 3 + m] == 0)
        hit = np.flatnonzero(high & low & _u32_at(w, 8, m, empty_crc))
        first = int(hit[0]) if len(hit) else m
        at = np.flatnonzero(high[:first] & (w[3 : 3 + first] < 0x80) & ~low[:first])  # other lengths below 2**31
        if len(at):
            crc = np.full(len(at), zero, dtype=np.uint64)
            for k in range(8):
                crc ^= tables[k][w[at + k]]
            masked = (((crc >> np.uint64(15)) | (crc << np.uint64(17))) + np.uint64(0xA282EAD8)) & np.uint64(
                0xFFFFFFFF)
            stored = sum(w[at + 8 + k].astype(np.uint64) << np.uint64(8 * k) for k in range(4))
            found = at[masked == stored]
            first = min(first, int(found[0])) if len(found) else first
        if first < m:
            return lo + first
        lo, size = lo + m, min(size * 2, window)
    return None


def _u32_at(w: np.ndarray, offset: int, m: int, value: int) -> np.ndarray:
    """Whether the little-endian uint32 at ``offset + i`` of ``w`` equals ``value``, for each i below ``m``."""
    out = w[offset : offset + m] == (value & 0xFF)
    for k in range(1, 4):
        out &= w[offset + k : offset + k + m] == ((value >> 8 * k) & 0xFF)
    return out


@cache
def _header_crc_tables() -> tuple[list[np.ndarray], int]:
    """Per byte position k of an 8-byte header and byte value v, what v at k adds (XOR) to the CRC-32C of eight
    zero bytes; and that CRC."""
    zero = _crc32c(bytes(8))  # type: ignore[misc]
    tables = [np.array([_crc32c(bytes(k) + bytes([v]) + bytes(7 - k)) ^ zero for v in range(256)],  # type: ignore[misc]
                       dtype=np.uint64) for k in range(8)]
    return tables, zero


def walk(buf: bytes, compiled: bool | None = None) -> Framing:
    """Frame every record of ``buf``.

    A payload with a bad CRC is skipped and reported; a header with a bad CRC (its length cannot be trusted) is
    skipped by resynchronising on the next valid header; a truncated tail is reported as a partial last record.
    The header CRC is only checked when something is off (payload CRC or length), so a sound record costs one
    CRC call. Runs of sound records are framed by :func:`_sound_records`, compiled with numba when ``compiled``
    (by default for a file of :data:`COMPILED_MIN_BYTES` or more), else by the same loop in Python.

    >>> record = _LEN.pack(3) + _U32.pack(masked_crc(_LEN.pack(3))) + b"abc" + _U32.pack(masked_crc(b"abc"))
    >>> for compiled in (False, True):
    ...     framing = walk(record + b"junk" + record + record[:-1], compiled)
    ...     print(framing.starts.tolist(), framing.ends.tolist(), framing.problems)
    [12, 35] [15, 38] ['bad record header at byte 19; skipped 4 bytes to the next valid header', \
'partial last record at byte 42 (needs 19 bytes, 18 left)']
    [12, 35] [15, 38] ['bad record header at byte 19; skipped 4 bytes to the next valid header', \
'partial last record at byte 42 (needs 19 bytes, 18 left)']
    """
    if _crc32c is None:  # pragma: no cover - see Framing.checked
        return _walk_unchecked(buf)
    n = len(buf)
    use_compiled = compiled if compiled is not None else n >= COMPILED_MIN_BYTES or _compiled.cache_info().currsize > 0
    frame = _CompiledFrame(buf) if use_compiled else _PythonFrame(buf)
    problems: list[str] = []
    pos: int | None = 0
    while pos is not None and (pos := frame.sound(pos)) < n:
        pos = _skip_damage(buf, pos, problems)
    starts, ends = frame.framed()
    return Framing(starts, ends, problems)


COMPILED_MIN_BYTES = 32 << 20  # the Python loop costs ~0.45 us a record, loading numba ~0.4 s: about 30 MB of scalars


def _skip_damage(buf: bytes, pos: int, problems: list[str]) -> int | None:
    """Report the unsound record at ``pos``; where the walk goes on (None: nothing sound is left)."""
    n = len(buf)
    if pos + 12 > n:
        problems.append(f"partial last record at byte {pos} ({n - pos} bytes of a header)")
        return None
    (length,) = _LEN.unpack_from(buf, pos)
    if not _header_ok(buf, pos):
        nxt = _resync(buf, pos)
        if nxt is None:
            problems.append(f"bad record header at byte {pos}; no valid header in the {n - pos} bytes left")
        else:
            problems.append(f"bad record header at byte {pos}; skipped {nxt - pos} bytes to the next valid header")
        return nxt
    if pos + 16 + length > n:
        problems.append(f"partial last record at byte {pos} (needs {length + 16} bytes, {n - pos} left)")
        return None
    problems.append(f"bad CRC in the record at byte {pos}; record skipped")
    return pos + 16 + length


class _PythonFrame:
    """Sound records framed in Python (a few hundred ns a record, nothing to load)."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.starts = array("q")  # 8 bytes per record; a list would hold a Python int object (28 bytes) per entry
        self.ends = array("q")

    def sound(self, pos: int) -> int:
        """Frame the sound records from ``pos`` on; the offset of the first one that is not (or the end)."""
        buf, n, view, crc = self.buf, len(self.buf), memoryview(self.buf), _crc32c
        unpack_len, unpack_u32 = _LEN.unpack_from, _U32.unpack_from
        add_start, add_end = self.starts.append, self.ends.append
        while pos + 12 <= n:
            (length,) = unpack_len(buf, pos)
            end = pos + 12 + length
            if end + 4 > n:
                break
            c = crc(view[pos + 12 : end])  # type: ignore[misc]
            if (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF != unpack_u32(buf, end)[0]:
                break
            add_start(pos + 12)
            add_end(end)
            pos = end + 4
        return pos

    def framed(self) -> tuple[np.ndarray, np.ndarray]:
        return np.frombuffer(self.starts, dtype=np.int64), np.frombuffer(self.ends, dtype=np.int64)


class _CompiledFrame:
    """Sound records framed by the compiled :func:`_sound_records` (~20 ns a record and 2 GB/s of CRC)."""

    def __init__(self, buf: bytes) -> None:
        self.kernel = _compiled()
        self.bytes = np.frombuffer(buf, dtype=np.uint8)
        capacity = len(buf) // 16 + 1  # a record takes at least 16 bytes; pages never written are never resident
        self.starts = np.empty(capacity, dtype=np.int64)
        self.ends = np.empty(capacity, dtype=np.int64)
        self.count = 0

    def sound(self, pos: int) -> int:
        pos, self.count = self.kernel(self.bytes, pos, _crc_table(), self.starts, self.ends, self.count)
        return int(pos)

    def framed(self) -> tuple[np.ndarray, np.ndarray]:
        return self.starts[: self.count], self.ends[: self.count]  # views: the pages past count were never touched


def _sound_records(a: np.ndarray, pos: int, table: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                   count: int) -> tuple[int, int]:
    """:meth:`_PythonFrame.sound` over the bytes ``a``, with CRC-32C by slicing-by-8 ``table``: records framed
    from ``pos`` into ``starts``/``ends`` from index ``count``; the next offset and count. Compiled by numba."""
    n = a.shape[0]
    while pos + 16 <= n:
        length = np.uint64(0)
        for k in range(8):
            length |= np.uint64(a[pos + k]) << np.uint64(8 * k)
        if length > np.uint64(n - pos - 16):
            break
        end = pos + 12 + np.int64(length)
        crc = np.uint32(0xFFFFFFFF)
        i = pos + 12
        while i + 8 <= end:
            lo = crc ^ (np.uint32(a[i]) | (np.uint32(a[i + 1]) << 8) | (np.uint32(a[i + 2]) << 16)
                        | (np.uint32(a[i + 3]) << 24))
            crc = (table[7, lo & 0xFF] ^ table[6, (lo >> 8) & 0xFF] ^ table[5, (lo >> 16) & 0xFF]
                   ^ table[4, lo >> 24] ^ table[3, a[i + 4]] ^ table[2, a[i + 5]] ^ table[1, a[i + 6]]
                   ^ table[0, a[i + 7]])
            i += 8
        while i < end:
            crc = table[0, (crc ^ a[i]) & 0xFF] ^ (crc >> 8)
            i += 1
        c = np.int64(crc) ^ 0xFFFFFFFF
        stored = (np.int64(a[end]) | (np.int64(a[end + 1]) << 8) | (np.int64(a[end + 2]) << 16)
                  | (np.int64(a[end + 3]) << 24))
        if (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF != stored:
            break
        starts[count] = pos + 12
        ends[count] = end
        count += 1
        pos = end + 4
    return pos, count


@cache
def _compiled() -> Callable[..., tuple[int, int]]:
    """:func:`_sound_records` compiled (numba is imported here only: ~0.4 s to load, cached on disk)."""
    import numba

    return numba.njit(cache=True, nogil=True)(_sound_records)


@cache
def _crc_table() -> np.ndarray:
    """CRC-32C slicing-by-8 tables: row k maps a byte to its CRC contribution k bytes before the end of a word.

    >>> t = _crc_table()
    >>> crc = 0xFFFFFFFF
    >>> for byte in b"123456789":
    ...     crc = int(t[0, (crc ^ byte) & 0xFF]) ^ (crc >> 8)
    >>> crc ^ 0xFFFFFFFF == _crc32c(b"123456789") == 0xE3069283
    True
    """
    table = np.zeros((8, 256), dtype=np.uint32)
    for v in range(256):
        c = v
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)  # the reflected Castagnoli polynomial
        table[0, v] = c
    for k in range(1, 8):
        table[k] = (table[k - 1] >> 8) ^ table[0][table[k - 1] & 0xFF]
    return table


def _walk_unchecked(buf: bytes) -> Framing:  # pragma: no cover - only without the crc32c package
    """Records framed by their length fields alone."""
    starts, ends, problems, pos, n = array("q"), array("q"), [], 0, len(buf)
    while pos < n:
        if pos + 12 > n:
            problems.append(f"partial last record at byte {pos} ({n - pos} bytes of a header)")
            break
        (length,) = _LEN.unpack_from(buf, pos)
        end = pos + 12 + length
        if end + 4 > n:
            problems.append(f"partial last record at byte {pos} (needs {length + 16} bytes, {n - pos} left)")
            break
        starts.append(pos + 12)
        ends.append(end)
        pos = end + 4
    return Framing(np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64), problems, False)
