"""Tag and key names of TensorBoard / W&B scalars -> canonical metric names (see ``parsers.schema``).

Megatron's flat tags (``lm loss``, ``grad-norm``), BigScience's grouped tags (``lm-loss-training/lm loss``),
tensorboardX's underscore rewrites (``lm_loss``) and common ``train/loss`` names all map to one canonical name.
Tags ending in `` vs samples`` / `` vs tokens`` are the same metric on another x-axis. Unknown tags keep their
own name.

Per-layer and per-parameter gradient norms (OLMo's ``optim/grad/<param>.norm``, Composer's ``l2_norm/grad/<param>``,
``grad_norm/<layer>``, ``grads/<param>/norm``) become ``grad_norm/<group>/<layer>/<parameter>``
(:func:`parsers.schema.layer_grad_metric`; :func:`layer_grad_name`): grouped by block index and by what the
parameter is (embedding, attention, MLP, norm, a whole block, output head, other). They never become ``grad_norm``.
"""

from __future__ import annotations

import re

from parsers import schema as s

# leaf names after lower-casing and turning '-', '_' and repeated spaces into one space
_LEAVES: dict[str, str] = {
    "lm loss": s.LOSS, "loss": s.LOSS, "train loss": s.LOSS, "training loss": s.LOSS,
    "epoch loss": s.LOSS,  # Keras: the epoch's mean loss (a validation/ writer's is the validation loss)
    "grad norm": s.GRAD_NORM, "gradient norm": s.GRAD_NORM, "grad norm total": s.GRAD_NORM,
    "global grad norm": s.GRAD_NORM, "total grad norm": s.GRAD_NORM,
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
    "z loss": s.Z_LOSS, "zloss": s.Z_LOSS,
    "max attention logit": s.MAX_ATTENTION_LOGIT, "max attention logits": s.MAX_ATTENTION_LOGIT,
    "max attn logit": s.MAX_ATTENTION_LOGIT, "attention logit max": s.MAX_ATTENTION_LOGIT,
}
# a tag's folder, or an event file's, that holds the evaluation's scalars
VALIDATION_FOLDERS: frozenset[str] = frozenset({"val", "valid", "validation", "eval", "evaluation"})
_VALIDATION_PARTS = VALIDATION_FOLDERS | {"lm loss validation"}
# Lightning's LearningRateMonitor: "lr-AdamW", and "lr-AdamW/pg1" for the first of several parameter groups
_LR_MONITOR = re.compile(r"^lr-[A-Za-z]\w*(?:/pg1)?$")
_FIRST_GROUP = re.compile(r"^pg1$", re.IGNORECASE)  # Lightning's numbering from 1 (a 0-based pg0/pg1 is two groups)
# another x-axis: Megatron's "lm loss vs samples", Keras's "evaluation_loss_vs_iterations" (beside epoch_ scalars)
_AXIS = re.compile(r"(?:\s+|_)vs(?:\s+|_)(samples|tokens|gigaflos.*|steps|iterations)$")
# tags whose values are in seconds in Megatron's TensorBoard output; the canonical metric is in ms
SECONDS_TAGS = frozenset({"iteration-time", "iteration-time/iteration-time", "iteration_time"})


# a per-layer grad norm: "<...>/<head>/<parameter>"; heads that say "gradient" only need a norm suffix on the parameter
_LAYER_GRAD = re.compile(r"^(?:[^/]+/)*?(?P<head>grad_norms?|grad-norms?|gradient_norms?|grad_l2_norm|norm2_gradient"
                         r"|grad_\d+(?:\.\d+)?_norm"  # Lightning's grad_norm(): grad_2.0_norm/<param>
                         r"|l2_norm/grad|(?P<bare>grads?|gradients?))/(?P<rest>.+)$", re.IGNORECASE)
# Composer's OptimizerMonitor and Lightning's grad_norm(): the global norm beside their per-parameter ones
_GLOBAL_NORMS = frozenset({"l2_norm/grad/global", "grad_2.0_norm_total", "grad_2_norm_total"})
_NORM_SUFFIX = re.compile(r"(?:[./_]l2)?[./_](?:l2_?)?norm$", re.IGNORECASE)
_AGGREGATES = frozenset({"total", "global", "all", "clip", "clipped", "pre clip", "post clip", "unclipped", "before clip",
                         "after clip", "max", "min", "mean", "avg", "std", "median", "norm", "l2", "sum"})
