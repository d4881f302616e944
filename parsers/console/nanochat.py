"""karpathy's nanochat consoles (``scripts/base_train.py``, ``mid_train.py``, ``chat_sft.py``, often all of them in
one ``speedrun.log``) and karpathy/autoresearch's ``train.py`` (its ``run.log``).

* a training step: ``step 00950/200000 (0.47%) | loss: 4.328526 | lrm: 0.48 | dt: 1338.63ms | tok/sec: 12,239 |
  bf16_mfu: 0.00 | epoch: 1 pq: 0 rg: 40 | total time: 21.08m | eta: 4463.1m`` (older: ``| mfu: 48.52 | total time:
  0.75m``; mid-training and autoresearch print no planned length: ``step 00309 (99.8%) | loss: 3.452771 | ... |
  remaining: 0s``, autoresearch's with a carriage return between steps, so a saved log holds them on one line);
* evaluations: ``Step 00250 | Validation bpb: 0.9123``, ``Step 02000 | CORE metric: 0.1212``; the older chat_sft's
  ``Step 00000/00651 | Training loss: 0.843050| lrm: 1.000000| num_tokens: 15,432`` and ``Step 00100 | Validation loss:
  1.012821``;
* autoresearch's summary after ``---``: ``val_bpb:          1.227996``, ``training_seconds: 300.4``, ...

The loss of the ``step`` lines is a debiased exponential moving average of the step losses (``ema_beta = 0.9``), not
one step's loss: a note says so. ``lrm`` is the learning-rate multiplier of the schedule, not the learning rate.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/nanochat/alexmorleyfinch_autoresearch-win-rtx_run.log")
>>> read(path, ReadContext("run.log", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").row(1)
(1, 8.451883)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, PLANNED_STEPS, LineFormat, Rule

VAL_BPB = "val_bpb"  # validation bits per byte (nanochat's and autoresearch's evaluation)
CORE_METRIC = "core_metric"  # nanochat's CORE score (DCLM's mean centered accuracy over its tasks)

# (a key pressed in the terminal while it printed is echoed in front of the line: "^[[B^[[Bstep 04354/21400 ...")
_LEAD = r"^(?:\s|\^\[\[[A-D])*"
_STEP = _LEAD + r"step (\d+)(?:/\d+)? \(\s*[\d.]+%\)\s*\|\s*loss: "

SPEC = LineFormat(
    FORMAT="nanochat",
    detect=re.compile(rb"(?:^|[\r\n])\s*step \d+(?:/\d+)? \(\s*[\d.]+%\)\s*\|\s*loss: [-+\w.]+\s*\|\s*(?:lrm|dt|grad norm): "
                      rb"|(?:^|[\r\n])Step \d+ \| Validation bpb: [\d.]+\s*[\r\n]"),
    rules=(
        Rule(_STEP, {s.LOSS: rf"\|\s*loss: ({NUMBER})", s.GRAD_NORM: rf"\|\s*grad norm: ({NUMBER})",  # (some versions)
                     s.ITERATION_TIME_MS: rf"\|\s*dt: ({NUMBER})\s*ms",
                     s.TOKENS_PER_SECOND: rf"\|\s*tok/sec: ({NUMBER})",
                     PLANNED_STEPS: _LEAD + r"step \d+/(\d+) \("},
             # (the usual line read in one pass: a million lines 7.4 s field by field)
             layout=r"step (?P<step>\d+)(?:/(?P<train_iters>\d+))? \(\s*[\d.]+%\)\s*\|\s*loss: (?P<loss>[^\s|]+)"
                    r"(?:\s*\|\s*grad norm: (?P<grad_norm>[^\s|]+))?\s*\|\s*lrm: [^\s|]+\s*\|\s*"
                    r"dt: (?P<iteration_time_ms>[\d.]+)\s*ms\s*\|\s*tok/sec: (?P<tokens_per_second>[\d,]+)"),
        Rule(r"^\s*Step (\d+) \| Validation bpb: ", {VAL_BPB: rf"Validation bpb: ({NUMBER})"}, per_step=False),
        Rule(r"^\s*Step (\d+) \| CORE metric: ", {CORE_METRIC: rf"CORE metric: ({NUMBER})"}, per_step=False),
        # the older chat_sft.py: the loss of one step, and its validation loss (its "/00651" is not read as a planned
        # length: it counts iterations, its last step is 650, an evaluation)
        Rule(r"^\s*Step (\d+)/\d+ \| Training loss: ", {s.LOSS: rf"Training loss: ({NUMBER})"}),
        Rule(r"^\s*Step (\d+) \| Validation loss: ", {s.VAL_LOSS: rf"Validation loss: ({NUMBER})"}, per_step=False),
        # autoresearch's summary, printed after its last step
        Rule(r"^val_bpb:\s+\S", {VAL_BPB: rf"^val_bpb:\s+({NUMBER})\s*$"}, step=False, per_step=False),
    ),
    events=(
        # every nanochat script's first line of its own (the evaluations' between the training stages too)
        (s.EV_STARTUP, r"\bnanochat\.common - INFO - Distributed world size: \d"),
        # ... and, before it, nanochat.common's autodetect_device_type() (rank 0 prints it once as each script starts:
        # a launch of its own, the evaluations' too): a launch that dies before its distributed set-up ("CUDA error:
        # invalid device ordinal" in set_device, then torchrun's ChildFailedError) shows only this line of itself
        (s.EV_PROCESS_START, r"^\W*Autodetected device type: \w+\s*$"),
        (s.EV_PARAMETER_COUNT, r"^\W*Number of parameters: ([\d,]+)\s*$"),  # the older base_train.py
        (s.EV_PARAMETER_COUNT, r"^\s*total\s+: ([\d,]+)\s*$"),  # the "total" row of "Parameter counts:"
        (s.EV_PLANNED_STEPS, r"^\W*(?:Calculated number of iterations from .*?|Using user-provided number of "
                             r"iterations): ([\d,]+)\s*$"),
        (s.EV_CHECKPOINT_SAVE, r"\bnanochat\.checkpoint_manager - INFO - Saved model (?:file|parameters) to: "
                               r"\S*?model_0*(\d+)\.pt"),
        (s.EV_CHECKPOINT_LOAD, r"^\W*Resuming optimization from step (\d+)\s*$"),
        # mid_train.py and chat_sft.py start from the weights of the stage before (a fine-tune: their steps count from
        # 0); the evaluation scripts between them load them too ("Loading model from .../base_checkpoints/d20 with
        # step 21400")
        (s.EV_CHECKPOINT_LOAD, r"\bnanochat\.checkpoint_manager - INFO - Loading model from \S"),
        (s.EV_TRAINING_DONE, r"^\W*Total training time: [\d.]+m\s*$"),  # (minutes: no value in seconds)
        (s.EV_TRAINING_DONE, r"^training_seconds:\s+(\d+(?:\.\d*)?)\s*$"),  # autoresearch's summary
        # the older chat_sft.py's last line (to chatsft_checkpoints); chat_rl.py prints the same words every save_every
        # steps (to chatrl_checkpoints): a save, not an end
        (s.EV_TRAINING_DONE, r"^\W*Saved model checkpoint to \S*chatsft_checkpoints\b"),
        (s.EV_CHECKPOINT_SAVE, r"^\W*Saved model checkpoint to \S"),
    ),
    # the older chat_sft.py's accuracies ("Step 00650 | mmlu_acc: 0.310547, arc_easy_acc: 0.393555")
    unread=((r"^\s*Step \d+ \| (?P<name>[A-Za-z_]\w*): [-\d.]", "of other evaluations"),),
    # (a single process prints them too: a Windows console's redraws pasted, "Distributed world size: 1")
    repeats="the same line printed again as it was (a console's redraw kept in a paste, or several ranks)",
    note="the loss of its \"step N (x%) | loss:\" lines is a debiased exponential moving average of the step losses "
         "(ema_beta 0.9), not one step's loss: a one-step spike shows damped and spread over the steps after it",
    # every "| name: value" field (lrm, mfu, bf16_mfu, epoch, total time, eta, remaining, num_tokens): those not read
    # are said to be not read
    printed=(r"\|\s*([A-Za-z_][\w/]*(?: [a-z]+)?):\s*-?\d",
             frozenset({"loss", "grad norm", "dt", "tok/sec", "Validation bpb", "CORE metric", "Training loss",
                        "Validation loss"})),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
