"""llm.c's stdout (``step   745/19560 | loss 4.698401 (-2.19z)| norm 0.6016 (-1.04z)| lr 6.00e-04 | 4213.95 ms |
...``, older builds ``train loss``; ``val loss 4.72`` after the step it follows) and its ``main.log``
(``s:100 trl:4.5 lr:0.0006 norm:0.41``, ``s:250 tel:4.1``).

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> log = read(Path("tests/fixtures/real/llmc/SiddanthEmani_log124M_main.log"), ReadContext("main.log", "r"))[0].log
>>> log.metrics.filter(metric="val_loss").select("step", "value").row(0)
(0, 11.0095)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, PLANNED_STEPS, LineFormat, Rule

SPEC = LineFormat(
    FORMAT="llm.c",
    detect=re.compile(rb"step\s+\d+/\d+ \| (?:train )?loss |(?:^|\n)s:\d+ (?:trl|tel):"
                      rb"|\| Parameter\s+\| Value\s+\|\n\+-+\+-+\+\n\| train data pattern "),
    rules=(
        Rule(r"(?:^|\s)step\s+(\d+)/\d+ \| (?:train )?loss ", {
            s.LOSS: rf"\| (?:train )?loss\s+({NUMBER})", s.GRAD_NORM: rf"\| norm\s+({NUMBER})",
            s.LR: rf"\| lr\s+({NUMBER})", s.ITERATION_TIME_MS: rf"\| ({NUMBER}) ms",
            PLANNED_STEPS: r"(?:^|\s)step\s+\d+/(\d+) \| "}),
        Rule(r"^\s*val loss ", {s.VAL_LOSS: rf"^\s*val loss\s+({NUMBER})"}, step=False, per_step=False,
             before_first=True),
        Rule(r"^s:(\d+) trl:", {s.LOSS: rf"trl:({NUMBER})", s.LR: rf"\blr:({NUMBER})", s.GRAD_NORM: rf"norm:({NUMBER})"}),
        Rule(r"^s:(\d+) tel:", {s.VAL_LOSS: rf"tel:({NUMBER})"}, per_step=False),
    ),
    events=((s.EV_PARAMETER_COUNT, r"^\| num_parameters\s+\| (\d+)\s"),),  # its settings table's row
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
