"""The reader interface: one registry, plug-ins from the ``forensics.readers`` entry-point group, a one-line reason
for a file no reader takes; and the readers of Lightning CSVLogger folders and MLflow file stores (real files)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import forensics
import parsers
from parsers import load_run, load_runs, registry
from parsers.reader import Reader
from parsers.textfile import InputError

REAL = Path(__file__).parent / "fixtures" / "real"


def test_every_builtin_reader_keeps_the_interface() -> None:
    assert all(isinstance(r, Reader) for r in registry.BUILTIN)
    assert [r.FORMAT for r in registry.BUILTIN][-1] == "megatron"  # the catch-all for text files is asked last
    assert len({r.FORMAT for r in registry.BUILTIN}) == len(registry.BUILTIN)


@pytest.mark.parametrize(("content", "name", "reason"), [
    (b'{"log_history": [{"loss": 2.3}], "best_metric": null}', "state.json",
     "JSON with keys `log_history`, `best_metric` (no reader for this layout)"),
    (b"step,reward,episode_len\n1,2.0,\n", "results.csv",  # a step table with no training metric
     "CSV with columns `step`, `reward`, `episode_len` (no reader for this layout)"),
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n", "events.out.bin",
     "Git LFS pointer, not the file (run `git lfs pull`)"),
])
def test_a_file_no_reader_takes_says_what_it_looks_like(tmp_path: Path, content: bytes, name: str, reason: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        load_run(path)
    assert str(err.value) == f"{path}: not a recognised training log: {reason}"


def test_a_plugin_reader_installed_from_a_package_is_used(tmp_path: Path) -> None:
    """A package that declares a reader under the ``forensics.readers`` entry-point group, installed into a fresh
    virtual environment that sees this project: its format is read, and the built-in ones still are."""
    # the package as a built wheel (what ``pip wheel`` makes of a pyproject.toml declaring the entry point): pip
    # installs it without building it in an isolated environment of its own (4-5 s of setuptools)
    wheel = tmp_path / "tinylog-0.1-py3-none-any.whl"
    files = {"tinylog/__init__.py": Path(__file__).with_name("plugin_reader.py").read_text(),
             "tinylog-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinylog\nVersion: 0.1\n",
             "tinylog-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             "tinylog-0.1.dist-info/entry_points.txt": "[forensics.readers]\ntinylog = tinylog\n"}
    with zipfile.ZipFile(wheel, "w") as z:
        record = []
        for name, text in files.items():
            z.writestr(name, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(text.encode())}\n")
        z.writestr("tinylog-0.1.dist-info/RECORD", "".join(record) + "tinylog-0.1.dist-info/RECORD,,\n")
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                          str(wheel)], capture_output=True, text=True)
    if pip.returncode:
        pytest.skip(f"pip cannot install a package here: {pip.stderr.strip().splitlines()[-1]}")
    log = tmp_path / "run.tiny"
    log.write_text("TINY\n1 3.5\n2 3.25\n3 9.0\n")
    script = ("from parsers import load_run, registry; import sys; r = load_run(sys.argv[1]); "
              "print(r.sources[0].format, r.metrics.filter(metric='loss')['value'].to_list(), "
              "[x.FORMAT for x in registry.readers()][-2:])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(Path(__file__).parents[1])])}
    out = subprocess.run([sys.executable, "-c", script, str(log)], check=True, capture_output=True, text=True,
                         env=env, cwd=tmp_path).stdout
    assert out.strip() == "tinylog [3.5, 3.25, 9.0] ['tinylog', 'megatron']"  # asked before the text catch-all


# --- Lightning CSVLogger -------------------------------------------------------------------------------------------
def test_lightning_versions_of_one_run_are_attempts_with_their_hparams_and_other_experiments_are_runs() -> None:
    """version_5 resumes version_0 (its first step, 140749, one interval after version_0's last): one run's two
    attempts. version_7 and version_9 start again from step 49 with settings of their own (lr, num_epochs): other
    experiments, each its own run."""
    runs = load_runs(REAL / "lightning" / "0Xero7_slm_training")
    assert [r.name for r in runs] == [f"lightning_logs/version_{n}" for n in (0, 7, 9)]
    run = runs[0]
    assert [src.format for src in run.sources][:1] == ["lightning"] and run.attempts == [1, 2]
    loss = run.metrics.filter(metric="loss")
    # version_0/metrics.csv line 2: "0,,49,,,7.628580570220947,,2056.12939453125,,,"
    assert loss.filter(attempt=1).select("step", "value").row(0) == (49, 7.628580570220947)
    assert loss.filter(attempt=2).select("step", "value").row(0) == (140749, 3.708270311355591)
    # val_loss and the epoch means keep their own rows ("0,,14073,,,,,,62.33803176879883,4.132571697235107,...")
    assert run.metrics.filter(metric="val_loss", attempt=1).select("step", "value").row(0) == (14073, 4.132571697235107)
    assert run.configs.filter(key="num_epochs").select("attempt", "value").rows() == [(1, "10"), (2, "20")]
    assert [r.configs.filter(key="num_epochs")["value"].to_list() for r in runs[1:]] == [["1"], ["1"]]
    # version_3 stopped before its first log call: its hparams.yaml is known by its folder, not skipped as text, and
    # said with the run before it
    assert run.skipped == [] and "lightning_logs/version_3/hparams.yaml" in [src.path for src in run.sources]


def test_lightning_resume_one_interval_on_is_not_called_a_rollback() -> None:
    """version_5 starts logging at step 140749, after version_0's last step 140739: the resume point is inferred,
    so nothing says it went back."""
    attempts = forensics.analyze(load_runs(REAL / "lightning" / "0Xero7_slm_training")[0]).runs[0].attempts
    assert [(a.start_step, a.rollback) for a in attempts] == [(49, False), (140749, False)]


# --- MLflow file store ---------------------------------------------------------------------------------------------
def test_mlflow_run_directory_is_one_run() -> None:
    runs = load_runs(REAL / "mlflow" / "swahili_stt_keras")
    assert [r.name for r in runs] == ["ed05f9cd599442fe9a0c9222184710b8"]
    run = runs[0]
    # metrics/loss: "1628697792090 332.6841735839844 0"
    assert run.metrics.filter(metric="loss").select("step", "value", "wall_time").row(0) == (
        0, 332.6841735839844, pytest.approx(1628697792.09))
    assert run.configs.filter(key="opt_learning_rate")["value"].to_list() == ["0.002"]
    assert run.skipped == ["mlruns/0/meta.yaml: an MLflow experiment with no runs"]


def test_a_text_log_of_no_known_format_is_not_called_csv() -> None:
    """GLM-130B's pasted DeepSpeed overflow lines have two commas each, like a CSV; they are text: read for the
    overflow they print (one skip, printed by seven ranks)."""
    import forensics

    path = REAL / "console_errors" / "glm_issue32_overflow_all_ranks.txt"
    run = load_run(path)
    assert [src.format for src in run.sources] == ["text (errors only)"]
    [attempt] = forensics.analyze(run).runs[0].attempts
    assert attempt.end_detail == ("no metric logged, but 1 fp16 overflow, a step skipped (the loss scale reduced "
                                  "to 268435456)")


def test_a_directory_that_cannot_be_listed_is_said(tmp_path, monkeypatch) -> None:
    """Issue 18: an unreadable subdirectory was skipped without a warning (unreadable files got one)."""
    import os
    import shutil as sh

    from conftest import SAMPLES

    from parsers import load_run

    sh.copytree(SAMPLES / "clean-1.3B", tmp_path / "run")
    (tmp_path / "run" / "locked").mkdir()
    scandir = os.scandir

    def refuse(path="."):
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    run = load_run(tmp_path / "run")
    assert "locked: directory not read (Permission denied)" in run.warnings
    assert run.metrics.filter(metric="loss").height > 0


def test_an_event_file_that_is_a_git_lfs_pointer_is_said_to_be_one() -> None:
    """P4P4N1CK/whisper-large-v2-japanese-5k-steps: its event files are Git LFS pointers ("version
    https://git-lfs.github.com/spec/v1", "size 37748"); the TensorBoard reader took them by name and called each "not a
    TensorBoard event file (no valid TFRecord)", as if damaged."""
    folder = REAL / "tensorboard" / "P4P4N1CK_whisper-large-v2-japanese-5k-steps_lfs"
    [pointer] = folder.iterdir()
    with pytest.raises(InputError) as raised:
        load_runs(pointer)
    assert str(raised.value).endswith(f"{pointer.name}: not a recognised training log: Git LFS pointer, not the file "
                                      "(run `git lfs pull`)")


def test_lightning_versions_that_log_once_an_epoch_from_scratch_are_separate_runs(tmp_path) -> None:
    """Review: a version that logs once an epoch has its first row an epoch in (step 311 against another's 49): it was
    taken for a resume, and two experiments (resnet18, vit) became one run's attempts."""
    for n, (model, every) in enumerate((("resnet18", 50), ("resnet50", 50), ("vit", 312))):
        folder = tmp_path / "lightning_logs" / f"version_{n}"
        folder.mkdir(parents=True)
        (folder / "hparams.yaml").write_text(f"model: {model}\n")
        rows = "".join(f"{step},{2.0 - step / 10000}\n" for step in range(every - 1, 3000, every))
        (folder / "metrics.csv").write_text("step,train_loss_step\n" + rows)
    assert [r.name for r in load_runs(tmp_path)] == [f"lightning_logs/version_{n}" for n in range(3)]


def test_lightning_test_metrics_after_the_last_step_end_training() -> None:
    """Saxeman/DNABERT version_1: metrics.csv's last row is trainer.test()'s test_loss 0.3715571463108063 and test_acc
    at step 800, after the last training step (799): "the log ends with no end printed: still running, cut off"."""
    [attempt] = forensics.analyze(load_run(REAL / "lightning" / "Saxeman_DNABERT")).runs[0].attempts
    # (plan_done: the reader's words, not a printed line, so the chronicle does not quote them; stop 46)
    assert (attempt.end_reason, attempt.end_kind) == ("completed", "training_ended")
    assert attempt.end_detail.startswith("test metrics logged after training (trainer.test() after fit() returned): "
                                         "test_loss=0.3715571463108063, test_acc=0.9638541340827942")


def test_lightning_checkpoint_files_and_save_lines_are_checkpoint_saves(tmp_path: Path) -> None:
    """Lightning's ModelCheckpoint names its files epoch=E-step=S.ckpt: in a folder they were skipped as binary files,
    and its verbose line "Epoch 20, global step 1848: 'val_loss' reached ..., saving model to '...'" was no event. A
    file in a folder of its own is a save at step S; AIRI-Institute/genrisk's version_13 (whose
    checkpoints/epoch=19-step=400.ckpt SOURCES.md says was left out: named here, empty) logs steps 0-79, 76-79 in epoch
    19: the GAN's global_step (400) counts both optimizers' steps, so the save is put at epoch 19's last step, said."""
    folder = tmp_path / "genrisk"
    shutil.copytree(REAL / "lightning" / "AIRI-Institute_genrisk", folder)
    (folder / "version_13" / "checkpoints").mkdir()
    (folder / "version_13" / "checkpoints" / "epoch=19-step=400.ckpt").write_bytes(b"PK\x03\x04")
    run = load_run(folder)
    assert run.skipped == [] and [src.format for src in run.sources] == ["lightning"]
    assert run.events.filter(kind="checkpoint_save").select("step", "text").rows() == [(79, (
        "checkpoint saved in epoch 19: version_13/checkpoints/epoch=19-step=400.ckpt; its name's step=400 is past the "
        "steps this log shows of it (as when Lightning's global_step counts the steps of every optimizer): placed at "
        "the last step this metrics.csv logs of epoch 19 (76–79)"))]
    # a folder of checkpoints beside a console: each a save at its step
    alone = tmp_path / "alone"
    (alone / "checkpoints").mkdir(parents=True)
    for name in ("epoch=0-step=88.ckpt", "epoch=1-step=176-v1.ckpt", "last.ckpt"):
        (alone / "checkpoints" / name).write_bytes(b"PK\x03\x04")
    (alone / "train.log").write_text("".join(f"iter {i}: loss {3 - i / 100:.4f}, time 10.00ms, mfu 1.00%\n"
                                             for i in range(0, 200, 4)))
    saves = load_run(alone).events.filter(kind="checkpoint_save").sort("step")
    assert saves.select("step", "source").rows() == [(88, "checkpoints/epoch=0-step=88.ckpt"),
                                                     (176, "checkpoints/epoch=1-step=176-v1.ckpt")]
    # the console line of a verbose ModelCheckpoint, in a console of a known format (NeMo's bar is Lightning's)
    bar = "Epoch 0:   0%|          | {n}/351750 [00:04<204:24:55,  2.09s/it, loss=11, v_num=9-02, " \
          "reduced_train_loss={loss}, global_step={step}.000, consumed_samples=0.000]"
    (tmp_path / "nemo.log").write_text("\n".join([
        bar.format(n=1, loss="11.00", step=0), bar.format(n=2, loss="10.90", step=1),
        "Epoch 0, global step 2: 'val_loss' reached 10.80000 (best 10.80000), saving model to "
        "'/results/checkpoints/epoch=0-step=2.ckpt' as top 1", bar.format(n=3, loss="10.70", step=2)]) + "\n")
    nemo = load_run(tmp_path / "nemo.log")
    assert nemo.events.filter(kind="checkpoint_saving").select("step").to_series().to_list() == [2]


def test_a_folder_of_settings_files_only_says_so(tmp_path: Path) -> None:
    """A folder of settings and no log was refused as "no readable training logs (config.yaml: no metrics lines of a
    text format it knows ...)", or "(no files)" where its only file was read as settings (a W&B config.yaml, a
    version_N/hparams.yaml), and a one-line args.json ({"lr": 0.1, "epochs": 3}) was read as a step table with its lr
    at "step" 3. Now the reason says what is there. Jaong/Checkpoint-of-CPT's all_results.json and config.json (real)
    are a summary and the model's settings."""
    settings = tmp_path / "settings"
    settings.mkdir()
    (settings / "config.yaml").write_text("lr: 0.001\nbatch_size: 32\n")
    (settings / "hparams.yaml").write_text("hidden: 64\n")
    (settings / "args.json").write_text('{"lr": 0.1, "epochs": 3}\n')
    with pytest.raises(InputError) as exc:
        load_run(settings)
    assert str(exc.value) == (f"{settings}: no training log, only settings files (args.json, config.yaml, "
                              "hparams.yaml): nothing here logs a training step")
    with pytest.raises(InputError, match=r"args.json: not a recognised training log: a settings file \(args.json\), "
                                         r"not a log of training steps$"):
        load_run(settings / "args.json")
    summary = tmp_path / "summary"
    summary.mkdir()
    for name in ("all_results.json", "config.json"):
        shutil.copy(REAL / "hf_output_dir" / "Jaong_Checkpoint-of-CPT" / name, summary / name)
    with pytest.raises(InputError) as exc:
        load_run(summary)
    assert str(exc.value) == (f"{summary}: no training log, only settings and summary files (all_results.json, "
                              "config.json): nothing here logs a training step")
    lone = tmp_path / "lone" / "version_0"
    lone.mkdir(parents=True)
    (lone / "hparams.yaml").write_text("lr: 0.01\n")
    with pytest.raises(InputError) as exc:
        load_run(lone.parent)
    assert str(exc.value).endswith("no training log, a settings file (version_0/hparams.yaml), not a log of training "
                                   "steps")
    (settings / "notes.txt").write_text("nothing here\n")  # anything else: the usual reasons, file by file
    with pytest.raises(InputError, match="no readable training logs"):
        load_run(settings)


@pytest.mark.parametrize("name", ["skip_line_first", "launcher_prefix"])
def test_copies_of_one_overflow_are_one_whatever_their_order_and_prefix(tmp_path: Path, name: str) -> None:
    """One overflow at iteration 8, "Grad overflow on iteration 8" printed by three ranks with the skip line before
    the last copies, or by hosts behind a launcher's "worker-N:" prefix: one skipped step each (review: 2 and 5)."""
    stamp = "[2021-01-26 22:05:35,108] [INFO]"
    copy = f"{stamp} [fused_optimizer.py:314:_update_scale] \nGrad overflow on iteration 8"
    skip = (f"{stamp} [logging.py:60:log_dist] [Rank 0] Overflow detected. Skipping step. Attempted loss scale: 2, "
            "reducing to 1")
    lines = ([copy, skip, copy, copy] if name == "skip_line_first" else
             [f"worker-{r}: {stamp} [fused_optimizer.py:314:_update_scale] Grad overflow on iteration 8" for r in range(3)]
             + [f"worker-{r}: {skip}" for r in range(2)])
    log = tmp_path / "ds.log"
    log.write_text("[2021-01-26 22:05:16,473] [INFO] [timer.py:166:stop] 0/320, SamplesPerSec=28.75\n"
                   + "\n".join(lines) + "\n")
    attempt = forensics.analyze(load_run(log)).runs[0].attempts[0]
    assert attempt.end_detail == "no metric logged, but 1 fp16 overflow, a step skipped (the loss scale reduced to 1)"


@pytest.mark.parametrize("pattern", [
    rb"\biter \d+: loss |(?:^|\n)step \d+ \| ", rb"(?i)killed by signal|\bSIGKILL\b", rb"CUDA error|(?i:uncorrectable ECC)",
    rb"(?i:ab(?-i:CDE)x)yz", rb"a(?:bcd)?xyz", rb"(?:abc|de)fgh", rb"ab\.cd", rb"(?i)x(?-i:ABC)|y(?:DEF)"])
def test_a_search_skipped_for_want_of_its_literals_finds_what_a_search_finds(pattern: bytes) -> None:
    """Sniffing skips a pattern's search where none of its alternatives' required literals is in the head (a search
    of a pattern that starts with ``\\b`` tries every position): never where the search would have matched."""
    import itertools
    import re

    from parsers.textfile import required_literals, search

    rx = re.compile(pattern)
    pieces = [b"iter 3: loss ", b"\nstep 4 | ", b"KILLED BY SIGNAL", b"sigkill", b"SIGKILL", b"cuda error", b"CUDA error",
              b"Uncorrectable ecc", b"ABCDEx", b"abCDExyz", b"abcdexyz", b"axyz", b"abcdxyz", b"defgh", b"abcfgh",
              b"ab.cd", b"abxcd", b"XABC", b"xabc", b"YDEF", b"yDEF", b" "]
    texts = [b"".join(combo) for n in (1, 2) for combo in itertools.permutations(pieces, n)]
    assert all((search(rx, text) or None) and search(rx, text).span() == rx.search(text).span()
               if rx.search(text) else search(rx, text) is None for text in texts)
    assert sum(rx.search(text) is not None for text in texts) > 0
    assert required_literals(re.compile(rb"(?i)abc|(?-i:DEFG)")) == ((b"abc", True), (b"DEFG", False))
    assert required_literals(re.compile(rb"abc|(?-i:DEF)g")) is None  # "g" alone: too short to gate on


def test_consoles_of_different_programs_in_one_folder_are_runs_of_their_own(tmp_path) -> None:
    # a nanoGPT log and a torchtitan log side by side used to be one run, the torchtitan loss overlaid on nanoGPT's steps
    shutil.copy(REAL / "nanogpt" / "ChenZihua-cn_nanoGPT_train.log", tmp_path / "nanogpt.log")
    shutil.copy(REAL / "torchtitan" / "NewComputeBench_completed_then_abort_in_teardown.txt", tmp_path / "titan.txt")
    shutil.copy(REAL / "nanogpt" / "karpathy_nanoGPT_issue215_excerpt.txt", tmp_path / "more.txt")  # nanoGPT's too
    findings = forensics.analyze(*parsers.load_runs(tmp_path))
    runs = {r.name: r for r in findings.runs}
    assert sorted(runs) == ["nanogpt", "titan.txt"]
    assert [(str(a.end_reason), a.end_step) for a in runs["titan.txt"].attempts] == [("completed", 640)]
    assert 425 in [a.step for a in runs["nanogpt"].anomalies if a.kind == "nan"]  # (its two logs: two launches)
    assert len(runs["nanogpt"].attempts) == 2
