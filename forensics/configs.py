"""Per-attempt configuration tables and the differences between attempts of a run and between runs.

Config keys are already canonical (see :mod:`parsers.config_names`); values are typed (JSON in the frame).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import polars as pl

from forensics.findings import shown
from parsers import schema as s

# keys that differ on every restart without changing the training: paths, timestamps, counters, ranks
BOOKKEEPING_KEYS: frozenset[str] = frozenset({
    "load", "save", "tensorboard_dir", "wandb_save_dir", "log_path", "data_cache_path", "iteration",
    "consumed_train_samples", "consumed_valid_samples", "curr_iteration", "rank", "local_rank", "timestamp",
    "start_time", "run_id", "job_id", "master_addr", "master_port", "hostname", "logging_level",
    "deepspeed_config_dict", "wandb_name", "wandb_exp_name", "wandb_id", "name", "run_name", "exp_name",
    "out_dir", "output_dir", "checkpoint_dir", "logging_dir",
    # a trainer_state.json's progress, not its settings
    "epoch", "global_step", "total_flos", "num_input_tokens_seen", "best_metric", "best_model_checkpoint",
    "best_global_step", "is_hyper_param_search", "is_local_process_zero", "is_world_process_zero", "trial_name",
    "trial_params",
})

# keys a run has without logging a config: Megatron's parser reads train_iters off "iteration 10/3000"
INFERRED_KEYS: frozenset[str] = frozenset({"train_iters"})


def show_value(value: Any) -> str:
    """A config value as text: floats with every digit they were logged with, strings as they are, anything else as
    JSON.

    >>> show_value(1.2345678e-4), show_value(0.0008), show_value("cosine"), show_value(True)
    ('0.00012345678', '0.0008', 'cosine', 'true')
    """
    if isinstance(value, float):
        return shown(value)
    return value if isinstance(value, str) else json.dumps(value)


def config_table(configs: pl.DataFrame) -> dict[int, dict[str, Any]]:
    """Per attempt, the typed configuration (key -> value)."""
    table: dict[int, dict[str, Any]] = {}
    for attempt, key, typed in configs.select("attempt", "key", "typed").iter_rows():
        table.setdefault(int(attempt), {})[key] = json.loads(typed) if typed is not None else None
    return table


def settings(config: dict[str, Any]) -> dict[str, Any]:
    """The keys that configure training: no bookkeeping (folders, ids, a trainer_state.json's progress), no W&B summary
    values or run-table columns.

    >>> settings({"learning_rate": 2e-05, "epoch": 3.0, "global_step": 804, "total_flos": 1.2e17, "output_dir": "o"})
    {'learning_rate': 2e-05}
    """
    return {
        k: v for k, v in config.items()
        if k not in BOOKKEEPING_KEYS and not k.startswith((s.SUMMARY_PREFIX, s.RUN_INFO_PREFIX))
    }


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # "<...LearningRateMonitor object at 0x7f9b338ebf10>": a new one each run
# another rank's text printed over the end of a bool or number ("False****", "1.0.."): the value is what came before
_SMEARED = re.compile(r"^((?i:true|false)|[-+]?\d[\d.eE+-]*?)(?:\*{2,}|-{3,}|\.{2,}).*$", re.S)


def same_value(value: Any) -> Any:
    """A setting's value as compared between attempts and runs: booleans and whole floats as integers, numbers
    written as text as numbers, object addresses dropped from reprs, and the smear of other ranks' output that
    interleaved printing leaves at the end of a line cut off.

    >>> [same_value(v) for v in (0, 0.0, False, "false", "False-----", "1.0..", 3.0, "3e-4", "x")]
    [0, 0, 0, 0, 0, 1, 3, 0.0003, 'x']
    >>> same_value("[<LearningRateMonitor object at 0x7f9b338ebf10>]"), same_value("False**** Git info for Megatron")
    ('[<LearningRateMonitor object>]', 0)
    >>> same_value("../data/v1"), same_value("--flag---x")
    ('../data/v1', '--flag---x')
    """
    if isinstance(value, str):
        text = _SMEARED.sub(r"\1", _ADDRESS.sub("", value).strip())
        lowered = text.lower()
        if lowered in ("true", "false"):
            return int(lowered == "true")
        try:
            value = float(text)
        except ValueError:
            return text
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def config_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """``{key: [old, new]}`` for every setting both hold with different values, keys sorted. A setting only one of
    them holds is not a change: the other's was not read (a garbled line) or its program had no such setting.

    >>> config_changes({"seed": 42, "save": "/a", "fp16": True}, {"seed": 43, "save": "/b", "bf16": True})
    {'seed': [42, 43]}
    """
    before, after = settings(before), settings(after)
    keys = sorted(set(before) & set(after))
    return {k: [before[k], after[k]] for k in keys if _token(before[k]) != _token(after[k])
            and not _cut_prints([before[k], after[k]])}


def differing_keys(configs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Across named configs (attempts or runs), the settings whose values are not all the same:
    ``{key: {name: value}}``, keys sorted; a name without the key has None.

    >>> differing_keys({"a": {"lr": 1e-4, "seed": 1}, "b": {"lr": 3e-4, "seed": 1}})
    {'lr': {'a': 0.0001, 'b': 0.0003}}
    """
    kept = {name: settings(cfg) for name, cfg in configs.items()}
    keys = sorted(set().union(*kept.values())) if kept else []
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        values = {name: cfg.get(key) for name, cfg in kept.items()}
        if len({_token(v) for v in values.values()}) > 1 and not _cut_prints(list(values.values())):
            out[key] = values
    return out


_CUT_PRINT = 200  # characters: a value this long that another begins with is one print cut off at another length


def _cut_prints(values: list[Any]) -> bool:
    """Whether the values are one long value printed cut off at different lengths (a log that truncates its long
    lines: a list of 40 data paths ending '...fineweb-e' in one launch and '...fineweb-edu-dedup-160B-' in the
    next): every one a beginning of the longest, the shortest at least :data:`_CUT_PRINT` characters. Nothing can
    be said to have changed in what both show.

    >>> long = "['/data/" + "a" * 300
    >>> _cut_prints([long, long + "bc"]), _cut_prints(["['/a']", "['/a', '/b']"]), _cut_prints([long, None])
    (True, False, False)
    >>> _cut_prints([long + "'", long + "', '/data/b'"])  # a closed value with one more after it: a change
    False
    """
    if not all(isinstance(v, str) for v in values):
        return False
    longest, shortest = max(values, key=len), min(values, key=len)
    # (a value that ends as a whole one does, a list or a quoted string closed, was not cut: one appended to it is
    # a change)
    return len(shortest) >= _CUT_PRINT and not shortest.rstrip().endswith(("]", ")", "}", "'", '"')) \
        and all(longest.startswith(v) for v in values)


def _token(value: Any) -> str:
    return json.dumps(same_value(value), sort_keys=True, default=str)


def diff_from(baseline: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """The settings of ``other`` that differ from ``baseline``: ``{key: other's value}`` (None when missing)."""
    return {k: new for k, (_, new) in config_changes(baseline, other).items()}
