"""MosaicML Composer's console (``ConsoleLogger``: the trainer of llm-foundry, LLM-Shearing and many others): each
logged batch is a header ``[batch=12/500]:`` (``[epoch=1][batch=5/5]:`` when the run's length is in epochs: its
batch is then the one within the epoch, of the epoch's batches), then one line per metric, ``\\t Train
loss/train/total: 8.4213``; an evaluation prints ``[Eval batch=3/3] Eval on eval data:`` then ``\\t Eval
metrics/eval/LanguageCrossEntropy: 3.21``. A multi-node launcher may put the rank in front (``0: [batch=1/300]:``); a
program's own print may run into a header (``device='cuda:0')[batch=1/40]:``).

The header's count is the batches done (``Train time/batch``, logged as the batch began, is one less: the step of
a run planned in tokens or samples, whose header counts those); ``/500`` is the run's planned length in batches (its
``max_duration``). Read: the loss (``loss/train/total``), the grad norm (the
``OptimizerMonitor`` callback's ``l2_norm/grad/global``, older ``l2_norm/grad_global``: computed at the batch's end
from the gradients the optimizer stepped with, after any clipping), the LR of the first parameter group
(``lr-DecoupledAdamW/group0``, where it is 0.001 or more: four decimals leave a smaller one a digit at most, too
few to follow a schedule), the samples per second and the tokens per second of one device, and the evaluation's
cross-entropy and perplexity, at the step of the training block printed before them (the batch the evaluation ran
after, where the console logs the batches the evaluation interval falls on). Every value is printed to four decimals
(``format_log_data_value``).

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> log = read(Path("tests/fixtures/real/composer/Helios113+dyna__profile"), ReadContext("profile", "r"))[0].log
>>> log.metrics.filter(metric="loss").select("step", "value").rows()
[(1, 0.0053), (10, 0.0053), (20, 0.0051)]
"""

from __future__ import annotations

import re

import polars as pl

from parsers import schema as s
from parsers.console.engine import NUMBER, PLANNED_STEPS, LineFormat, Rule

_RANK = r"(?:\d+:\s*)?"  # a launcher's rank label ("0: ")
_HEADER = r"\[(?:epoch=(\d+)\]\[)?batch=(\d+)/(\d+)\]:"
# the optimizers whose LR Composer's LRMonitor names "lr-<class>/group0" (Composer's own and llm-foundry's)
_OPTIMIZERS = ("DecoupledAdamW", "DecoupledSGDW", "AdamW", "Adam", "SGD", "DecoupledLionW", "DecoupledClipLion",
               "DecoupledAdaLRLion", "DecoupledLionW_8bit")


def _step(text: pl.Expr) -> pl.Expr:
    """The batches done: ``[batch=12/500]`` is 12, ``[epoch=3][batch=10/735]`` is 2 x 735 + 10 (epochs count from 1;
    each of the epoch's batch count)."""
    def part(n: int) -> pl.Expr:
        return text.str.extract(_HEADER, n).cast(pl.Int64, strict=False)

    return pl.when(part(1).is_null()).then(part(2)).otherwise((part(1) - 1) * part(3) + part(2))


def _batches_before(text: pl.Expr) -> pl.Expr:
    """``Train time/batch: 9`` (older: ``Train trainer/global_step: 9``), logged as the batch began: the block is the
    10th batch's (what its header counts, where it counts batches)."""
    return text.str.extract(r"(?:time/batch|trainer/global_step):\s*(\d+)\s*$", 1).cast(pl.Int64, strict=False) + 1


