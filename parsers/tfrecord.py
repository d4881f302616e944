"""TFRecord framing: find every sound record in a file, skip damaged ones, resynchronise after a bad header.

A record is ``uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)``. Only this walk is
a Python loop (a few hundred ns per record); decoding the payloads is vectorised in :mod:`parsers.tensorboard`.
"""

from __future__ import annotations

import struct
from array import array
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


def walk(buf: bytes) -> Framing:
    """Frame every record of ``buf``.

    A payload with a bad CRC is skipped and reported; a header with a bad CRC (its length cannot be trusted) is
    skipped by resynchronising on the next valid header; a truncated tail is reported as a partial last record.
    The header CRC is only checked when something is off (payload CRC or length), so a sound record costs one
    CRC call.
    """
    starts = array("q")  # 8 bytes per record; a list would hold a Python int object (28 bytes) per entry
    ends = array("q")
    problems: list[str] = []
    n = len(buf)
    pos = 0
    crc = _crc32c
    unpack_len = _LEN.unpack_from
    unpack_u32 = _U32.unpack_from
    view = memoryview(buf)
    add_start = starts.append
    add_end = ends.append
    while pos < n:
        if pos + 12 > n:
            problems.append(f"partial last record at byte {pos} ({n - pos} bytes of a header)")
            break
        (length,) = unpack_len(buf, pos)
        end = pos + 12 + length
        if crc is None:
            if end + 4 > n:
                problems.append(f"partial last record at byte {pos} (needs {length + 16} bytes, {n - pos} left)")
                break
            add_start(pos + 12)
            add_end(end)
            pos = end + 4
            continue
        if end + 4 <= n:
            c = crc(view[pos + 12 : end])
            if (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF == unpack_u32(buf, end)[0]:
                add_start(pos + 12)
                add_end(end)
                pos = end + 4
                continue
        if not _header_ok(buf, pos):
            nxt = _resync(buf, pos)
            if nxt is None:
                problems.append(f"bad record header at byte {pos}; no valid header in the {n - pos} bytes left")
                break
            problems.append(f"bad record header at byte {pos}; skipped {nxt - pos} bytes to the next valid header")
            pos = nxt
        elif end + 4 > n:
            problems.append(f"partial last record at byte {pos} (needs {length + 16} bytes, {n - pos} left)")
            break
        else:
            problems.append(f"bad CRC in the record at byte {pos}; record skipped")
            pos = end + 4
    return Framing(np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64), problems,
                   crc is not None)
