"""DeepSpeed-Chat's steps 1 and 2 (``training/step1_supervised_finetuning/main.py``, ``step2_reward_model_finetuning``
and ``step2_dpo_finetuning``): what their consoles print is DeepSpeed's, with a few lines of their own a run,

* ``***** Running training *****``, then an evaluation before the first step: ``***** Evaluating perplexity, Epoch
  0/16 *****`` and ``ppl: 4998.29638671875`` (newer: ``ppl: 1.93, loss: 0.66``), the reward model's
  ``chosen_last_scores (higher is better) : 2.81, rejected_last_scores (lower is better) : ..., acc (higher is
  better) : 0.49``, DPO's ``chosen: 0.0, rejected: 0.0, loss: 0.693359375``;
* ``Beginning of Epoch 1/16, Total Micro Batches 460``, and the same evaluation after each epoch (the reward model
  first prints its epoch's mean training loss: ``Epoch 1/1 with loss 0.5754789632299672``; with ``--eval_interval``
  also ``Iter 200: c_scores: ..., r_scores: ..., diff: ..., acc: ...`` at its optimizer step);
* ``saving model ...`` / ``saving the final model ...`` when training is done.

The steps are DeepSpeed's own: its ``[Rank 0] step=10, skipped=6, lr=[9.64e-06, ...]`` line every
``steps_per_print`` optimizer steps (skipped ones counted) gives the step, its LR (the first group's) and, read as
in any DeepSpeed log, the running count of skipped steps; its timer line ``epoch=0/micro_step=10/global_step=10,
RunningAvgSamplesPerSec=..., CurrSamplesPerSec=171.97...`` the samples per second. An evaluation is at the step of the
last such line before it (up to ``steps_per_print`` - 1 steps before the epoch's end); the one before training at
step 0. Its values are read under their own names (the reward model's scores and accuracy, DPO's rewards and loss are
not a language model's validation loss; only step 1's perplexity and loss are). The fp16 overflow lines
(``[deepspeed] OVERFLOW! Rank 0 Skipping step``, ``Grad overflow on iteration 482`` printed by every rank) are read as
in any DeepSpeed log. The per-rank losses of ``--print_loss`` (``Epoch: 0, Step: 10, Rank: 3, loss = ...``, micro-batches
of the epoch, without DeepSpeed's step) and ``print_throughput``'s ``Model Parameters: ..., Latency: ...`` lines (no
step) are counted as not read.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/deepspeed_chat/DeepSpeedExamples_step2_opt-350m_reward_model.log")
>>> log = read(path, ReadContext("rm.log", "r"))[0].log
>>> log.metrics.filter(metric="val_reward_acc").select("step", "value").rows()
[(0, 0.4924241304397583), (1840, 0.6994950175285339)]
"""

from __future__ import annotations

import re

import polars as pl

from parsers import schema as s
from parsers.console.deepspeed_chat import RUNNING_TRAINING
from parsers.console.engine import NUMBER, LineFormat, Rule

VAL_CHOSEN_SCORE = "val_chosen_score"  # the reward model's mean score of the chosen answers (higher is better)
VAL_REJECTED_SCORE = "val_rejected_score"  # ... of the rejected answers (lower is better)
VAL_REWARD_ACC = "val_reward_acc"  # the share of pairs whose chosen answer scored higher
VAL_CHOSEN_REWARD = "val_chosen_reward"  # DPO's implicit reward of the chosen answers
VAL_REJECTED_REWARD = "val_rejected_reward"  # ... of the rejected answers
VAL_DPO_LOSS = "val_dpo_loss"  # DPO's loss on the evaluation pairs (ln 2 = 0.693 before training)
TRAIN_LOSS_EPOCH = "train_loss_epoch"  # the reward model's mean training loss of an epoch (as Lightning's *_epoch)

# (its "step=0, skipped=0" line is printed as the engine starts, before any step: not a step's line)
_DS_STEP = r"\bstep=([1-9]\d*), skipped=\d+, lr=\["

SPEC = LineFormat(
    FORMAT="deepspeed-chat-sft-rm",
    # (not "***** Evaluating perplexity" alone: DeepSpeedExamples' random-LTD and data-efficiency fine-tunes print it
    # too, with steps and plans of their own, read by the Megatron reader)
    detect=re.compile(rb"(?:^|\n)\W*(?:\*\*\*\*\* Evaluating rewards?, Epoch \d+/\d+ \*\*\*\*\*"
                      rb"|Beginning of Epoch \d+/\d+, Total Micro Batches \d+)"),
    rules=(
        Rule(_DS_STEP, {s.LR: rf"\blr=\[\s*({NUMBER})"}, events_too=True),
        Rule(r"\bepoch=\d+/micro_step=\d+/global_step=(\d+), RunningAvgSamplesPerSec=",
             {s.SAMPLES_PER_SECOND: rf"\bCurrSamplesPerSec=({NUMBER})"}, per_step=False),
        # before the first step: the evaluation printed next is at step 0
        Rule(RUNNING_TRAINING, {},
             step_of=lambda text: pl.lit(0, dtype=pl.Int64), per_step=False, events_too=True),
        Rule(r"^\W*ppl: ", {s.VAL_PPL: rf"^\W*ppl: ({NUMBER})", s.VAL_LOSS: rf", loss: ({NUMBER})"}, step=False,
             per_step=False),
        Rule(r"^\W*chosen_last_scores \(higher is better\) : ", {
            VAL_CHOSEN_SCORE: rf"chosen_last_scores \(higher is better\) : ({NUMBER})",
            VAL_REJECTED_SCORE: rf"rejected_last_scores \(lower is better\) : ({NUMBER})",
            VAL_REWARD_ACC: rf"\bacc \(higher is better\) : ({NUMBER})"}, step=False, per_step=False),
        Rule(r"^\W*Iter (\d+): c_scores: ", {
            VAL_CHOSEN_SCORE: rf"c_scores: ({NUMBER})", VAL_REJECTED_SCORE: rf"r_scores: ({NUMBER})",
            VAL_REWARD_ACC: rf"\bacc: ({NUMBER})"}, per_step=False),
        Rule(r"^\W*chosen: [-+\d.]+, rejected: ", {
            VAL_CHOSEN_REWARD: rf"chosen: ({NUMBER})", VAL_REJECTED_REWARD: rf"rejected: ({NUMBER})",
            VAL_DPO_LOSS: rf"\bloss: ({NUMBER})"}, step=False, per_step=False),
        Rule(r"^\W*Epoch \d+/\d+ with loss ", {TRAIN_LOSS_EPOCH: rf"with loss ({NUMBER})"}, step=False,
             per_step=False),
    ),
    events=(
        (s.EV_STARTUP, RUNNING_TRAINING),
        # main.py prints it once its epochs are done, before it saves the model
        (s.EV_TRAINING_DONE, r"^\W*saving (?:the final )?model \.\.\.\s*$"),
    ),
    unread=((r"^\W*Epoch: \d+, Step: \d+, Rank: \d+, loss = ", "of --print_loss (each rank's loss of a micro-batch, "
             "printed without DeepSpeed's step)"),
            (r"^\W*Model Parameters: [\d.]+ B, Latency: ", "of print_throughput (a micro-batch's latency and "
             "TFLOPs, printed without a step)")),
    note="its steps are DeepSpeed's (its step=N lines, every steps_per_print steps); an evaluation is at the step of "
         "the last such line before it, and one before training at step 0",
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
