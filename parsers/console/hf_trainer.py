"""The Hugging Face Trainer's printed logs: one dict per logging step, ``{'loss': 2.3104, 'grad_norm': 5.125,
'learning_rate': 1e-05, 'epoch': 0.02}`` (newer versions quote every value: ``{'loss': '19.85', ...}``), evaluation
dicts ``{'eval_loss': ...}``; ms-swift adds ``'global_step/max_steps': '12/500'`` (its step) and writes the same
dicts to ``logging.jsonl`` with double quotes. The plain Trainer prints no step: its dicts are numbered in order,
and the report says so.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/hf_trainer/mswift_qwen3_17b_effective.train.log")
>>> read(path, ReadContext("train.log", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").row(0)
(1, 7.948)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

_Q = "['\"\u2018\u2019]"  # a quote, as printed or as a paste's typography turned it (‘loss’)


def _key(name: str) -> str:
    return rf"{_Q}{re.escape(name)}{_Q}:\s*{_Q}?({NUMBER}){_Q}?"


# ms-swift's "'global_step/max_steps': '12/500'", its v1's "'global_step': 2900"
_STEP = rf"{_Q}global_step/max_steps{_Q}:\s*{_Q}(\d+)/\d+{_Q}"
_GLOBAL_STEP = rf"{_Q}global_step{_Q}:\s*(\d+)\b"

SPEC = LineFormat(
    FORMAT="hf-trainer",
    detect=re.compile(rb"\{(?:'|\xe2\x80\x98)(?:loss|eval_loss)(?:'|\xe2\x80\x99): "
                      rb"|['\"]global_step/max_steps['\"]: ['\"]\d+/\d+['\"]"),
    rules=(
        Rule(rf"^[^{{]*\{{{_Q}(?:loss|grad_norm){_Q}:", {
            s.LOSS: _key("loss"), s.GRAD_NORM: _key("grad_norm"), s.LR: _key("learning_rate"), s.EPOCH: _key("epoch")},
            step_at=(_STEP, _GLOBAL_STEP), ordinal=True),
        Rule(rf"^[^{{]*\{{{_Q}eval_loss{_Q}:", {s.VAL_LOSS: _key("eval_loss")}, step_at=(_STEP, _GLOBAL_STEP),
             per_step=False),
    ),
    # its header's planned length, read as the attempt's train_iters where no line says it ("[INFO|...] trainer.py:2321
    # >>   Total optimization steps = 17,000": its max_steps, on the steps its dicts log)
    events=((s.EV_PLANNED_STEPS, r"\bTotal optimization steps = (\d[\d,]*)\s*$"),),
    # every key of its dicts whose value is a number ('num_input_tokens_seen': 196608, 'eval_accuracy': 0.51, ms-swift's
    # 'train_speed(s/it)': '2.546'): those not read are said to be not read
    printed=(rf"{_Q}([A-Za-z_][\w/.()\-]*){_Q}:\s*{_Q}?{NUMBER}%?{_Q}?\s*[,}}]",
             frozenset({"loss", "grad_norm", "learning_rate", "epoch", "eval_loss", "global_step/max_steps",
                        "global_step"})),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
