"""W&B exports: real UI/API CSVs, offline ``.wandb`` logs written by two client generations, and damaged inputs."""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
from pathlib import Path

import polars as pl
import pytest
from protowire import field, varint

import forensics
from parsers import InputError, load_run, load_runs
from parsers.schema import STEP_AXIS
from parsers.wandb_csv import split_series
from parsers.wandb_history import metric_names

HERE = Path(__file__).parent
REAL = HERE / "fixtures" / "real" / "wandb"
OFFLINE = HERE / "fixtures" / "wandb"
LAURA = REAL / "LauraWenderoth__Bachelorarbeit_Kidney_Stain_Transfer"
LUCAS = REAL / "Lucas-longxutang__Comp3242_Group_Project_nanoGPT"
SPIKE_031 = OFFLINE / "v0.31.0" / "wandb" / "offline-run-20261129_180309-fxspike01"


def value_at(run, metric: str, step: int, attempt: int = 1) -> float:
    rows = run.metrics.filter(metric=metric, step=step, attempt=attempt)
    assert rows.height == 1, rows
    return rows["value"][0]


# --- offline .wandb logs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["v0.16.6", "v0.31.0"])
def test_offline_runs_from_both_client_generations(version: str) -> None:
    runs = {r.name: r for r in load_runs(OFFLINE / version / "wandb")}
    assert sorted(runs) == ["clean-run", "spiky-run"]
    spiky = runs["spiky-run"]
    assert spiky.attempts == [1, 2]  # the resume of the same run id wrote a second run directory
    assert value_at(spiky, "loss", 150) == 9.0
    assert value_at(spiky, "grad_norm", 150) == 40.0
    assert math.isnan(value_at(spiky, "loss", 260))           # NaN kept, not dropped
    assert value_at(spiky, "grad_norm", 270) == math.inf      # +Inf kept
    assert spiky.metrics.filter(metric="loss", attempt=1).height == 300
    assert spiky.metrics.filter(metric="loss", attempt=2)["step"].to_list() == list(range(40))
    assert spiky.metrics.filter(metric="val_loss").height == 6
    assert value_at(spiky, "eval.ppl", 0) == pytest.approx(math.exp(2.0 + 8.0 * 10 ** -0.5))  # nested dict leaf
    keys = dict(spiky.configs.filter(attempt=1).select("key", "typed").iter_rows())
    assert keys["hidden_size"] == "256" and keys["optimizer"] == '"adamw"'
    assert keys["summary/best_val"] == "2.41"
    events = spiky.events.select("attempt", "kind", "text").rows()
    assert (1, "exit_code", "W&B run exited with code 1") in events  # evidence only when nothing printed says more
    assert [k for a, k, _ in events if k == "wandb_run_start"] == ["wandb_run_start"] * 2


def test_both_client_generations_give_the_same_frames() -> None:
    def frame(version: str) -> pl.DataFrame:
        run = next(r for r in load_runs(OFFLINE / version / "wandb") if r.name == "spiky-run")
        return run.metrics.select("attempt", "step", pl.col("metric").cast(pl.String), "value").sort(
            "attempt", "metric", "step"
        )

    assert frame("v0.16.6").equals(frame("v0.31.0"))


def test_offline_run_analysis() -> None:
    findings = forensics.analyze(*load_runs(OFFLINE / "v0.31.0" / "wandb"))
    spiky, clean = sorted(findings.runs, key=lambda r: r.name, reverse=True)
    kinds = {(a.kind, a.step) for a in spiky.anomalies}
    assert {("loss_spike", 150), ("grad_norm_spike", 150), ("nan", 260)} <= kinds
    assert spiky.attempts[1].config_changes == {"lr": [0.0003, 0.00015], "seed": [1234, 99]}
    assert spiky.attempts[0].end_reason == "crashed"
    assert clean.anomalies == [] and clean.attempts[0].end_reason == "completed"


def test_truncated_wandb_log_keeps_everything_before_the_cut() -> None:
    run = load_run(OFFLINE / "truncated")
    assert run.warnings == [
        "offline-run-20261129_180309-fxspike01/run-fxspike01.wandb: partial last record at byte 69834 "
        "(the run was cut off or still writing)",
        # its wandb-summary.json was written at the end: the cut lost the last row
        "offline-run-20261129_180309-fxspike01/run-fxspike01.wandb: its history ends at step 156, but the run's "
        "summary says it reached step 157: the rest of its history is not in the file (cut, or copied while the run "
        "was writing it)",
    ]
    loss = run.metrics.filter(metric="loss")
    assert loss["step"].to_list() == list(range(157))
    assert value_at(run, "loss", 150) == 9.0


def test_corrupt_block_is_skipped_and_later_blocks_kept(tmp_path: Path) -> None:
    data = bytearray((SPIKE_031 / "run-fxspike01.wandb").read_bytes())
    data[40000] ^= 0xFF  # inside the second 32 KiB block
    (tmp_path / "run-fxspike01.wandb").write_bytes(bytes(data))
    run = load_run(tmp_path / "run-fxspike01.wandb")
    assert len(run.warnings) == 1 and "bad CRC at byte" in run.warnings[0]
    assert "skipped the rest of that 32 KiB block" in run.warnings[0]
    steps = run.metrics.filter(metric="loss")["step"].to_list()
    intact = load_run(SPIKE_031).metrics.filter(metric="loss")["step"].to_list()
    assert 0 < len(intact) - len(steps) < 60 and steps[-1] == 299 and steps[0] == 0


