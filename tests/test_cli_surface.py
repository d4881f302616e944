"""The CLI surface of issue 17 (§3, §5) through the real entry point, and the library calls behind it: a bare
``forensics``, -V/-h, plain help, shell completion, internal errors (one line, or the traceback with --debug /
FORENSICS_DEBUG=1), --jobs validation, the never-write-into-what-was-read guard of :func:`reports.write`, word-boundary
clipping in the terminal summary, config values as logged and "1 step"."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES
from rich.console import Console

import forensics
import forensics.analysis
import forensics.cli
import forensics.compare as compare_module
import parsers
import reports
from forensics.compare import compare_runs
from forensics.findings import first_trouble
from parsers import InputError
from reports.terminal import clip, print_summary

TR8 = SAMPLES / "tr8-104B-sample"
CLEAN = SAMPLES / "clean-1.3B"
HINT = " (run with --debug or FORENSICS_DEBUG=1 for the traceback)"
NEVER = "the run being read; forensics never writes into what it reads"
# the console script beside this interpreter, else what it runs (the program is named "forensics" either way)
SCRIPT = Path(sys.executable).with_name("forensics")
FORENSICS = [str(SCRIPT)] if SCRIPT.exists() else [
    sys.executable, "-c", "import sys; sys.argv[0] = 'forensics'; from forensics.cli import main; main()"]
# an internal error (a bug of ours): forensics.analyze_path calls analyze, which now divides by zero
BROKEN = [sys.executable, "-c", "import sys; import forensics.analysis as a; a.analyze = lambda *runs: 1 / 0; "
          "sys.argv = ['forensics', *sys.argv[1:]]; from forensics.cli import main; main()"]


def run(command: list[str], *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("FORENSICS_DEBUG", "_FORENSICS_COMPLETE")}
    return subprocess.run([*command, *args], capture_output=True, text=True, check=False, env={**environ, **env})


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "forensics.cli"], *args, **env)


def spiked_clean(directory: Path) -> Path:
    """clean-1.3B (logged every step) with the loss at step 2000 raised to 200: a spike back at its level one step
    later."""
    lines = (CLEAN / "train.log").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "iteration     2000/" in line)
    lines[at] = re.sub(r"lm loss: \S+", "lm loss: 2.000000E+02", lines[at])
    directory.mkdir(parents=True)
    (directory / "train.log").write_text("".join(lines))
    return directory


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(scope="module")
def tr8() -> forensics.Analysis:
    return forensics.analyze_path(TR8)


@pytest.fixture(scope="module")
def spiked(tmp_path_factory) -> forensics.Analysis:
    return forensics.analyze_path(spiked_clean(tmp_path_factory.mktemp("spiked") / "run"))


# --- the command line ------------------------------------------------------------------------------------------


def test_bare_forensics_prints_the_help_without_an_error_line():
    proc = run(FORENSICS)
    assert proc.returncode in (0, 2)
    assert "forensics: error:" not in proc.stderr
    lines = (proc.stdout + proc.stderr).splitlines()
    assert "Usage: forensics [OPTIONS] COMMAND [ARGS]..." in lines
    for command, summary in (("analyze", "Analyze a run"), ("compare", "Compare runs:"), ("export", "Write a run's")):
        assert any(re.fullmatch(rf"  {command}\s+{summary}.*", line) for line in lines), command


def test_version_short_and_long():
    for flag in ("-V", "--version"):
        proc = cli(flag)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "forensics 0.1.0\n", ""), flag


def test_help_short_and_long_plain_text_with_completion_options():
    short, long = cli("-h"), cli("--help")
    assert (short.returncode, short.stderr) == (0, "")
    assert (long.returncode, long.stdout, long.stderr) == (0, short.stdout, "")   # -h is --help
    assert "<bool>" not in short.stdout and "``" not in short.stdout
    lines = short.stdout.splitlines()
    assert lines[0] == "Usage: python -m forensics.cli [OPTIONS] COMMAND [ARGS]..."
    for option in ("-V, --version", "--debug", "--install-completion", "--show-completion", "-h, --help"):
        assert any(line.startswith(f"  {option} ") for line in lines), option
    for command in ("analyze", "compare", "export"):
        sub = cli(command, "-h")
        assert (sub.returncode, sub.stderr) == (0, ""), command
        assert "<bool>" not in sub.stdout and "``" not in sub.stdout, command   # plain help, no reST
        assert sub.stdout.startswith(f"Usage: python -m forensics.cli {command} [OPTIONS] "), command
        assert "  -h, --help " in sub.stdout, command


def test_shell_completion_is_shown_installed_and_completes(tmp_path):
    # the shell named on the command line, not the one typer's shellingham finds above the test (sh, zsh, a CI
    # runner's): "Shell sh is not supported" when the suite was started from sh
    explicit = {"SHELL": "/bin/bash", "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = run(FORENSICS, "--show-completion", "bash", **explicit)
    assert (shown.returncode, shown.stderr) == (0, "")
    assert "_FORENSICS_COMPLETE=complete_bash $1" in shown.stdout
    assert shown.stdout.rstrip().endswith("complete -o default -F _forensics_completion forensics")
    installed = run(FORENSICS, "--install-completion", "bash", HOME=str(tmp_path), **explicit)
    script = tmp_path / ".bash_completions" / "forensics.sh"
    assert (installed.returncode, installed.stdout, installed.stderr) == (
        0, f"bash completion installed in {script}\nCompletion will take effect once you restart the terminal\n", "")
    assert script.read_text() == shown.stdout.rstrip("\n")
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text().splitlines()
    completed = run(FORENSICS, _FORENSICS_COMPLETE="complete_bash", COMP_WORDS="forensics an", COMP_CWORD="1")
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, "analyze\n", "")


def in_process(*args: str, broken: bool = True, **env: str) -> subprocess.CompletedProcess:
    """``forensics ARGS`` through :func:`forensics.cli.main` in this process, with BROKEN's bug unless ``broken`` is
    false: what a process would print and its exit code (a process costs a second of imports; BROKEN runs the real
    one)."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["forensics", *args])
        if broken:
            patch.setattr(forensics.analysis, "analyze", lambda *runs: 1 / 0)
        for name in ("FORENSICS_DEBUG", "_FORENSICS_COMPLETE"):
            patch.delenv(name, raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        patch.setitem(forensics.cli._DEBUG, "on", env.get("FORENSICS_DEBUG", "") not in ("", "0"))  # as at start
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                forensics.cli.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_an_internal_error_is_one_line_unless_the_traceback_is_asked_for():
    line = "forensics: internal error: ZeroDivisionError: division by zero"
    plain = run(BROKEN, "analyze", str(CLEAN))  # a real process once; the variants in this one
    assert (plain.returncode, plain.stdout, plain.stderr) == (1, "", line + HINT + "\n")
    plain = in_process("analyze", str(CLEAN), FORENSICS_DEBUG="0")
    assert (plain.returncode, plain.stdout, plain.stderr) == (1, "", line + HINT + "\n")
    for args, env in ((("analyze", str(CLEAN)), {"FORENSICS_DEBUG": "1"}), (("--debug", "analyze", str(CLEAN)), {}),
                      (("analyze", "--debug", str(CLEAN), "-f", "json"), {})):
        debug = in_process(*args, **env)
        assert (debug.returncode, debug.stdout) == (1, ""), args
        lines = debug.stderr.splitlines()
        assert lines[0] == "Traceback (most recent call last):", args
        assert any(re.search(r'analysis\.py", line \d+, in analyze_path$', x) for x in lines), args
        assert lines[-2:] == ["ZeroDivisionError: division by zero", line], args


def test_compare_jobs_below_one_is_a_usage_error():
    for jobs in ("0", "-1"):
        proc = in_process("compare", str(SAMPLES), "-j", jobs, "--no-cache", broken=False)
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            2, "", f"forensics: error: --jobs {jobs}: must be at least 1\n"), jobs


