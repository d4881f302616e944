"""The readers, in the order they are asked, and what to say of a file that none of them takes.

Built-in readers come first (the most specific first; the Megatron reader, which looks at any text file, last),
then readers that other packages register under the ``forensics.readers`` entry-point group, e.g. in their
``pyproject.toml``::

    [project.entry-points."forensics.readers"]
    mylog = "mypackage.mylog"      # a module (or object) with FORMAT, sniff() and read(): see parsers.reader
"""

from __future__ import annotations

import contextlib
import json
import re
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from parsers import (
    hf_model_config,
    hf_results,
    hf_trainer_state,
    lightning,
    lightning_checkpoint,
    llamafactory_log,
    megatron,
    mlflow_store,
    step_table,
    tensorboard,
    wandb_export,
    wandb_run,
)
from parsers.console import (
    colossalai,
    composer,
    deepspeed_chat,
    deepspeed_chat_sft_rm,
    detectron2,
    fairseq,
    hf_trainer,
    keras,
    litgpt,
    llmc,
    maxtext,
    metric_logger,
    mlx_lm,
    mmcv,
    mmengine,
    modded_nanogpt,
    nanochat,
    nanogpt,
    nanotron,
    nemo,
    olmo,
    torchtitan,
    torchtune,
)
from parsers.console.engine import LineFormat
from parsers.reader import HEAD_BYTES, Reader

ENTRY_POINT_GROUP = "forensics.readers"
BUILTIN: tuple[Reader, ...] = (  # type: ignore[assignment]
    wandb_run, mlflow_store, tensorboard, hf_trainer_state, hf_results, hf_model_config, llamafactory_log, lightning,
    lightning_checkpoint, wandb_export, step_table, nanogpt, modded_nanogpt, nanochat, litgpt, llmc, torchtitan,
    nanotron, olmo, fairseq, mlx_lm, mmengine, mmcv, detectron2, keras, metric_logger, nemo, maxtext, torchtune,
    colossalai, composer, deepspeed_chat, deepspeed_chat_sft_rm, hf_trainer, megatron,
)  # type: ignore[assignment]


@cache
def readers() -> tuple[Reader, ...]:
    """Every reader, in the order they are asked: the built-in ones, then the installed plug-ins (one that cannot
    be loaded or lacks the interface is left out)."""
    extra = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found = point.load()
        except Exception:
            continue
        if isinstance(found, Reader):
            extra.append(found)
    # plug-ins are asked before the Megatron reader, which takes any text file
    return (*BUILTIN[:-1], *extra, BUILTIN[-1])


def console_formats() -> dict[str, LineFormat]:
    """The console formats among the readers (the Megatron reader looks for them beyond the head)."""
    return {r.FORMAT: r.SPEC for r in readers() if isinstance(getattr(r, "SPEC", None), LineFormat)}


def reader_for(head: bytes, name: str) -> Reader | None:
    """The first reader that takes the file (none takes a Git LFS pointer, whatever its name: the data is not there)."""
    if head.startswith(_LFS):
        return None
    return next((r for r in readers() if r.sniff(head, name)), None)


_LFS = b"version https://git-lfs.github.com/spec/"


def _listed(names: list[str], most: int = 6) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:most])
    return shown + (", ..." if len(names) > most else "")


def looks_like(head: bytes, name: str) -> str:
    """What a file that no reader takes looks like, in a few words (for the one-line reason it was skipped).

    >>> looks_like(b'{"log_history": [], "best_metric": null}', "state.json")
    'JSON with keys `log_history`, `best_metric` (no reader for this layout)'
    >>> looks_like(b"version https://git-lfs.github.com/spec/v1\\noid sha256:abc\\n", "events.bin")
    'Git LFS pointer, not the file (run `git lfs pull`)'
    """
    if head.startswith(_LFS):
        return "Git LFS pointer, not the file (run `git lfs pull`)"
    if not head.strip():
        return "empty file"
    if b"\x00" in head[:8192]:
        return "binary file, not a text log"
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        keys = re.findall(r'"([^"]{1,60})"\s*:', stripped[:2000])
        with contextlib.suppress(ValueError, TypeError, RecursionError):
            whole = json.loads(stripped) if len(head) < HEAD_BYTES else None
            keys = list(whole) if isinstance(whole, dict) else keys
        kind = "JSON lines" if stripped.count("\n{") > 1 else "JSON"
        return f"{kind} with keys {_listed(list(dict.fromkeys(keys)))} (no reader for this layout)"
    lines = stripped.splitlines()[:5]
    first = lines[0] if lines else ""
    commas = {line.count(",") for line in lines[:-1] or lines}  # (the last line of the head may be cut)
    header = [c.strip().strip('"') for c in first.split(",")]
    named = all(re.fullmatch(r"[\w .:/()%-]{1,64}", c) for c in header)  # column names, not log text
    if Path(name).suffix.lower() in {".csv", ".tsv"} or (
            named and len(lines) > 2 and len(commas) == 1 and min(commas) >= 2):
        columns = [c.strip().strip('"') for c in first.split("\t" if "\t" in first else ",")]
        return f"CSV with columns {_listed(columns)} (no reader for this layout)"
    return "text without lines of any known training-log format"