def test_not_a_wandb_log(tmp_path: Path) -> None:
    bad = tmp_path / "run-x.wandb"
    bad.write_bytes(b"hello, not a log\n")
    with pytest.raises(InputError, match=r"run-x\.wandb: not a W&B run log \(no ':W&B' header\)"):
        load_run(bad)


def test_config_yaml_and_console_log_of_an_online_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "wandb" / "run-20261129_180309-fxspike01"
    shutil.copytree(SPIKE_031, run_dir)
    (run_dir / "files").mkdir()
    (run_dir / "files" / "config.yaml").write_text(
        "wandb_version: 1\n\n_wandb:\n  desc: null\n  value:\n    cli_version: 0.16.6\n"
        "lr:\n  desc: null\n  value: 0.0003\nffn_hidden_size:\n  desc: null\n  value: 20480\n"
    )
    (run_dir / "files" / "wandb-summary.json").write_text('{"train/loss": NaN, "_wandb": {"runtime": 3}}')
    megatron = HERE / "fixtures" / "real" / "megatron" / (
        "stark-sim+megatron-deepspeed-lock-clock__logs_qwen7b_baseline_500.log")
    shutil.copy(megatron, run_dir / "files" / "output.log")
    run = load_run(tmp_path)
    assert run.name == "spiky-run"
    assert {(s.path.split("/")[-1], s.format) for s in run.sources} >= {("run-fxspike01.wandb", "wandb"),
                                                                         ("output.log", "megatron")}
    typed = dict(run.configs.filter(source="wandb/run-20261129_180309-fxspike01/run-fxspike01.wandb")
                 .select("key", "typed").iter_rows())
    assert typed["summary/train/loss"] == "NaN"
    assert not any(k.startswith("_wandb") for k in typed)
    # one value per key: the Megatron args block of output.log (read first) wins, and the disagreement is reported
    ffn = run.configs.filter(key="ffn_hidden_size")
    assert ffn["typed"].to_list() == ["18944"] and ffn["source"][0].endswith("output.log")
    assert any("config ffn_hidden_size differs between sources: 18944" in w and "20480" in w for w in run.warnings)


def test_unsafe_yaml_runs_nothing_and_the_history_is_still_read(tmp_path: Path) -> None:
    """A Python tag in YAML is read as the plain data under it (a tokenizer Lightning saved in hparams.yaml costs
    nothing but itself): os.system is never called."""
    run_dir = tmp_path / "offline-run-x"
    shutil.copytree(SPIKE_031, run_dir)
    (run_dir / "files").mkdir()
    marker = tmp_path / "ran"
    (run_dir / "files" / "config.yaml").write_text(
        f"wandb_version: 1\nx: !!python/object/apply:os.system ['touch {marker}']\n")
    run = load_run(run_dir)
    assert run.metrics.filter(metric="loss").height > 0
    assert not marker.exists()
    assert dict(run.configs.select("key", "typed").iter_rows())["x"] == f'["touch {marker}"]'


# --- UI chart exports -----------------------------------------------------------------------------------------------
def test_chart_export_with_three_runs() -> None:
    runs = load_runs(LAURA / "graphics")
    assert [r.name for r in runs] == ["cycle_val_975", "cycle_val_65", "cycle_val_0"]
    first = runs[0]
    assert first.metrics.height == 200 and first.metrics["metric"].unique().to_list() == ["test SSMI_B mean"]
    assert value_at(first, "test SSMI_B mean", 105) == 0.03921817573774992
    assert first.metrics["step"].min() == 105 and first.metrics["step"].max() == 21199
    assert [s.format for s in first.sources] == ["wandb-chart"] and not first.sources[0].sampled
    assert not any("sampled" in w for w in first.warnings)  # 200 points at a regular 106-step spacing
    # its x-axis is W&B's 'Step': the count of log calls unless the run passed its own step; the report says so
    assert any(w.endswith(": steps are the export's 'Step' column, W&B's count of log calls (one per wandb.log unless "
                          "the run passed its own step), not necessarily training iterations: a run that logs every N "
                          "iterations shows N iterations as one step") for w in first.warnings)


def test_renamed_chart_export_single_run() -> None:
    run = load_run(LAURA / "results_data" / "single_seed" / "test_pix2pix_PAS2IF_van_patches_seed_65 MAE.csv")
    assert run.name == "test_pix2pix_PAS2IF_van_patches_seed_65"
    assert value_at(run, "test MAE_B", 6) == 0.030185506014809852


def test_split_series_on_the_shared_metric() -> None:
    parts = split_series(["a - b - train/loss", "c - train/loss", "Group: x - y - train/loss"])
    assert parts == {"a - b - train/loss": ("a - b", "train/loss"), "c - train/loss": ("c", "train/loss"),
                     "Group: x - y - train/loss": ("Group: x - y", "train/loss")}


def _sampled_chart(path: Path, spike_in_max_only: bool) -> None:
    steps = sorted({int(i * 239.7 + (i * 7919) % 200) for i in range(500)})
    lines = ['"Step","Group: big - train/loss","Group: big - train/loss__MIN","Group: big - train/loss__MAX"']
    for i, step in enumerate(steps):
        mean = 3.0 + 5.0 * (step + 100) ** -0.5
        top = mean * 1.02
        if i == 300:
            top = mean * 4 if spike_in_max_only else top
        cell = "" if i == 10 else f"{mean}"
        lines.append(f'"{step}","{cell}","{mean * 0.98}","{top}"')
    path.write_text("\n".join(lines))  # no trailing newline, as the UI writes it


