"""modded-nanogpt's stdout (the NanoGPT speedrun, and the many records and forks built on it, e.g. OpenAI's
parameter-golf): ``step:1/20000 train_loss:6.9370 train_time:41ms step_avg:41.14ms`` per step and
``step:0/20000 val_loss:6.9357 val_bpb:4.1077 train_time:0ms step_avg:0.02ms`` at each evaluation. The compile
warm-up's ``warmup_step:1/20`` lines train nothing that is kept and are not steps.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/modded_nanogpt/parameter-golf_issue839_start.txt")
>>> read(path, ReadContext("train.log", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").row(1)
(2, 16.8366)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, PLANNED_STEPS, LineFormat, Rule

SPEC = LineFormat(
    FORMAT="modded-nanogpt",
    detect=re.compile(rb"(?:^|[\s\]])step:\d+/\d+ (?:train_loss|val_loss):"),
    rules=(
        Rule(r"(?:^|[\s\]])step:(\d+)/\d+ train_loss:", {s.LOSS: rf"\btrain_loss:({NUMBER})",
                                                          PLANNED_STEPS: r"(?:^|[\s\]])step:\d+/(\d+) train_loss:"}),
        Rule(r"(?:^|[\s\]])step:(\d+)/\d+ val_loss:", {s.VAL_LOSS: rf"\bval_loss:({NUMBER})"}, per_step=False),
    ),
    # parameter-golf's planned stop at its time budget: "stopping_early: wallclock_cap train_time:14400039ms
    # step:329430/500000", then its final evaluations
    events=((s.EV_EXIT, r"^\W*stopping_early: \w"), (s.EV_PARAMETER_COUNT, r"^\W*model_params:(\d+)\b")),
    # every "name:value" its lines print (train_time:41ms, step_avg:nanms, tokens/sec:1.87e+05): those not read are
    # said to be not read ("step:1/20000" is no such field: its value goes on with "/")
    printed=(r"\b([A-Za-z_][\w/]*):(?:[-+]?\d[\d.]*(?:[eE][-+]?\d+)?|nan|inf)[A-Za-z%]*(?:\s|$)",
             frozenset({"train_loss", "val_loss"})),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
