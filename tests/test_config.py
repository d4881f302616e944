"""Config forensics: key aliases, typed per-attempt tables, diffs between attempts and runs, schedule positions."""

from __future__ import annotations

import json

import polars as pl
import pytest

from parsers import schema as s
from parsers.config_names import canonical_configs, canonical_key


@pytest.mark.parametrize(("key", "canonical"), [
    ("learning_rate", "lr"), ("optimizer.lr", "lr"), ("optimizer.params.lr", "lr"), ("train/learning_rate", "lr"),
    ("optimizer.betas[1]", "adam_beta2"), ("optimizer.betas.0", "adam_beta1"), ("Adam-Beta2", "adam_beta2"),
    ("model/n_embd", "hidden_size"), ("n_layer", "num_layers"), ("intermediate_size", "ffn_hidden_size"),
    ("initializer_range", "init_method_std"), ("warmup_steps", "lr_warmup_iters"),
    ("num_key_value_heads", "num_key_value_heads"),
    ("data.lr", "data.lr"), ("my_custom_flag", "my_custom_flag"), ("summary/loss", "summary/loss"),
])
def test_config_keys_are_unified_to_megatron_argument_names(key: str, canonical: str) -> None:
    assert canonical_key(key) == canonical


def _configs(rows: list[tuple[str, int, str, object]]) -> pl.DataFrame:
    frame = pl.DataFrame(
        {"source": [r[0] for r in rows], "attempt": [r[1] for r in rows], "key": [r[2] for r in rows],
         "typed": [json.dumps(r[3]) for r in rows], "value": [str(r[3]) for r in rows]},
    ).with_columns(run=pl.lit("r"))
    return s.conform(frame, s.CONFIGS_SCHEMA)


def test_beta_lists_split_and_the_first_source_wins_with_a_warning() -> None:
    frame = _configs([
        ("train.log", 1, "lr", 6e-5), ("wandb", 1, "learning_rate", 3e-4), ("wandb", 1, "optimizer.betas", [0.9, 0.95]),
        ("wandb", 2, "learning_rate", 3e-4),
    ])
    out, warnings = canonical_configs(frame)
    table = {(a, k): json.loads(t) for a, k, t in out.select("attempt", "key", "typed").iter_rows()}
    assert table == {(1, "lr"): 6e-5, (1, "adam_beta1"): 0.9, (1, "adam_beta2"): 0.95, (2, "lr"): 3e-4}
    assert warnings == ["r, attempt 1: config lr differs between sources: 6e-05 (train.log), 0.0003 (wandb); "
                        "the first is used"]


def test_a_runs_table_without_history_is_one_summary_table_not_a_chronicle_per_run() -> None:
    from pathlib import Path

    import forensics
    import reports
    from parsers import load_runs

    table = Path(__file__).parent / "fixtures" / "real" / "wandb" / "Lucas-longxutang__Comp3242_Group_Project_nanoGPT"
    findings = forensics.analyze(*load_runs(table / "wandb_export.csv"))
    lines = reports.render(findings, "markdown").splitlines()
    assert not any(line.startswith("# Incident chronicle") for line in lines)
    assert lines[2].startswith("64 runs and no history in the export")
    header = lines[4]
    assert header.startswith("| run | state | runtime (s) | seed | activation\\_type |")
    g1 = next(line for line in lines if line.startswith("| G1\\_ternary\\_weights (seed=6242) |"))
    # every value as the export holds it: val/loss 1.4786324501037598, not a rounded 1.47863
    assert g1 == ("| G1\\_ternary\\_weights (seed=6242) | finished | 732 | 6242 | gelu | ternary | 10745088 | pre | "
                  "layernorm | train/loss=1.038091778755188, train/step\\_loss=1.124631643295288, "
                  "val/loss=1.4786324501037598, iter=5000 |")
    assert findings.runs[0].config["linear_type"] == "ternary"
