"""Tag and key names of TensorBoard / W&B scalars -> canonical metric names (see ``parsers.schema``).

Megatron's flat tags (``lm loss``, ``grad-norm``), BigScience's grouped tags (``lm-loss-training/lm loss``),
tensorboardX's underscore rewrites (``lm_loss``) and common ``train/loss`` names all map to one canonical name.
Tags ending in `` vs samples`` / `` vs tokens`` are the same metric on another x-axis. Unknown tags keep their
own name.
"""

from __future__ import annotations

import re

from parsers import schema as s

# leaf names after lower-casing and turning '-', '_' and repeated spaces into one space
_LEAVES: dict[str, str] = {
    "lm loss": s.LOSS, "loss": s.LOSS, "train loss": s.LOSS, "training loss": s.LOSS,
    "grad norm": s.GRAD_NORM, "gradient norm": s.GRAD_NORM, "grad norm total": s.GRAD_NORM,
    "global grad norm": s.GRAD_NORM,
    "learning rate": s.LR, "lr": s.LR,
    "loss scale": s.LOSS_SCALE,
    "batch size": s.BATCH_SIZE, "global batch size": s.BATCH_SIZE,
    "num zeros": s.NUM_ZEROS,
    "params norm": s.PARAMS_NORM,
    "iteration time": s.ITERATION_TIME_MS,  # Megatron writes seconds; scaled by SECONDS_METRICS
    "samples per second": s.SAMPLES_PER_SECOND,
    "consumed samples": s.CONSUMED_SAMPLES, "consumed tokens": s.CONSUMED_TOKENS,
    "skipped iterations": s.SKIPPED_ITERATIONS, "nan iterations": s.NAN_ITERATIONS,
    "lm loss validation": s.VAL_LOSS, "valid lm loss": s.VAL_LOSS, "validation loss": s.VAL_LOSS,
    "val loss": s.VAL_LOSS, "eval loss": s.VAL_LOSS,
    "lm loss validation ppl": s.VAL_PPL, "validation ppl": s.VAL_PPL, "val ppl": s.VAL_PPL,
}
_VALIDATION_PARTS = {"val", "valid", "validation", "eval", "evaluation", "lm loss validation"}
_AXIS = re.compile(r"\s+vs\s+(samples|tokens|gigaflos.*|steps)$")
# tags whose values are in seconds in Megatron's TensorBoard output; the canonical metric is in ms
SECONDS_TAGS = frozenset({"iteration-time", "iteration-time/iteration-time", "iteration_time"})


def _leaf(text: str) -> str:
    return re.sub(r"[\s_-]+", " ", text.strip().lower())


def canonical(tag: str) -> tuple[str, str]:
    """``(metric, axis)`` for a tag: axis is ``step`` unless the tag is a `` vs samples``-style twin.

    >>> canonical("lm-loss-training/lm loss vs samples")
    ('loss', 'samples')
    >>> canonical("grad-norm"), canonical("train/loss"), canonical("dup_steps/foo"), canonical("train/train_loss")
    (('grad_norm', 'step'), ('loss', 'step'), ('dup_steps/foo', 'step'), ('train/train_loss', 'step'))
    """
    axis = "step"
    base = tag
    if found := _AXIS.search(tag):
        axis = found.group(1).split()[0]
        base = tag[: found.start()]
    parts = [p for p in base.split("/") if p]
    leaf = _leaf(parts[-1]) if parts else ""
    if len(parts) > 1 and _leaf(parts[-2]) in {"train", "training"} and leaf.startswith("train "):
        return base, axis  # the Hugging Face Trainer's end-of-training summary (train/train_loss: the mean loss)
    validation = any(_leaf(p) in _VALIDATION_PARTS for p in parts[:-1])
    name = _LEAVES.get(leaf)
    if name is None and len(parts) > 1 and _leaf(parts[0]) in {"train", "training", "optimizer", "loss"}:
        name = _LEAVES.get(_leaf(parts[0]) + " " + leaf) or _LEAVES.get(leaf)
    if name is None:
        return base, axis
    if validation and name == s.LOSS:
        name = s.VAL_LOSS
    return name, axis
