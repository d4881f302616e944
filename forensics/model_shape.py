"""The model's size from its shape, from the parameter counts the program printed, and from its name."""

from __future__ import annotations

import math
import re
from typing import Any

import polars as pl

from forensics.findings import ModelCheck
from parsers import schema as s

INIT_STD_FACTOR = 2.5  # an init std beyond 2.5x (or below 1/2.5 of) the small-init value is noted
# a size is its own token, bounded by non-alphanumerics: "tr8b-104B" states 104B (not 8B), "gpt2-1.3b" 1.3B; at
# most four digits before the point ("..._20260312_113029b" is a clock time, not a 113,029B model)
_SIZE_IN_NAME = re.compile(r"(?<![A-Za-z0-9.])(\d{1,4}(?:\.\d+)?)([BbMm])(?![A-Za-z0-9])")
# ... and not a count of something else: "fixed_tokens_10b" is a token budget
_COUNTS_OTHER = re.compile(r"(?i)(?:^|[^a-z])(?:tokens?|toks?|samples?|steps?|iters?|data)[-_ =]?$")
# ... nor one whose "_" may be a decimal point: "qwen1_5b" is Qwen 1.5B, "llama2_7b" Llama 2 7B; no telling which
_UNDERSCORE_POINT = re.compile(r"(?<![Vv])\d_$")  # (not a version: "run_v2_350m" is 350M)


def stated_parameters(*names: str) -> float | None:
    """A size written in a run's name or path: ``tr8-104B-wide`` -> 104e9, ``gpt-350m`` -> 350e6.

    >>> stated_parameters("tr8b-104B"), stated_parameters("bloom-1.3b"), stated_parameters("run7b1")
    (104000000000.0, 1300000000.0, None)
    >>> stated_parameters("power_lowfreq_20260312_113029b.log"), stated_parameters("gpt2-1558M")
    (None, 1558000000.0)
    >>> stated_parameters("fixed_tokens_10b"), stated_parameters("pythia-160m_tokens-300b")
    (None, 160000000.0)
    >>> stated_parameters("metadata-7b"), stated_parameters("qwen1_5b_opd"), stated_parameters("qwen-1.5b")
    (7000000000.0, None, 1500000000.0)
    >>> stated_parameters("qwen1_5b_opd", "/ckpt/Qwen-1.5B"), stated_parameters("run_v2_350m")
    (1500000000.0, 350000000.0)
    """
    for name in names:
        for part in reversed(re.split(r"[/\\]", name)):
            for found in _SIZE_IN_NAME.finditer(part):
                before = part[:found.start()]
                if _UNDERSCORE_POINT.search(before) and "." not in found.group(1):
                    continue  # (this match says no size; later matches, parts and names may)
                if not _COUNTS_OTHER.search(before):
                    return float(found.group(1)) * (1e9 if found.group(2) in "Bb" else 1e6)
    return None


def _int(cfg: dict[str, Any], key: str) -> int | None:
    """A size setting, or None when it is not a count a model could have (negative, NaN, 1e400, 400 digits).

    >>> [_int({"h": v}, "h") for v in (4096, 4096.0, -5, float("nan"), 10**400, True, "4096")]
    [4096, 4096, None, None, None, None, None]
    """
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if 0 <= value < 2**53 else None  # (NaN compares false)


# Hugging Face model types whose MLP is gated (SwiGLU or GeGLU), whatever their activation is called
GATED_MODEL_TYPES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
    "gemma3_text", "phi3", "chatglm", "glm", "glm4", "olmo2", "olmoe", "deepseek_v2", "deepseek_v3", "internlm2",
    "baichuan", "yi", "cohere", "granite",
})


def gated_mlp(cfg: dict[str, Any]) -> bool:
    """A GLU-style MLP (SwiGLU, GeGLU): three matrices, and an FFN width of ~8/3 hidden (LLaMA) up to 8x (Gemma)
    rather than 4x.

    >>> gated_mlp({"hidden_act": "silu"}), gated_mlp({"model_type": "gemma", "hidden_act": "gelu"}), gated_mlp({})
    (True, True, False)
    """
    return bool(
        cfg.get("swiglu") or cfg.get("glu_activation") or cfg.get("gated_linear_unit")
        or str(cfg.get("hidden_act", "")).lower() in {"silu", "swiglu"}
        or "hidden_activation" in cfg  # Gemma's key for its GeGLU's activation
        or str(cfg.get("model_type", "")).lower() in GATED_MODEL_TYPES
    )


def tied_embeddings(cfg: dict[str, Any]) -> bool:
    """Whether the output layer shares the word-embedding matrix (Megatron's default; HF ``tie_word_embeddings``)."""
    return not cfg.get("untie_embeddings_and_output_weights") and cfg.get("tie_word_embeddings") is not False


