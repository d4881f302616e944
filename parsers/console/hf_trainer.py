"""The Hugging Face Trainer's printed logs: one dict per logging step, ``{'loss': 2.3104, 'grad_norm': 5.125,
'learning_rate': 1e-05, 'epoch': 0.02}`` (newer versions quote every value: ``{'loss': '19.85', ...}``), evaluation
dicts ``{'eval_loss': ...}``; ms-swift adds ``'global_step/max_steps': '12/500'`` (its step) and writes the same
dicts to ``logging.jsonl`` with double quotes. The plain Trainer prints no step: its dicts are numbered in order,
and the report says so.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/hf_trainer/mswift_qwen3_17b_effective.train.log")
>>> read(path, ReadContext("train.log", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").row(0)
(1, 7.948)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

_Q = "['\"\u2018\u2019]"  # a quote, as printed or as a paste's typography turned it (‘loss’)


def _key(name: str) -> str:
    return rf"{_Q}{re.escape(name)}{_Q}:\s*{_Q}?({NUMBER}){_Q}?"


# ms-swift's "'global_step/max_steps': '12/500'", its v1's "'global_step': 2900"
_STEP = rf"{_Q}global_step/max_steps{_Q}:\s*{_Q}(\d+)/\d+{_Q}"
_GLOBAL_STEP = rf"{_Q}global_step{_Q}:\s*(\d+)\b"
# the progress bar the dict was printed after, on its line ("  1%|▏   | 20/1352 [02:11<51:39,  2.33s/it]{'loss': ..."):
# the Trainer redraws it at the step it logs, so its count is the dict's step
_BAR = r"\|\s*(\d+)/\d+ \[[^\]]*\]\s*\{"

# the Trainer's settings as its scripts print them: "TrainingArguments(" on a line of its own, one "name=value," a line,
# ")" (transformers 4.x), or all on one line ("Training/evaluation parameters TrainingArguments(output_dir='/w', ...,
# logging_steps=10, ...)", transformers 3.x); a value is quoted, an enum's repr, a list, or a bare word
_ARGUMENT = re.compile(r"(?:^|[,(])\s*([A-Za-z_]\w*)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|<[^>]*>|\[[^\]]*\]"
                       r"|\{[^}]*\}|[^,()\s](?:[^,()\s]|\s+(?=[^,()\s]))*)\s*(?=,|\)|$)", re.M)
_ENUM = re.compile(r"^<\w+(?:\.\w+)*: '([^']*)'>$")  # <EvaluationStrategy.EPOCH: 'epoch'>


def _value(raw: str) -> object:
    """One printed argument's value: a number, a bool, None, an enum's value, else its text unquoted."""
    if raw[:1] in "'\"" and raw[-1:] == raw[:1]:
        return raw[1:-1]
    if (enum := _ENUM.match(raw)) is not None:
        return enum.group(1)
    words: dict[str, object] = {"None": None, "True": True, "False": False}
    if raw in words:
        return words[raw]
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def training_arguments(text: str) -> dict:
    r"""The settings of a printed ``TrainingArguments(...)`` (one line or one a line).

    >>> args = training_arguments("parameters TrainingArguments(output_dir='/w', evaluation_strategy=<Evaluation"
    ...                           "Strategy.EPOCH: 'epoch'>, learning_rate=3e-05, max_steps=-1, logging_steps=10, "
    ...                           "fp16=True, label_names=None)")
    >>> args["evaluation_strategy"], args["learning_rate"], args["logging_steps"], args["fp16"], "label_names" in args
    ('epoch', 3e-05, 10, True, False)
    >>> training_arguments("_n_gpu=1,\nadam_beta2=0.999,\nlogging_steps=500,\nreport_to=['wandb'],")
    {'_n_gpu': 1, 'adam_beta2': 0.999, 'logging_steps': 500, 'report_to': "['wandb']"}
    """
    body = text.split("TrainingArguments(", 1)[-1]
    # (an argument printed None is not set: the Trainer fills it as it starts, eval_steps from logging_steps)
    values = {name: _value(raw.strip()) for name, raw in _ARGUMENT.findall(body)}
    return {name: value for name, value in values.items() if value is not None}


SPEC = LineFormat(
    FORMAT="hf-trainer",
    detect=re.compile(rb"\{(?:'|\xe2\x80\x98)(?:loss|eval_loss)(?:'|\xe2\x80\x99): "
                      rb"|['\"]global_step/max_steps['\"]: ['\"]\d+/\d+['\"]"
                      # (its summary: a run whose logging_steps were more than its steps prints no other dict)
                      rb"|\{'train_runtime': \d"),
    rules=(
        Rule(rf"^[^{{]*\{{{_Q}(?:loss|grad_norm){_Q}:", {
            s.LOSS: _key("loss"), s.GRAD_NORM: _key("grad_norm"), s.LR: _key("learning_rate"), s.EPOCH: _key("epoch")},
            step_at=(_STEP, _GLOBAL_STEP, _BAR), ordinal=True),
        Rule(rf"^[^{{]*\{{{_Q}eval_loss{_Q}:", {s.VAL_LOSS: _key("eval_loss")}, step_at=(_STEP, _GLOBAL_STEP),
             per_step=False),
    ),
    # its header's planned length, read as the attempt's train_iters where no line says it ("[INFO|...] trainer.py:2321
    # >>   Total optimization steps = 17,000": its max_steps, on the steps its dicts log)
    events=((s.EV_PLANNED_STEPS, r"\bTotal optimization steps = (\d[\d,]*)\s*$"),
            # PEFT's count, as LLaMA-Factory and the scripts that call print_trainable_parameters print it:
            # "trainable params: 645,922,816 || all params: 8,261,539,328 || trainable%: 7.8184"
            (s.EV_PARAMETER_COUNT, r"\btrainable params: [\d,]+ \|\| all params: (\d[\d,]*)"),
            # a traceback's frame in the Trainer's training loop: after a training's summary, another trainer.train()
            # began and failed (Clemens66666/Trainer-New: a third training's collator raised at its bar's 0/132)
            (s.EV_TRAINING_LOOP,
             r"^\s*File \".*[\\/]transformers[\\/]trainer\.py\", line \d+, in _inner_training_loop\s*$")),
    # every key of its dicts whose value is a number ('num_input_tokens_seen': 196608, 'eval_accuracy': 0.51, ms-swift's
    # 'train_speed(s/it)': '2.546'): those not read are said to be not read
    printed=(rf"{_Q}([A-Za-z_][\w/.()\-]*){_Q}:\s*{_Q}?{NUMBER}%?{_Q}?\s*[,}}]",
             frozenset({"loss", "grad_norm", "learning_rate", "epoch", "eval_loss", "global_step/max_steps",
                        "global_step"})),
    # (a line that ends with the call's ")" is the whole of it)
    config_block=(r"TrainingArguments\(", r"^\s*\)\s*$|TrainingArguments\(.*\)\s*$"),
    config_reader=training_arguments,
    whole_line=r"\}\s*$",
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