# --- forensics.compare_runs --------------------------------------------------------------------------------------


def never(*_: object, **__: object) -> None:
    raise AssertionError("a run was read")


def test_compare_runs_refuses_bad_jobs_and_an_unknown_baseline_before_reading(monkeypatch):
    monkeypatch.setattr(compare_module, "_ingest_and_cache", never)
    monkeypatch.setattr(compare_module, "run_all", never)
    for jobs in (0, -1):
        with pytest.raises(InputError) as exc:
            compare_runs([SAMPLES], jobs=jobs, cache=False)
        assert str(exc.value) == f"--jobs {jobs}: must be at least 1"
    with pytest.raises(InputError) as exc:
        compare_runs([SAMPLES], baseline="nope", jobs=1, cache=False)
    assert str(exc.value) == "--baseline nope: no such run (runs: clean-1.3B, tr8-104B-sample)"


def test_compare_runs_with_nothing_readable(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "empty.log").write_bytes(b"")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("nothing here\n")
    with pytest.raises(InputError) as exc:
        compare_runs([tmp_path], jobs=1, cache=False)
    assert str(exc.value) == (f"no readable runs: {tmp_path / 'a'}: no readable training logs (empty.log: empty file); "
                              f"{tmp_path / 'b'}: no readable training logs (notes.txt: no metrics lines of a text format "
                              "it knows (megatron, nanogpt, modded-nanogpt, nanochat, litgpt, llm.c, torchtitan, "
                              "nanotron, olmo, fairseq, mlx-lm, mmengine, mmcv, detectron2, keras, metric-logger, "
                              "nemo, maxtext, torchtune, colossalai, composer, deepspeed-chat, deepspeed-chat-sft-rm, "
                              "hf-trainer))")