def parameters_from_shape(cfg: dict[str, Any], vocab: int | None) -> tuple[float | None, dict[str, Any]]:
    """Parameters of a Megatron GPT from its arguments (embeddings included when the vocabulary is known), counted
    as Megatron holds them: with pipeline parallelism the last stage keeps its own copy of tied word embeddings for
    the output layer, so they count twice (as in the program's own per-stage counts). ``shape`` carries the
    count of distinct parameters as ``parameters_unique``.

    Per layer: attention q/k/v/output (grouped-query aware) + MLP (two matrices, three for GLU variants) + biases
    and norms; plus word embeddings, learned position embeddings, the final norm and an untied output layer.

    >>> n, _ = parameters_from_shape({"num_layers": 32, "hidden_size": 16384, "ffn_hidden_size": 20480,
    ...     "num_attention_heads": 32, "max_position_embeddings": 2048, "pipeline_model_parallel_size": 32}, 50688)
    >>> round(n / 1e9, 2)
    57.53
    """
    h, layers = _int(cfg, "hidden_size"), _int(cfg, "num_layers")
    if not h or not layers:
        return None, {}
    heads = _int(cfg, "num_attention_heads") or 1
    ffn = _int(cfg, "ffn_hidden_size") or 4 * h
    glu = gated_mlp(cfg)
    kv_ch = _int(cfg, "kv_channels") or h // heads
    grouped = cfg.get("group_query_attention") or cfg.get("multi_query_attention")  # Megatron's, ChatGLM2's switch
    groups = (_int(cfg, "num_query_groups") if grouped else None) or _int(
        cfg, "num_key_value_heads") or heads
    # a Hugging Face config of a rotary model (Llama, Mistral, Qwen 2, Gemma, ...) says so by its rope and RMS-norm
    # keys: no learned positions, no bias unless it asks for one
    hf_rotary = any(k in cfg for k in ("rope_theta", "rope_scaling", "rotary_emb_base"))
    bias = (cfg.get("add_bias_linear", True) is not False if not hf_rotary
            else bool(cfg.get("attention_bias") or cfg.get("mlp_bias")))
    rms = str(cfg.get("normalization", "LayerNorm")).lower().startswith("rms") or "rms_norm_eps" in cfg
    q_width, kv_width = heads * kv_ch, groups * kv_ch
    attention = h * (q_width + 2 * kv_width) + q_width * h + (q_width + 2 * kv_width + h if bias else 0)
    mlp = (3 if glu else 2) * h * ffn + ((2 * ffn if glu else ffn) + h if bias else 0)
    norm = h if rms else 2 * h
    total = layers * (attention + mlp + 2 * norm) + norm
    positions = _int(cfg, "max_position_embeddings") or 0
    pos_type = str(cfg.get("position_embedding_type", "learned_absolute"))
    if (
        hf_rotary
        or cfg.get("use_rotary_position_embeddings")
        or cfg.get("add_position_embedding") is False
        or pos_type in {"rope", "alibi", "none"}
        # (GPT-J's and CodeGen's rotary_dim, GPT-NeoX's rotary_pct: rotary positions over part of each head, no table)
        or cfg.get("rotary_dim") or cfg.get("rotary_pct")
    ):
        positions = 0
    copies = 1
    if vocab:
        total += vocab * h + positions * h
        tied = tied_embeddings(cfg)
        if not tied:
            total += vocab * h
        elif (_int(cfg, "pipeline_model_parallel_size") or 1) > 1:
            copies = 2
    assumed = [] if _int(cfg, "ffn_hidden_size") else ["ffn_hidden_size = 4 x hidden_size"]  # said, never as read
    shape = {
        "num_layers": layers, "hidden_size": h, "ffn_hidden_size": ffn,
        "num_attention_heads": heads if _int(cfg, "num_attention_heads") else None, "assumed": assumed,
        "num_query_groups": groups if groups != heads else None,
        "kv_channels": kv_ch if kv_ch != h // heads else None, "vocab_size": vocab,
        "max_position_embeddings": positions or None, "gated_mlp": glu,
        "tied_embeddings": tied_embeddings(cfg), "parameters_unique": float(total),
    }
    return float(total + (copies - 1) * (vocab or 0) * h), shape


# what trainers log of their model's size
LOGGED_COUNT_KEYS = ("model/num_parameters", "num_parameters", "n_params", "model_params", "num_params",
                     "total_params", "n_parameters")


