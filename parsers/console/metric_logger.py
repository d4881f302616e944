"""torchvision's reference-scripts ``MetricLogger`` (DETR, Deformable DETR, DeiT, MAE, ConvNeXt, BEiT and the many
repositories built on them): ``Epoch: [0]  [1280/3696]  eta: 0:32:17  lr: 0.000100  loss: 5.1132 (5.4946)  ...
time: 0.7906  data: 0.0349  max mem: 29528`` every ``print_freq`` iterations. Epochs count from 0, so the step is
epoch x iterations per epoch + iteration. Each value is printed as ``median (global average)``: the first number,
read here, is the median of the last 20 iterations (``SmoothedValue``'s window), so a one-iteration spike is damped
in it while a NaN shows at once. ``time`` is seconds per iteration (the same median).

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/metric_logger/stable_pix2seq_issue14_traceback.txt")
>>> read(path, ReadContext("log.txt", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").rows()[:2]
[(1280, 5.1132), (1290, 5.1292)]
"""

from __future__ import annotations

import re

import polars as pl

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule


def _field(name: str) -> str:
    """``  name: 5.1132 (5.4946)``: the window's median (not ``class_error`` for ``error``)."""
    return rf"(?:^|\s){name}:\s*({NUMBER})"


def _step(text: pl.Expr) -> pl.Expr:
    """``Epoch: [2]  [ 10/735]`` is iteration 2 x 735 + 10 (epochs count from 0)."""
    def part(rx: str) -> pl.Expr:
        return text.str.extract(rx, 1).cast(pl.Int64, strict=False)

    return part(r"Epoch:\s*\[\s*(\d+)\s*\]") * part(r"\]\s+\[\s*\d+\s*/\s*(\d+)\s*\]") + part(r"\]\s+\[\s*(\d+)\s*/")


SPEC = LineFormat(
    FORMAT="metric-logger",
    detect=re.compile(rb"(?:^|\n)[^\n]*?Epoch: \[\d+\]\s+\[\s*\d+/\d+\]\s+eta: [^\n]*?\bloss: "),
    rules=(
        Rule(r"Epoch:\s*\[\s*\d+\s*\]\s+\[\s*\d+\s*/\s*\d+\s*\]\s+eta:", {
            s.LOSS: _field("loss"), s.LR: _field("lr"), s.GRAD_NORM: _field("grad_norm"),
            s.LOSS_SCALE: _field("loss_scale"), s.ITERATION_TIME_MS: _field("time")},
            scale={s.ITERATION_TIME_MS: 1000.0}, step_of=_step),
    ),
    # every "name: value" of its lines (BEiT's and LaBraM's "class_acc: 0.52 (0.51)  loss_scale: 32768.0000 ...
    # weight_decay: 0.0500"): those not read are said to be not read
    printed=(rf"(?:^|\s)([A-Za-z_]\w*):\s*{NUMBER}",
             frozenset({"loss", "lr", "grad_norm", "loss_scale", "time", "eta", "data", "mem", "Epoch"})),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
