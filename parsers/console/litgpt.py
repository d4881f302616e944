"""LitGPT's stdout: ``iter 1152 step 144: loss 11.4630, iter time: 1260.82ms`` (its older fine-tuning scripts) and
``Epoch 1 | iter 100 step 50 | loss train: 1.234, val: n/a | iter time: 300.00 ms (step)`` (pretraining and the
newer scripts), with ``iter 600: val loss 1.0133, val time: 512.31ms`` at each evaluation.

Its ``iter`` counts micro-batches and its ``step`` optimizer steps (one per ``gradient_accumulation_iters``): the
loss it prints is one micro-batch's, so the steps here are its iters, every printed loss kept, and a note says so.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/litgpt/issue628_codellama_spike_excerpt.txt")
>>> log = read(path, ReadContext("x.txt", "r"))[0].log
>>> log.metrics.filter(metric="loss").select("step", "value").rows()[:2]
[(1151, 1.7019), (1152, 11.463)]
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

SPEC = LineFormat(
    FORMAT="litgpt",
    detect=re.compile(rb"\biter \d+ step \d+: loss [-+\w.]+, iter time: |\| iter \d+ step \d+ \| loss train: "),
    rules=(
        Rule(r"\biter (\d+) step \d+: loss ", {s.LOSS: rf"\biter \d+ step \d+: loss ({NUMBER})",
                                               s.ITERATION_TIME_MS: rf"iter time: ({NUMBER}) ?ms"},
             layout=r"\biter (?P<step>\d+) step \d+: loss (?P<loss>[^,\s]+), iter time: (?P<iteration_time_ms>[\d.]+) ?ms"),
        Rule(r"\| iter (\d+) step \d+ \| loss train: ", {s.LOSS: rf"loss train: ({NUMBER})",
                                                         s.VAL_LOSS: rf"loss train: [^,]+, val: ({NUMBER})",
                                                         s.ITERATION_TIME_MS: rf"iter time: ({NUMBER}) ?ms"}),
        Rule(r"\biter (\d+): val loss ", {s.VAL_LOSS: rf"val loss ({NUMBER})"}, per_step=False),
    ),
    events=(
        (s.EV_CHECKPOINT_SAVING, r"^\W*Saving (?:checkpoint|LoRA weights|adapter weights) to "),
        (s.EV_CHECKPOINT_LOAD, r"^\W*Resuming training from "),
    ),
    note="its iters count micro-batches and its steps optimizer steps: the steps here are its iters (each printed "
         "loss is one micro-batch's)",
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
