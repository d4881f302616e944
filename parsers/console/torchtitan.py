"""torchtitan's console: ``[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384
grad_norm: 0.87  memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%`` (coloured with ANSI codes on a
terminal; ``grad_norm`` in newer versions).

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/torchtitan/autoresearch_run214_ansi_color.log")
>>> read(path, ReadContext("run214.log", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").row(0)
(1, 12.54527)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, PLANNED_STEPS, LineFormat, Rule

_LOSS = rf"\bloss:\s*({NUMBER})"  # the training line's and the validator's

SPEC = LineFormat(
    FORMAT="torchtitan",
    # a step line (its words may be coloured), or the logger's "[titan]" prefix (a run that crashed before step 1)
    detect=re.compile(rb"step:\s*\d+(?:/\d+ = [\d.]+%)?\s+(?:\x1b\[[0-9;]*m)?loss:\s*[-+\w.]+\s"
                      rb"|\[titan\] \d{4}-\d{2}-\d{2} "),
    rules=(
        # its validator's line, "validate step: 1000  loss:  4.0249  memory: ...  tps: 8,084", after the training line
        # of the same step: a validation loss, not a step again (first: the first rule that matches a line reads it)
        Rule(r"\bvalidate step:\s*(\d+)\s+loss:", {s.VAL_LOSS: _LOSS}, per_step=False),
        # (a fork prints "step: 640/644 = 99.3789%": the run's planned length)
        Rule(r"\bstep:\s*(\d+)(?:/\d+ = [\d.]+%)?\s+loss:", {
            s.LOSS: _LOSS, s.GRAD_NORM: rf"\bgrad_norm:\s*({NUMBER})",
            s.TOKENS_PER_SECOND: rf"\btps:\s*({NUMBER})", PLANNED_STEPS: r"\bstep:\s*\d+/(\d+) = "}),
    ),
    placeholders=((s.LOSS, -1.0, "torchtitan's placeholder on a pipeline stage that does not compute the loss (only "
                                 "the last stage does)"),
                  (s.VAL_LOSS, -1.0, "torchtitan's placeholder on a pipeline stage that does not compute the "
                                     "validation loss (only the last stage does)")),
    events=(
        # its first lines as a launch begins: "torchtitan version: 0.2.2 ...", "Starting job: Llama 3 8B training"
        (s.EV_STARTUP, r"\btorchtitan version: |\bStarting job: "),
        # its checkpointer: "Loading the checkpoint from <folder>/checkpoint/step-12500." (the step in the folder's
        # name), then "Training starts at step 12501" (QIU023/torchtitan_attention_residual's resume)
        (s.EV_CHECKPOINT_LOAD, r"\bLoading the checkpoint from \S*?\bstep-(\d+)\b"),
        (s.EV_CHECKPOINT_LOAD, r"\bLoading the checkpoint from \S"),
        # "Trainer is initialized with local batch size 3, ..., total steps 30000 (warmup 12700)" (older: "Training
        # starts at step 1, with local batch size 8, ..., total steps 1000 (warmup 200)"), and the model's size:
        # "Model llama3 debugmodel size: 6,163,712 total parameters"
        (s.EV_PLANNED_STEPS, r"\btotal steps (\d+) \(warmup \d+\)"),
        (s.EV_PARAMETER_COUNT, r"\bsize: (\d[\d,]*) total parameters\b"),
    ),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
