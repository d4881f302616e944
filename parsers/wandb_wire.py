"""The wire layers of a ``run-<id>.wandb`` file (see :mod:`parsers.wandb_log`): its LevelDB-style chunk framing,
walked chunk by chunk (:func:`_chunks`, which says what damage it found) or framed all at once (:func:`_frame`), and
the bulk decoding of its history and summary records with NumPy (:func:`_bulk`).

The file is a 7-byte header (``:W&B``, ``0xBEE1``, version 0), then 32 KiB blocks of chunks, each with a 7-byte
header (IEEE CRC-32 of type byte + payload, uint16 length, type 1 FULL / 2 FIRST / 3 MIDDLE / 4 LAST). Chunks never
cross a block; fewer than 7 bytes left in a block are padding. A record is one FULL chunk or FIRST MIDDLE* LAST, and
its payload is a ``wandb_internal.Record`` protobuf (see :mod:`parsers.wandb_proto`).
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from parsers.textfile import read_all

if TYPE_CHECKING:
    from parsers.wandb_log import _Records


MAGIC = b":W&B\xe1\xbe\x00"
_BLOCK = 32768
_HEADER = struct.Struct("<IHB")
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def is_wandb_log(head: bytes) -> bool:
    """Whether a file's first bytes are a ``.wandb`` log header."""
    return head[:7] == MAGIC


def _chunks(buf: bytes, shown: str, warnings: list[str]) -> list[bytes]:
    """The record payloads of a ``.wandb`` file, skipping damaged blocks and noting a cut tail."""
    records: list[bytes] = []
    pos, end, pending = 7, len(buf), None
    crc32 = zlib.crc32
    type_crc = {t: zlib.crc32(bytes([t])) for t in (_FULL, _FIRST, _MIDDLE, _LAST)}
    while True:
        room = _BLOCK - pos % _BLOCK
        if room < 7:
            pos += room
            continue
        if pos + 7 > end:
            if pos < end and buf[pos:end].strip(b"\x00"):
                warnings.append(f"{shown}: partial last record at byte {pos} (the run was cut off or still writing)")
            break
        crc, length, kind = _HEADER.unpack_from(buf, pos)
        if crc == length == kind == 0:  # zeroed rest of a block
            pos += room
            continue
        start = pos + 7
        if length > room - 7 or kind not in type_crc:
            warnings.append(f"{shown}: bad chunk header at byte {pos}; skipped to the next 32 KiB block")
            pos, pending = pos + room, None
            continue
        if start + length > end:
            warnings.append(f"{shown}: partial last record at byte {pos} (the run was cut off or still writing)")
            break
        data = buf[start:start + length]
        pos = start + length
        if crc32(data, type_crc[kind]) != crc:
            warnings.append(f"{shown}: bad CRC at byte {start - 7}; skipped the rest of that 32 KiB block")
            pos, pending = pos + (_BLOCK - pos % _BLOCK) % _BLOCK, None
            continue
        if kind == _FULL:
            records.append(data)
        elif kind == _FIRST:
            pending = [data]
        elif pending is not None:
            pending.append(data)
            if kind == _LAST:
                records.append(b"".join(pending))
                pending = None
    if pending is not None and not any("partial last record" in w for w in warnings):
        warnings.append(f"{shown}: a record split over blocks ends without its last part")
    return records


_ITEMS = {"key": pl.String, "value_json": pl.String, "row": pl.Int64}
_ROWS = {"text": pl.String, "num": pl.Int64, "stamp": pl.String}


# --- the bulk decoder ------------------------------------------------------------------------------------------------
# History and summary records are decoded with NumPy, all records at once, one protobuf field of each per step; only
# their ordinary shape is taken (fields in number order, short keys, shortest varints: what both client generations
# write). Any record with something else (a repeated singular field, unknown or group fields, a duplicated key,
# text that is not UTF-8, ...) is left to the protobuf runtime, which decides exactly as it always did.
_PAD = 512  # zero bytes after the payloads, so that reads a little past a record (key words, a guessed value tag) stay in
_MAX_FIELDS = 4096  # items in one history or summary record beyond which the record is left to the runtime
_MAX_PARTS = 8  # key fields in one item (nested_key parts), likewise
_MAX_KEY = 128  # bytes of an item's key fields, likewise
_OTHER, _HISTORY, _SUMMARY, _RUNTIME = 0, 1, 2, 3


