"""Write small ``.wandb`` run logs for tests: records framed as W&B's LevelDB-style log does (FULL chunks, or
FIRST/MIDDLE/LAST across 32 KiB blocks), each with its CRC."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

from parsers.wandb_proto import Record
from parsers.wandb_wire import MAGIC

_BLOCK = 32768

Key = str | tuple[str, ...]  # a plain key, or the parts of a nested key (as the 0.31 client writes every key)


def _add(items: Any, key: Key, value: str) -> None:
    if isinstance(key, tuple):
        items.add(nested_key=list(key), value_json=value)
    else:
        items.add(key=key, value_json=value)


def history(items: dict[Key, str], step: int | None = None) -> bytes:
    """A history record: ``items`` maps keys to their JSON text (``{"_step": "3", ("eval", "ppl"): "2.5"}``)."""
    record = Record()
    for key, value in items.items():
        _add(record.history.item, key, value)
    if step is not None:
        record.history.step.num = step
    return record.SerializeToString()


def summary(items: dict[Key, str], remove: tuple[Key, ...] = ()) -> bytes:
    """A summary record: keys set to their JSON text, then the keys in ``remove`` taken out."""
    record = Record()
    for key, value in items.items():
        _add(record.summary.update, key, value)
    for key in remove:
        _add(record.summary.remove, key, "")
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
