"""``forensics index``: runs found in a tree, their rows and anomalies, and re-indexing only what changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import forensics.fleet as fleet
from forensics.cli import app
from parsers import InputError

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Two projects: two Megatron runs, a Trainer output dir (checkpoint-N/ and runs/ only), a run whose only
    log is a damaged event file, and a notes folder that is not a run."""
    root = tmp_path / "runs"
    shutil.copytree(ROOT / "sample_logs" / "tr8-104B-sample", root / "megatron" / "tr8-104B")
    shutil.copytree(ROOT / "sample_logs" / "clean-1.3B", root / "megatron" / "clean")
    shutil.copytree(REAL / "hf_output_dir" / "zhl-2022_x-algorithm_qwen3_17b_text_effective", root / "hf" / "qwen3")
    (root / "hf" / "qwen3" / "logging.jsonl").unlink()  # its logs now lie only in checkpoint-N/ and runs/
    (root / "hf" / "broken").mkdir(parents=True)
    (root / "hf" / "broken" / "events.out.tfevents.1.host").write_bytes(b"\x00garbage, not a TFRecord")
    (root / "notes").mkdir()
    (root / "notes" / "README.md").write_text("iteration 10/ 100 | lm loss: 2.0 |\n")  # notes, not a run
    (root / "notes" / "done").touch()  # an empty file is no log either
    return root