def _read(path: Path) -> tuple[memoryview, np.ndarray]:
    """The file's bytes, and the same bytes followed by :data:`_PAD` zeros (one read, no copy)."""
    size, padded = -1, np.zeros(0, dtype=np.uint8)
    try:
        with path.open("rb") as f:
            padded = np.zeros(os.fstat(f.fileno()).st_size + _PAD + 1, dtype=np.uint8)
            size = f.readinto(memoryview(padded))
    except OSError:
        pass
    if not 0 <= size < len(padded) - _PAD:  # unreadable (read_all says why) or grown while read
        data = read_all(path)
        padded = np.zeros(len(data) + _PAD, dtype=np.uint8)
        padded[:len(data)] = np.frombuffer(data, dtype=np.uint8)
        size = len(data)
    return memoryview(padded)[:size], padded[:size + _PAD]


def _frame(buf: memoryview, padded: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(payloads, starts, lengths)`` of the records of an undamaged log (``buf``; ``padded``: the same followed by
    zeros), or None when a chunk is damaged or out of order (then :func:`_chunks` walks it and says what it found).

    Chunks never cross a 32 KiB block and every block starts with a chunk, so all blocks are walked at once, one
    chunk of each per step; each chunk's CRC is checked by zlib."""
    a = np.frombuffer(buf, dtype=np.uint8)
    end = len(a)
    blocks = np.arange(-(-end // _BLOCK), dtype=np.int64) * _BLOCK
    pos = blocks.copy()
    pos[0] = 7
    found: list[tuple[np.ndarray, ...]] = []
    u32, u16 = (np.lib.stride_tricks.as_strided(np.frombuffer(buf, dtype=t, count=1), shape=(end - size + 1,),
                                                strides=(1,)) for t, size in (("<u4", 4), ("<u2", 2)))
    # (the little-endian numbers at each offset)
    while len(pos):
        room = _BLOCK - pos % _BLOCK
        pos, room = pos[room >= 7], room[room >= 7]
        tail = pos + 7 > end  # only in the last block
        if tail.any():
            last = int(pos[tail][0])
            if a[last:end].any():
                return None
            pos, room = pos[~tail], room[~tail]
        crc, length, kind = u32[pos], u16[pos + 4].astype(np.int64), a[pos + 6]
        live = (crc != 0) | (length != 0) | (kind != 0)  # a zeroed header ends its block
        pos, room, crc, length, kind = pos[live], room[live], crc[live], length[live], kind[live]
        if ((length > room - 7) | (kind < _FULL) | (kind > _LAST) | (pos + 7 + length > end)).any():
            return None
        found.append((pos, length, kind, crc))
        pos = pos + 7 + length
        pos = pos[pos % _BLOCK != 0]  # a chunk that fills its block ends the block's walk
    if not found:
        return np.zeros(_PAD, dtype=np.uint8), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # in file order: the k-th chunk of a block was found in step k
    count = np.zeros(len(blocks), dtype=np.int64)
    for chunk in found:
        count[chunk[0] // _BLOCK] += 1
    where = np.concatenate([np.cumsum(count)[c[0] // _BLOCK] - count[c[0] // _BLOCK] + k
                            for k, c in enumerate(found)])
    pos, length, kind, crc = (np.empty(len(where), dtype=np.int64) for _ in range(4))
    for column, parts in zip((pos, length, kind, crc), zip(*found, strict=True), strict=True):
        column[where] = np.concatenate(parts)
    view = memoryview(buf)
    got = np.fromiter(map(zlib.crc32, map(view.__getitem__, map(slice, (pos + 6).tolist(),
                                                                     (pos + 7 + length).tolist()))),
                      dtype=np.int64, count=len(pos))
    if (got != crc).any():
        return None
    payloads = padded
    starts, lengths = pos + 7, length
    split = np.flatnonzero(kind != _FULL)
    if len(split):  # records over several blocks: FIRST MIDDLE* LAST, nothing between
        kinds = kind[split].tolist()
        firsts = [j for j, k in enumerate(kinds) if k == _FIRST]
        if not _well_split(kinds) or np.any(np.diff(split)[np.array(kinds[:-1]) != _LAST] != 1):
            return None
        parts = [buf[p + 7:p + 7 + n] for p, n in zip(pos[split].tolist(), length[split].tolist(), strict=True)]
        whole = [b"".join(parts[j:k]) for j, k in zip(firsts, [*firsts[1:], len(kinds)], strict=True)]
        extra = np.frombuffer(b"".join(whole), dtype=np.uint8)
        payloads = np.concatenate([payloads[:end], extra, np.zeros(_PAD, dtype=np.uint8)])
        last = split[np.array(kinds) == _LAST]
        starts[last] = end + np.cumsum([0, *map(len, whole[:-1])])
        lengths[last] = [len(w) for w in whole]
        keep = (kind == _FULL) | (kind == _LAST)  # a record is where its last chunk is
        starts, lengths = starts[keep], lengths[keep]
    return payloads, starts, lengths


def _well_split(kinds: list[int]) -> bool:
    """Whether the chunk kinds of split records run FIRST MIDDLE* LAST, FIRST MIDDLE* LAST, ..."""
    pending = False
    for k in kinds:
        if (k == _FIRST) == pending:
            return False
        pending = k != _LAST
    return not pending


def _laid(payloads: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records the chunk walk kept, laid end to end as :func:`_frame` gives them."""
    lengths = np.array([len(p) for p in payloads], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    return np.frombuffer(b"".join(payloads) + bytes(_PAD), dtype=np.uint8), starts, lengths


def _varints(a: np.ndarray, at: np.ndarray, stop: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
    """``(values, next offsets)`` of the varints at ``at`` (each to end before ``stop``); next offset -1 where one
    is cut, longer than ``most`` bytes or not in its shortest form (those are left to the runtime)."""
    first = a[np.minimum(at, len(a) - 1)]
    value = first.astype(np.int64)
    after = np.where((first < 0x80) & (at < stop), at + 1, -1)
    longer = np.flatnonzero((first >= 0x80) & (at < stop))
    if len(longer):  # the few of more than one byte
        at, stop = at[longer], stop[longer]
        more = value[longer] & 0x7F
        past = np.full(len(longer), -1, dtype=np.int64)
        open_ = np.ones(len(longer), dtype=bool)
        for k in range(1, most):
            q = at + k
            byte = a[np.minimum(q, len(a) - 1)].astype(np.int64)
            open_ &= q < stop
            more |= np.where(open_, (byte & 0x7F) << (7 * k), 0)
            ends = open_ & (byte < 0x80)
            past[ends & (byte != 0)] = q[ends & (byte != 0)] + 1
            open_ &= ~ends
        value[longer], after[longer] = more, past
    return value, after


def _lengths(a: np.ndarray, at: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(lengths, starts)`` of the length-delimited values whose length varint is at ``at`` (start -1: odd)."""
    length = a[at].astype(np.int64)
    start = at + 1
    longer = np.flatnonzero(length >= 0x80)
    if len(longer):
        length[longer], start[longer] = _varints(a, at[longer], stop[longer], 3)
    start[(start + length > stop) | (start > stop)] = -1
    return length, start


def _walk(a: np.ndarray, at: np.ndarray, stop: np.ndarray, history: np.ndarray, most: int) -> tuple[np.ndarray, ...]:
    """The fields of history / summary record bodies ``a[at:stop]``, all bodies a field at a time: items
    ``(body, start, end)`` in body order, per body whether it has a step and its number, and which bodies are not of
    the ordinary shape (items, then at most a step ``{num}`` last; a summary: items only)."""
    n = len(at)
    bad = np.zeros(n, dtype=bool)
    has_step = np.zeros(n, dtype=bool)
    step = np.zeros(n, dtype=np.int64)
    more = at < stop
    live, pos, end = np.flatnonzero(more), at[more], stop[more]
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for _ in range(most):
        if not len(live):
            break
        tag = a[pos]
        length = a[pos + 1].astype(np.int64)
        after = pos + 2 + length
        if ((tag == 0x0A) & (length < 0x80) & (after <= end)).all():  # items with a 1-byte length, as most are
            found.append((live, pos + 2, after))
            more = after < end
            live, pos, end = live[more], after[more], end[more]
            continue
        length, start = _lengths(a, pos + 1, end)
        ok = start >= 0
        is_step = (tag == 0x12) & history[live]
        if is_step.any():  # HistoryStep: empty, or {num: varint}; and the record's last field
            stepped = np.flatnonzero(is_step & ok)
            sp, se = start[stepped], (start + length)[stepped]
            num, after = _varints(a, sp + 1, se, 9)
            empty = sp == se
            fine = (se == end[stepped]) & (empty | ((a[sp] == 0x08) & (after == se)))
            ok[stepped[~fine]] = False
            has_step[live[stepped]] = True
            step[live[stepped]] = np.where(empty, 0, num)
        ok &= (tag == 0x0A) | is_step
        bad[live[~ok]] = True
        took = ok & ~is_step
        after = start + length
        found.append((live[took], start[took], after[took]))
        more = took & (after < end)
        live, pos, end = live[more], after[more], end[more]
    bad[live] = True  # more fields than `most`
    if not found:
        empty_ = np.zeros(0, dtype=np.int64)
        return empty_, empty_, empty_, has_step, step, bad
    # the k-th item of a body was found in step k: its place is the body's first place plus k
    count = np.zeros(n, dtype=np.int64)
    for bodies, _, _ in found:
        count[bodies] += 1
    first = np.cumsum(count) - count
    where = np.concatenate([first[bodies] + k for k, (bodies, _, _) in enumerate(found)])
    out = [np.empty(len(where), dtype=np.int64) for _ in range(3)]
    for column, parts in zip(out, zip(*found, strict=True), strict=True):
        column[where] = np.concatenate(parts)
    return out[0], out[1], out[2], has_step, step, bad


def _items(a: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, ...]:
    """Items ``{key | nested_key..., value_json}`` in that order: per item where its key fields end (they are
    ``a[start:key_end]``), its value's start and length, and whether it is not of that shape (then the runtime)."""
    # most items: one key field and a value shorter than 128 bytes, all seen at once
    size = a[start + 1].astype(np.int64)
    key_end = start + 2 + size
    value_len = a[key_end + 2].astype(np.int64)
    value_at = key_end + 3
    tag = a[start]
    bad = ~(((tag == 0x0A) | (tag == 0x12)) & (size < 0x80) & (a[key_end] == 0x82) & (a[key_end + 1] == 0x01)
            & (value_len < 0x80) & (value_at + value_len == end))
    rest = np.flatnonzero(bad)
    if len(rest):  # the others (several key parts, long values, odd ones) a field at a time
        pos, stop = start[rest], end[rest]
        live = np.arange(len(rest))
        for _ in range(_MAX_PARTS + 1):
            if not len(live):
                break
            p, e = pos[live], stop[live]
            tag = a[p]
            value = (tag == 0x82) & (a[p + 1] == 0x01) & (p + 1 < e)
            if value.any():
                done = rest[live[value]]
                length, at = _varints(a, p[value] + 2, e[value], 3)
                key_end[done], value_at[done], value_len[done] = p[value], at, length
                bad[done] = (at < 0) | (at + length != e[value])
            part = ((tag == 0x0A) | (tag == 0x12)) & (p < e)
            size = a[p + 1].astype(np.int64)
            part &= (size < 0x80) & (p + 2 + size < e)
            pos[live[part]] = (p + 2 + size)[part]
            live = live[part]
        bad[rest] |= key_end[rest] - start[rest] > _MAX_KEY
    return key_end, value_at, value_len, bad


_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def _key_ids(a: np.ndarray, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Ids of the distinct byte strings ``a[start:stop]`` (``ids``, and one item of each id), by a hash of their
    8-byte words that is then checked word by word; None on a hash collision."""
    if not len(start):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    size = stop - start
    u64 = np.lib.stride_tricks.as_strided(np.frombuffer(a.data, dtype=np.uint64, count=1), shape=(len(a) - 7,),
                                          strides=(1,))  # the 8 bytes from each offset (a ends in _PAD zeros)
    words = []
    h = size.astype(np.uint64)
    for j in range(int(size.max() + 7) // 8):
        left = size - 8 * j
        word = u64[start + 8 * j]
        if (left < 8).any():
            word &= _MASKS[np.clip(left, 0, 8)]
        words.append(word)
        h = (h * np.uint64(0x100000001B3)) ^ word
        h ^= h >> np.uint64(29)
    first = np.flatnonzero(pl.Series(h).is_first_distinct().to_numpy())
    ids = _hash_ids(h, h[first])
    rep = first[ids]
    if (size != size[rep]).any() or any((word != word[rep]).any() for word in words):
        return None
    return ids, first


def _hash_ids(h: np.ndarray, distinct: np.ndarray) -> np.ndarray:
    """For each hash in ``h``, the index of it in ``distinct``: through a table on a slice of the hash's bits where
    the distinct hashes differ (found for a few thousand of them), else by binary search."""
    bits = max(int(len(distinct) - 1).bit_length() + 1, 1)
    if bits <= 13:
        mask = np.uint64((1 << bits) - 1)
        for shift in range(0, 64 - bits, 3):
            slots = (distinct >> np.uint64(shift)) & mask
            if len(np.unique(slots)) == len(distinct):
                table = np.zeros(1 << bits, dtype=np.int64)
                table[slots] = np.arange(len(distinct))
                return table[(h >> np.uint64(shift)) & mask]
    order = np.argsort(distinct)
    return order[np.searchsorted(distinct[order], h)]


def _key_text(raw: bytes) -> str | None:
    """The key of an item's key fields (``key``, else the ``nested_key`` parts joined with "."), None when they are
    odd (``key`` twice) or not UTF-8."""
    key, parts, i = None, [], 0
    try:
        while i < len(raw):
            text = raw[i + 2:i + 2 + raw[i + 1]].decode()
            if raw[i] == 0x0A:
                if key is not None:
                    return None
                key = text
            else:
                parts.append(text)
            i += 2 + raw[i + 1]
    except UnicodeDecodeError:
        return None
    return key or ".".join(parts)


def _texts(a: np.ndarray, start: np.ndarray, length: np.ndarray) -> pl.Series | None:
    """The texts ``a[start:start + length]`` as a string column, converted in one piece (each followed by a NUL in
    the piece); None when one is not UTF-8 or holds a NUL byte."""
    if not len(start):
        return pl.Series(dtype=pl.String)
    spans = length + 1
    ends = np.cumsum(spans)
    # the source offset of every byte of the piece: +1 a byte, and a jump at each text's start
    source = np.ones(int(ends[-1]), dtype=np.int32 if len(a) < 2**31 else np.int64)
    source[ends - spans] = start - np.concatenate([[0], (start + length)[:-1]])
    joined = a[np.cumsum(source, out=source)]
    joined[ends - 1] = 0
    try:
        whole = joined[:-1].tobytes().decode()
    except UnicodeDecodeError:
        return None
    texts = pl.Series([whole], dtype=pl.String).str.split("\x00").explode()
    return texts if texts.len() == len(start) else None


def _bulk(a: np.ndarray, starts: np.ndarray, lengths: np.ndarray, records: _Records) -> tuple[pl.DataFrame, ...]:
    """The history items (``key, value_json, row``) and rows (``text, num, stamp``) of the records
    ``a[start:start + length]``: history and summary records of the ordinary shape decoded in bulk, the others by
    ``records`` (the protobuf runtime) in file order, the bulk summary updates folded in between them in order."""
    n = len(starts)
    ends = starts + lengths
    kind = np.full(n, _RUNTIME, dtype=np.int8)
    # Record {int64 num = 1; HistoryRecord history = 2 | ItemsRecord summary = 3}
    numbered = (lengths > 0) & (a[starts] == 0x08)
    at = starts.copy()
    at[numbered] = _varints(a, starts[numbered] + 1, ends[numbered], 9)[1]
    sound = at >= 0
    kind[sound & (at == ends)] = _OTHER
    tag = a[np.maximum(at, 0)]
    length, body = _varints(a, at + 1, ends, 4)
    shaped = sound & (at < ends) & ((tag == 0x12) | (tag == 0x1A)) & (body >= 0) & (body + length == ends)
    kind[shaped & (tag == 0x12)] = _HISTORY
    kind[shaped & (tag == 0x1A)] = _SUMMARY
    rec = np.flatnonzero(shaped)
    item_body, item_start, item_end, has_step, step, odd = _walk(a, body[rec], ends[rec], tag[rec] == 0x12, _MAX_FIELDS)
    item_rec = rec[item_body]
    key_end, value_at, value_len, odd_item = _items(a, item_start, item_end)
    good = np.flatnonzero(~odd_item) if odd_item.any() else slice(None)  # (odd items' records go to the runtime)
    found = _key_ids(a, item_start[good], key_end[good])
    if found is None:
        return _all_runtime(a, starts, lengths, records)
    kid, first = found
    raw_keys = [_key_text(a[s:e].tobytes()) for s, e in zip(item_start[good][first].tolist(),
                                                            key_end[good][first].tolist(), strict=True)]
    index = {k: i for i, k in enumerate(dict.fromkeys(k for k in raw_keys if k is not None))}
    texts = list(index)
    sid = np.full(len(item_start), -1, dtype=np.int64)
    sid[good] = np.array([index.get(k, -1) if k is not None else -1 for k in raw_keys], dtype=np.int64)[kid]
    spoiled = np.zeros(n, dtype=bool)  # records left to the runtime after all
    spoiled[rec[odd]] = True
    spoiled[item_rec[sid < 0]] = True
    hist_item = kind[item_rec] == _HISTORY
    spoiled[_twice(item_rec[hist_item], sid[hist_item], len(texts))] = True
    meta = [index.get(k, -2) for k in ("_step", "_timestamp", "_runtime")]
    # values not converted (summary updates, _runtime): the ASCII ones are sound, the others are checked one by one
    summed = np.flatnonzero(~hist_item)
    unread = np.flatnonzero((~hist_item | (sid == meta[2])) & (sid >= 0))  # (odd items' records go to the runtime)
    suspect = unread[_high(a, value_at[unread], value_len[unread])]
    spoiled[[r for r, s, k in zip(item_rec[suspect].tolist(), value_at[suspect].tolist(), value_len[suspect].tolist(),
                                  strict=True) if not _plain(a[s:s + k], nul=True)]] = True
    while True:  # history values: converted, and checked, in one piece
        wanted = ~spoiled[item_rec] & hist_item & (sid != meta[2])
        values = _texts(a, value_at[wanted], value_len[wanted])
        if values is not None:
            break
        odd_text = [r for r, s, k in zip(item_rec[wanted].tolist(), value_at[wanted].tolist(),
                                         value_len[wanted].tolist(), strict=True) if not _plain(a[s:s + k])]
        if not odd_text:  # cannot happen: each text was checked
            return _all_runtime(a, starts, lengths, records)
        spoiled[odd_text] = True
    kind[spoiled] = _RUNTIME
    summed = summed[~spoiled[item_rec[summed]]]
    of_shaped = np.searchsorted(rec, np.flatnonzero(kind == _HISTORY))
    bulk = _Bulk(texts=texts, meta=meta, item_rec=item_rec[wanted], sid=sid[wanted], values=values,
                 has_step=has_step[of_shaped], step=step[of_shaped], sum_rec=item_rec[summed], sum_sid=sid[summed],
                 sum_at=value_at[summed], sum_len=value_len[summed])
    return _assemble(a, starts, lengths, kind, records, bulk)


@dataclass
class _Bulk:
    """What the bulk decoder read: the distinct keys, per history item (other than ``_runtime``) its record, key id
    and value, per history record whether it has a step and its number, per summary update its record, key, value."""

    texts: list[str]
    meta: list[int]  # key ids of _step, _timestamp, _runtime (-2: none)
    item_rec: np.ndarray
    sid: np.ndarray
    values: pl.Series
    has_step: np.ndarray
    step: np.ndarray
    sum_rec: np.ndarray
    sum_sid: np.ndarray
    sum_at: np.ndarray
    sum_len: np.ndarray


def _nulls(n: int, dtype: pl.DataType) -> pl.Series:
    return pl.select(pl.repeat(None, n, dtype=dtype)).to_series()


def _plain(b: np.ndarray, nul: bool = False) -> bool:
    """Whether a text is UTF-8 (without NUL bytes unless ``nul``)."""
    raw = b.tobytes()
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return nul or b"\x00" not in raw


def _high(a: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Which of the (disjoint) texts ``a[start:start + length]`` may hold a byte beyond ASCII (empty ones may be
    said to)."""
    if not len(start):
        return np.zeros(0, dtype=bool)
    order = np.argsort(start, kind="stable")
    bounds = np.empty(2 * len(start), dtype=np.int64)
    bounds[0::2], bounds[1::2] = start[order], (start + length)[order]
    high = np.zeros(len(start), dtype=bool)
    high[order] = np.maximum.reduceat(a, bounds)[0::2] >= 0x80
    return high


def _twice(rec: np.ndarray, sid: np.ndarray, n_keys: int) -> np.ndarray:
    """The records (given per item, items of a record together) in which some key id comes twice."""
    if not len(rec):
        return rec
    starts = np.flatnonzero(np.diff(rec, prepend=-1))
    twice = np.zeros(len(starts), dtype=bool)
    for base in range(0, n_keys, 64):  # a bit per key id, 64 ids a pass
        inside = (sid >= base) & (sid < base + 64)
        bits = np.where(inside, np.uint64(1) << np.clip(sid - base, 0, 63).astype(np.uint64), np.uint64(0))
        seen = np.bitwise_or.reduceat(bits, starts)
        twice |= np.bitwise_count(seen) != np.add.reduceat(inside.astype(np.int64), starts)
    return rec[starts[twice]]


def _all_runtime(a: np.ndarray, starts: np.ndarray, lengths: np.ndarray, records: _Records) -> tuple[pl.DataFrame, ...]:
    for s, k in zip(starts.tolist(), lengths.tolist(), strict=True):
        records.take(a[s:s + k].tobytes())
    return records.items(), records.row_meta()


def _assemble(a: np.ndarray, starts: np.ndarray, lengths: np.ndarray, kind: np.ndarray, records: _Records,
              bulk: _Bulk) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The runtime's records in file order with the bulk summary updates folded in between, then the history frames
    of both, rows numbered by their place in the file."""
    log, texts = records.log, bulk.texts
    folded = 0

    def fold_summaries(upto: int) -> None:  # the bulk-decoded summary updates before record `upto`
        nonlocal folded
        stop = int(np.searchsorted(bulk.sum_rec, upto))
        if stop > folded:
            last = (pl.DataFrame({"sid": bulk.sum_sid[folded:stop]}).with_row_index("i")
                    .group_by("sid", maintain_order=True).agg(pl.col("i").last()))
            for key, i in last.iter_rows():
                at, size = int(bulk.sum_at[folded + i]), int(bulk.sum_len[folded + i])
                log.summary[texts[key]] = a[at:at + size].tobytes().decode()
            folded = stop

    hist_at = np.flatnonzero(kind == _HISTORY)
    for r in np.flatnonzero(kind == _RUNTIME).tolist():
        fold_summaries(r)
        s = int(starts[r])
        records.take(a[s:s + int(lengths[r])].tobytes(), r, int(np.searchsorted(hist_at, r)))
    fold_summaries(len(kind))

    n_rows = len(hist_at)
    item_row = np.searchsorted(hist_at, bulk.item_rec)
    is_step, is_stamp = bulk.sid == bulk.meta[0], bulk.sid == bulk.meta[1]
    plain = ~(is_step | is_stamp)
    rows = pl.DataFrame({
        "text": _nulls(n_rows, pl.String).scatter(item_row[is_step], bulk.values.filter(pl.Series(is_step))),
        "num": pl.Series(bulk.step, dtype=pl.Int64).zip_with(pl.Series(bulk.has_step), _nulls(n_rows, pl.Int64)),
        "stamp": _nulls(n_rows, pl.String).scatter(item_row[is_stamp], bulk.values.filter(pl.Series(is_stamp))),
    }, schema=_ROWS)
    fast = pl.DataFrame({
        "key": pl.Series(texts, dtype=pl.String).gather(bulk.sid[plain]),
        "value_json": bulk.values.filter(pl.Series(plain)), "row": item_row[plain],
    }, schema=_ITEMS)
    if not records.at:
        return fast, rows
    # history rows the runtime read too: every row numbered by its place in the file
    other_at = np.array(records.at, dtype=np.int64)
    fast_row = np.arange(n_rows) + np.searchsorted(other_at, hist_at)
    other_row = np.arange(len(other_at)) + np.searchsorted(hist_at, other_at)
    fast = fast.with_columns(row=pl.Series(fast_row[item_row[plain]]))
    other = records.items()
    other = other.with_columns(row=pl.Series(other_row[other["row"].to_numpy()], dtype=pl.Int64))
    every = pl.concat([rows.with_columns(at=fast_row), records.row_meta().with_columns(at=other_row)])
    return pl.concat([fast, other]).sort("row", maintain_order=True), every.sort("at").drop("at")