# --- reports.write ---------------------------------------------------------------------------------------------


def test_write_refuses_the_analysed_directory_and_protected_paths(spiked, tmp_path, monkeypatch):
    run_dir = spiked.read
    assert run_dir is not None and run_dir.is_dir()
    before = tree(run_dir)
    for output in (run_dir / "report.md", run_dir / "sub" / "report.md"):
        with pytest.raises(InputError) as exc:
            reports.write(spiked, output)
        assert str(exc.value) == f"{output}: inside {run_dir}, {NEVER}"
    (tmp_path / "link").symlink_to(run_dir)   # the run directory by another name
    with pytest.raises(InputError) as exc:
        reports.write(spiked, tmp_path / "link" / "report.md", "json")
    assert str(exc.value) == f"{tmp_path / 'link' / 'report.md'}: inside {run_dir}, {NEVER}"
    monkeypatch.chdir(run_dir.parent)   # a relative output, an absolute run path
    with pytest.raises(InputError) as exc:
        reports.write(spiked, Path(run_dir.name) / "report.md")
    assert str(exc.value) == f"{run_dir.name}/report.md: inside {run_dir}, {NEVER}"
    assert tree(run_dir) == before == ["train.log"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.log").write_text("x\n")
    for protect in ([other], [str(other)], [tmp_path / "nowhere", other]):
        with pytest.raises(InputError) as exc:
            reports.write(spiked, other / "deep" / "report.md", protect=protect)
        assert str(exc.value) == f"{other / 'deep' / 'report.md'}: inside {other}, {NEVER}"
    assert tree(tmp_path) == ["link", "other", "other/train.log"]


def test_write_a_single_log_protects_only_itself(tmp_path):
    log = tmp_path / "train.log"
    shutil.copy(CLEAN / "train.log", log)
    analysis = forensics.analyze_path(log)
    assert analysis.read == log
    with pytest.raises(InputError) as exc:
        reports.write(analysis, log, plots=False)
    assert str(exc.value) == f"{log}: inside {log}, {NEVER}"
    assert log.read_bytes() == (CLEAN / "train.log").read_bytes()
    assert reports.write(analysis, tmp_path / "report.md", plots=False) == [tmp_path / "report.md"]
    assert (tmp_path / "report.md").read_text() == reports.render(analysis.findings)
    assert reports.write(analysis, tmp_path / "report.json", "json", protect=[log]) == [tmp_path / "report.json"]
    assert tree(tmp_path) == ["report.json", "report.md", "train.log"]


def test_write_refuses_the_compared_runs_from_python(tmp_path):
    """``reports.write`` guards a comparison as it guards an analysis, with no ``protect=`` from the caller: every
    path given, every run found in them, and a run reached through a symlink where it lies."""
    a, b, elsewhere = tmp_path / "runs" / "a", tmp_path / "runs" / "b", tmp_path / "elsewhere"
    shutil.copytree(CLEAN, a)
    shutil.copytree(TR8, b)
    shutil.copytree(CLEAN, elsewhere)
    compared = compare_runs([a, b], cache=False, jobs=1)
    assert compared.read == (a, b)
    comparison, overlay = compared  # (it still unpacks as the pair it was)
    assert comparison is compared.comparison and overlay is compared.overlay
    before = tree(tmp_path)
    for output, run_dir, fmt in ((a / "c.md", a, "markdown"), (b / "deep" / "c.json", b, "json")):
        with pytest.raises(InputError) as exc:
            reports.write(compared, output, fmt)
        assert str(exc.value) == f"{output}: inside {run_dir}, {NEVER}"
    (tmp_path / "runs" / "linked").symlink_to(elsewhere)  # a directory of runs, one of them a symlink
    compared = compare_runs([tmp_path / "runs"], cache=False, jobs=1)
    for output, run_dir in ((tmp_path / "runs" / "c.md", tmp_path / "runs"),
                            (elsewhere / "c.md", tmp_path / "runs" / "linked")):
        with pytest.raises(InputError) as exc:
            reports.write(compared, output)
        assert str(exc.value) == f"{output}: inside {run_dir}, {NEVER}"
    assert tree(tmp_path) == sorted([*before, "runs/linked"])
    assert reports.write(compared, tmp_path / "c.json", "json") == [tmp_path / "c.json"]
    # the writers behind it are private: no unguarded way to write a report from reports
    assert not {"write_report", "write_comparison"} & {*reports.__all__, *dir(reports)}


def test_render_is_the_one_format_dispatch(tr8, tmp_path):
    """``reports.render`` picks the renderer for an analysis and a comparison alike (what the CLI prints and what
    ``reports.write`` writes), and refuses an unknown format with the CLI's one line."""
    from reports.compare_report import render_compare_json, render_compare_markdown

    compared = compare_runs([TR8, CLEAN], cache=False, jobs=1)
    assert reports.render(compared, "json") == reports.render(compared.comparison, "json") \
        == render_compare_json(compared.comparison)
    assert reports.render(compared) == reports.render(compared.comparison, "markdown") \
        == render_compare_markdown(compared.comparison)
    assert reports.render(tr8, "json") == reports.render(tr8.findings, "json") == reports.render_json(tr8.findings)
    assert reports.render(tr8) == reports.render_markdown(tr8.findings)
    for result in (tr8, tr8.findings, compared, compared.comparison):
        with pytest.raises(InputError) as exc:
            reports.render(result, "html")
        assert str(exc.value) == "--format html: unknown format (choose from markdown, json)"
    with pytest.raises(TypeError, match="cannot render a str"):
        reports.render("findings")
    proc = in_process("compare", str(TR8), str(CLEAN), "-f", "json", "-j", "1", "--no-cache", broken=False)
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", reports.render(compared, "json"))
    for fmt in ("json", "markdown"):  # and a file written are what render gives
        assert reports.write(compared, tmp_path / f"c.{fmt}", fmt, plots=False) == [tmp_path / f"c.{fmt}"]
        assert (tmp_path / f"c.{fmt}").read_text(encoding="utf-8") == reports.render(compared, fmt)


def test_write_refuses_an_unknown_format_and_wraps_a_failed_write(spiked, tmp_path):
    with pytest.raises(InputError) as exc:
        reports.write(spiked, tmp_path / "report.html", "html")
    assert str(exc.value) == "--format html: unknown format (choose from markdown, json)"
    assert tree(tmp_path) == []
    blocker = tmp_path / "file.txt"   # a regular file where a directory would have to be
    blocker.write_text("x")
    with pytest.raises(InputError) as exc:
        reports.write(spiked, blocker / "report.json", "json")
    assert str(exc.value) == f"{blocker}: cannot write (File exists)"
    with pytest.raises(InputError) as exc:
        reports.write(spiked, blocker / "report.md")   # markdown with plots: the plot directory fails first
    assert str(exc.value) == f"{blocker / 'report_files'}: cannot write (Not a directory)"
    assert tree(tmp_path) == ["file.txt"] and blocker.read_text() == "x"


def test_export_frames_guards_and_wraps_a_failed_write(tmp_path):
    """``forensics export`` is ``reports.export_frames``: from Python too, a failed write is one line that names the
    file (never a raw OSError), and nothing is written into the run it reads."""
    run_dir, blocker = tmp_path / "run", tmp_path / "file.txt"
    shutil.copytree(CLEAN, run_dir)
    blocker.write_text("x")
    (tmp_path / "taken" / "0.metrics.parquet").mkdir(parents=True)  # a directory where a frame would go
    failures = {blocker / "frames": f"{blocker / 'frames'}: cannot write (Not a directory)",
                tmp_path / "taken": f"{tmp_path / 'taken'}: cannot write (expected a file path; "
                                    f"'{tmp_path / 'taken' / '0.metrics.parquet'}' is a directory)",
                run_dir / "frames": f"{run_dir / 'frames'}: inside {run_dir}, {NEVER}"}
    for output, message in failures.items():
        with pytest.raises(InputError) as exc:
            reports.export_frames(run_dir, output)
        assert str(exc.value) == message
    proc = in_process("export", str(run_dir), "-o", str(blocker / "frames"), broken=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"forensics: error: {failures[blocker / 'frames']}\n")
    assert tree(tmp_path) == ["file.txt", "run", "run/train.log", "taken", "taken/0.metrics.parquet"]
    runs, written = reports.export_frames(f"file://{run_dir}", tmp_path / "frames")
    assert [r.name for r in runs] == ["run"] and written[0] == tmp_path / "frames" / "runs.json"
    assert parsers.read_frames(tmp_path / "frames")[0].metrics.equals(runs[0].metrics)


# --- the terminal summary and the wording ------------------------------------------------------------------------


def at_a_word(clipped: str, text: str, width: int) -> None:
    """``clipped`` is ``text`` cut at the last word boundary that fits ``width`` with " …"."""
    if len(text) <= width:
        assert clipped == text
        return
    assert clipped.endswith(" …") and len(clipped) <= width, (clipped, width)
    head = clipped[:-2]
    assert head and head == head.rstrip() and text.startswith(head), (clipped, text)
    assert text[len(head)] in " ,;:", (clipped, text)   # the word before the cut is whole
    # and no later word would have fit: what was cut off up to the width is separators and part of one word
    assert re.fullmatch(r"[ ,;:]*[^ ]*", text[len(head):width - 1]), (clipped, width)


def test_clip_cuts_real_details_at_a_word(tr8):
    run = tr8.findings.runs[0]
    texts = [a.detail for a in run.anomalies] + [c.cause for c in run.suspected_causes]
    texts += [e for c in run.suspected_causes for e in c.evidence]
    assert sum(len(t) > 100 for t in texts) >= 10
    for text in texts:
        for width in (20, 24, 33, 40, 60, 77, 100):
            at_a_word(clip(text, width), text, width)
    spike = first_trouble(run.anomalies)[1].detail
    assert spike == "loss rose to 11.42026 (2.6x the trailing median 4.316242); not back to its level at any later " \
                    "logged point of the attempt"
    assert clip(spike, 60) == "loss rose to 11.42026 (2.6x the trailing median 4.316242) …"   # no ';' before the …
    assert clip(spike, 100) == spike[:spike.index(" logged")] + " …"


def test_clip_never_exceeds_its_width():
    for text, width in (("instability shortly after the learning-rate warm-up ended", 12),
                        ("/data/checkpoints/tr8-104B/global_step7000/mp_rank_00_model_states.pt missing", 40)):
        clipped = clip(text, width)
        assert len(clipped) <= width and clipped.endswith("…"), clipped


def test_terminal_summary_cuts_at_a_word_and_shows_config_values_as_logged(tr8, tmp_path):
    out = tmp_path / "tr8.md"
    proc = in_process("analyze", str(TR8), "-o", str(out), "--no-plots", broken=False, COLUMNS="300")
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "this is a ~58B model, not 104B: ffn_hidden_size 20480 is 1.25x hidden (expected 65536)"
    assert lines[-1] == f"report written to {out}"
    assert tree(tmp_path) == ["tr8.md"]
    rows = [[cell.strip() for cell in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    assert rows == [["1", "10-7360", "scratch", "", "nan"],
                    ["2", "6220-7150", "step 6210 (rollback)", "seed: 42 → 43", "nan"],
                    ["3", "3010-5400", "step 3000 (rollback)", "adam_beta2: 0.999 → 0.95", "diverged"]]
    first = first_trouble(tr8.findings.runs[0].anomalies)
    troubles = [line for line in lines if line.startswith("attempt ")]
    assert len(troubles) == len(first) == 3
    for line, (attempt, x) in zip(troubles, sorted(first.items()), strict=True):
        lead = f"attempt {attempt}: {x.kind.replace('_', ' ')} at step {x.step}: "
        assert line.startswith(lead), line
        at_a_word(line[len(lead):], x.detail, 100)
    assert troubles[0] == ("attempt 1: loss spike at step 7010: loss rose to 11.42026 (2.6x the trailing median "
                           "4.316242); not back to its level at any later …")
    assert [line for line in lines if line.endswith("…")] == troubles   # nothing else is cut


def test_terminal_summary_prints_logged_numbers_not_rounded_floats(tr8):
    findings = copy.deepcopy(tr8.findings)
    findings.runs[0].attempts[1].config_changes = {"loss_scale": [1048576.0, 65536.0], "lr": [1.2345678e-4, 6e-05]}
    console = Console(file=io.StringIO(), width=300, highlight=False)
    print_summary(findings, [Path("out.md")], console)
    rows = [[cell.strip() for cell in line.strip("│").split("│")] for line in console.file.getvalue().splitlines()
            if line.startswith("│ 2 ")]
    assert rows == [["2", "6220-7150", "step 6210 (rollback)", "loss_scale: 1048576 → 65536, lr: 0.00012345678 → 6e-05",
                     "nan"]]


def test_one_step_is_singular(tr8, spiked):
    for analysis in (tr8, spiked):
        for text in (reports.render(analysis.findings, "markdown"), reports.render(analysis.findings, "json")):
            assert not re.search(r"(?<![\d.])1 steps\b", text)
    detail = "loss rose to 200 (64.4x the trailing median 3.107432); back to its level by step 2001 (1 step)"
    markdown = reports.render(spiked.findings, "markdown").splitlines()
    assert f"  - step 2000: **loss spike** (loss): {detail}" in markdown
    doc = json.loads(reports.render(spiked.findings, "json"))
    assert [a["detail"] for a in doc["runs"][0]["anomalies"] if a["kind"] == "loss_spike"] == [detail]



def test_log_text_with_rich_markup_or_escapes_prints_as_it_is(tr8):
    """Issue 18: '[/x]' in a run name or a config value broke the terminal summary (rich read it as markup)."""
    from rich.console import Console

    from reports.terminal import print_summary

    run = tr8.findings.runs[0]
    saved = run.name, run.attempts[1].config_changes
    run.name, run.attempts[1].config_changes = "evil[/x] [bold]run", {"seed": ["[/y]", "43\x1b[2J"]}
    try:
        console = Console(record=True, width=300, highlight=False)
        print_summary(tr8.findings, [Path("out.md")], console)
    finally:
        run.name, run.attempts[1].config_changes = saved
    text = console.export_text()
    assert "evil[/x] [bold]run: attempts" in text
    assert "seed: [/y] → 43\\x1b[2J" in text and "\x1b" not in text


@pytest.mark.parametrize("to_file", [False, True])
def test_analysing_a_short_log_loads_no_heavy_module(to_file, tmp_path):
    """§4: the analysis of the 2,000-line sample (every detector, the precursors, the plateau check) runs without
    scipy.stats (0.2-0.5 s to import), numba (0.3 s) or matplotlib, and prints its chronicle, or writes it and its
    terminal summary, without the comparison's modules (forensics.comparison, forensics.sweep), nor the protobuf
    runtime and YAML (only W&B files need them), nor rich when it prints no summary; with one OpenBLAS thread
    (issue 17: the noise fits' tiny L-BFGS-B problems spent their time in a pool of BLAS threads)."""
    code = ("import os, sys; from forensics.cli import main; sys.argv = ['forensics', 'analyze', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
            "print(sorted(m for m in ('scipy.stats', 'numba', 'matplotlib', 'forensics.comparison', 'forensics.sweep',"
            " 'reports.compare_report', 'google.protobuf', 'yaml', 'rich') if m in sys.modules))")
    output = ["-o", str(tmp_path / "tr8.md"), "--no-plots"] if to_file else []
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code, str(TR8), *output], capture_output=True, text=True, check=True,
                         env=env)
    # the analysis ran and printed its chronicle, or wrote it and printed its summary
    assert (tmp_path / "tr8.md").read_text().startswith("# Incident chronicle") if to_file else "anomal" in out.stdout
    assert out.stdout.strip().splitlines()[-2:] == ["1", "['rich']" if to_file else "[]"]


def test_theil_sen_is_scipys():
    from scipy.stats import theilslopes

    from forensics.theil_sen import theil_sen

    rng = np.random.default_rng(3)
    for n in (2, 3, 17, 200):
        x = np.sort(rng.integers(0, n, n)).astype(float)  # ties in x
        y = np.round(rng.standard_t(3, n), 1)              # and in y
        r = theilslopes(y, x)
        assert theil_sen(y, x) == (r.slope, r.low_slope, r.high_slope)
    assert np.isnan(theil_sen(np.array([0.0, np.nan, 1.0]), np.arange(3.0))).all()  # NaN propagates, as in scipy
    slope, low, high = theil_sen(np.zeros(3), np.array([0.0, 1.0, 1.0]))  # ties everywhere: no interval
    assert slope == 0.0 and np.isnan(low) and np.isnan(high)
