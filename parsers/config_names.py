"""Config keys of every source -> one canonical name (Megatron's argument names), so attempts and runs compare.

W&B configs, TensorBoard hparams and Hugging Face / nanoGPT style settings name the same thing many ways
(``learning_rate``, ``optimizer.lr``, ``n_embd``, ``optimizer.betas``). Megatron's own argument names are the
canonical ones. A key is matched after lower-casing and turning ``-`` and spaces into ``_``, either whole or, when
everything before its last ``.`` or ``/`` is a generic section name (``optimizer.``, ``model/``, ``args.``), by its
last part. Unknown keys keep their own spelling. A list of Adam betas becomes ``adam_beta1`` and ``adam_beta2``.
"""

from __future__ import annotations

import json
import math
import re

import polars as pl

from parsers import schema as s

# normalised alias -> canonical key; every canonical key also maps to itself
ALIASES: dict[str, str] = {
    "learning_rate": "lr", "max_lr": "lr", "peak_lr": "lr", "base_lr": "lr", "lr": "lr", "max_learning_rate": "lr",
    "peak_learning_rate": "lr",
    "min_learning_rate": "min_lr", "min_lr": "min_lr", "final_lr": "min_lr",
    "beta1": "adam_beta1", "adam_beta1": "adam_beta1", "betas[0]": "adam_beta1", "betas.0": "adam_beta1",
    "beta2": "adam_beta2", "adam_beta2": "adam_beta2", "betas[1]": "adam_beta2", "betas.1": "adam_beta2",
    "eps": "adam_eps", "adam_eps": "adam_eps", "adam_epsilon": "adam_eps", "epsilon": "adam_eps",
    "weight_decay": "weight_decay", "wd": "weight_decay",
    "clip_grad": "clip_grad", "grad_clip": "clip_grad", "max_grad_norm": "clip_grad", "gradient_clipping": "clip_grad",
    "num_layers": "num_layers", "n_layer": "num_layers", "n_layers": "num_layers", "num_hidden_layers": "num_layers",
    "hidden_size": "hidden_size", "n_embd": "hidden_size", "d_model": "hidden_size", "hidden_dim": "hidden_size",
    "ffn_hidden_size": "ffn_hidden_size", "intermediate_size": "ffn_hidden_size", "ffn_dim": "ffn_hidden_size",
    "d_ff": "ffn_hidden_size", "n_inner": "ffn_hidden_size", "ff_hidden": "ffn_hidden_size", "ff_dim": "ffn_hidden_size",
    "ffn_hidden": "ffn_hidden_size", "dim_feedforward": "ffn_hidden_size", "mlp_dim": "ffn_hidden_size",
    "num_attention_heads": "num_attention_heads", "n_head": "num_attention_heads", "n_heads": "num_attention_heads",
    "num_heads": "num_attention_heads", "nhead": "num_attention_heads",
    "num_key_value_heads": "num_key_value_heads", "n_kv_heads": "num_key_value_heads", "num_kv_heads": "num_key_value_heads",
    "num_query_groups": "num_query_groups", "multi_query_group_num": "num_query_groups",  # ChatGLM2's
    # the width of one attention head: Megatron's kv_channels, a Hugging Face config's head_dim (Gemma's 256 with a
    # hidden size of 2304 and 8 heads, not 2304 / 8)
    "kv_channels": "kv_channels", "head_dim": "kv_channels",
    "vocab_size": "vocab_size", "padded_vocab_size": "padded_vocab_size",
    "max_position_embeddings": "max_position_embeddings", "n_positions": "max_position_embeddings",
    "seq_length": "seq_length", "seq_len": "seq_length", "block_size": "seq_length", "max_seq_len": "seq_length",
    "init_method_std": "init_method_std", "initializer_range": "init_method_std", "init_std": "init_method_std",
    "global_batch_size": "global_batch_size", "train_batch_size": "global_batch_size",
    "micro_batch_size": "micro_batch_size", "train_micro_batch_size_per_gpu": "micro_batch_size",
    "per_device_train_batch_size": "micro_batch_size",
    "lr_warmup_iters": "lr_warmup_iters", "warmup_steps": "lr_warmup_iters", "warmup_iters": "lr_warmup_iters",
    "num_warmup_steps": "lr_warmup_iters", "lr_warmup_steps": "lr_warmup_iters",
    "lr_warmup_samples": "lr_warmup_samples", "lr_warmup_fraction": "lr_warmup_fraction",
    "warmup_ratio": "lr_warmup_fraction",
    "train_iters": "train_iters", "max_steps": "train_iters", "max_iters": "train_iters",
    "train_samples": "train_samples",
    "seed": "seed", "random_seed": "seed",
    "rampup_batch_size": "rampup_batch_size",
    "tensor_model_parallel_size": "tensor_model_parallel_size", "tp": "tensor_model_parallel_size",
    "pipeline_model_parallel_size": "pipeline_model_parallel_size", "pp": "pipeline_model_parallel_size",
    "fp16": "fp16", "bf16": "bf16",
    "initial_loss_scale": "initial_loss_scale", "min_loss_scale": "min_loss_scale",
    "tie_word_embeddings": "tie_word_embeddings",
    # GPT-NeoX's switch for an output layer of its own (True: untied), Megatron's name for the same
    "no_weight_tying": "untie_embeddings_and_output_weights",
    "untie_embeddings_and_output_weights": "untie_embeddings_and_output_weights",
    "swiglu": "swiglu", "glu_activation": "glu_activation",
}
_BETAS = {"betas", "adam_betas"}
_SECTIONS = {"args", "config", "hparams", "model", "optimizer", "optim", "opt", "training", "train", "trainer",
             "params", "hyperparameters", "model_config", "training_args", "optimizer_config"}
