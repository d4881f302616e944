"""TFRecord framing: find every sound record in a file, skip damaged ones, resynchronise after a bad header.

A record is ``uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)``. Only this walk is
a Python loop (a few hundred ns per record); decoding the payloads is vectorised in :mod:`parsers.tensorboard`.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field

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


def _resync(buf: bytes, pos: int) -> int | None:
    """The next offset after ``pos`` where a header with a valid CRC starts, or None."""
    for candidate in range(pos + 1, len(buf) - 11):
        if _header_ok(buf, candidate):
            return candidate
    return None


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
            skipped = (nxt if nxt is not None else n) - pos
            problems.append(f"bad record header at byte {pos}; skipped {skipped} bytes to the next valid header")
            if nxt is None:
                break
            pos = nxt
        elif end + 4 > n:
            problems.append(f"partial last record at byte {pos} (needs {length + 16} bytes, {n - pos} left)")
            break
        else:
            problems.append(f"bad CRC in the record at byte {pos}; record skipped")
            pos = end + 4
    return Framing(np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64), problems,
                   crc is not None)
