"""PyTorch Lightning's checkpoint files in a run's folder, by their default name ``epoch=E-step=S.ckpt``
(``ModelCheckpoint``'s ``{epoch}-{step}``; ``-v1`` when a name is used again): each is a checkpoint the run saved at
step ``S`` (its ``global_step``, the optimizer steps), an event of the run (``checkpoint_save``); the file itself is
not read (a checkpoint is weights, not a log). One in a ``version_N/checkpoints/`` folder beside that version's
``metrics.csv`` is read with it (:mod:`parsers.lightning`: put on that log's steps). Its console's ``Epoch 3, global
step 400: 'val_loss' reached ..., saving model to '.../epoch=3-step=400.ckpt' as top 1`` is read as a save begun by
every text reader (:mod:`parsers.megatron_patterns`).

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> sniff(b"PK", "lightning_logs/version_13/checkpoints/epoch=19-step=400.ckpt"), sniff(b"PK", "last.ckpt")
(True, False)
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.reader import Piece, ReadContext
from parsers.schema import ParsedLog

FORMAT = "lightning-checkpoint"
NAME_ONLY = True  # read by its name alone: a copy from object storage takes its head, not gigabytes of weights
CHECKPOINT_NAME = re.compile(r"^epoch=(\d+)-step=(\d+)(?:-v\d+)?\.ckpt$")


def sniff(head: bytes, name: str) -> bool:
    return CHECKPOINT_NAME.match(Path(name).name) is not None


def read(path: Path, context: ReadContext) -> list[Piece]:
    if path.parent.name == "checkpoints" and (path.parent.parent / "metrics.csv").is_file():
        return []  # read with its version's metrics.csv, on that log's steps (parsers.lightning)
    found = CHECKPOINT_NAME.match(path.name)
    assert found is not None  # (sniff took it by its name)
    epoch, step = int(found.group(1)), int(found.group(2))
    events = s.conform(pl.DataFrame({
        "kind": [s.EV_CHECKPOINT_SAVE], "step": [step], "value": [float(step)], "attempt": [1], "run": [context.run],
        "source": [context.shown],
        "text": [f"checkpoint saved at step {step} (epoch {epoch}): the file {path.name} is in the run's folder"]}),
        s.EVENTS_SCHEMA)
    return [Piece(path, FORMAT, ParsedLog(s.empty(s.METRICS_SCHEMA), events, s.empty(s.CONFIGS_SCHEMA), n_attempts=1))]
