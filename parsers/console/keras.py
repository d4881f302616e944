"""Keras ``fit()`` consoles (Keras 1 and 2, tf.keras): an ``Epoch 3/10`` line, then the progress bar, which ends
the epoch with ``100/100 [==============================] - 328s 3s/step - loss: 0.2445 - val_loss: 0.2342``
(Keras 1: ``9595/9595 [====...] - 1s - loss: 0.6242 - acc: 0.6295 - val_loss: 0.5265 - val_acc: 0.7470``;
``verbose=2``: the same line without the bar; Keras 3: ``422/422 ━━━━━━━━━━━━━━━━━━━━ 3s 5ms/step - loss: 0.2329``,
an update of the bar the same line at ``57/422``). Keras prints no global step: **the steps here are epochs**, each
point the end-of-epoch line's value at the number of the ``Epoch k/K`` line before it. The bar's updates during an
epoch (``99/100 [====>.] - ETA: 2s - loss: 0.2445``, running means over a part of the epoch) are not read, but for
a NaN (or Inf) loss, which the epoch's own value will be too: a paste usually stops inside the epoch that went
wrong.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/keras/relernn_issue26_nan_epoch309.txt")
>>> read(path, ReadContext("train.log", "r"))[0].log.metrics.filter(metric="loss").select("step", "value").rows()
[(308, 0.2445), (309, nan), (310, nan)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import polars as pl

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule
from parsers.schema import ParsedLog
from parsers.textfile import TextFile


def _field(name: str) -> str:
    """``- name: value`` (not ``- val_name:`` for ``name``)."""
    return rf"\s-\s+{name}:\s*({NUMBER})"


@dataclass(frozen=True)
class _Keras(LineFormat):
    """Keras's console: after a fit, ``model.evaluate`` prints a line just like an epoch's end (``42/42 [====] - 1s
    14ms/step - loss: 0.0928 - accuracy: 0.9644``), which falls on the last epoch's step: an epoch's first end line
    is its value, a later one at the same epoch is not read (and said); a NaN read from the bar before the end line
    gives way to the end line's value."""

    def parse(self, text: TextFile, run: str, source: str) -> ParsedLog:
        log = super().parse(text, run, source)
        # a bar's NaN update followed by its epoch's end: the end is the epoch's value (NaN too: a running mean)
        key = ["attempt", "step", "metric"]
        update = ~pl.col("value").is_finite() & (pl.int_range(pl.len()).over(key) == 0) & (pl.len().over(key) > 1)
        first = log.metrics.filter(~update.fill_null(False))
        updates = log.metrics.height - first.height
        first = first.unique(key, keep="first", maintain_order=True)
        later = log.metrics.height - updates - first.height
        said = [f"{source}: {later} value{'s' if later != 1 else ''} printed after an epoch's end at the same epoch "
                "(model.evaluate or predict output after the fit): not read"] if later else []
        return replace(log, metrics=first, warnings=[*log.warnings, *said])


_BAR3 = "━"  # Keras 3's bar: "━━━━━━━━━━━━━━━━━━━━", the same whether the epoch is done or not


def _done(line: pl.Expr) -> pl.Expr:
    """A Keras 3 bar line at the end of its epoch: its count is the total (``2/2 ━━━━``; ``1/2 ━━━━`` is an update)."""
    return line.str.extract(r"^\s*(\d+)/", 1) == line.str.extract(r"^\s*\d+/(\d+)", 1)


_ENDS = {s.LOSS: _field("loss"), s.VAL_LOSS: _field("val_loss"), s.LR: _field("(?:lr|learning_rate)"),
         "acc": _field("acc"), "val_acc": _field("val_acc"),
         "accuracy": _field("accuracy"), "val_accuracy": _field("val_accuracy")}

SPEC = _Keras(
    FORMAT="keras",
    # (a callback may print between the epoch's line and its bar: a blank line and "Epoch 00001: LearningRateScheduler
    # setting learning rate to 0.003.")
    detect=re.compile(rb"(?:^|\n)[ \t]*Epoch \d+/\d+[ \t]*\r?\n(?:[ \t]*(?:Epoch \d+: [^\n]*)?\r?\n){0,3}"
                      rb"[ \t]*(?:\d+/\d+ (?:\[[=>.]*\] )?)?- (?:ETA: )?\d"
                      # Keras 3 (a line of TensorFlow's start-up noise may come between)
                      rb"|(?:^|\n)[ \t]*Epoch \d+/\d+[ \t]*\r?\n(?:[^\n]*\n){0,3}[ \t]*\d+/\d+ " + _BAR3.encode()),
    rules=(
        # the epoch's number: the step of the end-of-epoch line after it ("/5", the epochs fit() was asked for, is not
        # taken as the planned length: a point inside the last epoch, a NaN in its bar, would read as reaching it)
        Rule(r"^\s*Epoch (\d+)/\d+\s*$", {}),
        # an update of the bar whose running mean is already NaN: the epoch's loss is NaN whether or not its end was
        # printed (a paste usually stops inside the epoch that went wrong)
        Rule(r"^\s*\d+/\d+ \[[=>.]*\] - ETA: .*?\s-\s+loss:\s*(?i:nan|-?inf)\b", {s.LOSS: _field("loss")}, step=False,
             per_step=False),
        # the end of an epoch: its elapsed time where an update of the bar has "ETA:"
        Rule(r"^\s*(?:\d+/\d+ (?:\[[=>.]*\] )?)?- \d+(?:\.\d+)?m?s\b.*?\s-\s+\w+:", _ENDS, step=False),
        # Keras 3: the end of an epoch is the bar at its total, an update's NaN as Keras 2's
        Rule(rf"^\s*\d+/\d+ {_BAR3}+ .*?\s-\s+\w+:", _ENDS, step=False, where=_done),
        Rule(rf"^\s*\d+/\d+ {_BAR3}+ .*?\s-\s+loss:\s*(?i:nan|-?inf)\b", {s.LOSS: _field("loss")}, step=False,
             per_step=False, where=lambda line: ~_done(line)),
    ),
    # the EarlyStopping callback ends the fit before its planned last epoch: "Epoch 00033: early stopping"
    events=((s.EV_EXIT, r"^\s*Epoch \d+: early stopping\s*$"),),
    note="it prints no global step: the steps here are epochs (each point the end-of-epoch value)",
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
