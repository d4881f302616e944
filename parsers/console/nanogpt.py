"""nanoGPT's stdout: ``iter 100: loss 4.1172, time 118.20ms, mfu 37.9%`` each log interval and
``step 2000: train loss 3.9100, val loss 3.9700`` at each evaluation (its train loss there is an estimate over
``eval_iters`` batches, kept as ``train_loss_eval``); and llama2.c's, which prints its steps as
``490 | loss 5.7543 | lr 4.900000e-05 | 8060.78ms | mfu 0.21%`` and evaluates as nanoGPT does; and build-nanogpt's
("reproduce GPT-2" and its many forks): ``step    42 | loss: 5.180400 | lr 4.1874e-04 | norm: 1.0096 | dt: 927.33ms |
tok/sec: 565373.84`` (forks reorder the fields, write ``lr: 0.000010``), with ``validation loss: 5.3183`` and
``HellaSwag accuracy: 2391/10042=0.2381`` printed at the top of the step whose line follows them, and its ``log.txt``
(``250 val 6.1659``, ``250 hella 0.2437``, ``250 train 5.943471``).

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> log = read(Path("tests/fixtures/real/nanogpt/ChenZihua-cn_nanoGPT_train.log"), ReadContext("train.log", "r"))[0].log
>>> log.metrics.filter(metric="loss").select("step", "value").row(1)
(5, 4.2082)
"""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

HELLASWAG = "hellaswag_acc"  # build-nanogpt's HellaSwag accuracy (0-1)

# nanoGPT's configurator prints the config file it reads ("Overriding config with config/train_shakespeare_char.py:"
# and the file's lines), each command-line setting ("Overriding: batch_size = 12"), and the vocabulary it finds
# ("found vocab_size = 65 (inside data/shakespeare_char/meta.pkl)")
_CONFIG_BEGINS = r"^(?:Overriding config with \S.*:\s*$|Overriding: \w+ = |found vocab_size = \d+)"
_CONFIG_ENDS = (r"^(?:Overriding: \w+ = |found vocab_size = |tokens per iteration will be|Initializing |Resuming training"
                r"|number of parameters|using |iter \d|step \d)")
_SETTING = re.compile(r"^(?:Overriding: |found )?([A-Za-z_]\w*)\s*=\s*(.+?)\s*$")


def settings(text: str) -> dict:
    r"""The settings of nanoGPT's printed config lines (Python assignments: their literal values; anything else, such
    as an expression, as its text); other lines are passed by.

    >>> settings("Overriding config with config/x.py:\n# baby GPT\nn_layer = 6 # small\nout_dir = 'out-x'\n"
    ...          "lr = 6e-4 / 10")
    {'n_layer': 6, 'out_dir': 'out-x', 'lr': '6e-4 / 10'}
    >>> settings("found vocab_size = 139 (inside data/mitos/meta.pkl)")
    {'vocab_size': 139}
    """
    import ast

    out: dict = {}
    for line in text.splitlines():
        if line.startswith("found vocab_size = "):
            line = line.split(" (", 1)[0]
        if not (found := _SETTING.match(line)) or line.startswith("Overriding config with"):
            continue
        text = found[2]
        # the value with its comment cut at each '#' from the last (a '#' inside a string is the string's)
        cuts = [text] + [text[:i].rstrip() for i in reversed(range(len(text))) if text[i] == "#"]
        value, shown = text.split("#", 1)[0].strip(), None
        for candidate in cuts:
            try:
                # (literals only: nothing runs)
                value, shown = (ast.literal_eval(candidate), candidate) if len(candidate) < 1000 else (candidate, "")
                break
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
        out[found[1]] = value if isinstance(value, (int, float, str, bool)) or value is None else shown or text
    return out


