"""fairseq and metaseq (the OPT logbooks' format): ``... | INFO | train_inner | {"epoch": 1, "update": 0.001,
"loss": "25.22", ..., "num_updates": "3", "lr": "6e-05", "gnorm": "131.281", "loss_scale": "1", ...}`` per log
interval, ``valid | {"valid_loss": ..., "valid_num_updates": ...}`` per validation; the step is ``num_updates``. Its
losses are in bits (base 2), as printed. "Saved checkpoint ... (epoch 1 @ 10 updates)" and "loaded checkpoint ...
(epoch 16 @ 46000 updates)" are checkpoint events.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> log = read(Path("tests/fixtures/real/fairseq/fairseq_fsdp_README.md"), ReadContext("README.md", "r"))[0].log
>>> log.metrics.filter(metric="grad_norm").select("step", "value").row(2)
(3, 131.281)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule


def _key(name: str) -> str:
    return rf'"{name}": "?({NUMBER})"?'


SPEC = LineFormat(
    FORMAT="fairseq",
    detect=re.compile(rb'\| (?:train_inner|valid) \| \{"epoch": |\| INFO \| (?:metaseq|fairseq)[\w.]* \| '),
    rules=(
        Rule(r'\| train_inner \| \{.*?"num_updates": "?(\d+)', {
            s.LOSS: _key("loss"), s.GRAD_NORM: _key("gnorm"), s.LR: _key("lr"), s.LOSS_SCALE: _key("loss_scale"),
            "ppl": _key("ppl")}),
        Rule(r'\| valid \| \{.*?"valid_num_updates": "?(\d+)',
             {s.VAL_LOSS: _key("valid_loss"), s.VAL_PPL: _key("valid_ppl")}, per_step=False),
    ),
    events=(
        (s.EV_CHECKPOINT_SAVE, r"Saved checkpoint .*?\(epoch \d+ @ (\d+) updates\)"),
        (s.EV_CHECKPOINT_LOAD, r"[Ll]oaded checkpoint .*?\(epoch \d+ @ (\d+) updates\)"),
    ),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
