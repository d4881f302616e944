"""torchtune's console: its metric logger's ``Step 1 | loss:2.085338592529297 lr:2e-05
tokens_per_second_per_gpu:57.83`` (the StdoutLogger, and the DiskLogger's ``log_<time>.txt``; older recipes print
``gpu_resources:...``, newer ones ``grad_norm:...`` and ``peak_memory_*:...``), and the progress bar's description
``1|54|Loss: 1.0960569381713867:  54%|█████▍    | 55/101 [15:04<11:17, 14.73s/it]`` (epoch|global step|loss),
which tqdm prints again as the bar moves on: one point per step.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/torchtune/torchtune_pr1358_codellama_steps1-12.txt")
>>> read(path, ReadContext("pr1358.txt", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").row(0)
(1, 2.085338592529297)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

SPEC = LineFormat(
    FORMAT="torchtune",
    detect=re.compile(rb"(?:^|\n)Step \d+ \| loss:[-+\w.]+ |\b\d+\|\d+\|Loss: [-+\w.]+:? "),
    rules=(
        Rule(r"(?:^|\]:|\s)Step (\d+) \| loss:", {
            s.LOSS: rf"\| loss:({NUMBER})", s.LR: rf"\blr:({NUMBER})", s.GRAD_NORM: rf"\bgrad_norm:({NUMBER})",
            s.TOKENS_PER_GPU_PER_SECOND: rf"\btokens_per_second_per_gpu:({NUMBER})"}),
        Rule(r"\b\d+\|(\d+)\|Loss: ", {s.LOSS: rf"\|Loss: ({NUMBER})"}),
    ),
    repeats="the progress bar's description printed again as the bar moved on",
    # every "name:value" of a Step line: those not read are said to be not read
    printed=(r"(?:^|\s)([A-Za-z_]\w*):[-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|nan|inf)(?:\s|$)",
             frozenset({"loss", "lr", "grad_norm", "tokens_per_second_per_gpu", "Loss"})),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