def mpt_shape(config: dict) -> dict:
    """The shape settings, in Megatron's names, that an llm-foundry config of an MPT model (``model.name:
    mpt_causal_lm``) implies with llm-foundry's defaults (``MPTConfig``): the FFN is ``expansion_ratio`` (4) x
    d_model wide; multi-query attention has one key-value head, grouped-query ``attn_config.kv_n_heads``; positions
    are learned over ``max_seq_len`` unless ALiBi or RoPE replace them (``learned_pos_emb``); ``no_bias`` drops every
    bias; ``norm_type: rmsnorm`` is RMSNorm. Nothing for another model.

    >>> mpt_shape({"model": {"name": "mpt_causal_lm", "d_model": 1024, "max_seq_len": 32768,
    ...            "attn_config": {"attn_type": "multiquery_attention"}}})  # doctest: +NORMALIZE_WHITESPACE
    {'ffn_hidden_size': 4096, 'multi_query_attention': True, 'num_query_groups': 1, 'max_position_embeddings': 32768}
    """
    model = config.get("model")
    if not isinstance(model, dict) or model.get("name") != "mpt_causal_lm":
        return {}
    attn = model.get("attn_config") if isinstance(model.get("attn_config"), dict) else {}
    ffn = model.get("ffn_config") if isinstance(model.get("ffn_config"), dict) else {}
    implied: dict = {}
    d_model, ratio = model.get("d_model", 2048), model.get("expansion_ratio", 4)
    if "ffn_hidden_size" in ffn:
        implied["ffn_hidden_size"] = ffn["ffn_hidden_size"]
    elif isinstance(d_model, int) and isinstance(ratio, (int, float)) and not isinstance(ratio, bool):
        implied["ffn_hidden_size"] = int(d_model * ratio)
    kind = attn.get("attn_type", "multihead_attention")
    if kind == "multiquery_attention":
        implied |= {"multi_query_attention": True, "num_query_groups": 1}
    elif kind == "grouped_query_attention" and isinstance(attn.get("kv_n_heads"), int):
        implied |= {"group_query_attention": True, "num_query_groups": attn["kv_n_heads"]}
    if attn.get("alibi"):
        implied["position_embedding_type"] = "alibi"
    elif attn.get("rope"):
        implied["position_embedding_type"] = "rope"
    elif model.get("learned_pos_emb", True) is False:
        implied["position_embedding_type"] = "none"
    elif isinstance(model.get("max_seq_len", 2048), int):
        implied["max_position_embeddings"] = model.get("max_seq_len", 2048)
    if model.get("no_bias"):
        implied["add_bias_linear"] = False
    if str(model.get("norm_type", "")).lower().endswith("rmsnorm"):
        implied["normalization"] = "RMSNorm"
    return implied


def _metric(prefix: str, names: str, metric: str) -> Rule:
    """One metric's line: ``\\t Train <name>: <value>`` (``prefix`` Train or Eval), its step the header's before it.
    (Not anchored at the line's start: a regex that begins with its words is searched for them, a third faster.)"""
    return Rule(rf"(?:^|\s){prefix} (?:{names}):\s", {metric: rf":\s*({NUMBER})\s*$"}, step=False, per_step=False)


