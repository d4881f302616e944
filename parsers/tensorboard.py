"""TensorBoard event files -> canonical frames: every record, no sampling, no purge, restarts annotated.

The common record (one ``simple_value`` scalar per event, as PyTorch, tensorboardX and Megatron write it) is
decoded for all records at once with NumPy, following ``shared/reference/tensorboard-events.md`` §6. Every other
record (file version, ``SessionLog``, TF2 tensor scalars, text summaries, hparams, several values per event) is
decoded with the protobuf classes that ship with ``tensorboard``; nothing is unpickled.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from parsers import schema as s
from parsers.megatron import typed_value
from parsers.metric_names import SECONDS_TAGS, canonical
from parsers.reader import Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import InputError, read_all
from parsers.tfrecord import walk
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
    """Little-endian values of ``dtype`` at unaligned offsets ``at``: one aligned view per residue class."""
    size = np.dtype(dtype).itemsize
    out = np.empty(len(at), dtype)
    residue = at % size
    for k in range(size):
        idx = np.nonzero(residue == k)[0]
        if len(idx):
            view = np.frombuffer(buf, dtype, count=(len(buf) - k) // size, offset=k)
            out[idx] = view[(at[idx] - k) // size]
    return out


def _tag_ids(buf: bytes, start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Dictionary-encode the tag bytes ``buf[start:start+length]``: a 64-bit hash of all their bytes, then the
    distinct tags decoded once (a hash collision between two of a file's few tags is ~1e-15 unlikely)."""
    padded = buf + b"\0" * 8
    h = np.full(len(start), 1469598103934665603, np.uint64)
    prime = np.uint64(1099511628211)
    for k in range(int((length.max() + 7) // 8) if len(length) else 0):
        # a tag shorter than the longest has no bytes to read here (masked out below): read in bounds anyway, or a
        # short tag in the file's last record would read past its end
        word = _gather(padded, np.minimum(start + 8 * k, len(padded) - 8), "<u8")
        valid = np.clip(length - 8 * k, 0, 8).astype(np.uint64)
        mask = np.where(valid >= 8, np.uint64(0xFFFFFFFFFFFFFFFF), (np.uint64(1) << (valid * np.uint64(8))) - np.uint64(1))
        h = (h ^ (word & mask)) * prime
    h ^= length.astype(np.uint64)
    _, first, ids = np.unique(h, return_index=True, return_inverse=True)
    names = [buf[start[i] : start[i] + length[i]].decode("utf-8", "replace") for i in first]
    return ids.astype(np.int64), names


_CHUNK = 1 << 18  # records decoded together: bounds the int64 temporaries (~20 arrays) to ~40 MB


def _fast_scalars(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[pl.DataFrame, np.ndarray]:
    """Records that are exactly ``Event{wall_time, [step], summary{value{tag, simple_value}}}``, decoded with
    NumPy a chunk of records at a time.

    Returns their rows (offset, tag, step, wall_time, value) and a mask of the records left for the slow path.
    """
    frames, masks = [], []
    for lo in range(0, max(len(starts), 1), _CHUNK):
        rows, rest = _fast_chunk(buf, starts[lo:lo + _CHUNK], ends[lo:lo + _CHUNK])
        frames.append(rows)
        masks.append(rest)
    return pl.concat(frames), np.concatenate(masks)


def _fast_chunk(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[pl.DataFrame, np.ndarray]:
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
    rows = pl.DataFrame(
        {
            "offset": s0[i],
            "tag": pl.Series(names, dtype=pl.Categorical).gather(ids),
            "step": np.where(has_step[i], step_v[i], 0).view(np.int64),
            "wall_time": _gather(buf, s0[i] + 1, "<f8"),
            "value": _gather(buf, u[i] + 1, "<f4").astype(np.float64),
        }
    )
    return rows, ~fast


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


def _slow_records(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[list[dict], list[dict], list[dict]]:
    """Scalars, lifecycle events and config entries of the records the fast path did not take."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import plugin_data_pb2

    scalars: list[dict] = []
    events: list[dict] = []
    configs: list[dict] = []
    plugin_of: dict[str, str] = {}
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
                    for key, v in data.session_start_info.hparams.items():
                        kind_v = v.WhichOneof("kind")
                        configs.append({**base, "key": key, "value": getattr(v, kind_v) if kind_v else None})
                elif which == "tensor" and (plugin == "text" or value.tensor.dtype == 7):
                    text = value.tensor.string_val[0].decode("utf-8", "replace") if value.tensor.string_val else ""
                    configs.append({**base, "key": tag.removesuffix("/text_summary"), "value": text})
                elif which == "tensor" and plugin in ("scalars", ""):
                    number = _tensor_scalar(value.tensor)
                    if number is not None:
                        scalars.append({**base, "tag": tag, "value": number})
    return scalars, events, configs


# --- the file -----------------------------------------------------------------------------------------------------
def parse_event_file(path: Path, shown: str, run: str) -> ParsedLog:
    """Every scalar, lifecycle record and text/hparams config of one event file, attempts numbered from 1.

    >>> parsed = parse_event_file(Path("tests/fixtures/real/tensorboard/orktes_go-tensorboard/tfevents/"
    ...     "events.out.tfevents.1585499054.Jaakkos-Mac-mini.local.11684.5.v2"), "tf2", "tf2")
    >>> parsed.metrics["metric"].unique().to_list(), parsed.metrics.height
    (['my_metric'], 100)
    """
    buf = read_all(path)
    if not buf:
        raise InputError(f"{path}: empty file")
    framing = walk(buf)
    warnings = [f"{shown}: {problem}" for problem in framing.problems]
    if len(framing.starts) == 0:
        raise InputError(f"{path}: not a TensorBoard event file (no valid TFRecord)")
    fast, rest = _fast_scalars(buf, framing.starts, framing.ends)
    slow_scalars, slow_events, slow_configs = _slow_records(buf, framing.starts[rest], framing.ends[rest])
    raw = pl.concat([fast, pl.DataFrame(slow_scalars, schema=fast.schema)]).sort("offset")
    events = pl.DataFrame(slow_events, schema={"offset": pl.Int64, "step": pl.Int64, "wall_time": pl.Float64,
                                               "kind": pl.String, "text": pl.String})
    return _frames(raw, events, slow_configs, run, shown, warnings)


def _frames(raw: pl.DataFrame, events: pl.DataFrame, configs: list[dict], run: str, source: str,
            warnings: list[str]) -> ParsedLog:
    names = {tag: canonical(tag) for tag in raw["tag"].unique().to_list()}
    raw = raw.with_columns(
        metric=pl.col("tag").replace_strict({t: m for t, (m, _) in names.items()}, return_dtype=pl.Categorical),
        axis=pl.col("tag").replace_strict({t: a for t, (_, a) in names.items()}, return_dtype=pl.Categorical),
    )
    seconds = [t for t in names if t in SECONDS_TAGS]
    if seconds:
        raw = raw.with_columns(value=pl.when(pl.col("tag").is_in(seconds)).then(pl.col("value") * 1000.0)
                               .otherwise("value"))
    main = raw.filter(pl.col("axis") == "step")
    # restarts: a session start after the first record, or the step of the busiest tag going back
    primary = main.group_by("tag").len().sort(["len", "tag"], descending=[True, False])["tag"][:1].to_list()
    regress = (
        main.filter(pl.col("tag").is_in(primary))
        .with_columns(prev=pl.col("step").shift(1))
        .filter(pl.col("step") < pl.col("prev"))  # the same step again is a duplicate (HF logs its last step twice)
    )
    first_offset = int(raw["offset"].min()) if raw.height else 0  # type: ignore[arg-type]
    starts = events.filter((pl.col("kind") == s.EV_SESSION_START) & (pl.col("offset") > first_offset))["offset"]
    boundaries = sorted(set(starts.to_list()) | set(_rollback_starts(main, regress, starts.to_list())))
    bounds = np.array(boundaries, dtype=np.int64)

    def attempt_of(frame: pl.DataFrame) -> pl.DataFrame:
        at = np.searchsorted(bounds, frame["offset"].to_numpy(), side="right") + 1
        return frame.with_columns(attempt=pl.Series(at.astype(np.int32)))

    raw = attempt_of(raw)
    metrics = pl.concat([raw.filter(pl.col("axis") == "step"), _axis_metrics(raw)], how="diagonal_relaxed")
    marks = pl.concat(
        [
            events,
            regress.select("offset", "step", "wall_time", kind=pl.lit(s.EV_STEP_REGRESSION),
                           text=s.format_text("{} went back from step {} to {}", "tag", "prev", "step")),
            _duplicates(main),
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
    dup = main.filter(pl.col("step").is_duplicated().over("tag")).group_by("tag", "step").agg(
        pl.col("offset").sort().get(1).alias("offset"), pl.col("wall_time").first(), pl.len().alias("n")
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
