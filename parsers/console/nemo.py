"""NeMo's console: the Lightning progress bar with NeMo's metrics in its postfix, one line per refresh:
``Epoch 0:   0%|          | 190/301501 [59:30<1572:41:13, 18.79s/it, loss=7.74, v_num=3-16,
reduced_train_loss=7.560, global_step=189.0, consumed_samples=24192.0]`` (``Epoch 1: : 1it [00:04, ...`` when the
length is not known).

The step is ``global_step``, the optimizer's step. The bar prints numbers as tqdm does: to three significant digits
where that is shorter than the plain number (``2e+3`` for 1995 to 2004, ``3.2e+4`` for 31,950 to 32,049, every step
from 100,000 on), else the plain number padded to five characters (``1.000``, ``39.00``, ``188.0``, ``12345.0``): a
step in the exponent form is not known exactly, so those lines are counted in a warning and not read. The loss is
``reduced_train_loss``, the step's loss averaged over the data-parallel ranks (Lightning's own ``loss=`` is a running
mean of the last 20, not read); ``consumed_samples`` is not read from the bar (``1.63e+6``: rounded), nor
``val_loss``, the last evaluation's value carried on every line. A refresh that prints a step again with the same
values is one print of it.

NeMo 2 prints a line per step instead: ``Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 |
global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146``.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/nemo/nemo_issue5928_pipeline_parallel_nan.txt")
>>> read(path, ReadContext("train.log", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").rows()
[(0, 11.0), (1, nan), (2, nan)]
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

# (lazy: tqdm's refreshes can be glued into one line, and a step's values are read from the same refresh as the step)
_BAR = r"\bEpoch \d+:.*?(?:\d+/\d+|\d+it) \[[^\]]*?"

SPEC = LineFormat(
    FORMAT="nemo",
    detect=re.compile(rb"Epoch \d+:[^\n]*?(?:\d+/\d+|\d+it) \[[^\]\n]*\breduced_train_loss="
                      rb"|Training epoch \d+, iteration \d+/\d+ \|[^\n]*\| global_step: \d+ \|"),
    rules=(
        Rule(_BAR + r"\breduced_train_loss=.*?\bglobal_step=(\d+)(?:\.\d*)?[,\]]", {
            s.LOSS: rf"\breduced_train_loss=({NUMBER})",
            s.LR: rf"\blr=({NUMBER})",
            s.GRAD_NORM: rf"\b(?:gradient_norm|grad_norm)=({NUMBER})",
            s.ITERATION_TIME_MS: rf"\btrain_step_timing in s=({NUMBER})",
        }, scale={s.ITERATION_TIME_MS: 1000.0}),
        # NeMo 2's progress printer: "Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 |
        # global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146"
        Rule(r"\bTraining epoch \d+, iteration \d+/\d+ \|.*?\| global_step: (\d+) \|", {
            s.LOSS: rf"\| reduced_train_loss: ({NUMBER})",
            s.LR: rf"\| lr: ({NUMBER})",
            s.GRAD_NORM: rf"\| (?:grad_norm|gradient_norm): ({NUMBER})",
            s.CONSUMED_SAMPLES: rf"\| consumed_samples: ({NUMBER})",
            s.ITERATION_TIME_MS: rf"\| train_step_timing in s: ({NUMBER})",
        }, scale={s.ITERATION_TIME_MS: 1000.0}),
    ),
    unread=((_BAR + r"\breduced_train_loss=.*?\bglobal_step=\d(?:\.\d+)?e\+\d",
             "of NeMo's progress bar with global_step printed to 3 significant digits (3.2e+4: the step is not "
             "known)"),),
    repeats="the progress bar printing the step again as it refreshes",
    # the bar's other postfix fields are named as not read (consumed_samples=1.45e+5 is rounded to 3 digits, the
    # last evaluation's val_loss rides on every line, parameter_norm, throughput); Lightning's own loss= (a running
    # mean of the last 20 of reduced_train_loss) and v_num= (the logger's version) are left on purpose
    printed=(r"[\[,]\s*([A-Za-z_][\w ]*?)=\s*[-+]?(?:\d|nan\b|inf\b)",
             frozenset({"reduced_train_loss", "lr", "gradient_norm", "grad_norm", "train_step_timing in s",
                        "global_step", "loss", "v_num"})),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