def test_sampled_chart_export_is_flagged_and_max_column_is_spike_evidence(tmp_path: Path) -> None:
    _sampled_chart(tmp_path / "loss_data.csv", spike_in_max_only=True)
    run = load_run(tmp_path / "loss_data.csv")
    assert run.name == "Group: big" and run.sources[0].sampled
    assert any(w.startswith(f"{tmp_path / 'loss_data.csv'} (Group: big): sampled chart export: 500 points over ") and
               "single-step spikes may be missing" in w for w in run.warnings)
    assert run.metrics.filter(metric="loss").height == 499  # the empty cell is "not logged"
    assert run.metrics.filter(metric="loss__max").height == 500
    findings = forensics.analyze(run).runs[0]
    spikes = [a for a in findings.anomalies if a.kind == "loss_spike"]
    assert len(spikes) == 1 and spikes[0].metric == "loss__max"
    assert "MAX column" in spikes[0].detail
    assert any("a grouped series: values are the group's mean" in w for w in run.warnings)


def test_chart_exports_of_the_same_runs_merge_per_series(tmp_path: Path) -> None:
    for metric, scale in (("train/loss", 1.0), ("train/grad_norm", 10.0)):
        header = ",".join(f'"{r} - {metric}","{r} - {metric}__MIN","{r} - {metric}__MAX"' for r in ("a", "b"))
        rows = [f'"{s}",' + ",".join([f'"{scale * (s + 1)}"'] * 6) for s in range(5)]
        (tmp_path / f"{metric.split('/')[1]}.csv").write_text("\n".join(['"Step",' + header, *rows]))
    runs = load_runs(tmp_path)
    assert [r.name for r in runs] == ["a", "b"]
    for run in runs:
        assert run.attempts == [1]
        assert sorted(run.metrics["metric"].cast(pl.String).unique()) == ["grad_norm", "loss"]
        assert value_at(run, "grad_norm", 4) == 50.0
        assert {s.path for s in run.sources} == {"grad_norm.csv", "loss.csv"}


@pytest.mark.parametrize(("key", "name"), [
    ("train/loss", "loss"), ("loss", "loss"), ("lm loss", "loss"), ("train/grad_norm", "grad_norm"),
    ("grad_norm", "grad_norm"), ("lr", "lr"), ("learning_rate", "lr"), ("train/lr", "lr"),
    ("loss_scale", "loss_scale"), ("val/loss", "val_loss"), ("train/global_grad_norm", "grad_norm"),
    ("train/step_loss", "train/step_loss"), ("dataset_stats.S100.gap_mean", "dataset_stats.S100.gap_mean"),
])
def test_wandb_keys_to_canonical_names(key: str, name: str) -> None:
    assert metric_names([key]) == {key: name}


def test_sampled_export_gives_way_to_a_full_resolution_source(tmp_path: Path) -> None:
    shutil.copytree(SPIKE_031, tmp_path / "wandb" / SPIKE_031.name)
    lines = ['"Step","spiky-run - train/loss","spiky-run - train/loss__MIN","spiky-run - train/loss__MAX"']
    lines += [f'"{s}","1.0","1.0","1.0"' for s in (0, 3, 10, 11, 50, 120, 121, 200, 290)]
    (tmp_path / "wandb_export.csv").write_text("\n".join(lines) + "\n")
    run = load_run(tmp_path)
    assert run.name == "spiky-run"
    assert value_at(run, "loss", 150) == 9.0 and value_at(run, "loss", 3) != 1.0
    assert "spiky-run: sampled W&B values of loss not used; a full-resolution source has them" in run.warnings


# --- runs tables --------------------------------------------------------------------------------------------------
def test_runs_table_rows_become_runs_with_config_and_summary() -> None:
    runs = {r.name: r for r in load_runs(LUCAS / "wandb_export.csv")}
    # 64 rows, 16 names each run with four seeds: seed replicates are runs of their own, not attempts of one run
    assert len(runs) == 64
    replicates = sorted(n for n in runs if n.startswith("G1_ternary_weights"))
    assert replicates == ["G1_ternary_weights (seed=2026)", "G1_ternary_weights (seed=3242)",
                          "G1_ternary_weights (seed=3740)", "G1_ternary_weights (seed=6242)"]
    g1 = runs["G1_ternary_weights (seed=6242)"]
    assert g1.attempts == [1]
    typed = dict(g1.configs.select("key", "typed").iter_rows())
    assert typed["lr"] == "0.001" and typed["bias"] == "false" and typed["n_params"] == "10745088"
    assert typed["summary/val/loss"] == "1.4786324501037598"   # summary starts where the alphabetical order restarts
    assert typed["wandb/State"] == '"finished"' and typed["wandb/Runtime"] == "732"
    assert "summary/weight_decay" not in typed and "weight_decay" in typed


def test_runs_table_kingb12() -> None:
    runs = load_runs(REAL / "kingb12__text_aug_experiments")
    assert [r.name for r in runs][:2] == ["bert_substitute_02", "bert_substitute_10"]
    typed = dict(runs[0].configs.select("key", "typed").iter_rows())
    assert typed["wandb/ID"] == '"3p0donj4"' and typed["wandb/Notes"] == '"test"'


