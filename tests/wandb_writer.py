"""Write small ``.wandb`` run logs for tests: records framed as W&B's LevelDB-style log does (FULL chunks, or
FIRST/MIDDLE/LAST across 32 KiB blocks), each with its CRC."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

from parsers.wandb_log import MAGIC
from parsers.wandb_proto import Record

_BLOCK = 32768


def history(items: dict[str, str], step: int | None = None) -> bytes:
    """A history record: ``items`` maps keys to their JSON text (``{"_step": "3", "loss": "2.5"}``)."""
    record = Record()
    for key, value in items.items():
        record.history.item.add(key=key, value_json=value)
    if step is not None:
        record.history.step.num = step
    return record.SerializeToString()


def run_record(**fields: Any) -> bytes:
    record = Record()
    for name, value in fields.items():
        setattr(record.run, name, value)
    return record.SerializeToString()


def frame(payloads: list[bytes]) -> bytes:
    """The bytes of a ``.wandb`` file holding these record payloads."""
    out = bytearray(MAGIC)
    for payload in payloads:
        first = True
        while True:
            room = _BLOCK - len(out) % _BLOCK
            if room < 7:
                out += b"\x00" * room
                continue
            part, payload = payload[:room - 7], payload[room - 7:]
            kind = (1 if first else 4) if not payload else (2 if first else 3)
            out += struct.pack("<IHB", zlib.crc32(part, zlib.crc32(bytes([kind]))), len(part), kind) + part
            first = False
            if not payload:
                break
    return bytes(out)


def write(path: Path, payloads: list[bytes]) -> Path:
    path.write_bytes(frame(payloads))
    return path
