"""MaxText's console: ``completed step: 15107, seconds: 2.167, TFLOP/s: 36.722, loss: 2.191`` (2023), later
``completed step: 9, seconds: 1.341, TFLOP/s/device: 257.929, Tokens/s/device: 36653.244, total_weights: 1572864,
loss: 10.874`` and, behind absl's ``I0811 21:54:55.531340 138304841739136 metric_logger.py:226]`` prefix, more
fields after the loss (``lm_loss: 12.979, perplexity: 433358.281``): those are named as not read.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/maxtext/maxtext_pr4847_gemma_steps1-3.txt")
>>> read(path, ReadContext("pr4847.txt", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").row(0)
(1, 12.979)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

SPEC = LineFormat(
    FORMAT="maxtext",
    detect=re.compile(rb"\bcompleted step: \d+, seconds: [-+\w.]+, TFLOP/s"),
    rules=(
        Rule(r"\bcompleted step: (\d+), seconds: ", {
            s.LOSS: rf"\bloss: ({NUMBER})", s.ITERATION_TIME_MS: rf"\bcompleted step: \d+, seconds: ({NUMBER})",
            s.TFLOPS_PER_GPU: rf"\bTFLOP/s(?:/device)?: ({NUMBER})",
            s.TOKENS_PER_GPU_PER_SECOND: rf"\bTokens/s/device: ({NUMBER})"},
            scale={s.ITERATION_TIME_MS: 1000.0}),
    ),
    # every "name: value," of a step line: those not read are said to be not read ("completed step: 9" is the step)
    printed=(r"(?:^|\s)([A-Za-z_][\w/]*): [-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|nan|inf)(?:,|\s*$)",
             frozenset({"step", "seconds", "TFLOP/s", "TFLOP/s/device", "Tokens/s/device", "loss"})),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