# --- API history dumps --------------------------------------------------------------------------------------------
def test_api_history_csv_real() -> None:
    run = load_run(LUCAS / "history_data")
    # the run logs its own step, `iter` (0, 10, ... 5000); W&B's _step (0 ... 522) only counts log calls
    assert value_at(run, "loss", 0) == 4.239290237426758
    assert value_at(run, "train/step_loss", 10) == 3.1508336067199707  # unknown keys keep their own name
    assert value_at(run, "lr", 0) == 9.900990099009901e-06
    assert value_at(run, "val_loss", 5000) == 1.6883337497711182
    assert run.metrics["step"].max() == 5000 and run.sources[0].format == "wandb-history"
    assert {"source": "baseline_cpc0g0we_history.csv", "tag": "iter", "metric": STEP_AXIS} in run.tags
    # its empty cells are other log calls (the evaluation's rows at iter 0, 250, ... hold no train/step_loss): they
    # are not said to be NaNs, as every CSV history once was
    assert not any("pandas writes NaN" in w for w in run.warnings)


def test_empty_cells_in_a_row_that_logged_the_rest_may_be_nans(tmp_path: Path) -> None:
    """pandas' to_csv writes NaN as an empty cell: a row that logged lr and the step without its loss and grad norm
    is said, with the first step where it happens; an evaluation's row (other keys) is not, nor the rows without
    an evaluation logged at a few steps beside the loss."""
    rows = [f"{k},{k * 10},{3 - k / 100},1.5,1e-4," for k in range(8)]
    rows[5] = "5,50,,,1e-4,"
    rows[3] += "3.1"  # evaluations logged in the same call as a step: their key's other rows are not holes
    rows[6] += "3.0"
    rows.append("8,80,,,,2.9")
    (tmp_path / "h.csv").write_text("_step,iter,train/loss,train/grad_norm,lr,val/loss\n" + "\n".join(rows) + "\n")
    run = load_run(tmp_path / "h.csv")
    assert [w.removeprefix(str(tmp_path / "h.csv")) for w in run.warnings if "pandas" in w] == [
        ": train/loss is empty in 1 row that logged only keys logged with it (first at step 5); train/grad_norm is "
        "empty in 1 row that logged only keys logged with it (first at step 5); pandas writes NaN as an empty cell, "
        "so those may be NaNs, read as 'not logged'"]


def test_api_history_csv_unsorted_with_index_column(tmp_path: Path) -> None:
    (tmp_path / "h.csv").write_text(",_step,train/loss,train/grad_norm\n2,2,2.5,inf\n0,0,3.0,1.0\n1,1,,1.5\n")
    run = load_run(tmp_path / "h.csv")
    assert run.metrics.filter(metric="loss")["step"].to_list() == [0, 2]
    assert value_at(run, "grad_norm", 2) == math.inf
    assert set(run.metrics["metric"].cast(pl.String)) == {"loss", "grad_norm"}


@pytest.mark.parametrize("kind", ["json", "jsonl", "parquet"])
def test_api_history_json_jsonl_parquet(tmp_path: Path, kind: str) -> None:
    rows = [{"_step": s, "_timestamp": 1.7e9 + s, "train/loss": 2.0 + 1 / (s + 1), "lr": 1e-4} for s in range(20)]
    rows[5]["train/loss"] = float("nan")
    rows[6]["eval"] = {"acc": 0.5}
    del rows[7]["train/loss"]
    rows[8]["lr"] = float("-inf")
    path = tmp_path / f"history.{kind}"
    if kind == "json":
        path.write_text(json.dumps(rows))
    elif kind == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    else:
        pl.DataFrame(rows).write_parquet(path)
    run = load_run(path)
    loss = run.metrics.filter(metric="loss")
    assert loss.height == 19 and 7 not in loss["step"].to_list()  # not logged: no row
    assert math.isnan(value_at(run, "loss", 5))                    # NaN: a row with NaN
    assert value_at(run, "eval.acc", 6) == 0.5
    assert value_at(run, "lr", 8) == -math.inf
    assert run.metrics.filter(metric="loss", step=0)["wall_time"][0] == 1.7e9


