"""The command line through typer's test runner, through its console entry point and as a subprocess: reports,
JSON contract, bad input."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from conftest import SAMPLES, real
from typer.testing import CliRunner

import forensics
from forensics.cli import app, main
from parsers import InputError, load_run

runner = CliRunner()
KNOWN_TEXT = ("no metrics lines of a text format it knows (megatron, nanogpt, modded-nanogpt, nanochat, litgpt, llm.c, "
              "torchtitan, nanotron, olmo, fairseq, mlx-lm, mmengine, mmcv, detectron2, keras, metric-logger, nemo, "
              "maxtext, torchtune, colossalai, composer, deepspeed-chat, deepspeed-chat-sft-rm, hf-trainer)")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """``forensics ARGS`` through the console entry point in this process: its stdout, stderr and exit code, as a
    subprocess would give them (a process costs a second of imports; :func:`run_process` is the real one)."""
    out, err, code = io.StringIO(), io.StringIO(), 0
    with (mock.patch.object(sys, "argv", ["forensics", *args]), contextlib.redirect_stdout(out),
          contextlib.redirect_stderr(err)):
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    return subprocess.CompletedProcess(["forensics", *args], code, out.getvalue(), err.getvalue())


def run_process(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "forensics.cli", *args], capture_output=True, text=True, check=False
    )


def test_version_and_help():
    version = runner.invoke(app, ["--version"])
    assert (version.exit_code, version.output) == (0, f"forensics {forensics.__version__}\n")
    helped = runner.invoke(app, ["--help"])
    assert helped.exit_code == 0
    for command, summary in (("analyze", "Analyze a run"), ("compare", "Compare runs:"), ("export", "Write a run's")):
        assert re.search(rf"\b{command}\s+{summary}", helped.output), command   # each command with its summary


def test_markdown_report_on_the_sample():
    result = runner.invoke(app, ["analyze", str(SAMPLES / "tr8-104B-sample")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "# Incident chronicle: tr8-104B-sample"
    headline = "this is a \\~58B model, not 104B: ffn\\_hidden\\_size 20480 is 1.25x hidden (expected 65536)"
    assert headline in "\n".join(lines[:6])
    assert ("| 2 | 6220–7150 | resumed from step 6210 **(rollback)** | seed: 42 → 43 | step 7150 | ended in NaN/Inf |"
            in lines)
    sections = [line for line in lines if line.startswith("## ")]
    assert sections == ["## Summary", "## What was read and checked", "## Timeline", "## Attempts",
                        "## Attempt 1: steps 10–7360", "## Attempt 2: steps 6220–7150", "## Attempt 3: steps 3010–5400",
                        "## Why it blew up (suspected causes)", "## Setup findings",
                        "## Config differences between attempts", "## Setup", "## Inputs"]
    assert "| adam\\_beta2 | 0.999 | 0.999 | 0.95 |" in lines
    assert "  - after seed 42 → 43: first loss spike at step 6930, 80 steps sooner than attempt 1's (step 7010)" in lines
    # the setup finding heads the summary but is not "why it blew up"
    assert "- **Model (setup finding):** " + headline + "." in lines
    assert not any(line.startswith("- **Most likely why (suspected):** model shape") for line in lines)
    # the summary quotes the top cause as the ranking does, confidence included
    assert ("- **Most likely why (suspected):** optimizer or model state rather than one batch: after the rollback "
            "the trouble came sooner (step 6930 vs 7010) (confidence 0.45).") in lines
    assert ("1. **optimizer or model state rather than one batch: after the rollback the trouble came sooner (step 6930 "
            "vs 7010)** (suspected, confidence 0.45)") in lines
    assert ("| 1 | 10–7360 | 2021-09-22 10:00:00 | – | – | 41.2 h | ended in NaN/Inf after step 7360: “RuntimeError: Rank "
            "37: found NaN in local forward loss calculation. Device: 1, node: r7i4n3” |") not in lines


def test_json_contract():
    result = runner.invoke(app, ["analyze", str(SAMPLES / "tr8-104B-sample"), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["schema_version"] == 2
    run = doc["runs"][0]
    assert run["name"] == "tr8-104B-sample"
    assert run["sources"] == [{"path": "main_log.txt", "format": "megatron", "sampled": False}]
    assert {"index", "start_step", "end_step", "resumed_from_step", "config_changes", "end_reason"} <= set(
        run["attempts"][0]
    )
    assert run["attempts"][2]["config_changes"] == {"adam_beta2": [0.999, 0.95]}
    anomaly = run["anomalies"][0]
    assert {"kind", "metric", "attempt", "step", "end_step", "value", "baseline"} <= set(anomaly)
    nan = next(a for a in run["anomalies"] if a["kind"] == "nan")
    assert nan["value"] is None and nan["step"] == 7320
    assert set(run["model"]) >= {"parameters_from_shape", "parameters_logged", "parameters_stated"}
    assert run["model"]["parameters_stated"] == 104e9
    cause = run["suspected_causes"][0]
    assert set(cause) >= {"cause", "confidence", "evidence"}


def test_output_is_deterministic():
    a, b = (runner.invoke(app, ["analyze", str(SAMPLES / "tr8-104B-sample"), "-f", "json"]) for _ in range(2))
    assert a.exit_code == b.exit_code == 0
    assert a.output == b.output and json.loads(a.output)["runs"][0]["name"] == "tr8-104B-sample"   # a report, twice


def test_report_file_has_plots_beside_it_and_is_byte_for_byte_repeatable(tmp_path):
    outputs = []
    for name in ("a", "b"):
        out = tmp_path / name / "tr8.md"
        result = runner.invoke(app, ["analyze", str(SAMPLES / "tr8-104B-sample"), "-o", str(out)])
        assert result.exit_code == 0, result.output
        outputs.append(out)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert [str(p) for p in files] == ["tr8.md", "tr8_files/tr8-104B-sample-attempts.png",
                                       "tr8_files/tr8-104B-sample-overview.png"]
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    text = outputs[0].read_text().splitlines()
    assert text[2] == "![loss across attempts](tr8_files/tr8-104B-sample-overview.png)"
    assert "![loss and grad norm per attempt](tr8_files/tr8-104B-sample-attempts.png)" in text
    assert (tmp_path / "a" / files[1]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    no_plots = tmp_path / "c" / "tr8.md"
    assert runner.invoke(app, ["analyze", str(SAMPLES / "tr8-104B-sample"), "-o", str(no_plots), "--no-plots"]
                         ).exit_code == 0
    assert sorted(p.name for p in no_plots.parent.iterdir()) == ["tr8.md"]
    assert "![" not in no_plots.read_text()


def test_write_to_file_prints_summary(tmp_path):
    out = tmp_path / "report.md"
    result = runner.invoke(app, ["analyze", str(SAMPLES / "clean-1.3B"), "-o", str(out)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    # the terminal gets the summary (the attempts table) and where the report went, not the report
    assert result.output.splitlines() == [
        "clean-1.3B: attempts                               ",
        "┏━━━┳━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━┓",
        "┃ # ┃ steps  ┃ start   ┃ what changed ┃ ended     ┃",
        "┡━━━╇━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━┩",
        "│ 1 │ 1-3000 │ scratch │              │ completed │",
        "└───┴────────┴─────────┴──────────────┴───────────┘",
        f"report written to {out} (+ 1 plot in {tmp_path / 'report_files'})",
    ]
    # the file holds the report printed to stdout, with its one plot linked (one attempt: no overview)
    stdout = runner.invoke(app, ["analyze", str(SAMPLES / "clean-1.3B")])
    assert stdout.exit_code == 0, stdout.output
    plot = "![loss and grad norm per attempt](report_files/clean-1.3B-attempts.png)"
    report = out.read_text()
    assert report.count(plot) == 1 and "overview" not in report
    assert report.replace(f"\n\n{plot}", "") == stdout.output


def test_never_writes_into_the_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(SAMPLES / "clean-1.3B", run_dir)
    proc = run_cli("analyze", str(run_dir), "-o", str(run_dir / "report.md"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"forensics: error: {run_dir / 'report.md'}: "
                                                           f"inside {run_dir}, the run being read; forensics never "
                                                           "writes into what it reads\n")
    assert sorted(p.name for p in run_dir.iterdir()) == ["train.log"]


def test_where_the_report_went_is_one_line_however_long_the_path(tmp_path):
    out = tmp_path / ("a-directory-with-a-long-name-" * 5) / ("b" * 60) / "report.md"
    result = runner.invoke(app, ["analyze", str(SAMPLES / "clean-1.3B"), "-o", str(out)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert len(str(out)) > 200     # longer than the terminal and than the 200 columns used off a terminal
    assert result.output.splitlines()[-1] == f"report written to {out} (+ 1 plot in {out.parent / 'report_files'})"


def test_a_single_log_gets_its_report_beside_it_but_never_over_it(tmp_path):
    log = tmp_path / "train.log"
    shutil.copy(SAMPLES / "clean-1.3B" / "train.log", log)
    before = log.read_bytes()
    over = run_cli("analyze", str(log), "-o", str(log))
    assert over.returncode == 2 and over.stderr.strip() == (
        f"forensics: error: {log}: inside {log}, the run being read; forensics never writes into what it reads")
    beside = run_cli("analyze", str(log), "--no-plots", "-o", str(tmp_path / "report.md"))
    assert beside.returncode == 0, beside.stderr
    printed = run_cli("analyze", str(log))
    assert printed.returncode == 0 and printed.stdout.startswith("# Incident chronicle: train\n")
    assert (tmp_path / "report.md").read_text() == printed.stdout   # the report itself, as stdout would have it
    assert log.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "train.log"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not a recognised training log: empty file"),
        (bytes(range(256)) * 40, "not a recognised training log: binary file, not a text log"),
        (b"hello\nworld\n", "not a recognised training log: " + KNOWN_TEXT),
    ],
)
def test_bad_single_files_exit_2_with_one_line(tmp_path, content, message):
    bad = tmp_path / "bad.log"
    bad.write_bytes(content)
    proc = run_cli("analyze", str(bad))
    assert proc.returncode == 2
    assert proc.stderr == f"forensics: error: {bad}: {message}\n"
    assert "Traceback" not in proc.stderr


def test_missing_path():
    proc = run_process("analyze", "/nonexistent/run")  # the real process: exit code and one line on stderr
    assert (proc.returncode, proc.stderr) == (2, "forensics: error: /nonexistent/run: no such file or directory\n")


@pytest.mark.parametrize("command", [("analyze",), ("compare",), ("index", "-o", "fleet")])
def test_an_empty_path_is_refused_not_read_as_the_working_directory(command, tmp_path, monkeypatch):
    """``forensics analyze ""`` read the working directory (``Path("")`` is ``.``): a whole source tree as one run."""
    monkeypatch.chdir(tmp_path)
    proc = run_cli(command[0], "", *command[1:])
    assert (proc.returncode, proc.stderr) == (2, "forensics: error: an empty path: name a run directory or a log file\n")


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null on this system")
def test_a_device_or_a_pipe_is_refused_as_what_it_is():
    """/dev/null was "directory not read (Not a directory)": it is neither, and a pipe cannot be read twice."""
    proc = run_cli("analyze", "/dev/null")
    assert (proc.returncode, proc.stderr) == (2, "forensics: error: /dev/null: no readable training logs (/dev/null: "
                                              "not a file or a directory (a device, a pipe or a socket): not read; "
                                              "save it to a file first)\n")


def test_directory_with_nothing_readable(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    (tmp_path / "empty.log").write_bytes(b"")
    proc = run_cli("analyze", str(tmp_path))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"forensics: error: {tmp_path}: no readable training logs (empty.log: empty file; "
                           "notes.txt: " + KNOWN_TEXT + ")\n")


def test_non_utf8_and_truncated_last_line_are_read_as_far_as_sound(tmp_path):
    src = real("tr8-104B-wide_chronicles").read_bytes()
    damaged = src.replace(b"| lm loss: 6.444662E+00", b"| lm loss: 6.444662E+00 \xff\xfe", 1)
    cut = damaged[: damaged.rindex(b"lm loss") - 30]  # the last iteration line loses its loss and the rest
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "main_log.txt").write_bytes(cut)
    run = load_run(run_dir)
    assert any("not valid UTF-8 (first at byte" in w for w in run.warnings)
    assert any("last line: iteration line cut short" in w for w in run.warnings)
    result = runner.invoke(app, ["analyze", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "Warnings while reading" in result.output
    assert "step 7010: **loss spike**" in result.output  # everything before the damage is still analyzed


def test_unreadable_file_is_a_warning_when_others_are_readable(tmp_path, monkeypatch):
    shutil.copy(SAMPLES / "clean-1.3B" / "train.log", tmp_path / "train.log")
    (tmp_path / "secret.log").write_text("x")
    original = Path.open

    def deny(self: Path, *args, **kwargs):
        if self.name == "secret.log":
            raise PermissionError(13, "Permission denied")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", deny)
    run = load_run(tmp_path)
    assert run.warnings == [f"{tmp_path / 'secret.log'}: permission denied"]
    with pytest.raises(InputError, match=r"secret\.log: permission denied$"):
        load_run(tmp_path / "secret.log")


def test_log_text_is_escaped_in_markdown(tmp_path):
    line = (
        " iteration       10/     100 | lm loss: 2.0E+00 | number of skipped iterations:   0 |"
        " number of nan iterations:   0 |\n"
    )
    evil = "RuntimeError: <img src=x onerror=alert(1)> [click](http://x) | *boom*\n"
    (tmp_path / "a.log").write_text(line + evil)
    result = runner.invoke(app, ["analyze", str(tmp_path)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "<img" not in out and " [click](" not in out
    assert "&lt;img src=x onerror=alert(1)&gt; \\[click\\](http://x) \\| \\*boom\\*" in out


def test_usage_errors_are_one_line_with_exit_code_2():
    proc = run_cli("nope")
    assert (proc.returncode, proc.stderr) == (2, "forensics: error: No such command 'nope'.\n")
    proc = run_cli("compare", str(SAMPLES / "clean-1.3B" / "missing"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"forensics: error: {SAMPLES / 'clean-1.3B' / 'missing'}: no such file or directory\n")


def test_no_plot_directory_for_a_run_without_loss_or_grad_norm(tmp_path):
    tb = Path(__file__).parent / "fixtures" / "real" / "tensorboard" / "orktes_go-tensorboard"
    out = tmp_path / "o.md"
    assert runner.invoke(app, ["analyze", str(tb), "-o", str(out)]).exit_code == 0
    assert [p.name for p in tmp_path.iterdir()] == ["o.md"] and "![" not in out.read_text()


def test_a_huge_config_value_is_capped_in_every_report(tmp_path: Path) -> None:
    """Issue 18: a config value of 900,000 characters that changed across a restart was written whole five times
    (a 4.5 MB markdown report and a 4.5 MB JSON); every value now shows at most 4,000 characters and its size."""
    text = (SAMPLES / "tr8-104B-sample" / "main_log.txt").read_text()
    last_seed = text.rindex("  seed ....") + text[text.rindex("  seed ...."):].index("43")
    run = tmp_path / "run"
    run.mkdir()
    (run / "main_log.txt").write_text(text[:last_seed] + "7" * 900_000 + text[last_seed + 2:])
    for fmt in ("markdown", "json"):
        out = tmp_path / f"report.{fmt}"
        result = CliRunner().invoke(app, ["analyze", str(run), "-o", str(out), "--format", fmt, "--no-plots"])
        assert result.exit_code == 0, result.output
        report = out.read_text()
        assert len(report) < 100_000
        shown = report if fmt == "markdown" else json.dumps(json.loads(report), ensure_ascii=False)
        assert f"{'7' * 4000} … (900,000 bytes in all)" in shown


def test_file_names_that_are_not_utf8_and_paths_too_long(tmp_path: Path) -> None:
    """Issue 18: a log, a run directory or a report whose name is not UTF-8 was an internal error
    (UnicodeEncodeError in Polars and in the write), and so was a path beyond NAME_MAX or PATH_MAX (OSError)."""
    import os

    log = (SAMPLES / "tr8-104B-sample" / "main_log.txt").read_bytes()
    run = Path(os.fsdecode(bytes(tmp_path) + b"/run\xfe"))
    run.mkdir()
    Path(os.fsdecode(bytes(run) + b"/train\xff.log")).write_bytes(log)
    out = Path(os.fsdecode(bytes(tmp_path) + b"/out\xfd (1).md"))
    result = CliRunner().invoke(app, ["analyze", str(run), "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = out.read_text(encoding="utf-8")
    assert "# Incident chronicle: run\\\\xfe" in report and "- train\\\\xff.log (megatron)" in report  # \xNN
    assert "](out%FD%20%281%29_files/run_xfe-overview.png)" in report  # a link that finds the plot
    assert (tmp_path / os.fsdecode(b"out\xfd (1)_files") / "run_xfe-overview.png").exists()
    result = CliRunner().invoke(app, ["compare", str(run), str(SAMPLES / "clean-1.3B"), "-o", str(tmp_path / "c.md"),
                                      "--cache-dir", str(tmp_path / "cache"), "-j", "1"])
    assert result.exit_code == 0, result.output  # the cache key hashed the name as UTF-8 text
    assert "run\\\\xfe" in (tmp_path / "c.md").read_text(encoding="utf-8")
    short = tmp_path / "short.log"  # the report's name is what fails: a log of 30 iterations is enough to get there
    short.write_bytes(b"\n".join(log.splitlines()[:55]) + b"\n")
    for too_long in (tmp_path / ("x" * 300), tmp_path.joinpath(*["d" * 200] * 25)):
        result = CliRunner().invoke(app, ["analyze", str(too_long)])
        assert result.exit_code == 1 and isinstance(result.exception, InputError)
        assert str(result.exception) == f"{too_long}: cannot read (File name too long)"
        result = CliRunner().invoke(app, ["analyze", str(short), "-o", f"{too_long}.md"])
        assert isinstance(result.exception, InputError)
        assert str(result.exception).endswith(": cannot write (File name too long)")