_DIGITS = re.compile(r"(?:^|[./_-])(\d+)(?=[./_-]|$)")
_IS_NORM = re.compile(r"norm|(?:^|[./_])ln(?:_?f|_?\d)?(?:[./_]|$)")
_IS_EMBED = re.compile(r"embed|(?:^|[./_])(?:wte|wpe|tok_embeddings)(?:[./_]|$)")
_IS_HEAD = re.compile(r"lm_head|unembed|(?:^|[./_])(?:head|output|ff_out|out_proj_head)(?:[./_]|$)")
_IS_ATTN = re.compile(r"att|q_proj|k_proj|v_proj|o_proj|qkv|query|(?:^|[./_])(?:key|value|w[qkvo])(?:[./_]|$)")
_IS_MLP = re.compile(r"mlp|ffn|ff_|feed_forward|(?:^|[./_])(?:fc\d?|c_fc|w[123]|experts?|intermediate)(?:[./_]|$)"
                     r"|gate_proj|up_proj|down_proj|dense_h_to_4h|dense_4h_to_h")
_CONTAINERS = frozenset({"layer", "layers", "block", "blocks", "h", "transformer", "model", "decoder", "encoder",
                         "weight", "bias", "module", "backbone", "gpt", "base", "model_", "trunk"})


def layer_group(parameter: str) -> tuple[str, int | None]:
    """``(group, block index or None)`` of a parameter or layer name (``parsers.schema.LAYER_GROUPS``).

    >>> layer_group("transformer.blocks.0.att_proj.weight"), layer_group("transformer.wte.weight")
    (('attention', 0), ('embedding', None))
    >>> layer_group("model.layers.5.mlp.down_proj.weight"), layer_group("layer_3"), layer_group("transformer.ff_out")
    (('mlp', 5), ('block', 3), ('head', None))
    >>> layer_group("model.layers.2.input_layernorm.weight"), layer_group("lm_head.weight"), layer_group("rotary")
    (('norm', 2), ('head', None), ('other', None))
    """
    name = parameter.lower()
    found = _DIGITS.search(name)
    layer = int(found.group(1)) if found else None
    if _IS_NORM.search(name):
        return "norm", layer
    if _IS_EMBED.search(name):
        return "embedding", layer
    if layer is None and _IS_HEAD.search(name):
        return "head", layer
    if _IS_ATTN.search(name):
        return "attention", layer
    if _IS_MLP.search(name):
        return "mlp", layer
    if _IS_HEAD.search(name):
        return "head", layer
    words = [w for w in re.split(r"[./_-]+", name) if w and not w.isdigit()]
    if layer is not None and all(w in _CONTAINERS for w in words):
        return "block", layer
    return "other", layer


def layer_grad_name(tag: str) -> str | None:
    """The canonical name of a per-layer or per-parameter grad-norm tag, or None for any other tag (the global grad
    norm among them: ``grad_norm/total``, ``optim/total_grad_norm``).

    >>> layer_grad_name("optim/grad/transformer.blocks.0.att_proj.weight.norm")
    'grad_norm/attention/0/transformer.blocks.0.att_proj.weight'
    >>> layer_grad_name("grad_norm/embedding"), layer_grad_name("train/grads/layers.7/norm")
    ('grad_norm/embedding/-/embedding', 'grad_norm/block/7/layers.7')
    >>> layer_grad_name("grad_2.0_norm/model.layers.1.self_attn.q_proj.weight")  # Lightning's grad_norm()
    'grad_norm/attention/1/model.layers.1.self_attn.q_proj.weight'
    >>> layer_grad_name("Health/Grad_Norm/Embeddings"), layer_grad_name("norms/grad_norm/transformer.h.0.attn.weight")
    ('grad_norm/embedding/-/Embeddings', 'grad_norm/attention/0/transformer.h.0.attn.weight')
    >>> [layer_grad_name(t) for t in ("optim/grad/transformer.wte.weight.max", "grad_norm/total", "train/grad_norm")]
    [None, None, None]
    """
    found = _LAYER_GRAD.match(tag)
    if not found:
        return None
    rest = found.group("rest")
    suffix = _NORM_SUFFIX.search(rest)
    if suffix:
        rest = rest[: suffix.start()]
    elif found.group("bare"):
        return None  # optim/grad/<param>.max, grads/<param>/mean: not a norm
    if not rest or _leaf(rest) in _AGGREGATES or _leaf(rest.split("/")[-1]) in _AGGREGATES:
        return None
    group, layer = layer_group(rest)
    return s.layer_grad_metric(group, layer, rest)


# one layer's largest attention logits: "logits/layer11/max_p95", "attn_logits/layer_3/max", "attention/3/max_logit";
# a tag that names a logit, a layer index and a maximum (a mean or a spread of the logits is not one)
_LOGIT_LAYER = re.compile(r"(?:^|[/._-])(?:layers?|blocks?|h)[._-]?(\d+)(?=[/._-]|$)|/(\d+)(?=/)", re.IGNORECASE)
_LOGIT_MAX = re.compile(r"^(?:max(?:[_-]?p\d+)?|amax|maximum|max[_-]?(?:attn[_-]?|attention[_-]?)?logits?)$",
                        re.IGNORECASE)


