"""A Hugging Face model's ``config.json`` (``model_type``, ``architectures``, ``hidden_size``, ``num_hidden_layers``,
``vocab_size``, ...), as ``save_pretrained`` writes it into a Trainer's output directory and its ``checkpoint-N``
folders: the model's shape, read as config rows, so the chronicle can give its size. It holds no metric and no step.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/hf_output_dir/Silver-8ce_llamaTest/config.json")
>>> configs = read(path, ReadContext("config.json", "r"))[0].log.configs
>>> shape = dict(configs.select("key", "value").rows())
>>> shape["num_hidden_layers"], shape["hidden_size"], shape["vocab_size"]
('22', '2048', '32000')
"""

from __future__ import annotations

from pathlib import Path

from parsers import schema as s
from parsers.reader import NotThisFormat, Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import InputError, json_value, read_all
from parsers.wandb_history import config_frame

FORMAT = "hf-model-config"
_SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "n_layer", "num_layers", "d_model", "n_embd")
# what a model file holds beside its shape that is no training setting: the dtype it was stored in (not the precision
# it trained in), its cache switch, the library's version
_NOT_SETTINGS = {"torch_dtype", "use_cache", "transformers_version"}
# a shape the size from shape does not count (a dense decoder's): experts, an encoder and a decoder, nested models
_OTHER_SHAPES = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size", "is_encoder_decoder",
                 "num_decoder_layers", "text_config", "vision_config")


def sniff(head: bytes, name: str) -> bool:
    """A file named ``config.json`` that holds a JSON object naming a model type or its architectures."""
    return Path(name).name == "config.json" and head.lstrip().startswith(b"{") and (
        b'"model_type"' in head or b'"architectures"' in head)


def read(path: Path, context: ReadContext) -> list[Piece]:
    raw = read_all(path)
    try:
        values = json_value(raw)
    except ValueError as exc:
        raise InputError(f"{context.shown}: not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(values, dict) or not any(k in values for k in _SHAPE_KEYS):
        raise NotThisFormat(f"{context.shown}: a config.json that gives no model shape")
    if any(values.get(k) not in (None, False, 0, 1) for k in _OTHER_SHAPES):
        raise NotThisFormat(f"{context.shown}: a config.json of a shape not counted (experts, encoder-decoder, nested)")
    kept = {k: v for k, v in values.items() if isinstance(v, int | float | str | bool) and not k.startswith("_")
            and k not in _NOT_SETTINGS}
    configs = config_frame(kept, run=context.run, source=context.shown)
    return [Piece(path, FORMAT, ParsedLog(s.empty(s.METRICS_SCHEMA), s.empty(s.EVENTS_SCHEMA), configs),
                  config_only=True)]
