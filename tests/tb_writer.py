"""A minimal TensorBoard event writer for generated test fixtures (torch / tensorboardX byte layout)."""

from __future__ import annotations

import struct
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2

from parsers.tfrecord import masked_crc


def record(event: event_pb2.Event) -> bytes:
    data = event.SerializeToString()
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))


def version(wall_time: float = 1000.0) -> bytes:
    return record(event_pb2.Event(wall_time=wall_time, file_version="brain.Event:2"))


def scalar(tag: str, value: float, step: int, wall_time: float = 1000.0) -> bytes:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return record(event_pb2.Event(wall_time=wall_time, step=step, summary=summary))


def tensor_scalar(tag: str, value: float, step: int, wall_time: float = 1000.0) -> bytes:
    """TF2 style: a rank-0 DT_FLOAT tensor in tensor_content, plugin metadata on the first event only (TF1)."""
    tensor = tensor_pb2.TensorProto(
        dtype=1, tensor_shape=tensor_shape_pb2.TensorShapeProto(), tensor_content=struct.pack("<f", value)
    )
    meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    val = summary_pb2.Summary.Value(tag=tag, tensor=tensor)
    if step == 0:
        val.metadata.CopyFrom(meta)
    return record(event_pb2.Event(wall_time=wall_time, step=step, summary=summary_pb2.Summary(value=[val])))


def text(tag: str, value: str, step: int) -> bytes:
    """torch ``add_text``: tag + '/text_summary', a DT_STRING tensor, plugin 'text'."""
    tensor = tensor_pb2.TensorProto(dtype=7, string_val=[value.encode()])
    meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    val = summary_pb2.Summary.Value(tag=tag + "/text_summary", tensor=tensor, metadata=meta)
    return record(event_pb2.Event(wall_time=1000.0, step=step, summary=summary_pb2.Summary(value=[val])))


def session_start(step: int) -> bytes:
    log = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
    return record(event_pb2.Event(wall_time=1000.0, step=step, session_log=log))


def write(path: Path, *records: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(records))
    return path