@pytest.fixture
def analysed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the runs index_one is called for (the local engine runs it inline with jobs=1)."""
    names: list[str] = []
    real = fleet.index_one

    def spy(name: str, *args: object) -> object:
        names.append(name)
        return real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(fleet, "index_one", spy)
    return names


def test_find_runs_takes_trainer_output_dirs_whole_and_skips_notes(tree: Path) -> None:
    assert [name for name, _ in fleet.find_runs(tree)] == ["hf/broken", "hf/qwen3", "megatron/clean", "megatron/tr8-104B"]
    lightning = [name for name, _ in fleet.find_runs(REAL / "lightning")]
    assert lightning == [*(f"0Xero7_slm_training/lightning_logs/version_{n}" for n in (0, 5, 7, 9)),
                         "AIRI-Institute_genrisk/version_13", "BvoJa_GPTTT_version_0",
                         "EKProgrammer_FJSPT_RL4CO/version_1", "Goreg12345_nlp2-probing-lms/version_0",
                         "Jan21_FAST-GNN-SAT/version_54", "Jan21_FAST-GNN-SAT/version_57",
                         "Saxeman_DNABERT/version_1",
                         *(f"WarrenZhu050413_torchLoom/lightning_logs/version_{n}" for n in (0, 1, 2)),
                         "daankaasjager_thesis_final_coding/version_10"]
    mlflow = [name for name, _ in fleet.find_runs(REAL / "mlflow")]  # an MLflow run: metrics/, params/, tags/
    assert mlflow == ["GhadeerElmkaiel_SegFormer/mlruns/1/3c7adce791d244d8bf5779f654f8e2e8",
                      "swahili_stt_keras/mlruns/1/ed05f9cd599442fe9a0c9222184710b8"]


def test_index_writes_one_row_per_run_and_one_per_anomaly(tree: Path, tmp_path: Path) -> None:
    done = fleet.index(tree, tmp_path / "fleet", jobs=1, cache=False)
    assert done.summary() == "4 new, 0 changed, 0 unchanged, 0 removed (1 unreadable)"
    runs = pl.read_parquet(done.runs)
    assert runs.schema == pl.Schema(fleet.RUN_SCHEMA)
    tr8 = runs.row(by_predicate=pl.col("name") == "megatron/tr8-104B", named=True)
    assert (tr8["outcome"], tr8["outcome_step"], tr8["steps"], tr8["attempts"]) == ("diverged", 4960, 7360, 3)
    assert (tr8["params_stated"], tr8["params_from_shape"], tr8["size_mismatch"]) == (104e9, 57534480384.0, True)
    assert (tr8["lr"], tr8["global_batch_size"], tr8["seq_length"], tr8["precision"]) == (6e-05, 2048, 2048, "fp16")
    assert tr8["formats"] == ["megatron"]
    assert str(tr8["started"]) == "2021-09-22 10:00:00+00:00"
    qwen = runs.row(by_predicate=pl.col("name") == "hf/qwen3", named=True)
    assert qwen["formats"] == ["hf-trainer-state", "tensorboard"] and qwen["steps"] > 0
    broken = runs.row(by_predicate=pl.col("name") == "hf/broken", named=True)
    assert broken["outcome"] == "unreadable" and "events.out.tfevents.1.host" in broken["error"]
    anomalies = pl.read_parquet(done.anomalies)
    divergences = anomalies.filter(run="megatron/tr8-104B", kind="divergence").select("attempt", "step").rows()
    assert divergences == [(1, 7010), (2, 6930), (3, 4960)]
    assert set(anomalies["run"]) <= set(runs["name"])


def test_reindex_reads_only_new_and_changed_runs(tree: Path, tmp_path: Path, analysed: list[str]) -> None:
    out = tmp_path / "fleet"
    fleet.index(tree, out, jobs=1, cache=False)
    first = pl.read_parquet(out / fleet.RUNS_FILE)
    analysed.clear()
    assert fleet.index(tree, out, jobs=1, cache=False).summary() == (
        "0 new, 0 changed, 4 unchanged, 0 removed (1 unreadable)")
    assert analysed == []
    assert pl.read_parquet(out / fleet.RUNS_FILE).equals(first)

    with (tree / "megatron" / "clean" / "train.log").open("a") as log:
        log.write(" iteration     3010/    3000 | lm loss: 9.000000E+00 |\n")
    shutil.rmtree(tree / "hf" / "broken")
    shutil.copytree(ROOT / "tests" / "fixtures" / "real" / "nanogpt", tree / "nano")
    done = fleet.index(tree, out, jobs=1, cache=False)
    assert done.summary() == "1 new, 1 changed, 2 unchanged, 1 removed"
    assert sorted(analysed) == ["megatron/clean", "nano"]
    runs = pl.read_parquet(done.runs)
    assert runs["name"].to_list() == ["hf/qwen3", "megatron/clean", "megatron/tr8-104B", "nano"]
    assert runs.filter(name="megatron/clean")["final_loss"].item() == 9.0
    anomalies = pl.read_parquet(done.anomalies)
    assert "hf/broken" not in anomalies["run"] and anomalies.filter(run="megatron/tr8-104B").height > 0


def test_a_path_of_several_runs_is_a_row_for_each_and_kept_whole(tmp_path: Path, analysed: list[str]) -> None:
    """A W&B folder of two run-* folders (RWKV-RM-Copilot, tests/fixtures/real/wandb) is one path holding two runs:
    a row for each, named as compare names them, each with its own anomalies; the counts are of runs."""
    import os

    from forensics.compare import ingest

    root = tmp_path / "runs"
    shutil.copytree(REAL / "wandb" / "Ourboros-Alignment-Team__RWKV-RM-Copilot", root / "rwkv")
    shutil.copytree(ROOT / "sample_logs" / "clean-1.3B", root / "clean")
    out = tmp_path / "fleet"
    done = fleet.index(root, out, jobs=1, cache=False)
    assert done.summary() == "3 new, 0 changed, 0 unchanged, 0 removed"
    runs = pl.read_parquet(done.runs)
    assert runs.select("name", "path", "steps", "outcome", "outcome_step", "first_anomaly").rows() == [
        ("clean", str(root / "clean"), 3000, "completed", 3000, None),
        ("rwkv/lv15l27e", str(root / "rwkv"), 152, "running", 152, None),
        ("rwkv/8641imk4", str(root / "rwkv"), 3727, "crashed", 3727, "zero_loss")]
    assert runs["error"].null_count() == runs.height
    assert runs["name"].to_list()[1:] == [row.name for row in ingest("rwkv", root / "rwkv").rows]  # compare's names
    anomalies = pl.read_parquet(done.anomalies)
    assert anomalies.filter(pl.col("run").str.starts_with("rwkv/")).select("run", "kind", "step").rows() == [
        ("rwkv/lv15l27e", "skipped_iterations", 10), ("rwkv/8641imk4", "zero_loss", 750)]

    analysed.clear()
    again = fleet.index(root, out, jobs=1, cache=False)
    assert again.summary() == "0 new, 0 changed, 3 unchanged, 0 removed"
    assert analysed == []  # the path's signature is unchanged: it is not read, and both its rows are kept
    assert pl.read_parquet(again.runs).equals(runs) and pl.read_parquet(again.anomalies).equals(anomalies)

    os.utime(next((root / "rwkv").rglob("output.log")), ns=(0, 0))  # one file of the path touched: both runs read
    assert fleet.index(root, out, jobs=1, cache=False).summary() == "0 new, 2 changed, 1 unchanged, 0 removed"
    assert analysed == ["rwkv"]
    assert pl.read_parquet(out / fleet.RUNS_FILE)["name"].to_list() == runs["name"].to_list()


def test_a_code_change_reanalyses_every_run(tree: Path, tmp_path: Path, analysed: list[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "fleet"
    fleet.index(tree, out, jobs=1, cache=False)
    import forensics.cache

    monkeypatch.setattr(forensics.cache, "code_signature", lambda *code: "another-version")
    analysed.clear()
    assert fleet.index(tree, out, jobs=1, cache=False).summary().startswith("0 new, 4 changed, 0 unchanged")
    assert len(analysed) == 4


def test_index_refuses_to_write_into_the_tree_and_names_bad_options(tree: Path) -> None:
    with pytest.raises(InputError, match=r"inside .*runs, the run being read"):
        fleet.index(tree, tree / "fleet", jobs=1)
    with pytest.raises(InputError, match="--engine spark: unknown engine"):
        fleet.index(tree, tree.parent / "fleet", engine="spark")
    (tree.parent / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty: no runs found \(no file in it that a reader takes\)"):
        fleet.index(tree.parent / "empty", tree.parent / "fleet")
    with pytest.raises(InputError, match="no such file or directory"):
        fleet.index(tree / "missing", tree.parent / "fleet")
    assert not (tree / "fleet").exists() and not (tree.parent / "fleet").exists()


def test_cli_index_says_what_it_did(tree: Path, tmp_path: Path) -> None:
    args = ["index", str(tree), "-o", str(tmp_path / "fleet"), "-j", "1", "--no-cache"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert first.output.startswith("4 new, 0 changed, 0 unchanged, 0 removed (1 unreadable); index in ")
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and again.output.startswith("0 new, 0 changed, 4 unchanged")


def test_a_fleet_in_object_storage_is_indexed_and_reindexed_by_url(tmp_path: Path, analysed: list[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    try:
        memory.put(str(ROOT / "sample_logs" / "tr8-104B-sample"), "/bucket/runs/tr8-104B", recursive=True)
        memory.put(str(ROOT / "sample_logs" / "clean-1.3B"), "/bucket/runs/clean", recursive=True)
        out = tmp_path / "fleet"
        assert fleet.index("memory://bucket/runs", out, jobs=1, cache=False).summary() == (
            "2 new, 0 changed, 0 unchanged, 0 removed")
        runs = pl.read_parquet(out / fleet.RUNS_FILE)
        assert runs.select("name", "path", "outcome", "outcome_step").rows() == [
            ("clean", "memory://bucket/runs/clean", "completed", 3000),
            ("tr8-104B", "memory://bucket/runs/tr8-104B", "diverged", 4960)]
        from forensics.cache import input_signature
        from parsers import remote

        assert runs["signature"].to_list() == [input_signature(p) for p in runs["path"]]  # compare's cache keys
        listings: list[str] = []
        listing = remote.listing
        monkeypatch.setattr(remote, "listing", lambda url: listings.append(url) or listing(url))
        analysed.clear()
        assert fleet.index("memory://bucket/runs", out, jobs=1, cache=False).summary().startswith(
            "0 new, 0 changed, 2 unchanged")
        assert analysed == [] and listings == ["memory://bucket/runs"]  # the tree listed once, no request per run
        memory.pipe("/bucket/runs/clean/train.log", (ROOT / "sample_logs" / "clean-1.3B" / "train.log").read_bytes()
                    + b" iteration     3010/    3000 | lm loss: 9.000000E+00 |\n")
        assert fleet.index("memory://bucket/runs", out, jobs=1, cache=False).summary().startswith("0 new, 1 changed")
        assert analysed == ["clean"]
    finally:
        memory.rm("/bucket", recursive=True)


def test_a_url_trees_heads_are_read_together_and_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over object storage a head read is a request (~50 ms): the file that decides each folder is read for all
    folders at once (remote.WORKERS at a time), and no head twice."""
    import threading
    import time

    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    reads: list[str] = []
    now, most, lock = [0], [0], threading.Lock()
    real = MemoryFileSystem.cat_file

    def slow(self: MemoryFileSystem, path: str, start: int | None = None, end: int | None = None, **kw: object) -> bytes:
        with lock:
            reads.append(path)
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)
        with lock:
            now[0] -= 1
        return real(self, path, start, end, **kw)

    memory = fsspec.filesystem("memory")
    log = (ROOT / "sample_logs" / "clean-1.3B" / "train.log").read_bytes()
    try:
        for i in range(16):
            memory.pipe(f"/heads/runs/r{i:02d}/train.log", log)
            memory.pipe(f"/heads/runs/r{i:02d}/notes.md", b"# notes\n")
        memory.pipe("/heads/runs/other/a.bin", b"\x00\x01 binary")
        memory.pipe("/heads/runs/other/b.bin", b"\x00\x02 binary")
        monkeypatch.setattr(MemoryFileSystem, "cat_file", slow)
        found = [name for name, _ in fleet.find_runs("memory://heads/runs")]
    finally:
        memory.rm("/heads", recursive=True)
    assert found == [f"r{i:02d}" for i in range(16)]
    assert most[0] >= 4, most    # together, not one request after another
    assert sorted(reads) == sorted({*reads}) and len(reads) == 18, reads  # once each: 16 logs, other's two files


