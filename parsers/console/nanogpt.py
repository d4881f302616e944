"""nanoGPT's stdout: ``iter 100: loss 4.1172, time 118.20ms, mfu 37.9%`` each log interval and
``step 2000: train loss 3.9100, val loss 3.9700`` at each evaluation (its train loss there is an estimate over
``eval_iters`` batches, kept as ``train_loss_eval``); and llama2.c's, which prints its steps as
``490 | loss 5.7543 | lr 4.900000e-05 | 8060.78ms | mfu 0.21%`` and evaluates as nanoGPT does.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> log = read(Path("tests/fixtures/real/nanogpt/ChenZihua-cn_nanoGPT_train.log"), ReadContext("train.log", "r"))[0].log
>>> log.metrics.filter(metric="loss").select("step", "value").row(1)
(5, 4.2082)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

SPEC = LineFormat(
    FORMAT="nanogpt",
    detect=re.compile(rb"\biter \d+: loss [-+\w.]+, time |\bstep \d+: train loss [-+\w.]+, val loss "
                      rb"|(?:^|\n)\d+ \| loss [-+\w.]+ \| lr [-+\w.]+ \| "),
    rules=(
        Rule(r"\biter (\d+): loss ", {s.LOSS: rf"\biter \d+: loss ({NUMBER})",
                                      s.ITERATION_TIME_MS: rf", time ({NUMBER})ms"},
             layout=r"\biter (?P<step>\d+): loss (?P<loss>[^,\s]+), time (?P<iteration_time_ms>[\d.]+)ms"),
        Rule(r"\bstep (\d+): train loss ", {"train_loss_eval": rf"train loss ({NUMBER})",
                                            s.VAL_LOSS: rf"val loss ({NUMBER})"}, per_step=False),
        Rule(r"^(\d+) \| loss ", {s.LOSS: rf"^\d+ \| loss ({NUMBER})", s.LR: rf"\| lr ({NUMBER})",
                                  s.ITERATION_TIME_MS: rf"\| ({NUMBER})ms"}),  # llama2.c
    ),
    events=(
        (s.EV_CHECKPOINT_SAVE, r"^\W*saving checkpoint to "),
        (s.EV_CHECKPOINT_LOAD, r"^\W*Resuming training from "),
        (s.EV_STARTUP, r"^\W*(?:tokens per iteration will be|Initializing a new model from scratch)"),
    ),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
