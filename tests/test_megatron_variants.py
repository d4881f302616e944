"""Megatron lines as older versions printed them and as pastes carry them, a value cut by the end of the file, and
a short W&B chart export with a hole (not a sample)."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from parsers import load_run
from parsers.wandb_history import sampling_note

# Megatron-LM 1.x (DeepSpeedExamples' Megatron-LM): fields without colons; "lm loss NAN" on the one bad interval
_OLD_LINE = (" iteration {:8d}/     300 | elapsed time per iteration (ms): {} | learning rate {} | lm loss {} | "
             "loss scale {} |\n")
OLD = "".join(_OLD_LINE.format(*row) for row in [
    (100, "1048.5", "1.258E-04", "4.799004E+00", "32768.0"),
    (200, "1020.9", "5.257E-05", "NAN", "16384.0"),
    (300, "1018.4", "1.806E-06", "4.669175E-03", "16384.0"),
])


def _wide(path: Path) -> list[tuple]:
    return load_run(path).metrics.pivot(on="metric", index="step", values="value", aggregate_function="first") \
        .select("step", "lr", "loss", "loss_scale").rows()


def test_oldest_megatron_fields_without_colons(tmp_path: Path) -> None:
    log = tmp_path / "old.log"
    log.write_text(OLD)
    rows = _wide(log)
    assert rows[0] == (100, 1.258e-04, 4.799004, 32768.0) and rows[2] == (300, 1.806e-06, 4.669175e-03, 16384.0)
    assert rows[1][0] == 200 and math.isnan(rows[1][2]) and rows[1][3] == 16384.0  # only that interval is NaN


def test_pasted_lines_with_quote_markers_backticks_and_prompts(tmp_path: Path) -> None:
    line = (" iteration {:8d}/     500 | consumed samples: {} | learning rate: 1.500E-04 | lm loss: {:.6E} | "
            "loss scale: 128.0 |")
    marks = ["> ", "> > ", "`", "$ "]
    log = tmp_path / "issue.txt"
    log.write_text("".join(f"{m}{line.format(100 * (k + 1), 100 * (k + 1), 7 - k / 10)}\n" for k, m in enumerate(marks)))
    assert [(step, loss) for step, _, loss, _ in _wide(log)] == [(100, 7.0), (200, 6.9), (300, 6.8), (400, 6.7)]


def test_a_number_cut_by_the_end_of_the_file_is_not_a_value(tmp_path: Path) -> None:
    log = tmp_path / "cut.log"
    log.write_text(" iteration      100/     500 | learning rate: 1.5E-04 | lm loss: 7.12E+00 | loss scale: 128.0 |\n"
                   " iteration      200/     500 | learning rate: 1.5E-04 | lm loss: 2")
    run = load_run(log)
    loss = run.metrics.filter(metric="loss").select("step", "value").rows()
    assert loss == [(100, 7.12)]
    assert run.metrics.filter(metric="lr", step=200)["value"].to_list() == [1.5e-04]  # the fields before the cut
    assert any("cut short by the end of the file; the field it cut ('lm loss: 2')" in w for w in run.warnings)


def test_a_short_chart_export_with_one_missing_step_is_not_sampled() -> None:
    steps = pl.Series([s for s in range(150) if s != 77])
    assert sampling_note(steps, "chart.csv", chart=True) is None
    thinned = pl.Series(sorted(set(range(0, 20_000, 7)) | {3, 5}))
    assert sampling_note(thinned, "history.csv").startswith("history.csv: sampled history dump: 2,860 points")


_ITERATION = (" iteration       10/    1000 | consumed samples: 10 | elapsed time per iteration (ms): 100.0 | learning rate:"
              " 1.0E-04 | global batch size: 8 | lm loss: 2.500000E+00 | loss scale: 1.0 | grad norm: 1.0 |"
              " number of skipped iterations: 0 | number of nan iterations: 0 |")


def test_numbers_beyond_int64_are_left_out_with_a_warning_not_an_internal_error(tmp_path: Path) -> None:
    """Issue 18: an iteration of 2**63, a total of 1e20 and a checkpoint iteration of 1e20 raised."""
    beyond = tmp_path / "beyond.log"
    beyond.write_text(_ITERATION + "\n" + _ITERATION.replace("iteration       10", "iteration 9223372036854775808") + "\n")
    run = load_run(beyond)
    assert run.metrics.filter(metric="loss").select("step", "value").rows() == [(10, 2.5)]
    assert run.warnings == [f"{beyond}: 1 iteration line(s) whose iteration number is not a 64-bit integer were left "
                            "out (first at line 2)"]
    total = tmp_path / "total.log"
    total.write_text(_ITERATION + "\n" + _ITERATION.replace("/    1000", "/ 100000000000000000000") + "\n")
    assert "train_iters" not in load_run(total).configs.filter(attempt=2)["key"].to_list()
    loaded = tmp_path / "loaded.log"
    loaded.write_text(_ITERATION + "\n successfully loaded checkpoint from /x at iteration 100000000000000000000\n")
    event = load_run(loaded).events.filter(kind="checkpoint_load")
    assert event.select("step", "value").rows() == [(10, 1e20)]  # the step it came after; the number as printed


def test_carriage_returns_alone_end_lines(tmp_path: Path) -> None:
    """Issue 18: a Megatron log with CR-only line ends gave zero steps and no warning."""
    lf = tmp_path / "lf" / "log.txt"
    cr = tmp_path / "cr" / "log.txt"
    lf.parent.mkdir()
    cr.parent.mkdir()
    text = "\n".join([_ITERATION, _ITERATION.replace("iteration       10", "iteration       20")]) + "\n"
    lf.write_text(text)
    cr.write_bytes(text.replace("\n", "\r").encode())
    got = load_run(cr)
    assert got.metrics.filter(metric="loss").select("step", "value").rows() == [(10, 2.5), (20, 2.5)]
    assert got.warnings == []
    assert got.metrics.drop("source").equals(load_run(lf).metrics.drop("source"))


def test_carriage_return_logs_learn_their_layout_from_lines_not_the_whole_block(tmp_path: Path) -> None:
    """A CR-only log was sampled for its layout as one line (the whole block): a 365 KB tr8 log cost 1 GB and 2 s."""
    from parsers.megatron import learn_layout
    from parsers.textfile import inspect_text

    sample = Path(__file__).parent.parent / "sample_logs" / "tr8-104B-sample" / "main_log.txt"
    cr = tmp_path / "cr.log"
    cr.write_bytes(sample.read_bytes().replace(b"\n", b"\r"))
    prefix = "^"
    assert learn_layout(inspect_text(cr, "cr.log"), prefix) == learn_layout(inspect_text(sample, "log"), prefix)


def test_absurdly_long_lines_are_read_to_their_first_mib_in_bounded_memory(tmp_path: Path) -> None:
    """Issue 18: a 1 MB iteration line cost 1.3 GB and a 50 MB one 24 GB (the line was copied into every row of a
    frame, see ``schema.coalesce_text``). Now an 8 MB line and 8 MB of junk without a line end keep only their first
    MiB; the values before them and on the long line are kept."""
    import subprocess
    import sys

    log = tmp_path / "long" / "train.log"
    log.parent.mkdir()
    second = _ITERATION.replace("iteration       10", "iteration       20")
    before = "".join(_ITERATION.replace("iteration       10", f"iteration {n:>8}") + "\n" for n in range(1, 10))
    log.write_bytes((before * 150 + _ITERATION + "\n" + second + " junk: " + "x" * (8 << 20) + "\n" + _ITERATION.replace(
        "iteration       10", "iteration       30") + "\n").encode() + b"y" * (8 << 20))
    # the peak of the child's own memory (VmHWM): its ru_maxrss keeps the peak of the process it was forked from
    # (Linux carries it across exec), which is the whole test session's after a long suite
    probe = ("import re, sys; from parsers import load_run; run = load_run(sys.argv[1]);"
             "print(run.metrics.filter(metric='loss')['step'].to_list()); print(run.warnings[0]);"
             "print(int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]) >> 10)")
    out = subprocess.run([sys.executable, "-c", probe, str(log.parent)], capture_output=True, text=True, check=True)
    steps, warning, peak_mb = out.stdout.splitlines()
    assert steps == str([*range(1, 10)] * 150 + [10, 20, 30])
    first = len(before * 150 + _ITERATION) + 1
    assert warning == (f"train.log: 2 lines longer than 1 MiB (the longest 8,388,880 bytes, the first at byte {first:,});"
                       " only their first 1 MiB was read")
    assert int(peak_mb) < 600, peak_mb  # 8.4 GB before


def test_odd_argument_values_do_not_break_the_model_check_or_the_json(tmp_path: Path) -> None:
    """Issue 18: literal-eval results that are unhashable or not JSON keys, non-finite and huge numbers in the
    arguments used by the shape check."""
    import json

    import forensics

    log = tmp_path / "args.log"
    log.write_text("\n".join([
        "------------------------ arguments ------------------------",
        "  seq_length ...................................... 1e400",
        "  hidden_size ..................................... {[1]: 2}",
        "  num_layers ...................................... " + "9" * 400,
        "  ffn_hidden_size ................................. {(1, 2): 3}",
        "  num_attention_heads ............................. nan",
        "-------------------- end of arguments ---------------------",
        _ITERATION, _ITERATION.replace("iteration       10", "iteration       20"), ""]))
    import reports

    findings = forensics.analyze(load_run(log))
    assert [a.end_step for a in findings.runs[0].attempts] == [20]
    doc = json.loads(reports.render(findings, "json"))
    assert doc["runs"][0]["config"]["hidden_size"] == "{[1]: 2}"  # kept as printed: it has no typed value
    assert doc["runs"][0]["config"]["ffn_hidden_size"] == "{(1, 2): 3}"


@pytest.mark.parametrize(("key", "value"), [
    ("hidden_size", "1e400"), ("hidden_size", "-5"), ("num_layers", "9" * 400), ("ffn_hidden_size", "9" * 400),
    ("train_iters", "9" * 400), ("global_batch_size", "9" * 400), ("lr_warmup_samples", "1e400"),
    ("log_interval", "1e400"),
])
def test_settings_no_model_or_schedule_could_have_are_unknown(tmp_path: Path, key: str, value: str) -> None:
    """Issue 18: a size or count of 1e400, 400 digits or below zero raised OverflowError or a math domain error in
    the shape check and the schedule (an internal error); such a setting is now unknown there."""
    import re

    import forensics

    sample = (Path(__file__).parent.parent / "sample_logs" / "tr8-104B-sample" / "main_log.txt").read_text()
    text, n = re.subn(rf"(  {key} \.+ )(\S.*)", lambda m: m.group(1) + value, sample)
    assert n
    (tmp_path / "main_log.txt").write_text(text)
    findings = forensics.analyze(load_run(tmp_path)).runs[0]
    assert findings.attempts  # analysed
    if key in {"hidden_size", "num_layers"}:
        assert findings.model.parameters_from_shape is None


def test_an_lr_still_rising_at_the_last_line_is_not_called_a_peak() -> None:
    """Megatron-Bridge issue 4024: the LR goes 5.8e-05, 6.0e-05, 6.2e-05 over the three lines pasted; the chronicle
    said "LR peaks at 6.2e-05 (step 31); no warm-up seen" (the first rate was not below half the last)."""
    import forensics

    log = Path(__file__).parent / "fixtures" / "real" / "megatron" / "issue__NVIDIA-NeMo+Megatron-Bridge__issue4024.txt"
    schedule = forensics.analyze(load_run(log)).runs[0].schedule
    assert (schedule.lr_peak, schedule.lr_peak_step, schedule.still_warming_up) == (6.2e-05, 31, True)
    assert schedule.warmup_end_step is None
