"""Protobuf wire encoding by hand, for test records that the protobuf runtime would refuse to write (tags that are
not UTF-8, fields in odd shapes)."""

from __future__ import annotations


def varint(n: int) -> bytes:
    """``n`` (>= 0) as a base-128 varint."""
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def field(number: int, payload: bytes | int) -> bytes:
    """One protobuf field: a varint when ``payload`` is an int, else length-delimited."""
    if isinstance(payload, int):
        return varint(number << 3) + varint(payload)
    return varint(number << 3 | 2) + varint(len(payload)) + payload
