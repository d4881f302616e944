"""ColossalAI's legacy Trainer: its progress bar per epoch, ``[Epoch 0 / Train]:   0% 431/788222 [29:28<796:09:33,
3.64s/it, loss=nan, lr=2.5e-5, throughput=0.28555 sample_per_sec, 2.3376 Tflops]`` (epochs from 0; the count is
the iterations of that epoch done before the one whose values it shows, so the step is epoch × the bar's total + the
count + 1), often with a rich-logger line glued after it.

The loss and LR on the bar are the iteration just done: the Trainer's loop body (``_train_epoch``) runs iteration
``i`` (from 0), counts it (``_cur_step += 1``) and then calls ``progress.set_postfix(...)``, which prints the bar at
tqdm's count so far, ``i``; tqdm counts the iteration only when the body returns. The values printed at count N are
iteration N + 1's (the count that the bar's next print shows with the same postfix).

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/console_errors/colossalai_issue1375_found_inf_loss_nan_excerpt.txt")
>>> read(path, ReadContext("issue1375.txt", "r"))[0].log.metrics.filter(metric="lr").select("step", "value").row(0)
(432, 2.5e-05)
"""

from __future__ import annotations

import re

import polars as pl

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

_BAR = r"\[Epoch (\d+) / Train\]:\s*\d+%[^\d]*(\d+)/(\d+) \["


def epoch_step(text: pl.Expr) -> pl.Expr:
    """``[Epoch 2 / Train]: 10% 5/50 [`` printed by ``set_postfix`` is iteration 2 × 50 + 5 + 1: the count is the
    iterations before the one whose values it shows."""
    epoch, count, total = (text.str.extract_groups(_BAR).struct.field(str(n)).cast(pl.Int64, strict=False)
                           for n in (1, 2, 3))  # (one pass of the regex)
    return epoch * total + count + 1


def _set_postfix_print(text: pl.Expr) -> pl.Expr:
    """Not the bar tqdm prints as it counts an iteration done: the Trainer's ``progress.set_postfix(...)`` in the loop
    body prints the bar at the count so far with this iteration's values, then tqdm's update prints it one count
    higher with the same postfix (in a log written to a file, where '\\r' overwrites nothing, each count shows twice
    with two losses: read as a replay at every step). A bar whose postfix is the previous bar's is that update."""
    # (the postfix from its loss on, to the bar's "]": the rest of the bar changes as it counts; split, not a regex: a
    # third of the read time of a million lines)
    postfix = text.str.split_exact("loss=", 1).struct.field("field_1").str.split_exact("]", 1).struct.field("field_0")
    return ~(postfix == postfix.shift(1).forward_fill()).fill_null(False)


SPEC = LineFormat(
    FORMAT="colossalai",
    detect=re.compile(rb"\[Epoch \d+ / Train\]:\s*\d+%[^\n]*? \d+/\d+ \[[^\]\n]*\bloss="),
    rules=(
        Rule(r"\[Epoch \d+ / Train\]:\s*\d+%[^\d]*\d+/\d+ \[[^\]]*\bloss=",
             {s.LOSS: rf"[\s,]loss=({NUMBER})", s.LR: rf"[\s,]lr=({NUMBER})"}, step_of=epoch_step,
             where=_set_postfix_print),
    ),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
