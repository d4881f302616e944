"""The Hugging Face Trainer's closing metrics files in an output directory: ``train_results.json`` (what
``trainer.save_metrics("train", ...)`` writes after ``train()`` returns: ``train_loss``, ``train_runtime``,
``train_samples_per_second``, ``epoch``, ``total_flos``), ``eval_results.json`` (``eval_loss``, ``eval_*``),
``test_results.json`` / ``predict_results.json``, and ``all_results.json`` (all of them merged).

They hold no step: each value is read as a summary value of the run (``summary/train_loss``, as a W&B run's
``wandb-summary.json`` is), joined to its last attempt. A ``train_results.json`` with a ``train_runtime`` says
``train()`` returned; the files say nothing of how the training went on the way.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/hf_output_dir/Jaong_Checkpoint-of-CPT/train_results.json")
>>> configs = read(path, ReadContext("train_results.json", "r"))[0].log.configs
>>> configs.filter(key="summary/train_loss")["value"].item()
'0.4479398911550831'
"""

from __future__ import annotations

import re
from pathlib import Path

from parsers import schema as s
from parsers.reader import NotThisFormat, Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import InputError, json_value, read_all
from parsers.wandb_history import config_frame

FORMAT = "hf-trainer-results"
_NAME = re.compile(r"^(?:all|train|eval|test|predict)_results\.json$")


def sniff(head: bytes, name: str) -> bool:
    """``all_results.json``, ``train_results.json``, ``eval_results.json`` (and ``test_`` / ``predict_``) holding a
    JSON object."""
    return _NAME.match(Path(name).name) is not None and head.lstrip().startswith(b"{")


def read(path: Path, context: ReadContext) -> list[Piece]:
    raw = read_all(path)
    if not raw.strip():
        raise NotThisFormat(f"{context.shown}: empty file", empty=True)
    try:
        values = json_value(raw)
    except ValueError as exc:
        raise InputError(f"{context.shown}: not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(values, dict):
        raise NotThisFormat(f"{context.shown}: JSON that is not an object of the Trainer's metrics")
    # (a flat object of numbers: a nested one is some other program's file of that name)
    kept = {k: v for k, v in values.items() if isinstance(v, int | float | str) and not isinstance(v, bool)}
    if not kept or len(kept) < len(values):
        raise NotThisFormat(f"{context.shown}: JSON that is not a flat object of the Trainer's metrics")
    configs = config_frame(kept, run=context.run, source=context.shown, prefix=s.SUMMARY_PREFIX)
    log = ParsedLog(s.empty(s.METRICS_SCHEMA), s.empty(s.EVENTS_SCHEMA), configs)
    return [Piece(path, FORMAT, log, config_only=True)]