SPEC = LineFormat(
    FORMAT="nanogpt",
    detect=re.compile(rb"\biter \d+: loss [-+\w.]+, time |\bstep \d+: train loss [-+\w.]+, val loss "
                      rb"|(?:^|\n)\d+ \| loss [-+\w.]+ \| lr [-+\w.]+ \| "
                      rb"|\bstep\s+\d+\s*\|\s*loss: [-+\w.]+\s*\|"  # build-nanogpt
                      rb"|\bstep \d+, loss: [-+\w.]+(?:, norm: |\r?\n)"  # ... and its forks' commas
                      rb"|(?:^|\n)\d+ (?:val|train) \d[\d.]*\r?\n\d+ (?:val|hella|train) \d"),  # its log.txt
    rules=(
        Rule(r"\biter (\d+): loss ", {s.LOSS: rf"\biter \d+: loss ({NUMBER})",
                                      s.ITERATION_TIME_MS: rf", time ({NUMBER})ms"},
             layout=r"\biter (?P<step>\d+): loss (?P<loss>[^,\s]+), time (?P<iteration_time_ms>[\d.]+)ms"),
        Rule(r"\bstep (\d+): train loss ", {"train_loss_eval": rf"train loss ({NUMBER})",
                                            s.VAL_LOSS: rf"val loss ({NUMBER})"}, per_step=False),
        Rule(r"^(\d+) \| loss ", {s.LOSS: rf"^\d+ \| loss ({NUMBER})", s.LR: rf"\| lr ({NUMBER})",
                                  s.ITERATION_TIME_MS: rf"\| ({NUMBER})ms"}),  # llama2.c
        Rule(r"(?:^|\s)step\s+(\d+)\s*[|,]\s*loss:\s", {  # build-nanogpt (its forks: commas for bars)
            s.LOSS: rf"[|,]\s*loss:\s*({NUMBER})", s.LR: rf"[|,]\s*lr:?\s*({NUMBER})",
            s.GRAD_NORM: rf"[|,]\s*norm:\s*({NUMBER})", s.ITERATION_TIME_MS: rf"[|,]\s*(?:dt|time):\s*({NUMBER})\s*ms",
            s.TOKENS_PER_SECOND: rf"[|,]\s*(?:tok/sec|tokens/sec):\s*({NUMBER})"}),
        Rule(r"^\s*validation loss:", {s.VAL_LOSS: rf"^\s*validation loss:\s*({NUMBER})"}, step=False, per_step=False,
             step_after=True),
        Rule(r"^\s*HellaSwag accuracy:", {HELLASWAG: rf"HellaSwag accuracy:\s*\d+\s*/\s*\d+\s*=\s*({NUMBER})"},
             step=False, per_step=False, step_after=True),
        Rule(r"^(\d+) train \d", {s.LOSS: rf"^\d+ train ({NUMBER})"}),  # build-nanogpt's log.txt
        Rule(r"^(\d+) val \d", {s.VAL_LOSS: rf"^\d+ val ({NUMBER})"}, per_step=False),
        Rule(r"^(\d+) hella \d", {HELLASWAG: rf"^\d+ hella ({NUMBER})"}, per_step=False),
    ),
    events=(
        (s.EV_CHECKPOINT_SAVING, r"^\W*saving checkpoint to "),
        (s.EV_CHECKPOINT_LOAD, r"^\W*Resuming training from "),
        # init_from='gpt2': pretrained weights, the steps counted from 0 (a fine-tune)
        (s.EV_CHECKPOINT_LOAD, r"^\W*Initializing from OpenAI GPT-2 weights: "),
        (s.EV_STARTUP, r"^\W*(?:tokens per iteration will be|Initializing a new model from scratch)"),
        (s.EV_STARTUP, r"^\W*using device: \w"),  # build-nanogpt's first line
        (s.EV_PARAMETER_COUNT, r"^\s*Total (?:Parameters|params):\s*(\d[\d,]*)\s*$"),  # a model summary's total
        (s.EV_PARAMETER_COUNT, r"^\W*number of parameters: (\d+(?:\.\d+)?)M\s*$"),  # nanoGPT's count, in millions
    ),
    # a field printed as "name value" and not read is said to be not read: nanoGPT's "iter 100: loss 4.1172, time
    # 118.20ms, mfu 37.9%" and llama2.c's "490 | loss 5.7543 | lr 4.9e-05 | 8060.78ms | mfu 0.21%" print their mfu
    # (build-nanogpt's "name: value" fields are all read)
    printed=(r"[:,|]\s+([A-Za-z_]+) -?\d", frozenset({"loss", "time", "lr"})),
    config_block=(_CONFIG_BEGINS, _CONFIG_ENDS),
    config_reader=settings,
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
