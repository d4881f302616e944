"""OLMo's console (``olmo.train``): a header line ``[step=100/739328]`` (``[step=2/739328,epoch=0]``), then one
indented ``name=value`` line per metric: ``train/CrossEntropyLoss=11.25``, ``optim/total_grad_norm=0.87``; OLMo-core
names them ``train/CE loss``, ``optim/total grad norm``, ``optim/LR (group 0)``.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> log = read(Path("tests/fixtures/real/olmo/issue692_ce_loss_zero_excerpt.txt"), ReadContext("692.txt", "r"))[0].log
>>> log.metrics.filter(metric="loss").select("step", "value").rows()[:2]
[(1, 12.18), (2, 1.7872662283480167e-06)]
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, PLANNED_STEPS, LineFormat, Rule


def _metric_line(names: str, metric: str) -> Rule:
    return Rule(rf"^\s+(?:{names})\s*=", {metric: rf"=\s*({NUMBER})\s*$"}, step=False, per_step=False)


SPEC = LineFormat(
    FORMAT="olmo",
    detect=re.compile(rb"\[step=\d+/\d+[\],][^\n]*\n\s+[\w/ ()-]+="),
    rules=(
        Rule(r"\[step=(\d+)/\d+[\],]", {PLANNED_STEPS: r"\[step=\d+/(\d+)[\],]"}),  # "/1000": max_duration
        _metric_line(r"train/CrossEntropyLoss|train/CE loss", s.LOSS),
        _metric_line(r"train/ZLoss|train/Z loss", "z_loss"),
        _metric_line(r"optim/total_grad_norm|optim/total grad norm", s.GRAD_NORM),
        _metric_line(r"optim/learning_rate_group0|optim/LR \(group 0\)", s.LR),
        _metric_line(r"throughput/total_tokens", s.CONSUMED_TOKENS),
    ),
    # every other indented name=value line of a block is a metric too (OLMo-core prints dozens: throughput/...,
    # system/GPU ... mem, eval/...): not read, but said with its names, so that no metric seen goes unmentioned
    # (OLMo's names are "<group>/<name>": a traceback's indented source line "    warmup_steps = 2000" is none)
    unread=((rf"^\s+(?P<name>[^\s=/][^=/]*/[^=]*?)\s*=\s*{NUMBER}\s*$",
             "of other metrics (OLMo's name=value lines beyond the loss, Z loss, grad norm, the LR of "
             "group 0 and the total tokens)"),),
    events=(
        # "Loading checkpoint from .../latest-unsharded..." (no step: the step counter may start again at 1)
        (s.EV_CHECKPOINT_LOAD, r"\bLoading checkpoint from \S"),
        (s.EV_CHECKPOINT_SAVE, r"\b(?:Unsharded|Sharded) checkpoint saved to \S*/step(\d+)(?:-unsharded)?/?\s*$"),
        (s.EV_PARAMETER_COUNT, r"\bTotal number of parameters: ([\d,]+)\s*$"),
    ),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