def layer_logit_name(tag: str) -> str | None:
    """The canonical name of one layer's attention-logit maximum, or None for any other tag (a mean, a spread, the
    output logits, a validation pass's).

    >>> layer_logit_name("logits/layer11/max_p95"), layer_logit_name("attn_logits/layer_3/max")
    ('max_attention_logit/11/max_p95', 'max_attention_logit/3/max')
    >>> [layer_logit_name(t) for t in ("logits/layer0/mean", "logits/layer5/std", "val/logits/layer0/max", "logits/max")]
    [None, None, None, None]
    """
    parts = [p for p in tag.split("/") if p]
    if len(parts) < 2 or "logit" not in tag.lower() or not _LOGIT_MAX.match(parts[-1]):
        return None
    if any(_leaf(p) in _VALIDATION_PARTS for p in parts[:-1]):
        return None
    found = _LOGIT_LAYER.search("/".join(parts[:-1]) + "/")
    if not found:
        return None
    return s.layer_logit_metric(int(found.group(1) or found.group(2)), parts[-1])


def _leaf(text: str) -> str:
    return re.sub(r"[\s_-]+", " ", text.strip().lower())


_IN_UNITS = re.compile(r"^(.*[^\s(])\s*\((1e-?\d{1,2})\)$")


def in_units(key: str) -> tuple[str, float] | None:
    """A key that names its unit, a power of ten, after the metric (verl's ``train/lr(1e-3)``: its values are the LR
    in thousandths): the key without the unit, and the factor that gives the value; None for any other key.

    >>> in_units("train/lr(1e-3)"), in_units("train/loss"), in_units("time(s)")
    (('train/lr', 0.001), None, None)
    """
    found = _IN_UNITS.match(key)
    return (found.group(1), float(found.group(2))) if found else None


def canonical(tag: str) -> tuple[str, str]:
    """``(metric, axis)`` for a tag: axis is ``step`` unless the tag is a `` vs samples``-style twin.

    >>> canonical("lm-loss-training/lm loss vs samples")
    ('loss', 'samples')
    >>> canonical("grad-norm"), canonical("train/loss"), canonical("dup_steps/foo"), canonical("train/train_loss")
    (('grad_norm', 'step'), ('loss', 'step'), ('dup_steps/foo', 'step'), ('train/train_loss', 'step'))
    >>> canonical("optim/grad/transformer.wte.weight.norm"), canonical("l2_norm/grad/global")
    (('grad_norm/embedding/-/transformer.wte.weight', 'step'), ('grad_norm', 'step'))
    >>> canonical("train/ZLoss"), canonical("train/Z loss"), canonical("max_attention_logit")
    (('z_loss', 'step'), ('z_loss', 'step'), ('max_attention_logit', 'step'))
    >>> canonical("optim/total_grad_norm"), canonical("grad-norm/grad-norm"), canonical("grad_2.0_norm_total")
    (('grad_norm', 'step'), ('grad_norm', 'step'), ('grad_norm', 'step'))
    >>> canonical("lr-AdamW"), canonical("lr-Adam/pg1"), canonical("lr-Adam/pg2")
    (('lr', 'step'), ('lr', 'step'), ('lr-Adam/pg2', 'step'))
    >>> canonical("learning_rate/pg1"), canonical("learning_rate/pg2"), canonical("lr/pg0")
    (('lr', 'step'), ('learning_rate/pg2', 'step'), ('lr/pg0', 'step'))
    """
    axis = "step"
    base = tag
    if found := _AXIS.search(tag):
        axis = found.group(1).split()[0]
        base = tag[: found.start()]
    if base.lower() in _GLOBAL_NORMS:  # the global norm of their per-parameter ones
        return s.GRAD_NORM, axis
    if _LR_MONITOR.match(base):
        return s.LR, axis
    parts = [p for p in base.split("/") if p]
    if len(parts) > 1 and _FIRST_GROUP.match(parts[-1]) and _LEAVES.get(_leaf(parts[-2])) == s.LR:
        parts = parts[:-1]  # the first parameter group's LR: "learning_rate/pg1"
    leaf = _leaf(parts[-1]) if parts else ""
    if len(parts) > 1 and _leaf(parts[-2]) in {"train", "training"} and leaf.startswith("train "):
        return base, axis  # the Hugging Face Trainer's end-of-training summary (train/train_loss: the mean loss)
    validation = any(_leaf(p) in _VALIDATION_PARTS for p in parts[:-1])
    name = _LEAVES.get(leaf)
    if name is None and len(parts) > 1 and _leaf(parts[0]) in {"train", "training", "optimizer", "loss"}:
        name = _LEAVES.get(_leaf(parts[0]) + " " + leaf) or _LEAVES.get(leaf)
    if name is None:
        return layer_grad_name(base) or layer_logit_name(base) or base, axis
    if validation and name == s.LOSS:
        name = s.VAL_LOSS
    if validation and name in s.LOGIT_METRICS:
        return base, axis  # a validation z-loss is not the training one
    return name, axis