def test_a_link_to_a_run_or_to_a_parent_is_not_another_run(tmp_path: Path) -> None:
    """wandb's latest-run and a launcher's runs/latest are links to a run; a link to a parent is a cycle."""
    import os

    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "sample_logs" / "clean-1.3B", runs / "run-1")
    os.symlink("run-1", runs / "latest")
    os.symlink("..", runs / "run-1" / "up")
    assert [name for name, _ in fleet.find_runs(runs)] == ["run-1"]


def test_the_rows_first_anomaly_is_the_chronicles_not_any_at_that_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A changepoint at the step of the first anomaly is never the first anomaly (NOT_FIRST_ANOMALY)."""
    import forensics.analysis as analysis
    from forensics.findings import Anomaly, Kind, first_anomaly

    real = analysis.analyze_run

    def with_changepoint(run, *args, **kwargs):  # type: ignore[no-untyped-def]
        found = real(run, *args, **kwargs)
        first = first_anomaly(found.anomalies)
        found.anomalies.insert(0, Anomaly(Kind.CHANGEPOINT, "grad_norm", first.attempt, first.step, first.step, 1.0,
                                          1.0, detail="a level shift"))
        return found

    monkeypatch.setattr(analysis, "analyze_run", with_changepoint)
    [row], _ = fleet.index_one("tr8", ROOT / "sample_logs" / "tr8-104B-sample", None, "sig", "code")
    assert (row["first_anomaly"], row["first_anomaly_step"]) == ("grad_norm_spike", 7010)


def test_logs_at_the_root_beside_runs_are_runs_of_their_own_not_the_fleet_merged(tree: Path, tmp_path: Path) -> None:
    # a stray log at the root used to make the root one run of everything under it (both projects merged)
    shutil.copy(REAL / "nanogpt" / "ChenZihua-cn_nanoGPT_train.log", tree / "train.log")
    (tree / "notes.txt").write_text("Runs from March; the 104B one was restarted twice.\n")
    assert [name for name, _ in fleet.find_runs(tree)] == [
        "notes.txt", "train.log", "hf/broken", "hf/qwen3", "megatron/clean", "megatron/tr8-104B"]
    # a folder of logs only is a folder of runs, as compare reads it; one log with its config is one run
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(REAL / "nanogpt" / "ChenZihua-cn_nanoGPT_train.log", logs / "a.log")
    shutil.copy(REAL / "torchtitan" / "NewComputeBench_completed_then_abort_in_teardown.txt", logs / "b.txt")
    assert [name for name, _ in fleet.find_runs(logs)] == ["a.log", "b.txt"]
    (logs / "b.txt").unlink()
    (logs / "config.yaml").write_text("lr: 3e-4\n")
    assert fleet.find_runs(logs) == [("logs", logs)]