def logged_parameters(events: pl.DataFrame, cfg: dict[str, Any] | None = None) -> float | None:
    """The program's own count: a printed total if there is one, else the sum over model-parallel ranks, else a
    count the trainer logged with its config (the Hugging Face Trainer's ``model/num_parameters``)."""
    counts = events.filter(pl.col("kind").is_in([s.EV_PARAMETER_COUNT, s.EV_PARAMETER_COUNT_SUM])).drop_nulls("value")
    if counts.height == 0:
        logged = next((cfg[k] for k in LOGGED_COUNT_KEYS if isinstance((cfg or {}).get(k), (int, float))
                       and not isinstance(cfg[k], bool)), None)  # type: ignore[index]
        return float(logged) if logged else None
    totals = counts.filter(pl.col("kind") == s.EV_PARAMETER_COUNT)  # printed by the program, not summed here
    chosen = totals if totals.height else counts
    return float(chosen["value"][-1])


def logged_parameters_how(events: pl.DataFrame, cfg: dict[str, Any]) -> str:
    """How :func:`logged_parameters` got its count when the program printed no total: a sum over the ranks'
    counts, in which a word embedding tied across pipeline stages counts once per stage that holds it."""
    counts = events.filter(pl.col("kind").is_in([s.EV_PARAMETER_COUNT, s.EV_PARAMETER_COUNT_SUM])).drop_nulls("value")
    if counts.height == 0 or (counts["kind"] == s.EV_PARAMETER_COUNT).any():
        return ""
    last = counts.row(-1, named=True)
    ranks = events.filter(  # the rank count the reader put beside that sum
        (pl.col("kind") == s.EV_PARAMETER_COUNT_RANKS) & pl.col("source").eq_missing(last["source"])
        & pl.col("attempt").eq_missing(last["attempt"]) & pl.col("line").eq_missing(last["line"]))["value"]
    if ranks.len() == 0 or ranks[0] is None or ranks[0] <= 1:
        return ""
    how = f"summed over the counts of {int(ranks[0])} model-parallel ranks"
    if (_int(cfg, "pipeline_model_parallel_size") or 1) > 1 and tied_embeddings(cfg):
        how += "; the tied word embedding counts once in the first and once in the last pipeline stage"
    return how


def vocabulary(cfg: dict[str, Any], events: pl.DataFrame) -> int | None:
    """The vocabulary size: the padded size the program printed, else the config's ``padded_vocab_size`` or
    ``vocab_size``; None when unknown."""
    printed = events.get_column("value").filter(events.get_column("kind") == s.EV_PADDED_VOCAB).drop_nulls()
    return int(printed[-1]) if printed.len() else (
        _int(cfg, "padded_vocab_size") or _int(cfg, "vocab_size")
    )


DEFAULT_INIT_STD = 0.02  # Megatron's init_method_std and the Hugging Face initializer_range, when a config is silent


def init_spread(cfg: dict[str, Any]) -> float | None:
    """The spread of a freshly initialised model's logits, std x sqrt(hidden) (a unit-variance final hidden state times
    output weights of standard deviation std): its first loss is near ln(vocabulary) + spread^2 / 2. None without a
    hidden size, or with a std above 0.1; std is the config's, else :data:`DEFAULT_INIT_STD`.

    >>> round(init_spread({"hidden_size": 9216, "init_method_std": 0.02}), 3), init_spread({})
    (1.92, None)
    """
    hidden, std = _int(cfg, "hidden_size"), cfg.get("init_method_std", DEFAULT_INIT_STD)
    if not hidden or isinstance(std, bool) or not isinstance(std, (int, float)) or not 0 < std <= 0.1:
        return None  # (an init std that is no small-init value: nothing is assumed of the fresh model's loss)
    return float(std) * math.sqrt(hidden)


