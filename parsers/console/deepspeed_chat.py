"""DeepSpeed-Chat's step 3 (``training/step3_rlhf_finetuning/main.py``, PPO on an actor and a critic): after each
batch of prompts, one line of the PPO losses and one of the reward,

* ``Epoch: 0 | Step: 10 | PPO Epoch: 1 | Actor Loss: 0.0108 | Critic Loss: 0.0201 | Unsupervised Loss: 0.0`` then
  ``Average reward score: -3.46 | EMA reward score: ...`` (DeepSpeedExamples since summer 2023);
* ``epoch: 0|step: 107|ppo_ep: 1|act_loss: -0.0517|cri_loss: 0.0413|unsuper_loss: 0.0`` then
  ``average reward score: 5.38671875`` (the first releases, and the forks made from them).

Its ``step`` counts the prompt batches of the epoch from 0 and is printed after the batch's optimizer steps (DeepSpeed's
``step=1, skipped=0, lr=[...]`` lines of the actor and the critic come just before ``step: 0``): the step here is the
batches done, the printed step + 1, DeepSpeed's step count. Its header ``Beginning of Epoch 1/1, Total Generation
Batches 113`` is the run's planned length where it trains one epoch.

The losses are PPO's, not a language model's cross-entropy: the actor's (policy) loss, the critic's (value) loss and
the unsupervised (pre-training mix) loss are read under their own names, and the reward model's mean score of the
batch's answers as ``reward``; none of them is the run's training loss, so nothing here says it "should" fall. The
learning rates on DeepSpeed's ``step=N`` lines are not read: the actor's and the critic's engines print one each, with
their own rates, alike.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/deepspeed_chat/yuguo-Jack_chatglm6b_step3_excerpt.log")
>>> log = read(path, ReadContext("step3.log", "r"))[0].log
>>> log.metrics.filter(metric="actor_loss").select("step", "value").row(0)
(1, 0.3017578125)
"""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

ACTOR_LOSS = "actor_loss"  # PPO's policy (clipped surrogate) loss of the actor: an RL objective, below 0 as often
CRITIC_LOSS = "critic_loss"  # the critic's value loss
UNSUPERVISED_LOSS = "unsupervised_loss"  # the pre-training mix's language-model loss (0.0 when no such data is mixed)
REWARD = "reward"  # the reward model's mean score of the batch's answers

_NEW = r"^\W*Epoch: \d+ \| Step: (\d+) \| PPO Epoch: \d+ \| Actor Loss: "
_OLD = r"^\W*epoch: \d+\|step: (\d+)\|ppo_ep: \d+\|act_loss: "


def _batches_done(rx: str) -> Callable[[pl.Expr], pl.Expr]:
    """The step of a line: its printed step (the prompt batch, from 0) + 1."""
    def step(text: pl.Expr) -> pl.Expr:
        return text.str.extract(rx, 1).cast(pl.Int64, strict=False) + 1
    return step


SPEC = LineFormat(
    FORMAT="deepspeed-chat",
    detect=re.compile(rb"(?:^|\n)\W*(?:Epoch: \d+ \| Step: \d+ \| PPO Epoch: \d+ \| Actor Loss: "
                      rb"|epoch: \d+\|step: \d+\|ppo_ep: \d+\|act_loss: )"),
    rules=(
        Rule(_NEW, {ACTOR_LOSS: rf"\| Actor Loss: ({NUMBER})", CRITIC_LOSS: rf"\| Critic Loss: ({NUMBER})",
                    UNSUPERVISED_LOSS: rf"\| Unsupervised Loss: ({NUMBER})"}, step_of=_batches_done(_NEW)),
        Rule(_OLD, {ACTOR_LOSS: rf"\|act_loss: ({NUMBER})", CRITIC_LOSS: rf"\|cri_loss: ({NUMBER})",
                    UNSUPERVISED_LOSS: rf"\|unsuper_loss: ({NUMBER})"}, step_of=_batches_done(_OLD)),
        # printed after the losses of its batch: the step of the line before
        Rule(r"^\W*[Aa]verage reward score: ", {REWARD: rf"[Aa]verage reward score: ({NUMBER})"}, step=False,
             per_step=False),
    ),
    events=(
        (s.EV_STARTUP, r"^\W*\*\*\*\*\* Running training \*\*\*\*\*\s*$"),
        # (one epoch: its batches are the plan; over several, each epoch counts its steps from 0 again)
        (s.EV_PLANNED_STEPS, r"^\W*Beginning of Epoch 1/1, Total Generation Batches (\d+)\s*$"),
        # main.py prints it once its training loop is done, before it saves the actor (and the critic)
        (s.EV_TRAINING_DONE, r"^\W*saving model \.\.\.\s*$"),
    ),
    # (said, so that "lr not found" is not read as "not printed")
    unread=((r"\[Rank \d+\] step=\d+, skipped=\d+, lr=\[", "of DeepSpeed's \"step=N, skipped=M, lr=[...]\" (the actor's "
             "and the critic's engines print one each a step, each with its own learning rate)"),),
    note="its losses are PPO's (the actor's policy loss, the critic's value loss, the unsupervised mix's loss), read "
         "under their own names: none of them is a language model's training loss",
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