def test_history_step_going_back_is_a_restart(tmp_path: Path) -> None:
    rows = [{"_step": s, "loss": 2.0} for s in (*range(10), *range(5, 12))]
    (tmp_path / "wandb-history.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    run = load_run(tmp_path / "wandb-history.jsonl")
    assert run.attempts == [1, 2]
    assert run.events.select("kind", "step", "text").row(0) == (
        "step_regression", 5, "step went back from 9 to 5: the run was restarted")


def test_sampled_api_dump_is_flagged(tmp_path: Path) -> None:
    steps = sorted({(i * i * 37) % 120000 for i in range(700)})[:500]
    (tmp_path / "metrics.csv").write_text("_step,loss\n" + "".join(f"{s},2.0\n" for s in steps))  # (as pandas ends it)
    run = load_run(tmp_path / "metrics.csv")
    assert run.sources[0].sampled
    span = steps[-1] - steps[0]
    expected = f"{tmp_path / 'metrics.csv'}: sampled history dump: 500 points over {span:,} steps; single-step spikes"
    assert expected + " may be missing" in " ".join(run.warnings)


# --- bad input ----------------------------------------------------------------------------------------------------
def test_chart_header_without_rows(tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_text('"Step","r - loss","r - loss__MIN","r - loss__MAX"')
    with pytest.raises(InputError, match=r"e\.csv: W&B chart export without any series"):
        load_run(tmp_path / "e.csv")


def test_broken_json_history(tmp_path: Path) -> None:
    """A JSON-lines history cut short keeps its sound lines (issue 18); one with no sound line is refused."""
    (tmp_path / "h.jsonl").write_text('{"_step": 0, "loss": 1.0}\n{"_step": 1, "loss": ')
    run = load_run(tmp_path / "h.jsonl")
    assert run.metrics.filter(metric="loss").select("step", "value").rows() == [(0, 1.0)]
    assert run.warnings == [f"{tmp_path / 'h.jsonl'}: 1 line(s) that are not JSON were skipped (first: line 2)"]
    (tmp_path / "cut.jsonl").write_text('{"_step": 1, "loss": ')
    with pytest.raises(InputError, match=r"cut\.jsonl: cannot read W&B history \(no line is JSON \(line 1 first\)\)"):
        load_run(tmp_path / "cut.jsonl")


def test_several_runs_need_load_runs() -> None:
    with pytest.raises(InputError, match=r"holds 3 runs \(cycle_val_975, cycle_val_65, cycle_val_0\); read them "
                                         r"with load_runs\(\)"):
        load_run(LAURA / "graphics")


def test_non_utf8_bytes_in_a_chart_export_are_replaced_with_a_warning(tmp_path: Path) -> None:
    data = b'"Step","r - loss","r - loss__MIN","r - loss__MAX"\n"1","2.0\xff","2","2"\n"2","2.1","2.1","2.1"'
    (tmp_path / "c.csv").write_bytes(data)
    run = load_run(tmp_path)
    assert "c.csv: bytes that are not UTF-8 (first at byte 58) were replaced" in run.warnings
    assert value_at(run, "loss", 2) == 2.1  # the damaged cell is lost, the rest is read
    assert run.attempts == [1]


def test_a_bad_byte_in_a_history_header_with_no_line_end_is_said():
    """Polars does not check a header's UTF-8 (it replaces the bytes); the reader does, also on a file of one line."""
    from parsers.wandb_history import read_csv_text

    warnings: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "h.csv").write_bytes(b"_step,lo\xff")
        read_csv_text(Path(tmp) / "h.csv", "h.csv", warnings)
    assert warnings == ["h.csv: bytes that are not UTF-8 (first at byte 8) were replaced"]


def test_a_history_with_a_key_called_step_reads_and_claims_no_step_axis(tmp_path):
    """A run may log a key named "step" (not one of the step keys the reader follows): the history CSV still reads,
    and the key is a scalar of its own, not taken for the run's step axis."""
    (tmp_path / "history.csv").write_text("_step,_timestamp,step,train/loss\n0,1.0,10,3.0\n1,2.0,20,2.5\n")
    run = load_run(tmp_path / "history.csv")
    assert run.metrics.filter(pl.col("metric") == "loss")["value"].to_list() == [3.0, 2.5]
    assert STEP_AXIS not in {t["metric"] for t in run.tags}


def test_odd_or_broken_config_yaml_keeps_the_run(tmp_path: Path) -> None:
    """Issue 18: a date, !!binary, !!set or a 5,000-digit integer in config.yaml was an internal error, and a
    config.yaml that does not parse discarded the whole run; the history is read either way."""
    source = Path(__file__).parent / "fixtures/real/wandb/jackokeefe11__nanoGPT/wandb/run-20240215_023758-f656tyfr"
    run_dir = tmp_path / "wandb" / source.name
    shutil.copytree(source, run_dir)
    config = run_dir / "files" / "config.yaml"
    original = config.read_text()
    loss = load_run(tmp_path).metrics.filter(metric="loss").select("step", "value").rows()
    config.write_text(original + "when:\n  value: 2024-01-01\nblob:\n  value: !!binary aGk=\ntags:\n  value: !!set {b, a}\n")
    odd = forensics.analyze(load_run(tmp_path)).runs[0]
    assert (odd.config["when"], odd.config["blob"], odd.config["tags"]) == ("2024-01-01", "<2 bytes>", ["a", "b"])
    json.dumps(odd.to_dict())
    for broken, why in (("big: " + "9" * 5000, "Exceeds the limit (4300 digits) for integer string conversion"),
                        ("bad: [unclosed", "while parsing a flow sequence")):
        config.write_text(original + broken + "\n")
        run = load_run(tmp_path)
        assert run.metrics.filter(metric="loss").select("step", "value").rows() == loss
        assert next(w for w in run.warnings if "config.yaml" in w).startswith(f"{config}: cannot read W&B config ({why}")


def test_json_nested_too_deep_or_a_bad_jsonl_line_loses_only_itself(tmp_path: Path) -> None:
    """Issue 18: JSON nested thousands deep was a RecursionError (an internal error), and one bad line of a JSON-lines
    history rejected the whole file."""
    deep = "[" * 100_000 + "]" * 100_000
    history = tmp_path / "jsonl" / "history.jsonl"
    history.parent.mkdir()
    history.write_text(f'{{"_step": 1, "loss": 1.0}}\n{{"_step": 2, "loss": {deep}}}\n{{"_step": 3, "loss": 0.5}}\n'
                       '{"_step": 4, "loss": 0.4')  # and a last line cut short
    run = load_run(history.parent)
    assert run.metrics.filter(metric="loss").select("step", "value").rows() == [(1, 1.0), (3, 0.5)]
    assert run.warnings == ["history.jsonl: 2 line(s) that are not JSON were skipped (first: line 2)"]
    source = Path(__file__).parent / "fixtures/real/wandb/jackokeefe11__nanoGPT/wandb/run-20240215_023758-f656tyfr"
    run_dir = tmp_path / "run" / "wandb" / source.name
    shutil.copytree(source, run_dir)
    summary = run_dir / "files" / "wandb-summary.json"
    summary.write_text(f'{{"a": {deep}}}')
    said = next(w for w in load_run(tmp_path / "run").warnings if "wandb-summary.json" in w)
    assert said == f"{summary}: cannot read W&B summary (nested too deeply to read); the run's history was read without it"


def test_history_rows_with_odd_step_or_timestamp_lose_only_themselves(tmp_path: Path) -> None:
    from tests.wandb_writer import history, run_record, write

    run = tmp_path / "run"
    run.mkdir()
    odd = [("0", "1.7e9"), ("null", "1"), ('""', "2"), ('"abc"', "3"), ("NaN", "4"), ("Infinity", "5"),
           ("1e30", "6"), ("9223372036854775808", "7"), ("5", "nan"), ("6", '"noon"'), ("7", "8")]
    records = [history({"_step": step, "_timestamp": stamp, "loss": f"{2 + i / 100}"}) for i, (step, stamp) in
               enumerate(odd)]
    records.append(history({"_step": "oops", "loss": "3.5"}, step=9))  # the record's own step number stands in
    write(run / "run-abc.wandb", [run_record(run_id="abc", project="p"), *records])
    [parsed] = load_runs(run)
    loss = parsed.metrics.filter(pl.col("metric") == "loss")
    assert loss.select("step", "value", "wall_time").rows() == [
        (0, 2.0, 1.7e9), (5, 2.08, None), (6, 2.09, None), (7, 2.1, 8.0), (9, 3.5, None)]
    assert parsed.warnings == [
        "run-abc.wandb: _step is not a step number (e.g. null) in 7 history rows; left out",
        "run-abc.wandb: _timestamp is not a time (e.g. nan) in 2 history rows; wall time unknown there"]
    assert forensics.analyze(parsed).runs[0].name == "abc"


def test_a_json_history_cut_short_or_damaged_keeps_its_sound_records(tmp_path: Path) -> None:
    """Issue 18: a JSON array cut short, or with one damaged record, was refused whole."""
    rows = [{"_step": s, "train/loss": 2.0 + s / 10, "info": {"note": "x"}} for s in range(6)]
    whole = json.dumps(rows, indent=2)
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "history.json").write_text(whole[:whole.index('"_step": 4')])
    run = load_run(tmp_path / "cut")
    assert run.metrics.filter(metric="loss")["step"].to_list() == [0, 1, 2, 3]
    assert run.warnings[0].startswith("history.json: not valid JSON from character ")
    assert run.warnings[0].endswith("(cut short or damaged); read the 4 sound records")
    (tmp_path / "bad").mkdir()
    one_line = json.dumps(rows).replace('"train/loss": 2.2', '"train/loss": 2.2.2')  # record 2 damaged
    (tmp_path / "bad" / "history.json").write_text(one_line)
    run = load_run(tmp_path / "bad")
    assert run.metrics.filter(metric="loss")["step"].to_list() == [0, 1, 3, 4, 5]  # not the nested {"note": "x"}
    assert run.warnings == [f"history.json: not valid JSON from character {one_line.index('2.2.2') - 27} (cut short or"
                            " damaged); read the 5 sound records"]