def check_model(
    cfg: dict[str, Any], events: pl.DataFrame, run_name: str, run_path: str
) -> ModelCheck:
    """Compare the three sizes and the shape's proportions; notes say what is off, in plain words."""
    vocab = vocabulary(cfg, events)
    from_shape, shape = parameters_from_shape(cfg, vocab)
    check = ModelCheck(
        parameters_from_shape=from_shape,
        parameters_logged=logged_parameters(events, cfg),
        parameters_logged_how=logged_parameters_how(events, cfg),
        parameters_stated=stated_parameters(run_name, run_path),
        shape=shape,
    )
    ffn_note = None
    if shape:
        h, ffn, heads = shape["hidden_size"], shape["ffn_hidden_size"], shape["num_attention_heads"] or 1
        expected = round(8 * h / 3) if shape["gated_mlp"] else 4 * h
        ratio = ffn / h
        low, high = (2.0, 8.5) if shape["gated_mlp"] else (3.0, 5.0)  # gated: LLaMA 2.7x, Qwen2.5 5.3x, Gemma 8x
        if not low <= ratio <= high and not shape["assumed"]:
            check.ffn_ratio = ratio
            ffn_note = f"ffn_hidden_size {ffn} is {ratio:.2f}x hidden (expected {expected})"
            check.notes.append(ffn_note)
        if h % heads:
            check.notes.append(f"hidden_size {h} is not divisible by num_attention_heads {heads}")
        if shape["num_query_groups"] and heads % shape["num_query_groups"]:
            check.notes.append(f"num_attention_heads {heads} is not divisible by {shape['num_query_groups']} "
                               "key-value groups")
        std = cfg.get("init_method_std")
        if isinstance(std, (int, float)) and not isinstance(std, bool) and std > 0:
            small = math.sqrt(2 / (5 * h))
            if not 1 / INIT_STD_FACTOR <= std / small <= INIT_STD_FACTOR:
                check.notes.append(
                    f"init_method_std {std:g} is {std / small:.1f}x the small-init value sqrt(2/(5·hidden)) = "
                    f"{small:.2g} for hidden {h}"
                )
        if vocab is None:
            check.caveats.append("vocabulary size unknown: embeddings left out of the count from shape")
    experts = _experts(cfg)
    if experts > 1:
        parallel = _int(cfg, "moe_expert_parallel_size") or _int(cfg, "expert_model_parallel_size") or 1
        check.caveats.append(
            f"a mixture of experts ({experts} experts" + (f", {parallel}-way expert parallel" if parallel > 1 else "")
            + "): the count from its shape is the dense model without the experts"
            + (", and a count printed per model-parallel rank holds only that rank's experts" if parallel > 1 else ""))
    check.parameters_non_embedding = non_embedding_parameters(shape)
    if from_shape and check.parameters_stated and experts == 1:  # (a MoE's shape count leaves its experts out)
        ratio = check.size_ratio = from_shape / check.parameters_stated
        if check.parameters_non_embedding:
            check.size_ratio_non_embedding = check.parameters_non_embedding / check.parameters_stated
        # the name is the total or (Gemma's "2B", Qwen's non-embedding counts) the count without the embeddings:
        # whichever is within 25% of it, the nearer if both are
        within = check.sizes_within()
        if within:
            check.name_matches = min(within, key=lambda basis: abs(math.log(within[basis])))
        if check.size_mismatch:
            headline = f"this is a ~{size_label(from_shape)} model, not {size_label(check.parameters_stated)}"
            if ffn_note:
                check.notes.remove(ffn_note)
                headline += f": {ffn_note}"
            else:
                headline += f" (computed from its shape: {ratio:.2f}x the size in its name)"
            check.notes.insert(0, headline)
            check.size_headline = headline
    return check


def non_embedding_parameters(shape: dict[str, Any]) -> float | None:
    """The distinct parameters outside the word embedding, an untied output layer and learned position embeddings
    (the count Gemma and Qwen name their models by); None when the vocabulary is unknown.

    >>> round(non_embedding_parameters({"parameters_unique": 2614341888.0, "vocab_size": 256000, "hidden_size": 2304,
    ...     "tied_embeddings": True, "max_position_embeddings": None}) / 1e9, 3)
    2.025
    """
    vocab, h, unique = shape.get("vocab_size"), shape.get("hidden_size"), shape.get("parameters_unique")
    if not vocab or not h or not unique:
        return None
    embedding = vocab * h * (1 if shape.get("tied_embeddings") else 2) + (shape.get("max_position_embeddings") or 0) * h
    return float(unique - embedding)


def _experts(cfg: dict[str, Any]) -> int:
    """The number of experts of a mixture-of-experts model (Megatron-DeepSpeed prints ``num_experts [64]``, one per
    MoE layer group), 1 for a dense one.

    >>> _experts({"num_experts": [64]}), _experts({"num_moe_experts": 8}), _experts({})
    (64, 8, 1)
    """
    for key in ("num_experts", "num_moe_experts", "moe_num_experts", "num_local_experts"):
        value = cfg.get(key)
        values = value if isinstance(value, list) else [value]
        numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if numbers:
            return max(numbers)
    return 1


def size_label(n: float) -> str:
    """A model size as people say it.

    >>> size_label(125_262_336), size_label(1.3158e9), size_label(6.7e10), size_label(6.71e6), size_label(4.2e5)
    ('125M', '1.3B', '67B', '6.7M', '420k')
    """
    if n >= 1e9:
        return f"{n / 1e9:.0f}B" if n >= 1e10 else f"{n / 1e9:.1f}B"
    if n >= 1e6:
        return f"{n / 1e6:.0f}M" if n >= 1e7 else f"{n / 1e6:.1f}M"
    return f"{n / 1e3:.0f}k" if n >= 1e3 else f"{n:.0f}"
