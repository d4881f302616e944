"""nanotron's console: ``01/27/2025 15:50:16 [INFO|DP=0|PP=0|TP=0]: iteration: 1 / 120000 | consumed_tokens: 16.4K |
elapsed_time_per_iteration_ms: 13.8K | ... | lm_loss: 14.5 | lr: 5e-08 | ... | grad_norm: 64.7 | ...`` (numbers
with K/M/G suffixes).

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> log = read(Path("tests/fixtures/real/nanotron/exp6b1_console.log"), ReadContext("exp6b1.log", "r"))[0].log
>>> log.metrics.filter(metric="iteration_time_ms").select("step", "value").row(0)
(1, 13800.0)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import SUFFIXED, LineFormat, Rule

SPEC = LineFormat(
    FORMAT="nanotron",
    detect=re.compile(rb"iteration: \d+ / \d+ \| consumed_tokens: "),
    rules=(
        Rule(r"iteration: (\d+) / \d+ \|", {
            s.LOSS: rf"\| lm_loss: ({SUFFIXED})", s.LR: rf"\| lr: ({SUFFIXED})", s.GRAD_NORM: rf"\| grad_norm: ({SUFFIXED})",
            s.ITERATION_TIME_MS: rf"\| elapsed_time_per_iteration_ms: ({SUFFIXED})",
            s.CONSUMED_TOKENS: rf"\| consumed_tokens: ({SUFFIXED})", s.BATCH_SIZE: rf"\| global_batch_size: ({SUFFIXED})",
        }),
    ),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
