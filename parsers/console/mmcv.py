"""mmcv 1.x's text logger (MMDetection, MMSegmentation, MMOCR 2.x and the many repositories built on them, 2019-2022):
``2020-05-18 09:24:48,902 - mmdet - INFO - Epoch [1][50/1084]\tlr: 1.000e-02, eta: 14:19:58, time: 0.953,
data_time: 0.011, memory: 4370, loss_rpn_cls: 0.5577, ..., loss_bbox: nan, loss: nan`` in an epoch-based runner
(its step counts iterations over all epochs: (epoch - 1) x iterations per epoch + iteration, as in
:mod:`parsers.console.mmengine`), ``Iter [50/160000]\tlr: ...`` in an iteration-based one. ``time`` is seconds per
iteration. An evaluation, ``Epoch(val) [1][500]\tbbox_mAP: 0.2180, ...`` (``[500]`` is the size of the validation
set, not a step) or ``Iter(val) [500]\tmIoU: ...``, is put at the step of the training line before it.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/mmcv/iterdet_issue3_intermittent_nan.txt")
>>> read(path, ReadContext("train.log", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").rows()
[(50, nan), (100, nan), (150, 1.1586)]
"""

from __future__ import annotations

import re
from functools import partial

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule
from parsers.console.mmengine import FIELDS, epoch_step


def _field(name: str) -> str:
    return rf"\b{name}:\s*({NUMBER})"


# the loss terms of MMDetection's two-stage detectors, under their own names (a NaN in one of them says where the
# NaN loss comes from)
_TERMS = {name: _field(name) for name in ("loss_rpn_cls", "loss_rpn_bbox", "loss_cls", "loss_bbox", "loss_mask")}
_EVAL = {s.VAL_LOSS: FIELDS[s.LOSS], **{name: _field(name) for name in ("bbox_mAP", "segm_mAP", "mAP", "mIoU")}}
_SECONDS = {s.ITERATION_TIME_MS: 1000.0}

SPEC = LineFormat(
    FORMAT="mmcv",
    detect=re.compile(rb"\b(?:Epoch \[\d+\]\[\s*\d+/\d+\]|Iter \[\s*\d+/\d+\])\s+lr[:_]"),
    rules=(
        Rule(r"\bEpoch\s*\[\s*\d+\s*\]\s*\[\s*\d+\s*/", {**FIELDS, **_TERMS}, scale=_SECONDS,
             step_of=partial(epoch_step, epoch=r"\bEpoch")),
        Rule(r"\bIter\s*\[\s*(\d+)\s*/", {**FIELDS, **_TERMS}, scale=_SECONDS),
        Rule(r"\b(?:Epoch\(val\)\s*\[\s*\d+\s*\]|Iter\(val\))\s*\[\s*\d+\s*\]", _EVAL, step=False, per_step=False),
    ),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
