"""detectron2's training console (and the projects built on it: AdelaiDet, Mesh R-CNN, DeViT, ...): its
``CommonMetricPrinter`` line, ``[11/01 20:14:15 d2.utils.events]: eta: 5:41:49  iter: 379  total_loss: 1.707
loss_cls: 1.184  loss_box_reg: 0.475  time: 0.2293  data_time: 0.0033  lr: 0.003796  max_mem: 3782M``. The step is
``iter``, the loss ``total_loss`` (like each ``loss_*`` term, a median over the last 20 iterations); the iteration
time is newer versions' ``last_time`` (seconds): ``time`` is the mean since the start, which hides a slowdown, and is
not read. A NaN loss stops training before it is printed: "FloatingPointError: Loss became infinite or NaN at
iteration=1002!" is the error that ends the run.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/detectron2/issue214_events_calm.txt")
>>> read(path, ReadContext("train.log", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").row(0)
(379, 1.707)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule


def _field(name: str) -> str:
    return rf"(?:^|\s){name}:\s*({NUMBER})"


# the loss terms of its R-CNN models, under their own names
_TERMS = {name: _field(name) for name in ("loss_cls", "loss_box_reg", "loss_mask", "loss_rpn_cls", "loss_rpn_loc")}

SPEC = LineFormat(
    FORMAT="detectron2",
    detect=re.compile(rb"\bd2\.utils\.events\]:(?:\s|\x1b\[[\d;]*m)*(?:eta: [^\n]*?)?\biter: \d"),
    rules=(
        Rule(r"\bd2\.utils\.events\]:.*?\siter:\s*(\d+)", {
            s.LOSS: _field("total_loss"), s.LR: _field("lr"), s.ITERATION_TIME_MS: _field("last_time"), **_TERMS},
            scale={s.ITERATION_TIME_MS: 1000.0}),
    ),
    # (not training done: the after_train hook's "Overall training speed: 298 iterations in 0:06:13" is printed in a
    # finally block, before the traceback of an exception or a Ctrl-C that ended the loop)
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
