"""TensorBoard event files -> canonical frames: every record, no sampling, no purge, restarts annotated.

The common record (one ``simple_value`` scalar per event, as PyTorch, tensorboardX and Megatron write it) is
decoded for all records at once with NumPy, following ``shared/reference/tensorboard-events.md`` §6, or, in a file of
:data:`~parsers.tfrecord.COMPILED_MIN_BYTES` or more, by one numba loop (2M scalars: 0.27 s with NumPy, 0.05 s
compiled, plus ~0.45 s and ~115 MB to load numba). Every other record (file version, ``SessionLog``, TF2 tensor
scalars, text summaries, hparams, several values per event) is decoded with the protobuf classes that ship with
``tensorboard``; nothing is unpickled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from parsers import schema as s
from parsers.megatron import typed_value
from parsers.metric_names import SECONDS_TAGS, VALIDATION_FOLDERS, canonical
from parsers.reader import Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import InputError, read_all
from parsers.tfrecord import COMPILED_MIN_BYTES, walk
from parsers.wandb_history import flatten

_SCALAR_DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 9: "<i8", 19: "<f2"}  # TensorProto dtype -> numpy
_DT_BFLOAT16 = 14
_SESSION_KINDS = {"START": s.EV_SESSION_START, "STOP": s.EV_SESSION_STOP, "CHECKPOINT": s.EV_SESSION_CHECKPOINT}


FORMAT = "tensorboard"


def sniff(head: bytes, name: str) -> bool:
    """An event file: recognised by name (``*tfevents*``), as TensorBoard itself does."""
    return "tfevents" in Path(name).name


def read(path: Path, context: ReadContext) -> list[Piece]:
    return [Piece(path, FORMAT, parse_event_file(path, context.shown, context.run))]


# --- numpy helpers ------------------------------------------------------------------------------------------------
def _varint(b: np.ndarray, at: np.ndarray, maxlen: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised protobuf varints at offsets ``at``: values and byte lengths (0 where malformed)."""
    last = len(b) - 1
    value = np.zeros(len(at), np.uint64)
    nbytes = np.zeros(len(at), np.int64)
    active = np.ones(len(at), bool)
    for i in range(maxlen):
        x = b[np.minimum(at + i, last)]
        value |= np.where(active, (x & 0x7F).astype(np.uint64) << np.uint64(7 * i), np.uint64(0))
        nbytes += active
        active &= (x & 0x80) != 0
        if not active.any():
            break
    nbytes[active] = 0
    return value, nbytes


def _gather(buf: bytes, at: np.ndarray, dtype: str) -> np.ndarray:
    """Little-endian values of ``dtype`` at unaligned offsets ``at``: one fancy index into a view of the bytes with a
    stride of one byte (element i holds the bytes from i on; 10x one aligned view per residue class).

    >>> _gather(bytes(range(12)), np.array([0, 3]), "<u2").tolist()
    [256, 1027]
    """
    size = np.dtype(dtype).itemsize
    return np.ndarray((max(len(buf) - size + 1, 0),), dtype, buffer=buf, strides=(1,))[at]


