"""The few W&B ``Record`` protobuf messages a forensics reader needs, declared here so ``wandb`` is not imported.

Field numbers are those of ``wandb/proto/wandb_internal.proto`` (checked against wandb 0.16.6 and 0.31.0); fields
left out are skipped by the protobuf runtime as unknown fields. The messages live in a private descriptor pool,
so they never clash with wandb's own classes when both are loaded.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _INT64, _INT32, _BOOL, _MESSAGE = _F.TYPE_STRING, _F.TYPE_INT64, _F.TYPE_INT32, _F.TYPE_BOOL, _F.TYPE_MESSAGE
_PACKAGE = "forensics_wandb"

# message name -> [(field, number, type, repeated, message type)]
_MESSAGES: dict[str, list[tuple[str, int, int, bool, str]]] = {
    "Timestamp": [("seconds", 1, _INT64, False, ""), ("nanos", 2, _INT32, False, "")],
    "Item": [("key", 1, _STRING, False, ""), ("nested_key", 2, _STRING, True, ""), ("value_json", 16, _STRING, False, "")],
    "HistoryStep": [("num", 1, _INT64, False, "")],
    "HistoryRecord": [("item", 1, _MESSAGE, True, "Item"), ("step", 2, _MESSAGE, False, "HistoryStep")],
    "ItemsRecord": [("update", 1, _MESSAGE, True, "Item"), ("remove", 2, _MESSAGE, True, "Item")],
    "RunRecord": [
        ("run_id", 1, _STRING, False, ""), ("entity", 2, _STRING, False, ""), ("project", 3, _STRING, False, ""),
        ("config", 4, _MESSAGE, False, "ItemsRecord"), ("summary", 5, _MESSAGE, False, "ItemsRecord"),
        ("run_group", 6, _STRING, False, ""), ("display_name", 8, _STRING, False, ""),
        ("starting_step", 14, _INT64, False, ""), ("start_time", 17, _MESSAGE, False, "Timestamp"),
        ("resumed", 18, _BOOL, False, ""), ("forked", 22, _BOOL, False, ""),
    ],
    "RunExitRecord": [("exit_code", 1, _INT32, False, ""), ("runtime", 2, _INT32, False, "")],
    "MetricRecord": [  # run.define_metric(name, step_metric=...)
        ("name", 1, _STRING, False, ""), ("glob_name", 2, _STRING, False, ""), ("step_metric", 4, _STRING, False, ""),
    ],
    "OutputRawRecord": [
        ("output_type", 1, _INT32, False, ""), ("timestamp", 2, _MESSAGE, False, "Timestamp"),
        ("line", 3, _STRING, False, ""),
    ],
    "Record": [
        ("num", 1, _INT64, False, ""), ("history", 2, _MESSAGE, False, "HistoryRecord"),
        ("summary", 3, _MESSAGE, False, "ItemsRecord"), ("config", 5, _MESSAGE, False, "ItemsRecord"),
        ("metric", 12, _MESSAGE, False, "MetricRecord"),
        ("output_raw", 13, _MESSAGE, False, "OutputRawRecord"), ("run", 17, _MESSAGE, False, "RunRecord"),
        ("exit", 18, _MESSAGE, False, "RunExitRecord"),
    ],
}


def _record_class() -> Any:
    file = descriptor_pb2.FileDescriptorProto(name="forensics_wandb.proto", package=_PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        for field_name, number, kind, repeated, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind)
            field.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Record"))


Record = _record_class()
