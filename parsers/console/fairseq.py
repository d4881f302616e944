"""fairseq and metaseq (the OPT logbooks' format): ``... | INFO | train_inner | {"epoch": 1, "update": 0.001,
"loss": "25.22", ..., "num_updates": "3", "lr": "6e-05", "gnorm": "131.281", "loss_scale": "1", ...}`` per log
interval, ``valid | {"valid_loss": ..., "valid_num_updates": ...}`` per validation; the step is ``num_updates``. Its
losses are in bits (base 2), as printed. "Saved checkpoint ... (epoch 1 @ 10 updates)" and "loaded checkpoint ...
(epoch 16 @ 46000 updates)" are checkpoint events.

Its default ``--log-format simple`` prints the same as ``key=value`` pairs: ``... | INFO | train_inner | epoch 001:
4 / 78 loss=1.006, ppl=2.01, wps=0, ..., num_updates=1, lr=2.24975e-07, gnorm=0.056, loss_scale=16, ...`` (a line
without ``num_updates``: no update finished in its interval, it is not a step) and ``| valid | epoch 001 | valid on
'valid' subset | loss 6.08 | ppl 20.1 | num_updates 14000 | ...``; fairseq 0.6-0.8 (2019) printed them with no time
stamp or logger name (``| epoch 001:    200 / 1374 loss=14.351, ...``, ``| epoch 027 | valid on 'valid' subset |
valid_loss 8.30118 | valid_ppl 142.39 | num_updates 10198 | ...``). The end-of-epoch averages (``| epoch 027 | loss
6.343 | ... | num_updates 10198``) are not steps and are not read. An fp16 overflow, "NOTE: overflow detected, setting
loss scale to: 16.0" (``| WARNING: ...`` in 0.x, "gradient overflow detected, ignoring gradient, ..." later), is an
overflow event whose value is the new loss scale.

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


def _pair(name: str) -> str:
    """``name=value`` of a simple-format line (not ``nll_loss=`` for ``loss``)."""
    return rf"(?:^|[\s,]){name}=([^,\s]+)"


def _cell(name: str) -> str:
    """``| name value`` of a simple-format summary line."""
    return rf"\| {name} ({NUMBER})(?:\s|$)"


_SIMPLE = r"\bepoch \d+:\s+\d+ / \d+ "  # "epoch 001:      4 / 78 loss=1.006, ..."


SPEC = LineFormat(
    FORMAT="fairseq",
    detect=re.compile(rb'\| (?:train_inner|valid) \| \{"epoch": |\| INFO \| (?:metaseq|fairseq)[\w.]* \| '
                      rb"|\| epoch \d+:\s+\d+ / \d+ \w+=|\| epoch \d+ \| valid on '"  # --log-format simple
                      rb"|\| WARNING: overflow detected, setting loss scale to"),
    rules=(
        Rule(r'\| train_inner \| \{.*?"num_updates": "?(\d+)', {
            s.LOSS: _key("loss"), s.GRAD_NORM: _key("gnorm"), s.LR: _key("lr"), s.LOSS_SCALE: _key("loss_scale"),
            "ppl": _key("ppl")}),
        Rule(r'\| valid \| \{.*?"valid_num_updates": "?(\d+)',
             {s.VAL_LOSS: _key("valid_loss"), s.VAL_PPL: _key("valid_ppl")}, per_step=False),
        Rule(_SIMPLE + r".*?[\s,]num_updates=(\d+)", {
            s.LOSS: _pair("loss"), s.GRAD_NORM: _pair("gnorm"), s.LR: _pair("lr"), s.LOSS_SCALE: _pair("loss_scale"),
            "ppl": _pair("ppl")}),
        Rule(r"\bepoch \d+ \| valid on '[^']*' subset \|.*?\| (?:valid_)?num_updates (\d+)",
             {s.VAL_LOSS: _cell("(?:valid_)?loss"), s.VAL_PPL: _cell("(?:valid_)?ppl")}, per_step=False),
    ),
    events=(
        (s.EV_OVERFLOW, r"overflow detected, (?:ignoring gradient, )?setting loss scale to:?\s*"
                        r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"),
        (s.EV_CHECKPOINT_SAVE, r"[Ss]aved checkpoint .*?\(epoch \d+ @ (\d+) updates\)"),
        (s.EV_CHECKPOINT_LOAD, r"[Ll]oaded checkpoint .*?\(epoch \d+ @ (\d+) updates\)"),
    ),
    # said, so that a loss, grad norm or loss scale printed only there is not read as absent from the log
    unread=((r"\bepoch \d+ \| loss [-+\w.]+ \|",
             "of end-of-epoch averages (loss, gnorm, lr, loss_scale over a whole epoch; not steps)"),),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