def _tag_ids(buf: bytes, start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Dictionary-encode the tag bytes ``buf[start:start+length]``: a 64-bit hash of all their bytes, then the
    distinct tags decoded once (a hash collision between two of a file's few tags is ~1e-15 unlikely)."""
    h = np.full(len(start), 1469598103934665603, np.uint64)
    prime = np.uint64(1099511628211)
    for k in range(int((length.max() + 7) // 8) if len(length) else 0):
        # a word holding tag bytes ends within the record's CRC (the tag is followed by 5 bytes of value); a tag
        # shorter than the longest has no bytes to read here (masked out below): read in bounds anyway
        word = _gather(buf, np.minimum(start + 8 * k, len(buf) - 8), "<u8")
        valid = np.clip(length - 8 * k, 0, 8).astype(np.uint64)
        mask = np.where(valid >= 8, np.uint64(0xFFFFFFFFFFFFFFFF), (np.uint64(1) << (valid * np.uint64(8))) - np.uint64(1))
        h = (h ^ (word & mask)) * prime
    h ^= length.astype(np.uint64)
    _, first, ids = np.unique(h, return_index=True, return_inverse=True)
    names = [buf[start[i] : start[i] + length[i]].decode("utf-8", "replace") for i in first]
    return ids.astype(np.uint32), names


_CHUNK = 1 << 18  # records decoded together: bounds the int64 temporaries (~20 arrays) to ~40 MB


@dataclass
class _FastRows:
    """The fast path's rows as NumPy columns (:meth:`frame` once the file's bytes are freed: a lower peak)."""

    offset: np.ndarray
    tag: np.ndarray  # uint32 positions in names
    names: list[str]
    step: np.ndarray
    wall_time: np.ndarray
    value: np.ndarray  # float32, as stored

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "offset": self.offset,
                "tag": pl.Series(self.names, dtype=pl.Categorical).gather(pl.Series(self.tag)),  # NumPy index: 2x memory
                "step": self.step,
                "wall_time": self.wall_time,
                "value": pl.Series(self.value).cast(pl.Float64),
            }
        )


def _fast_scalars(buf: bytes, starts: np.ndarray, ends: np.ndarray, compiled: bool = False
                  ) -> tuple[_FastRows, np.ndarray, np.ndarray]:
    """Records that are exactly ``Event{wall_time, [step], summary{value{tag, simple_value}}}``: their rows, and
    the starts and ends of the records left for the slow path.

    Decoded with NumPy a chunk of records at a time, or by the compiled :func:`_scalar_records` in one pass (the
    same rows: both are checked against each other in tests/test_tensorboard.py), which reuses ``starts`` and
    ``ends`` for the rows' offsets and steps (32 MB fewer for 2M records): the caller must not use them after.
    """
    if compiled:
        k, wall, value, tag, slow_starts, slow_ends, first, size = _scalar_kernel()(
            np.frombuffer(buf, np.uint8), starts, ends)
        names = [buf[a : a + n].decode("utf-8", "replace") for a, n in zip(first.tolist(), size.tolist(), strict=True)]
        return _FastRows(starts[:k], tag, names, ends[:k], wall, value), slow_starts, slow_ends
    parts = [_fast_chunk(buf, starts[lo:lo + _CHUNK], ends[lo:lo + _CHUNK])
             for lo in range(0, max(len(starts), 1), _CHUNK)]
    names: list[str] = []
    tags = []
    for rows, _ in parts:  # each chunk numbers its own tags
        tags.append(rows.tag + np.uint32(len(names)))
        names += rows.names

    def joined(field: str) -> np.ndarray:
        return np.concatenate([getattr(rows, field) for rows, _ in parts])

    rows = _FastRows(joined("offset"), np.concatenate(tags), names, joined("step"), joined("wall_time"),
                     joined("value"))
    rest = np.concatenate([rest for _, rest in parts])
    return rows, starts[rest], ends[rest]


def _fast_chunk(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[_FastRows, np.ndarray]:
    b = np.frombuffer(buf, np.uint8)
    last = len(b) - 1

    def at(x: np.ndarray) -> np.ndarray:
        return b[np.minimum(x, last)]

    s0, e = starts, ends
    ok = at(s0) == 0x09
    p = s0 + 9
    has_step = at(p) == 0x10
    step_v, step_n = _varint(b, p + 1, 10)
    ok &= ~has_step | (step_n > 0)
    q = np.where(has_step, p + 1 + step_n, p)
    ok &= at(q) == 0x2A
    summary_len, summary_n = _varint(b, q + 1, 5)
    r = q + 1 + summary_n
    ok &= (summary_n > 0) & (r + summary_len.astype(np.int64) == e) & (at(r) == 0x0A)
    value_len, value_n = _varint(b, r + 1, 5)
    t = r + 1 + value_n
    ok &= (value_n > 0) & (t + value_len.astype(np.int64) == e) & (at(t) == 0x0A)
    tag_len, tag_n = _varint(b, t + 1, 3)
    tag_start = t + 1 + tag_n
    u = tag_start + tag_len.astype(np.int64)
    fast = ok & (tag_n > 0) & (at(u) == 0x15) & (u + 5 == e)
    i = np.nonzero(fast)[0]
    ids, names = _tag_ids(buf, tag_start[i], tag_len[i].astype(np.int64))
    step = np.where(has_step[i], step_v[i], 0).view(np.int64)
    return _FastRows(s0[i], ids, names, step, _gather(buf, s0[i] + 1, "<f8"), _gather(buf, u[i] + 1, "<f4")), ~fast


def _scalar_records(b: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[int | np.ndarray, ...]:
    """:func:`_fast_chunk` as one loop over the records (compiled by numba). The k records it decodes leave their
    offsets in ``starts[:k]`` and steps in ``ends[:k]`` (written behind the reading index) and their wall times,
    values and tag ids in new arrays; the others' starts and ends are collected for the slow path. Returns k, the
    wall times, values, tag ids, the slow records' starts and ends, and where each distinct tag first occurs
    (start, length).

    Tags are told apart by their bytes (an open-addressing table keyed by an FNV-1a hash, bytes compared on a hit),
    numbered in order of first occurrence.
    """
    n = starts.shape[0]
    slow_starts = np.empty(n, dtype=np.int64)  # pages past the slow records' count are never touched
    slow_ends = np.empty(n, dtype=np.int64)
    m = 0
    wall = np.empty(n, dtype=np.float64)
    value = np.empty(n, dtype=np.float32)
    tag = np.empty(n, dtype=np.uint32)
    bits64 = np.zeros(1, dtype=np.uint64)
    as_f64 = bits64.view(np.float64)
    bits32 = np.zeros(1, dtype=np.uint32)
    as_f32 = bits32.view(np.float32)
    slots = np.full(64, -1, dtype=np.int64)  # tag id per slot of the hash table
    first = np.empty(32, dtype=np.int64)
    size = np.empty(32, dtype=np.int64)
    hashes = np.empty(32, dtype=np.uint64)
    ntags = 0
    k = 0
    for i in range(n):
        s, e = starts[i], ends[i]
        slow_starts[m], slow_ends[m] = s, e  # left for the slow path, unless decoded below
        m += 1
        if e - s < 10 or b[s] != 0x09:
            continue
        pos = s + 9
        stepv = np.uint64(0)
        if b[pos] == 0x10:  # a step (absent when 0)
            j = 0
            while pos + 1 + j < e and j < 10:
                x = b[pos + 1 + j]
                stepv |= np.uint64(x & 0x7F) << np.uint64(7 * j)
                j += 1
                if x < 0x80:
                    break
            else:
                continue
            pos += 1 + j
        # summary{ value{ tag ... } }: each length reaches the record's end, the tag is followed by simple_value
        tag_start = -1
        tag_end = -1
        for level in range(3):
            if pos >= e or b[pos] != (0x2A if level == 0 else 0x0A):
                break
            length = 0
            j = 0
            maxlen = 3 if level == 2 else 5
            while pos + 1 + j < e and j < maxlen:
                x = b[pos + 1 + j]
                length |= (x & 0x7F) << (7 * j)
                j += 1
                if x < 0x80:
                    break
            else:
                break
            pos += 1 + j
            if level < 2 and pos + length != e:
                break
            if level == 2:
                tag_start, tag_end = pos, pos + length
        if tag_end < 0 or tag_end + 5 != e or b[tag_end] != 0x15:
            continue
        h = np.uint64(14695981039346656037)
        for j in range(tag_start, tag_end):
            h = (h ^ np.uint64(b[j])) * np.uint64(1099511628211)
        mask = slots.shape[0] - 1
        slot = np.int64(h & np.uint64(mask))
        while True:
            t = slots[slot]
            if t < 0:  # a new tag
                if ntags == first.shape[0]:
                    first = np.concatenate((first, np.empty(ntags, dtype=np.int64)))
                    size = np.concatenate((size, np.empty(ntags, dtype=np.int64)))
                    hashes = np.concatenate((hashes, np.empty(ntags, dtype=np.uint64)))
                t = ntags
                first[t], size[t], hashes[t] = tag_start, tag_end - tag_start, h
                ntags += 1
                slots[slot] = t
                if 2 * ntags > slots.shape[0]:  # keep the table at most half full
                    slots = np.full(2 * slots.shape[0], -1, dtype=np.int64)
                    mask = slots.shape[0] - 1
                    for u in range(ntags):
                        at = np.int64(hashes[u] & np.uint64(mask))
                        while slots[at] >= 0:
                            at = (at + 1) & mask
                        slots[at] = u
                break
            if hashes[t] == h and size[t] == tag_end - tag_start:
                same = True
                for j in range(size[t]):
                    if b[first[t] + j] != b[tag_start + j]:
                        same = False
                        break
                if same:
                    break
            slot = (slot + 1) & mask
        m -= 1
        starts[k] = s
        ends[k] = np.int64(stepv)
        tag[k] = t
        bits64[0] = 0
        for j in range(8):
            bits64[0] |= np.uint64(b[s + 1 + j]) << np.uint64(8 * j)
        wall[k] = as_f64[0]
        bits32[0] = 0
        for j in range(4):
            bits32[0] |= np.uint32(b[tag_end + 1 + j]) << np.uint32(8 * j)
        value[k] = as_f32[0]
        k += 1
    return k, wall[:k], value[:k], tag[:k], slow_starts[:m], slow_ends[:m], first[:ntags], size[:ntags]


@cache
def _scalar_kernel() -> Callable[..., tuple]:
    """:func:`_scalar_records` compiled (numba is imported here only; cached on disk)."""
    import numba

    return numba.njit(cache=True, nogil=True)(_scalar_records)


# --- the slow path ------------------------------------------------------------------------------------------------
def _tensor_scalar(tensor: object) -> float | None:
    """The value of a rank-0 / one-element numeric TensorProto, else None (also for bytes too short for their
    dtype, or a half-precision bit pattern beyond 16 bits: damaged, not a value)."""
    dims = [d.size for d in tensor.tensor_shape.dim]  # type: ignore[attr-defined]
    if dims and int(np.prod(dims)) != 1:
        return None
    dtype = tensor.dtype  # type: ignore[attr-defined]
    content = tensor.tensor_content  # type: ignore[attr-defined]
    if content:
        if dtype == _DT_BFLOAT16:  # the high half of a float32
            if len(content) < 2:
                return None
            return float((np.frombuffer(content[:2], "<u2").astype(np.uint32) << 16).view("<f4")[0])
        if dtype not in _SCALAR_DTYPES or len(content) < np.dtype(_SCALAR_DTYPES[dtype]).itemsize:
            return None
        return float(np.frombuffer(content, _SCALAR_DTYPES[dtype], count=1)[0])
    for name in ("float_val", "double_val", "int_val", "int64_val"):
        values = getattr(tensor, name)
        if len(values):
            return float(values[0])
    if len(tensor.half_val):  # type: ignore[attr-defined]  fp16 / bf16 bit patterns in int32s
        if not 0 <= tensor.half_val[0] <= 0xFFFF:  # type: ignore[attr-defined]
            return None
        bits = np.array([tensor.half_val[0]], np.uint16)  # type: ignore[attr-defined]
        return float(bits.view("<f2")[0]) if dtype == 19 else float((bits.astype(np.uint32) << 16).view("<f4")[0])
    return 0.0 if dtype in (1, 2) else None  # proto3 leaves a zero out


def _slow_records(buf: bytes, starts: np.ndarray,
                  ends: np.ndarray) -> tuple[list[dict], list[dict], list[dict], dict[str, dict[str, None]]]:
    """Scalars, lifecycle events and config entries of the records the fast path did not take, and the tags of the
    summaries none of them is (images, histograms, PR curves, a tensor of more than one value), by their kind (the
    plugin that wrote them, else the kind of value), in the order first seen."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import plugin_data_pb2

    scalars: list[dict] = []
    events: list[dict] = []
    configs: list[dict] = []
    plugin_of: dict[str, str] = {}
    unread: dict[str, dict[str, None]] = {}
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        try:
            event = event_pb2.Event.FromString(buf[start:end])
        except Exception:
            events.append({"offset": start, "kind": s.EV_UNDECODABLE, "text": f"record at byte {start - 12}"})
            continue
        base = {"offset": start, "step": event.step, "wall_time": event.wall_time}
        kind = event.WhichOneof("what")
        if kind == "file_version":
            events.append({**base, "kind": s.EV_FILE_START, "text": event.file_version})
        elif kind == "session_log":
            code = event.session_log.status
            names = event_pb2.SessionLog.SessionStatus
            status = names.Name(code) if code in names.values() else f"status {code}"
            events.append({**base, "kind": _SESSION_KINDS.get(status, s.EV_SESSION_OTHER),
                           "text": f"SessionLog {status} at step {event.step}"})
        elif kind in ("graph_def", "meta_graph_def", "tagged_run_metadata"):  # the model's graph, not a value
            unread.setdefault("graphs", {})[kind] = None
        elif kind == "summary":
            for value in event.summary.value:
                tag = value.tag
                if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
                    plugin_of.setdefault(tag, value.metadata.plugin_data.plugin_name)
                plugin = plugin_of.get(tag, "")
                which = value.WhichOneof("value")
                if which == "simple_value":
                    scalars.append({**base, "tag": tag, "value": float(value.simple_value)})
                elif plugin == "hparams" and tag.endswith("session_start_info"):
                    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
                    for key, v in sorted(data.session_start_info.hparams.items()):  # (a map: no order of its own)
                        kind_v = v.WhichOneof("kind")
                        configs.append({**base, "key": key, "value": getattr(v, kind_v) if kind_v else None})
                elif which == "tensor" and (plugin == "text" or value.tensor.dtype == 7):
                    text = value.tensor.string_val[0].decode("utf-8", "replace") if value.tensor.string_val else ""
                    configs.append({**base, "key": tag.removesuffix("/text_summary"), "value": text})
                elif which == "tensor" and plugin in ("scalars", "") and \
                        (number := _tensor_scalar(value.tensor)) is not None:
                    scalars.append({**base, "tag": tag, "value": number})
                elif plugin != "hparams":  # (the hparams plugin's other records are its bookkeeping, not values)
                    unread.setdefault(plugin or _VALUE_KINDS.get(which or "", which or "empty"), {})[tag] = None
    return scalars, events, configs, unread


# a summary value of no plugin, by its kind (a torch / tensorboardX writer names none for these)
_VALUE_KINDS = {"histo": "histograms", "image": "images", "audio": "audio", "tensor": "tensors",
                "obsolete_old_style_histogram": "histograms"}


def _unread_warning(shown: str, unread: dict[str, dict[str, None]]) -> list[str]:
    """A warning naming the tags of a file that hold no scalar the reader takes (none when there are none).

    >>> _unread_warning("v0", {"images": {"samples": None}, "pr_curves": dict.fromkeys(["cat", "dog"])})
    ['v0: it also holds records that are no scalar, not read (images: samples; pr_curves: cat, dog)']
    """
    if not unread:
        return []
    said = "; ".join(f"{kind}: {', '.join(list(tags)[:6])}{', ...' if len(tags) > 6 else ''}"
                     for kind, tags in unread.items())
    return [f"{shown}: it also holds records that are no scalar, not read ({said})"]


# --- the file -----------------------------------------------------------------------------------------------------
def parse_event_file(path: Path, shown: str, run: str, compiled: bool | None = None) -> ParsedLog:
    """Every scalar, lifecycle record and text/hparams config of one event file, attempts numbered from 1.

    >>> parsed = parse_event_file(Path("tests/fixtures/real/tensorboard/orktes_go-tensorboard/tfevents/"
    ...     "events.out.tfevents.1585499054.Jaakkos-Mac-mini.local.11684.5.v2"), "tf2", "tf2")
    >>> parsed.metrics["metric"].unique().to_list(), parsed.metrics.height
    (['my_metric'], 100)
    """
    return _frames(path, run, shown, compiled)


def _records(path: Path, shown: str, compiled: bool | None) -> tuple[pl.DataFrame, pl.DataFrame, list[dict], list[str]]:
    """The file's scalars (sorted by offset), lifecycle events, config entries and framing warnings."""
    buf = read_all(path)
    if not buf:
        raise InputError(f"{path}: empty file")
    if compiled is None:  # numba is worth loading for a large file, or once it is loaded
        compiled = len(buf) >= COMPILED_MIN_BYTES or _scalar_kernel.cache_info().currsize > 0
    framing = walk(buf, compiled)
    warnings = [f"{shown}: {problem}" for problem in framing.problems]
    if len(framing.starts) == 0:
        raise InputError(f"{path}: not a TensorBoard event file (no valid TFRecord)")
    rows, slow_starts, slow_ends = _fast_scalars(buf, framing.starts, framing.ends, compiled)
    slow_scalars, slow_events, configs, unread = _slow_records(buf, slow_starts, slow_ends)
    warnings += _unread_warning(shown, unread)
    del buf, framing  # the file's bytes, freed before the frame is built
    fast = rows.frame()
    del rows
    if slow_scalars:
        raw = pl.concat([fast, pl.DataFrame(slow_scalars, schema=fast.schema)]).sort("offset")
    else:  # one row per record, in file order: sorted already (a sort would copy every column)
        raw = fast.with_columns(pl.col("offset").set_sorted())
    events = pl.DataFrame(slow_events, schema={"offset": pl.Int64, "step": pl.Int64, "wall_time": pl.Float64,
                                               "kind": pl.String, "text": pl.String})
    return raw, events, configs, warnings


# (tag, value, step, why): a value a writer logs where it has none, dropped with a reading warning
_PLACEHOLDERS: tuple[tuple[str, float, int, str], ...] = (
    ("hp_metric", -1.0, 0, "Lightning's placeholder, logged with the hyperparameters at each launch (not a value "
                           "the run computed)"),
)


def _without_placeholders(raw: pl.DataFrame, source: str) -> tuple[pl.DataFrame, list[str]]:
    """The file's scalars without the :data:`_PLACEHOLDERS`, and a warning per placeholder dropped.

    >>> raw = pl.DataFrame({"tag": ["hp_metric", "val_loss"], "step": [0, 9], "value": [-1.0, 0.5]},
    ...                    schema_overrides={"tag": pl.Categorical})
    >>> kept, said = _without_placeholders(raw, "v0")
    >>> kept["tag"].to_list(), said
    (['val_loss'], ["v0: hp_metric -1 at step 0 (1 record): Lightning's placeholder, logged with the hyperparameters \
at each launch (not a value the run computed); not read"])
    """
    notes: list[str] = []
    present = set(raw["tag"].unique().to_list())
    for tag, value, step, why in _PLACEHOLDERS:
        if tag not in present:
            continue
        placeholder = (pl.col("tag") == tag) & (pl.col("value") == value) & (pl.col("step") == step)
        if n := raw.select(placeholder.sum()).item():
            raw = raw.filter(~placeholder)
            notes.append(f"{source}: {tag} {value:g} at step {step} ({n} record{'s' if n > 1 else ''}): {why}; not "
                         "read")
    return raw, notes


# Lightning's per-batch evaluation values (``self.log(..., on_step=True)`` in validation_step): "val_loss_step"
_EVAL_BATCH = re.compile(r"^(?:val|valid|validation|test|eval)[_/].+_step$", re.IGNORECASE)
_EVALUATION = re.compile(r"^(?:val|valid|validation|test|eval)[_/]", re.IGNORECASE)  # an evaluation's scalar


def _evaluation_pass(raw: pl.DataFrame, names: dict[str, tuple[str, str]]) -> pl.DataFrame:
    """An ``evaluation_pass`` event at the first record of a file whose scalars are all an evaluation's (``val_*``,
    ``test_*``, ``eval/*``, with the epoch beside them, the Trainer's ``train/epoch``: Lightning's
    ``trainer.validate()`` / ``test()``, a Trainer's ``evaluate()``, each a writer of its own) within one epoch,
    saying its last values; none for any other file."""
    evaluated = sorted(t for t in names if _EVALUATION.match(t))
    epoch = {t for t, (m, _) in names.items() if m == s.EPOCH or t.rpartition("/")[2] == s.EPOCH}  # (train/epoch)
    if not evaluated or set(evaluated) | epoch != names.keys():
        return pl.DataFrame()
    # evaluation scalars at several steps with the epoch rising across them are a training that logged only its
    # evaluations (a module whose train loss went to the progress bar); a pass evaluates within one epoch (at one
    # step, or per batch, or checkpoint after checkpoint)
    at_step = [t for t in evaluated if names[t][1] != "evaluation_batches"]
    if raw.filter(pl.col("tag").is_in(at_step or evaluated))["step"].n_unique() > 1 \
            and raw.filter(pl.col("tag").is_in(list(epoch)))["value"].n_unique() > 1:
        return pl.DataFrame()
    last = raw.filter(pl.col("tag").is_in(evaluated)).group_by("tag").agg(pl.col("step", "value").last())
    said = ", ".join(f"{t}={v:.6g}" for t, _, v in last.sort("tag").head(4).iter_rows())
    steps = sorted(set(last["step"].to_list()))
    where = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}–{steps[-1]}"
    return raw.head(1).select(
        "offset", "step", "wall_time", kind=pl.lit(s.EV_EVALUATION_PASS),
        text=pl.lit(f"evaluation scalars only, no training step: {said}{', ...' if len(evaluated) > 4 else ''} "
                    f"at {where}"))


def _frames(path: Path, run: str, source: str, compiled: bool | None) -> ParsedLog:
    """The canonical frames of the file's records (read here: the only reference to each intermediate column, so
    replacing one frees it; the file's bytes are freed before the frames are built)."""
    raw, events, configs, warnings = _records(path, source, compiled)
    raw, dropped = _without_placeholders(raw, source)
    warnings += dropped
    # a writer of its own for evaluation (Keras's validation/ beside train/): its scalars are validation metrics
    folder = path.parent.name
    within = f"{folder}/" if folder.lower() in VALIDATION_FOLDERS else ""
    names = {tag: canonical(within + tag) for tag in raw["tag"].unique().to_list()}
    per_batch = sorted(t for t in names if _EVAL_BATCH.match(t) and t.removesuffix("_step") + "_epoch" in names)
    if per_batch:  # Lightning logs an evaluation's on_step values at a count of evaluation batches
        names.update({t: (t, "evaluation_batches") for t in per_batch})
        warnings.append(f"{source}: {len(per_batch)} scalar(s) logged per evaluation batch ("
                        + ", ".join(per_batch[:3]) + (", ..." if len(per_batch) > 3 else "")
                        + "): their steps count evaluation batches, not training steps; not used (their per-evaluation "
                        "means, the _epoch twins, are)")
    by_tag = _TagLookup(raw["tag"])
    raw = raw.with_columns(metric=by_tag.categorical({t: m for t, (m, _) in names.items()}),
                           axis=by_tag.categorical({t: a for t, (_, a) in names.items()}))
    if any(t in SECONDS_TAGS for t in names):
        value = raw["value"].to_numpy().copy()  # seconds -> ms in place (a when/then made two 8-byte columns)
        value[by_tag.mask(SECONDS_TAGS)] *= 1000.0
        raw = raw.with_columns(value=pl.Series(value))
    steps_only = all(axis == "step" for _, axis in names.values())  # no `` vs samples`` twins: no filter copies
    on_step = pl.lit(True) if steps_only else pl.col("axis") == "step"
    main = raw.select("offset", "tag", "step", "wall_time", "axis").filter(on_step)
    # restarts: a session start after the first record, or the step of the training loss (else the busiest tag but
    # the epoch, which Lightning logs at an evaluation's step and at the training step before it) going back
    losses = [t for t, (m, axis) in names.items() if m == s.LOSS and axis == "step"]
    counts = main.group_by("tag").len().filter(  # (the small per-tag table, not the frame, is filtered)
        pl.col("tag").is_in(losses) if losses else pl.col("tag").cast(pl.String) != s.EPOCH)
    primary = counts.sort(["len", "tag"], descending=[True, False])["tag"][:1].to_list()
    regress = (
        main.filter(pl.col("tag").is_in(primary))
        .with_columns(prev=pl.col("step").shift(1))
        .filter(pl.col("step") < pl.col("prev"))  # the same step again is a duplicate (HF logs its last step twice)
    )
    first_offset = int(raw["offset"].min()) if raw.height else 0  # type: ignore[arg-type]
    starts = events.filter((pl.col("kind") == s.EV_SESSION_START) & (pl.col("offset") > first_offset))["offset"]
    boundaries = _apart(sorted(set(starts.to_list()) | set(_rollback_starts(main, regress, starts.to_list()))
                               | set(_trainings_begun(configs, raw["offset"]))), raw["offset"])
    bounds = np.array(boundaries, dtype=np.int64)

    def attempt_of(frame: pl.DataFrame) -> pl.DataFrame:
        if not len(bounds):
            return frame.with_columns(attempt=pl.lit(1, dtype=pl.Int32))
        at = np.searchsorted(bounds, frame["offset"].to_numpy(), side="right").astype(np.int32)
        at += 1
        return frame.with_columns(attempt=pl.Series(at))

    raw = attempt_of(raw)
    metrics = raw if steps_only else pl.concat([raw.filter(on_step), _axis_metrics(raw)], how="diagonal_relaxed")
    # the Hugging Face Trainer writes train/train_runtime (with train_loss, the run's mean) when train() returns
    done = raw.filter(by_tag.mask(s.TRAINER_DONE_KEYS)).select(
        "offset", "step", "wall_time", kind=pl.lit(s.EV_TRAINING_ENDED),
        text=pl.format("training finished: the Trainer's summary (train_runtime {} s)", pl.col("value"))
    ) if s.TRAINER_DONE_KEYS & names.keys() else events.clear()
    marks = pl.concat(
        [
            events,
            done,
            regress.select("offset", "step", "wall_time", kind=pl.lit(s.EV_STEP_REGRESSION),
                           text=s.format_text("{} went back from step {} to {}", "tag", "prev", "step")),
            _duplicates(attempt_of(main)),
            _evaluation_pass(raw, names) if not within else pl.DataFrame(),
        ],
        how="diagonal_relaxed",
    )
    marks = attempt_of(marks.sort("offset"))
    config_frame = _config_frame(configs)
    if config_frame.height:
        config_frame = attempt_of(config_frame).unique(["attempt", "key"], keep="first", maintain_order=True)

    def finish(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        labels = {"run": pl.lit(run, dtype=schema["run"]), "source": pl.lit(source, dtype=schema["source"])}
        return s.conform(frame.with_columns(**labels), schema)

    return ParsedLog(
        metrics=finish(metrics.sort("offset"), s.METRICS_SCHEMA),
        events=finish(marks.with_columns(line=pl.col("offset")), s.EVENTS_SCHEMA),
        configs=finish(config_frame, s.CONFIGS_SCHEMA),
        warnings=warnings,
        n_attempts=len(boundaries) + 1,
        tags={tag: metric for tag, (metric, axis) in names.items() if axis == "step"},
    )


class _TagLookup:
    """Per-row values of a per-tag table, looked up once per distinct tag and gathered by tag code (a
    ``replace_strict`` on 2M rows took 4x the time and memory).

    >>> lookup = _TagLookup(pl.Series(["lm loss", "lr", "lm loss"], dtype=pl.Categorical))
    >>> lookup.categorical({"lm loss": "loss", "lr": "lr"}).to_list(), lookup.mask({"lr"}).tolist()
    (['loss', 'lr', 'loss'], [False, True, False])
    """

    def __init__(self, tag: pl.Series) -> None:
        distinct = tag.unique()
        codes = distinct.to_physical().to_numpy()
        position = np.zeros(int(codes.max()) + 1 if len(codes) else 0, dtype=np.uint32)
        position[codes] = np.arange(len(codes), dtype=np.uint32)
        self.tags = distinct.to_list()
        self.index = pl.Series(position[tag.to_physical().to_numpy()])  # each row's position in self.tags

    def categorical(self, table: dict[str, str]) -> pl.Series:
        return pl.Series([table[t] for t in self.tags], dtype=pl.Categorical).gather(self.index)

    def mask(self, tags: Collection[str]) -> np.ndarray:
        return np.array([t in tags for t in self.tags], dtype=bool)[self.index.to_numpy()]


def _rollback_starts(main: pl.DataFrame, regress: pl.DataFrame, session_starts: list[int]) -> list[int]:
    """Where each rollback begins: the first record after the primary tag's last record of the old attempt
    whose step is at or below the step the run went back to (none when a session start already marks it)."""
    out: list[int] = []
    for offset, step, prev in regress.select("offset", "step", "prev").iter_rows():
        window = main.filter((pl.col("offset") <= offset) & (pl.col("step") <= step))
        before = main.filter((pl.col("offset") < offset) & (pl.col("step") >= prev))["offset"].max()
        if before is not None:
            window = window.filter(pl.col("offset") > before)
            if any(before < start <= offset for start in session_starts):
                continue
        out.append(int(window["offset"].min()) if window.height else offset)  # type: ignore[arg-type]
    return out


def _duplicates(main: pl.DataFrame) -> pl.DataFrame:
    """A ``duplicate_step`` event per (attempt, tag, step) logged more than once, at its second record (its offset
    and time: a step each of three trainings in one file logged once is no duplicate)."""
    if main.group_by("attempt", "tag").agg(unique=pl.col("step").n_unique() == pl.len())["unique"].all():
        main = main.clear()  # no tag repeats a step: skip the window over every row (~5x the time, ~1x the memory)
    dup = main.filter(pl.col("step").is_duplicated().over("attempt", "tag")).group_by("attempt", "tag", "step").agg(
        pl.col("offset").sort().get(1).alias("offset"), pl.col("wall_time").sort_by("offset").get(1),
        pl.len().alias("n"),
    )
    return dup.select(
        "offset", "step", "wall_time", kind=pl.lit(s.EV_DUPLICATE_STEP),
        text=s.format_text("{} logged {} times at step {}", "tag", "n", "step"),
    )


def _axis_metrics(raw: pl.DataFrame) -> pl.DataFrame:
    """`` vs samples`` / `` vs tokens`` twins: the consumed samples/tokens at each iteration, not more points.

    Megatron writes ``add_scalar(key, v, iteration)`` and then ``add_scalar(key + ' vs samples', v, consumed)``,
    so each twin is paired with the last record of its base tag before it.
    """
    twins = raw.filter(pl.col("axis").is_in(["samples", "tokens"]))
    if twins.height == 0:
        return pl.DataFrame()
    base = raw.filter(pl.col("axis") == "step").select("offset", "metric", "attempt", iteration=pl.col("step"))
    paired = twins.select("offset", "metric", "axis", "wall_time", x=pl.col("step")).sort("offset").join_asof(
        base.sort("offset"), on="offset", by="metric", strategy="backward", check_sortedness=False
    )
    return (
        paired.drop_nulls("iteration")
        .unique(["attempt", "iteration", "axis"], keep="first", maintain_order=True)
        .select(
            "offset", "attempt", "wall_time", step=pl.col("iteration"),
            metric=pl.when(pl.col("axis") == "samples").then(pl.lit(s.CONSUMED_SAMPLES)).otherwise(
                pl.lit(s.CONSUMED_TOKENS)),
            value=pl.col("x").cast(pl.Float64),
        )
    )


_TRAINING_ARGS = "args"  # the Hugging Face Trainer's TrainingArguments, written as text as each train() begins


def _trainings_begun(configs: list[dict], offsets: pl.Series) -> list[int]:
    """Where another training began in the file: the Trainer's ``args`` text written again after scalars were
    logged (yongshuaiy/LLMs-final: three train() calls in one process wrote one event file, the last two at step 20
    each). A text written at every evaluation (generated samples) is no such mark: only the Trainer's own.

    >>> _trainings_begun([{"offset": 0, "key": "args"}, {"offset": 90, "key": "args"}], pl.Series([10, 50, 100]))
    [90]
    >>> _trainings_begun([{"offset": 0, "key": "args"}, {"offset": 5, "key": "args"}], pl.Series([10, 50]))
    []
    """
    written = sorted(c["offset"] for c in configs if c.get("key") == _TRAINING_ARGS)
    if len(written) < 2 or not offsets.len():
        return []
    scalars = np.sort(offsets.to_numpy())
    logged_before = np.searchsorted(scalars, np.array(written), side="left")  # scalars before each write
    return [int(w) for w, n, prev in zip(written[1:], logged_before[1:], logged_before[:-1], strict=True) if n > prev]


def _apart(boundaries: list[int], offsets: pl.Series) -> list[int]:
    """The attempt boundaries with a scalar logged since the one before: two marks of one start (the Trainer's args
    text, then its step going back at its first loss) are one boundary, the first.

    >>> _apart([90, 120, 300], pl.Series([10, 130, 310]))
    [90, 300]
    """
    if len(boundaries) < 2:
        return boundaries
    scalars = np.sort(offsets.to_numpy())
    before = np.searchsorted(scalars, np.array(boundaries), side="left")
    return [boundaries[0]] + [b for b, n, prev in zip(boundaries[1:], before[1:], before[:-1], strict=True) if n > prev]


def _config_frame(configs: list[dict]) -> pl.DataFrame:
    """Text summaries and hparams as config rows; a key repeated within an attempt keeps its first value. A text
    summary holding a JSON object (the Hugging Face Trainer's ``args`` and ``model_config``) gives one row per key."""
    if not configs:
        return pl.DataFrame(schema={"offset": pl.Int64, "key": pl.String, "value": pl.String, "typed": pl.String})
    rows = []
    for c in configs:
        value = c["value"]
        for key, v in _json_object(value).items() or [(c["key"], value)]:
            typed = typed_value(v) if isinstance(v, str) else v
            rows.append({"offset": c["offset"], "key": key, "value": v if isinstance(v, str) else json.dumps(v),
                         "typed": json.dumps(typed, default=str)})
    return pl.DataFrame(rows)


def _json_object(text: object) -> dict[str, object]:
    """The flattened keys of a text that is a JSON object, else nothing."""
    if not isinstance(text, str) or not text.lstrip().startswith("{"):
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return flatten(data) if isinstance(data, dict) else {}