SPEC = LineFormat(
    FORMAT="composer",
    detect=re.compile(rb"\[(?:epoch=\d+\]\[)?(?:batch|token|sample|iteration|duration|second)=\d+/\d+\]:[ \t]*\r?\n"
                      rb"(?:\d+:)?\s+Train [^\n:]+: "),
    rules=(
        # (a header of a run planned in epochs has no planned length of its own: its "/5" is the epoch's batches)
        Rule(r"\[(?:epoch=\d+\]\[)?batch=\d+/\d+\]:", {PLANNED_STEPS: r"(?:^|[^\]])\[batch=\d+/(\d+)\]:"},
             step_of=_step),
        # the batches before the block, plus one: its step where the header counts no batches ("[token=N/T]:")
        Rule(r"(?:^|\s)Train (?:time/batch|trainer/global_step):\s*\d+\s*$", {}, per_step=False,
             step_of=_batches_before),
        _metric("Train", r"loss/train/total|loss/train", s.LOSS),
        _metric("Train", r"l2_norm/grad/global|l2_norm/grad_global", s.GRAD_NORM),
        _metric("Train", "|".join(f"lr-{name}/group0" for name in _OPTIMIZERS), s.LR),
        _metric("Train", r"throughput/samples_per_sec", s.SAMPLES_PER_SECOND),
        _metric("Train", r"throughput/device/tokens_per_sec", s.TOKENS_PER_GPU_PER_SECOND),
        _metric("Eval", r"metrics/eval/LanguageCrossEntropy", s.VAL_LOSS),
        _metric("Eval", r"metrics/eval/LanguagePerplexity", s.VAL_PPL),
        # every other metric line of a block: read for its name only (printed, below)
        Rule(rf"^\s*{_RANK}(?:Train|Eval) [^:\s][^:]*:\s", {}, step=False, per_step=False),
    ),
    events=(
        # a launch: the Trainer names its run first ("INFO: composer.trainer.trainer: Run name: interactive-il0GeA",
        # "[composer.trainer.trainer][INFO] - Run name: 1754470968-umber-owl"), before it loads a checkpoint; the
        # hyperparameters it prints as training begins ("composer_version: 0.21.3" in its "Config:" block);
        # llm-foundry's "INFO: __main__: Starting training..."
        (s.EV_STARTUP, r"\bcomposer\.trainer\.trainer\b.*\bRun name: \S"),
        (s.EV_STARTUP, r"^\W*composer_version: \S"),
        (s.EV_STARTUP, r"\bINFO: [\w.]+: Starting training\.\.\.\s*$"),
        # the Trainer's own words (composer/trainer/trainer.py, composer/callbacks/checkpoint_saver.py): "Loading
        # checkpoint from ./ckpt/ep0-ba2000-rank0.pt" (an autoresume too, after "Autoresuming training from
        # checkpoint"), "No previous autoresume checkpoint found"; its save is said at DEBUG only ("Checkpoint locally
        # saved to ./ckpt/ep0-ba2000-rank0.pt"); the step from its default name's "ba2000", where it has one
        (s.EV_CHECKPOINT_LOAD, r"\bLoading checkpoint from \S*?\bba(\d+)\b"),
        (s.EV_CHECKPOINT_LOAD, r"\bLoading checkpoint from \S"),
        (s.EV_NO_CHECKPOINT, r"\bNo previous autoresume checkpoint found\b"),
        (s.EV_CHECKPOINT_SAVE, r"\bCheckpoint locally saved to \S*?\bba(\d+)\b"),
        (s.EV_CHECKPOINT_SAVE, r"\bCheckpoint locally saved to \S"),
        # the Trainer's SIGTERM handler (composer/core/engine.py: "sys.exit(128 + signal)") ends its traceback with
        # "SystemExit: 143": it was asked to stop
        (s.EV_SIGTERM, r"^\W*SystemExit: 143\s*$"),
        # llm-foundry's count of the model's parameters, in the config it logs ("n_params: 95761536")
        (s.EV_PARAMETER_COUNT, r"^n_params: (\d+)\s*$"),
    ),
    # the ConsoleLogger's hyperparameters as training begins (llm-foundry's whole run config: its model's d_model,
    # n_layers, n_heads, the optimizer's lr and betas, max_seq_len, ...): "*" * 30, "Config:", the YAML, "*" * 30
    config_block=(r"^Config:\s*$", r"^\*{30}\s*$"),
    config_implies=mpt_shape,
    note="Composer prints every value to four decimal places",
    read_notes=((s.GRAD_NORM, "its grad norm (the OptimizerMonitor's l2_norm/grad/global) is taken after the "
                              "optimizer step, from the gradients as any clipping left them: under gradient clipping "
                              "it stays at or below the threshold, and a spike above it does not show"),),
    # (an LR printed "0.0001" is anything from 5e-05 to 1.5e-04: a warm-up to 3e-04 shows as 0.0000, 0.0001, ...,
    # a flat line where the LR rose)
    coarse=((s.LR, 0.001, "four decimal places leave an LR under 0.001 one significant digit at most (0.0001 is "
                          "anything from 5e-05 to 1.5e-04, 0.0000 anything under 5e-05), too few to follow its "
                          "schedule"),),
    # a run whose length is in tokens or samples counts those in its header, not batches: its blocks' steps are
    # their "Train time/batch" lines' (above)
    unread=((r"(?:^|[^\w\s])\s*\[(?P<name>token|sample|iteration|duration|second)=\d+/\d+\]:\s*$",
             "of headers counting tokens, samples or time, not batches (a run planned in those; the steps are its "
             "blocks' time/batch + 1)"),),
    # the name of every metric line (Composer prints one a line: memory/..., time/..., metrics/train/...,
    # l2_norm/grad/<layer>): those not read are said to be not read
    printed=(rf"^\s*{_RANK}(?:Train|Eval) ([^:\s][^:]*):\s",
             frozenset({"loss/train/total", "loss/train", "l2_norm/grad/global", "l2_norm/grad_global", "time/batch",
                        "trainer/global_step",
                        "throughput/samples_per_sec", "throughput/device/tokens_per_sec",
                        "metrics/eval/LanguageCrossEntropy", "metrics/eval/LanguagePerplexity",
                        *(f"lr-{name}/group0" for name in _OPTIMIZERS)})),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
