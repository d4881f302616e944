"""MMEngine's logger (OpenMMLab's trainers, and XTuner's fine-tuning on top of it):
``10/30 22:18:02 - mmengine - INFO - Epoch(train) [1][200/735]  lr: 1.9870e-04  eta: 2:46:39  time: 2.8906
data_time: 0.0042  memory: 10762  loss: 2.7522  grad_norm: 3.0608`` in an epoch-based loop (its step is the
iteration over all epochs: (epoch - 1) x iterations per epoch + iteration), ``Iter(train) [ 10/1000] ...`` in an
iteration-based one. ``time`` is seconds per iteration.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/mmengine/xtuner_issue187_gradnorm_nan.txt")
>>> read(path, ReadContext("train.log", "r"))[0].log.metrics.filter(metric="grad_norm").select("step", "value").row(-1)
(250, nan)
"""

from __future__ import annotations

import re

import polars as pl

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule


def epoch_step(text: pl.Expr, epoch: str = r"Epoch\(train\)") -> pl.Expr:
    """``Epoch(train) [2][10/735]`` is iteration 735 + 10 (``epoch``: what precedes ``[2]``; mmcv's ``Epoch``)."""
    def part(rx: str) -> pl.Expr:
        return text.str.extract(rx, 1).cast(pl.Int64, strict=False)

    return (part(epoch + r"\s*\[\s*(\d+)\s*\]") - 1) * part(r"\]\s*\[\s*\d+\s*/\s*(\d+)\s*\]") \
        + part(r"\]\s*\[\s*(\d+)\s*/")


FIELDS = {s.LOSS: rf"\sloss:\s*({NUMBER})", s.GRAD_NORM: rf"\bgrad_norm:\s*({NUMBER})", s.LR: rf"\slr:\s*({NUMBER})",
          s.ITERATION_TIME_MS: rf"\stime:\s*({NUMBER})"}

SPEC = LineFormat(
    FORMAT="mmengine",
    detect=re.compile(rb"(?:Epoch|Iter)\(train\)\s*\[[\d\s/\]\[]+\]\s+lr:"),
    rules=(
        Rule(r"Epoch\(train\)\s*\[\s*\d+\s*\]\s*\[", FIELDS, step_of=epoch_step,
             scale={s.ITERATION_TIME_MS: 1000.0}),
        Rule(r"Iter\(train\)\s*\[\s*(\d+)\s*/", FIELDS, scale={s.ITERATION_TIME_MS: 1000.0}),
    ),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