def test_a_csv_with_an_unterminated_quote_loses_only_that_line(tmp_path: Path) -> None:
    """Issue 18: a quote left open mid-file made the whole CSV unreadable."""
    (tmp_path / "history.csv").write_bytes(b'"_step","train/loss"\n0,2.5\n1,"2.4\n2,2.3\n3,2.2\n')
    run = load_run(tmp_path)
    assert run.metrics.filter(metric="loss").select("step", "value").rows() == [(0, 2.5), (2, 2.3), (3, 2.2)]
    assert run.warnings[0] == "history.csv: 1 line with an unterminated quote left out (first: line 3)"


def test_a_jsonl_history_with_a_byte_that_is_not_utf8_keeps_every_line(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_bytes(b'{"_step": 0, "loss": 1.0}\n{"_step": 1, "loss": 0.9, "n": "\xff"}\n')
    run = load_run(tmp_path)
    assert run.metrics.filter(metric="loss")["step"].to_list() == [0, 1]
    assert run.warnings == ["history.jsonl: bytes that are not UTF-8 (first at byte 58) were replaced"]


# --- the bulk .wandb decoder against the protobuf runtime ------------------------------------------------------------
def _raw_history(*items: bytes, step: bytes | None = None) -> bytes:
    """A Record {num, history {items..., step}} written byte by byte (items may hold what protobuf would refuse)."""
    body = b"".join(field(1, item) for item in items) + (b"" if step is None else field(2, step))
    return field(1, 7) + field(2, body)


def _logs_agree(path: Path) -> None:
    from parsers.wandb_log import read_wandb_log

    try:
        bulk = read_wandb_log(path, "f")
    except InputError as exc:  # no W&B header: refused alike
        with pytest.raises(InputError, match=re.escape(str(exc))):
            read_wandb_log(path, "f", bulk=False)
        return
    runtime = read_wandb_log(path, "f", bulk=False)
    assert bulk.history.equals(runtime.history)
    assert bulk.warnings == runtime.warnings
    assert list(bulk.summary.items()) == list(runtime.summary.items())
    assert list(bulk.config.items()) == list(runtime.config.items())
    assert bulk.config_updates == runtime.config_updates
    assert (bulk.run_id, bulk.display_name, bulk.start_time, bulk.exit_code, bulk.console, bulk.step_metrics) == (
        runtime.run_id, runtime.display_name, runtime.start_time, runtime.exit_code, runtime.console,
        runtime.step_metrics)


def test_bulk_decoder_reads_what_the_protobuf_runtime_reads(tmp_path: Path) -> None:
    """Every shape of history and summary record the bulk decoder takes or must leave to the runtime: nested keys,
    unicode keys and values, JSON values of every kind, long values and records split over blocks (FIRST, MIDDLE,
    LAST), a key twice in one record, key and nested key together, text that is not UTF-8 or holds NUL, a summary
    that removes keys, unknown fields, steps present, absent or empty, configs between rows, 70 distinct keys."""
    from parsers.wandb_proto import Record
    from tests.wandb_writer import history, run_record, summary, write

    def config(**values: str) -> bytes:
        record = Record()
        for key, value in values.items():
            record.config.update.add(key=key, value_json=value)
        return record.SerializeToString()

    records = [run_record(run_id="bulk01", display_name="bulk", project="p"), config(lr="0.1")]
    for step in range(120):
        items = {("_step",): str(step), ("_timestamp",): f"{1.7e9 + step}", ("_runtime",): str(step / 4),
                 ("train/loss",): repr(2.0 / (step + 1)), ("eval", "ppl"): "3.5", "grad_norm": "0.5"}
        kinds = ['"text"', "true", "null", '{"a": 1, "b": {"c": NaN}}', "NaN", "Infinity", "-Infinity", "[1, 2]", ""]
        items[("value", "kind")] = kinds[step % len(kinds)]
        items[f"k{step % 70}"] = str(step)  # 70 distinct keys over the run
        if step % 7 == 0:
            items[("损失", "μ")] = f'"{"é" * (step % 5)}"'  # unicode key parts and value
        if step % 11 == 0:
            items["long"] = '"' + "x" * (100 + step * 3) + '"'  # values of 2-byte lengths
        if step % 13 == 0:
            items["huge"] = '"' + "y" * (40_000 if step % 26 else 70_000) + '"'  # FIRST (MIDDLE) LAST over blocks
        records.append(summary(items, remove=("k3",) if step == 50 else ()))
        records.append(history(items, step=None if step % 17 == 0 else step))
        if step == 60:
            records.append(config(lr="0.05"))
    records[40] = _raw_history(field(1, b"twice") + field(16, b"1"), field(1, b"twice") + field(16, b"2"),
                               field(1, b"_step") + field(16, b"999"))  # a key twice: the last value wins
    records[41] = _raw_history(field(1, b"key") + field(2, b"nested") + field(16, b"1"),  # the key wins
                               field(2, b"a") + field(2, b"") + field(2, b"c") + field(16, b"2"), step=b"")
    records[42] = _raw_history(field(1, b"loss") + field(16, b"\xff1"))  # not UTF-8: the record is skipped
    records[43] = _raw_history(field(1, b"_runtime") + field(16, b"\xc3"), field(1, b"loss") + field(16, b"1"))
    records[44] = _raw_history(field(1, b"loss") + field(16, b"1\x002"), field(1, b"nul\x00key") + field(16, b"3"))
    records[45] = _raw_history(field(1, b"loss") + field(16, b"4") + field(99, 5), step=field(1, 3) + field(7, b"?"))
    records[46] = _raw_history(field(1, b"loss") + field(16, b"5"), step=field(1, 2**62)) + field(500, b"extra")
    records[47] = field(1, 9) + field(3, field(1, field(1, b"bad") + field(16, b"\xe2\x82")))  # summary, not UTF-8
    records[48] = field(1, 9) + field(3, field(1, field(1, b"s") + field(16, b"a\x00b")))  # NUL: fine in a summary
    write(tmp_path / "run-bulk01.wandb", records)
    _logs_agree(tmp_path / "run-bulk01.wandb")


@pytest.mark.parametrize("length", [b"\xff", b"\xff\x7f", b"\x7f"])
def test_a_summary_value_whose_length_is_cut_or_too_long_is_a_warning(tmp_path: Path, length: bytes) -> None:
    """A summary item whose value length is cut (a varint left open) or runs past its record: the record is skipped
    with the runtime's warning (the bulk decoder checked such values' bytes first: IndexError, an internal error)."""
    from tests.wandb_writer import write

    item = field(1, b"k") + varint(16 << 3 | 2) + length  # key "k", then value_json's tag and a broken length
    write(tmp_path / "run-cut.wandb", [field(3, field(1, item))])
    _logs_agree(tmp_path / "run-cut.wandb")
    from parsers.wandb_log import read_wandb_log

    assert read_wandb_log(tmp_path / "run-cut.wandb", "f").warnings == [
        "f: a record that is not a valid W&B protobuf was skipped"]


@pytest.mark.parametrize("index", range(30))
def test_bulk_decoder_agrees_with_the_runtime_on_mutants(tmp_path: Path, index: int) -> None:
    """Damaged and edited logs (the fuzzing mutators: CRCs broken, records cut, fields changed and reframed)."""
    import random

    from tests import mutants

    seeds = [s for s in mutants.SEEDS if s.kind == "wandb"]
    data, _ = mutants.mutate(mutants.seed_bytes(seeds[index % len(seeds)]), "wandb", random.Random(index))
    (tmp_path / "run-m.wandb").write_bytes(data)
    _logs_agree(tmp_path / "run-m.wandb")


def test_a_summary_that_says_the_run_reached_step_infinity_is_not_a_step(tmp_path: Path) -> None:
    """A damaged wandb-summary.json with `"_step": Infinity` (JSON's non-standard literal, which Python reads) made
    an internal error (OverflowError) instead of a read: a fuzzing find (seed 32)."""
    src = Path(__file__).parent / "fixtures" / "real" / "wandb" / "jackokeefe11__nanoGPT" / "wandb" / \
        "run-20240215_023758-f656tyfr"
    run = tmp_path / src.name
    shutil.copytree(src, run)
    (run / "files" / "wandb-summary.json").write_text('{"_step": Infinity, "_runtime": Infinity}')
    loaded = load_run(run)
    assert loaded.metrics.height > 0
    assert not any("but the run's summary says it reached" in w for w in loaded.warnings)


def test_history_wandb_dropped_below_its_step_counter_is_said(tmp_path: Path) -> None:
    """A training restarted inside one W&B run logs steps the run had passed, and W&B drops them, saying so in the
    console: "Tried to log to step 0 that is less than the current step 311. ... data will be ignored" (cs336
    xinacahi: 281 such calls, read as "the log begins mid-run"; audit V3). The reading warning says what is missing."""
    from tests.wandb_writer import history, run_record, write

    run = tmp_path / "run"
    (run / "files").mkdir(parents=True)
    write(run / "run-abc.wandb", [run_record(run_id="abc", project="p"),
                                  *[history({"_step": str(s), "loss": f"{3 - s / 1000}"}) for s in range(311, 330)]])
    (run / "files" / "output.log").write_text("No model to load - starting from scratch\n" + "".join(
        f"wandb: WARNING Tried to log to step {s} that is less than the current step 311. Steps must be monotonically "
        "increasing, so this data will be ignored.\n" for s in range(0, 40, 10)))
    [parsed] = load_runs(run)
    assert [w for w in parsed.warnings if "dropped" in w] == [
        "files/output.log: W&B dropped 4 log calls to steps 0-30, below its step counter ('Tried to log to step N that "
        "is less than the current step'): those points are not in the run's history (a training restarted inside the "
        "run logs steps it had passed)"]


def test_a_copy_of_the_latest_run_folder_is_not_a_second_launch() -> None:
    """BoocampMonster/korean-relation-extraction commits its ``wandb/latest-run/`` as a folder (a copy of
    ``run-20221125_150848-28b1fgqy/``, byte-identical ``run-28b1fgqy.wandb``): one launch (loss at steps 0-12, Ctrl-C) read
    as two attempts, the second 'from the start of training', 'what changed: nothing', each with its
    KeyboardInterrupt and exit code 255. The copy is one launch's log read twice: it is left out and said so."""
    root = REAL / "BoocampMonster__korean-relation-extraction"
    [run] = load_runs(root)
    assert run.attempts == [1]
    assert [src.path for src in run.sources] == ["wandb/run-20221125_150848-28b1fgqy/run-28b1fgqy.wandb"]
    assert run.metrics.filter(metric="loss").select("step").to_series().to_list() == [0, 1, 2, 6, 7, 8, 12]
    assert run.skipped == ["wandb/latest-run/run-28b1fgqy.wandb: the same launch's log as "
                           "wandb/run-20221125_150848-28b1fgqy/run-28b1fgqy.wandb (run 28b1fgqy, started "
                           "2022-11-25 15:08:48 UTC, the same history): a copy (W&B's latest-run folder), not read"]
    [analysis] = forensics.analyze(run).runs
    assert [str(a.end_kind) for a in analysis.attempts] == ["keyboard_interrupt"]


def test_a_copy_of_the_latest_run_folder_without_its_wandb_log_is_not_read_again(tmp_path: Path) -> None:
    """The same BoocampMonster/korean-relation-extraction folder with `latest-run/run-28b1fgqy.wandb` taken away
    (most committed copies of `wandb/latest-run/` hold only `files/`): its `files/output.log` was read beside the run
    folder's own, the one Ctrl-C said as 'keyboard interrupt: KeyboardInterrupt (x2)' 'printed to
    wandb/latest-run/files/output.log', and its config.yaml and wandb-summary.json read again as inputs."""
    root = tmp_path / "krre"
    shutil.copytree(REAL / "BoocampMonster__korean-relation-extraction", root)
    (root / "wandb" / "latest-run" / "run-28b1fgqy.wandb").unlink()
    [run] = load_runs(root)
    assert [src.path for src in run.sources] == ["wandb/run-20221125_150848-28b1fgqy/run-28b1fgqy.wandb"]
    assert run.skipped == ["wandb/latest-run/: W&B's latest-run folder without its .wandb log, its files/output.log "
                           "the same as wandb/run-20221125_150848-28b1fgqy's: a copy, not read"]
    interrupts = run.events.filter(pl.col("kind") == "keyboard_interrupt")
    assert interrupts["source"].cast(pl.String).to_list() == ["wandb/run-20221125_150848-28b1fgqy/files/output.log"]


def test_a_history_dump_cut_inside_its_last_line_does_not_read_that_line(tmp_path: Path) -> None:
    """pandas ends a history dump's last line; one cut while it was copied ends inside a value ("...,2.4" of
    "...,2.4375") and was read as it stood. It is left out with a warning; a whole dump keeps every row."""
    whole = "_step,train/loss\n" + "".join(f"{s},{2.5 - s / 1000:.4f}\n" for s in range(1, 101))
    (tmp_path / "history.csv").write_text(whole[:-3])  # "100,2.4" of "100,2.4000"
    run = load_run(tmp_path / "history.csv")
    assert run.metrics.filter(metric="loss")["step"].max() == 99
    assert f"{tmp_path / 'history.csv'}: its last line has no line end: cut short by the end of the file (a table still " \
           "being written, or a cut copy), so its values may be cut too: not read" in run.warnings
    (tmp_path / "whole.csv").write_text(whole)
    assert load_run(tmp_path / "whole.csv").metrics.filter(metric="loss")["step"].max() == 100
