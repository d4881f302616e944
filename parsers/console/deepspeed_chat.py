"""DeepSpeed-Chat's step 3 (``training/step3_rlhf_finetuning/main.py``, PPO on an actor and a critic): after each
batch of prompts, one line of the PPO losses and one of the reward,

* ``Epoch: 0 | Step: 10 | PPO Epoch: 1 | Actor Loss: 0.0108 | Critic Loss: 0.0201 | Unsupervised Loss: 0.0`` then
  ``Average reward score: -3.46 | EMA reward score: ...`` (DeepSpeedExamples since summer 2023);
* ``epoch: 0|step: 107|ppo_ep: 1|act_loss: -0.0517|cri_loss: 0.0413|unsuper_loss: 0.0`` then
  ``average reward score: 5.38671875`` (the first releases, and the forks made from them).

Its ``step`` counts the prompt batches of the epoch from 0 and is printed after the batch's optimizer steps (DeepSpeed's
``step=1, skipped=0, lr=[...]`` lines of the actor and the critic come just before ``step: 0``): the step here is the
batches done, the printed step + 1, DeepSpeed's step count. Each epoch counts its batches from 0 again: over several
epochs the step is the epoch's batches before it (the epoch, from 0, times the ``Total Generation Batches N`` of its
header ``Beginning of Epoch 2/4, Total Generation Batches 113``; in a log without that header, the largest printed
batch + 1) plus the printed step + 1, so a second epoch goes on where the first ended and is no relaunch. The header
``Beginning of Epoch 1/1, Total Generation Batches 113`` is the run's planned length where it trains one epoch.

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

import mmap
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule
from parsers.schema import ParsedLog
from parsers.textfile import TextFile

ACTOR_LOSS = "actor_loss"  # PPO's policy (clipped surrogate) loss of the actor: an RL objective, below 0 as often
CRITIC_LOSS = "critic_loss"  # the critic's value loss
UNSUPERVISED_LOSS = "unsupervised_loss"  # the pre-training mix's language-model loss (0.0 when no such data is mixed)
REWARD = "reward"  # the reward model's mean score of the batch's answers

# the line DeepSpeed-Chat prints as its training starts (its steps 1, 2 and 3 alike)
RUNNING_TRAINING = r"^\W*\*\*\*\*\* Running training(?: \(total_iters=\d+\))? \*\*\*\*\*\s*$"
_NEW = r"^\W*Epoch: (\d+) \| Step: (\d+) \| PPO Epoch: \d+ \| Actor Loss: "
_OLD = r"^\W*epoch: (\d+)\|step: (\d+)\|ppo_ep: \d+\|act_loss: "
_BATCHES = re.compile(rb"Beginning of Epoch \d+/\d+, Total Generation Batches (\d+)")
_PRINTED_STEP = re.compile(rb"(?:\| Step: |\|step: )(\d+)")


def _batches_done(rx: str, per_epoch: int = 0) -> Callable[[pl.Expr], pl.Expr]:
    """The step of a line: the batches of the epochs before it (``per_epoch`` each) + its printed step (the prompt
    batch of its epoch, from 0) + 1."""
    def step(text: pl.Expr) -> pl.Expr:
        epoch = text.str.extract(rx, 1).cast(pl.Int64, strict=False)
        return epoch * per_epoch + text.str.extract(rx, 2).cast(pl.Int64, strict=False) + 1
    return step


def _per_epoch(path: Path) -> int:
    """The prompt batches of an epoch: its header's ``Total Generation Batches N``, else the largest step printed + 1
    (0 when neither is found: one epoch's steps)."""
    try:
        with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if found := _BATCHES.search(data):
                return int(found.group(1))
            return 1 + max(map(int, _PRINTED_STEP.findall(data)), default=-1)
    except (OSError, ValueError):  # (an empty file cannot be mapped)
        return 0


def _rules(per_epoch: int = 0) -> tuple[Rule, ...]:
    return (
        Rule(_NEW, {ACTOR_LOSS: rf"\| Actor Loss: ({NUMBER})", CRITIC_LOSS: rf"\| Critic Loss: ({NUMBER})",
                    UNSUPERVISED_LOSS: rf"\| Unsupervised Loss: ({NUMBER})"}, step_of=_batches_done(_NEW, per_epoch)),
        Rule(_OLD, {ACTOR_LOSS: rf"\|act_loss: ({NUMBER})", CRITIC_LOSS: rf"\|cri_loss: ({NUMBER})",
                    UNSUPERVISED_LOSS: rf"\|unsuper_loss: ({NUMBER})"}, step_of=_batches_done(_OLD, per_epoch)),
        # printed after the losses of its batch: the step of the line before
        Rule(r"^\W*[Aa]verage reward score: ", {REWARD: rf"[Aa]verage reward score: ({NUMBER})"}, step=False,
             per_step=False),
    )


@dataclass(frozen=True)
class _PPOFormat(LineFormat):
    """Step 3's format: its steps count on over its epochs (see the module docstring)."""

    def parse(self, text: TextFile, run: str, source: str) -> ParsedLog:
        return LineFormat.parse(replace(self, rules=_rules(_per_epoch(text.path))), text, run, source)


SPEC = _PPOFormat(
    FORMAT="deepspeed-chat",
    detect=re.compile(rb"(?:^|\n)\W*(?:Epoch: \d+ \| Step: \d+ \| PPO Epoch: \d+ \| Actor Loss: "
                      rb"|epoch: \d+\|step: \d+\|ppo_ep: \d+\|act_loss: )"),
    rules=_rules(),
    events=(
        (s.EV_STARTUP, RUNNING_TRAINING),
        # (one epoch: its batches are the plan; over several, each epoch counts its steps from 0 again)
        (s.EV_PLANNED_STEPS, r"^\W*Beginning of Epoch 1/1, Total Generation Batches (\d+)\s*$"),
        # main.py prints it once its training loop is done, before it saves the actor (and the critic)
        (s.EV_TRAINING_DONE, r"^\W*saving model \.\.\.\s*$"),
    ),
    # (said, so that "lr not found" is not read as "not printed")
    unread=((r"\[Rank \d+\] step=\d+, skipped=\d+, lr=\[", "of DeepSpeed's \"step=N, skipped=M, lr=[...]\" (the actor's "
             "and the critic's engines print one each a step, each with its own learning rate)"),),
    note="its losses are PPO's (the actor's policy loss, the critic's value loss, the unsupervised mix's loss), read "
         "under their own names: none of them is a language model's training loss; its printed step counts each "
         "epoch's prompt batches from 0: a step here is the batches done, the printed step + 1 (plus the batches of "
         "the epochs before)",
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