_SPLIT = re.compile(r"[./]")


def normal_name(key: str) -> str:
    """A key or column name as the tables here list them: lower case, spaces and hyphens as underscores.

    >>> normal_name(" Batch-Size "), normal_name("train loss")
    ('batch_size', 'train_loss')
    """
    return re.sub(r"[\s-]+", "_", key.strip().lower())



def canonical_key(key: str) -> str:
    """The canonical name of a config key (``optimizer.lr`` -> ``lr``, ``n_embd`` -> ``hidden_size``); unknown keys
    are returned unchanged."""
    norm = normal_name(key)
    if norm in ALIASES:
        return ALIASES[norm]
    parts = [p for p in _SPLIT.split(norm) if p]
    for width in (2, 1):  # ``optimizer.betas.1`` ends in two parts, ``optimizer.betas[1]`` in one
        leaf = ".".join(parts[-width:])
        if len(parts) > width and leaf in ALIASES and all(p in _SECTIONS for p in parts[:-width]):
            return ALIASES[leaf]
    return key


def canonical_configs(configs: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """Rename config keys to their canonical names, split Adam beta lists, and keep one value per (attempt, key):
    the first source's. Returns the frame and a warning for each key whose sources disagree."""
    if configs.height == 0:
        return configs, []
    keys = configs["key"].unique().to_list()
    mapping = {k: canonical_key(k) for k in keys if not k.startswith((s.SUMMARY_PREFIX, s.RUN_INFO_PREFIX))}
    renamed = configs.with_columns(
        raw_key=pl.col("key"), key=pl.col("key").replace_strict(mapping, default=pl.col("key"))
    )
    # a planned length of -1 (the Hugging Face Trainer's max_steps when num_train_epochs decides) plans nothing
    renamed = renamed.filter(~((pl.col("key") == "train_iters")
                               & (pl.col("typed").cast(pl.Float64, strict=False) <= 0)).fill_null(False))
    # beside "dim" (the model's width: DistilBERT, LLaMA's params.json), "hidden_dim" is the FFN's
    # (in one section: the same source, attempt and parent key)
    path = pl.col("raw_key").str.strip_chars().str.to_lowercase().str.replace_all(r"[\s-]+", "_")
    widths = renamed.with_columns(norm=path.str.extract(r"([^./]+)$", 1), parent=path.str.replace(r"[^./]+$", ""))
    places = ["source", "attempt", "parent"]
    beside = widths.group_by(places).agg(both=pl.col("norm").is_in(["dim"]).any()
                                         & pl.col("norm").is_in(["hidden_dim"]).any())
    if beside["both"].any():
        renamed = widths.join(beside, on=places, how="left", maintain_order="left", nulls_equal=True).with_columns(
            key=pl.when(pl.col("both") & (pl.col("norm") == "hidden_dim")).then(pl.lit("ffn_hidden_size"))
            .when(pl.col("both") & (pl.col("norm") == "dim")).then(pl.lit("hidden_size"))
            .otherwise("key")).drop("norm", "parent", "both")
    betas = [k for k in keys if ([p for p in _SPLIT.split(normal_name(k)) if p] or [""])[-1] in _BETAS]
    if betas:
        renamed = pl.concat([renamed.filter(~pl.col("raw_key").is_in(betas)), _split_betas(
            renamed.filter(pl.col("raw_key").is_in(betas)))])
    renamed = renamed.with_row_index("_order")
    first = renamed.unique(["run", "attempt", "key"], keep="first", maintain_order=True)
    warnings: list[str] = []
    # the same value written as another type is the same setting (TensorBoard's hparams are floats: 1000.0 and a
    # YAML's 1000, 0.0 and false)
    same = {v: _comparable(v) for v in renamed["typed"].unique().to_list()}
    compared = renamed.with_columns(_value=pl.col("typed").replace_strict(same, default=pl.col("typed"),
                                                                            return_dtype=pl.String))
    # (a repr of Python objects, "<...EarlyStopping object at 0x7f...>", "<Logger __main__ (INFO)>", is not a value
    # to compare with another)
    disagree = (
        compared.group_by("run", "attempt", "key")
        .agg(n=pl.col("_value").n_unique(), objects=pl.col("typed").str.contains(r' object at 0x|^"<.*>"$').any())
        .filter((pl.col("n") > 1) & ~pl.col("objects")).sort("run", "attempt", "key")
    )
    for run, attempt, key, _, _ in disagree.iter_rows():
        rows = compared.filter((pl.col("run") == run) & (pl.col("attempt") == attempt) & (pl.col("key") == key))
        seen: dict[str, tuple[str, list[str]]] = {}
        for value, typed, source in rows.select("_value", "typed", "source").iter_rows():
            sources = seen.setdefault(value, (typed, []))[1]
            if source not in sources:
                sources.append(source)
        warnings.append(f"{run}, attempt {attempt}: config {key} differs between sources: "
                        + ", ".join(f"{shown} ({', '.join(sources)})" for shown, sources in seen.values())
                        + "; the first is used")
    return first.drop("_order", "raw_key").select(configs.columns), warnings


def _comparable(typed: str | None) -> str | None:
    """A typed (JSON) config value as compared between sources: numbers and booleans as floats, the same written as
    text ("1", "false") too, and a list of numbers as the comma-joined text a YAML or hparams plugin writes of it.

    >>> [_comparable(v) for v in ("1000", "1000.0", "false", "0.0", "0.5", '"x"', None, "1" + "0" * 400)][:7]
    ['1000', '1000', '0', '0', '0.5', '"x"', None]
    >>> [_comparable(v) for v in ('"1"', '"False"', "[1, 0]", '"1,0"', '"[1, 0]"', '"1,000"')]
    ['1', '0', '1,0', '1,0', '1,0', '1000']
    """
    if typed is None:
        return None
    try:
        value = json.loads(typed)
    except ValueError:
        return typed
    if isinstance(value, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        return ",".join(_comparable(json.dumps(v)) or "" for v in value)
    if isinstance(value, str):
        text = value.strip().strip("[]").replace(" ", "")
        if text.lower() in ("true", "false"):
            return str(int(text.lower() == "true"))
        if re.fullmatch(r"\d{1,3}(?:,\d{3})+", text):  # a thousands separator: "1,000" is 1000, not [1, 0]
            text = text.replace(",", "")
        try:
            number = float(text)
        except ValueError:
            parts = text.split(",")
            numeric = len(parts) > 1 and all(_is_number(p) for p in parts)
            return ",".join(_comparable(json.dumps(float(p))) or "" for p in parts) if numeric else typed
        return _comparable(json.dumps(number)) if math.isfinite(number) else typed
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    return typed


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _split_betas(rows: pl.DataFrame) -> pl.DataFrame:
    out = []
    for row in rows.iter_rows(named=True):
        try:
            values = json.loads(row["typed"]) if row["typed"] is not None else None
        except ValueError:
            values = None
        if isinstance(values, list) and len(values) == 2:
            for i, v in enumerate(values):
                out.append({**row, "key": f"adam_beta{i + 1}", "value": str(v), "typed": json.dumps(v)})
        else:
            out.append(row)
    return pl.DataFrame(out, schema=rows.schema)
