"""Per-attempt configuration tables and the differences between attempts of a run and between runs.

Config keys are already canonical (see :mod:`parsers.config_names`); values are typed (JSON in the frame).
"""

from __future__ import annotations

import json
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
    """The keys that configure training: no bookkeeping, no W&B summary values or run-table columns."""
    return {
        k: v for k, v in config.items()
        if k not in BOOKKEEPING_KEYS and not k.startswith((s.SUMMARY_PREFIX, s.RUN_INFO_PREFIX))
    }


def config_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """``{key: [old, new]}`` for every setting both hold with different values, keys sorted. A setting only one of
    them holds is not a change: the other's was not read (a garbled line) or its program had no such setting.

    >>> config_changes({"seed": 42, "save": "/a", "fp16": True}, {"seed": 43, "save": "/b", "bf16": True})
    {'seed': [42, 43]}
    """
    before, after = settings(before), settings(after)
    keys = sorted(set(before) & set(after))
    return {k: [before[k], after[k]] for k in keys if before[k] != after[k]}


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
        if len({json.dumps(v, sort_keys=True, default=str) for v in values.values()}) > 1:
            out[key] = values
    return out


def diff_from(baseline: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """The settings of ``other`` that differ from ``baseline``: ``{key: other's value}`` (None when missing)."""
    return {k: new for k, (_, new) in config_changes(baseline, other).items()}
