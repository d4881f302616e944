"""Console formats that were refused as "not a recognised training log": build-nanogpt's ("reproduce GPT-2") step
lines and log.txt, and fairseq's ``--log-format simple``. Real files from public repositories (see
fixtures/real/SOURCES.md), values pinned from their lines."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import forensics
from parsers import load_run
from reports import render_markdown

REAL = Path(__file__).parent / "fixtures" / "real"
FORGE = REAL / "build_nanogpt" / "dhairyag_ShakespeareGPT-Forge_log.md"
STDOUT = REAL / "build_nanogpt" / "logbob0401_build-nanogpt_rec_202411010420_v100_all_fp32.txt"
LOG_TXT = REAL / "build_nanogpt" / "logbob0401_build-nanogpt_log_202411010420.txt"
PRACTICE = REAL / "build_nanogpt" / "logbob0401_build-nanogpt_practice.md"


def points(path: Path, metric: str) -> list[tuple]:
    return load_run(path).metrics.filter(metric=metric).select("step", "value").rows()


# --- build-nanogpt -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "metric", "first", "last", "n"), [
    # "step 0 | loss: 10.9677 | dt: 25213.31ms | tok/sec: 5198.52 | norm: 6.74 | lr: 0.000010" ... "step 250 | ..."
    (FORGE, "loss", (0, 10.9677), (250, 0.0052), 26),
    (FORGE, "grad_norm", (0, 6.74), (250, 0.08), 26),
    (FORGE, "lr", (0, 0.00001), (250, 0.000722), 26),
    (FORGE, "iteration_time_ms", (0, 25213.31), (250, 18931.22), 26),
    (FORGE, "tokens_per_second", (0, 5198.52), (250, 6923.59), 26),
    # "step     0 | loss: 10.955603 | lr 8.3916e-07 | norm: 59.6808 | dt: 20759.67ms | tok/sec: 25255.12" ... 841
    (STDOUT, "loss", (0, 10.955603), (841, 4.304033), 842),
    (STDOUT, "lr", (0, 8.3916e-07), (841, 5.9994e-04), 842),
    (STDOUT, "grad_norm", (0, 59.6808), (841, 2.7), 842),
    (STDOUT, "iteration_time_ms", (0, 20759.67), (841, 4812.28), 842),
    # the same run's log.txt: "0 val 10.9512", "0 hella 0.2469", "0 train 10.955603", ... "841 train 4.304033"
    (LOG_TXT, "loss", (0, 10.955603), (841, 4.304033), 842),
    (LOG_TXT, "val_loss", (0, 10.9512), (750, 4.5786), 4),
    (LOG_TXT, "hellaswag_acc", (0, 0.2469), (750, 0.25), 4),
])
def test_build_nanogpt_values(path: Path, metric: str, first: tuple, last: tuple, n: int) -> None:
    run = load_run(path)
    assert [src.format for src in run.sources] == ["nanogpt"]
    rows = run.metrics.filter(metric=metric).select("step", "value").rows()
    assert len(rows) == n and rows[0] == first and rows[-1] == last


def test_build_nanogpt_stdout_and_log_txt_agree() -> None:
    """The stdout and the log.txt of one run give the same losses at the same steps."""
    assert points(STDOUT, "loss") == points(LOG_TXT, "loss")
    assert points(LOG_TXT, "val_loss") == [(0, 10.9512), (250, 6.1659), (500, 5.2842), (750, 4.5786)]


def test_validation_printed_at_the_top_of_its_step() -> None:
    """build-nanogpt evaluates at the top of step 500, before step 500's line: "step   499 | ...",
    "validation loss: 5.3183", "HellaSwag accuracy: 2391/10042=0.2381", "step   500 | ..."."""
    assert points(PRACTICE, "val_loss") == [(500, 5.3183)]
    assert points(PRACTICE, "hellaswag_acc") == [(500, 0.2381)]
    loss = points(PRACTICE, "loss")
    assert len(loss) == 14 and (499, 5.164181) in loss and (11059, 3.166646) in loss and loss[-1] == (12586, 3.135432)
    run = load_run(PRACTICE)
    assert run.attempts == [1]
    assert run.events.filter(kind="elision").height == 3  # its "......" lines


def test_validation_with_no_step_after_it_is_not_put_at_the_step_before(tmp_path: Path) -> None:
    """A log that ends at "validation loss: 5.3183" (step 500's line never printed) does not claim it for step 499."""
    lines = PRACTICE.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = tmp_path / "practice.md"
    cut.write_text("".join(lines[:lines.index("validation loss: 5.3183\n") + 1]), encoding="utf-8")
    run = load_run(cut)
    assert run.metrics.filter(metric="val_loss").height == 0
    assert run.metrics.filter(metric="loss").select("step", "value").rows()[-1] == (499, 5.164181)


def test_model_summary_parameter_count() -> None:
    """"Total Parameters: 124,475,904" in the model summary printed before training."""
    counts = load_run(FORGE).events.filter(kind="parameter_count")
    assert counts.select("value").to_series().to_list() == [124475904.0]
    run = forensics.analyze(load_run(FORGE)).runs[0]
    assert [(a.start_step, a.end_step) for a in run.attempts] == [(0, 250)]


def test_build_nanogpt_line_cut_by_the_end_of_the_file(tmp_path: Path) -> None:
    """The last step line cut inside its lr: the step and its loss are kept, the cut lr is not used."""
    text = STDOUT.read_text(encoding="utf-8")
    cut = tmp_path / "cut.txt"
    cut.write_text(text[:text.rindex("| lr 5.9994e-04 | norm: 2.7000") + len("| lr 5.99")], encoding="utf-8")
    run = load_run(cut)
    assert run.metrics.filter(metric="loss").select("step", "value").rows()[-1] == (841, 4.304033)
    assert run.metrics.filter(metric="lr").select("step", "value").rows()[-1] == (840, 5.9994e-04)
    assert any("cut short" in w for w in run.warnings)


def test_build_nanogpt_damaged_line_is_skipped(tmp_path: Path) -> None:
    """A step line whose loss is not a number costs only its own loss; the lines around it are read."""
    lines = STDOUT.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[400] = lines[400].replace("loss: 5.566013", "loss: \x00\ufffd#")
    damaged = tmp_path / "damaged.txt"
    damaged.write_text("".join(lines), encoding="utf-8")
    loss = dict(load_run(damaged).metrics.filter(metric="loss").select("step", "value").rows())
    assert 400 not in loss and loss[399] == 5.591611 and loss[401] == 5.577208 and len(loss) == 841


# --- fairseq --log-format simple ---------------------------------------------------------------------------------
FAIRSEQ = REAL / "fairseq"
FAIRSCALE = FAIRSEQ / "fairscale_pr121_simple_overflow_excerpt.txt"
ISSUE515 = FAIRSEQ / "fairseq_issue515_overflow_excerpt.txt"
ISSUE514 = FAIRSEQ / "fairseq_issue514_simple_0x_excerpt.txt"
ISSUE512 = FAIRSEQ / "fairseq_issue512_overflow_to_min_scale_excerpt.txt"


def overflows(path: Path) -> list[tuple]:
    return load_run(path).events.filter(kind="overflow").select("step", "value").rows()


@pytest.mark.parametrize(("path", "metric", "rows"), [
    # "| INFO | train_inner | epoch 001:      4 / 78 loss=1.006, ppl=2.01, ..., num_updates=1, lr=2.24975e-07,
    # gnorm=0.056, loss_scale=16, ..." (its lines "2 / 78" and "3 / 78" print no num_updates: no update, no step)
    (FAIRSCALE, "loss", [(1, 1.006)]),
    (FAIRSCALE, "grad_norm", [(1, 0.056)]),
    (FAIRSCALE, "lr", [(1, 2.24975e-07)]),
    (FAIRSCALE, "loss_scale", [(1, 16.0)]),
    (FAIRSCALE, "ppl", [(1, 2.01)]),
    # fairseq 0.6 (2019): "| epoch 001:    200 / 1374 loss=14.351, ppl=20899.56, ..., num_updates=190, ..."
    (ISSUE515, "loss", [(190, 14.351), (290, 13.689), (389, 13.137), (486, 12.636)]),
    (ISSUE515, "loss_scale", [(190, 0.062), (290, 0.062), (389, 0.031), (486, 0.004)]),
    (ISSUE515, "grad_norm", [(190, 3.901), (290, 3.057), (389, 2.587), (486, 2.302)]),
    # its end-of-epoch averages ("| epoch 008 | loss 6.326 | ... | num_updates 21896") are not steps' losses
    (ISSUE514, "loss", [(22897, 6.22), (23897, 6.234), (25634, 6.144)]),
    (ISSUE514, "lr", [(22897, 0.000208983), (23897, 0.000204564), (25634, 0.000197511)]),
    # "| epoch 008 | valid on 'valid' subset | valid_loss 6.43844 | ... | valid_ppl 37.61 | num_updates 21896 | ..."
    (ISSUE514, "val_loss", [(21896, 6.43844), (24633, 6.37204)]),
    (ISSUE514, "val_ppl", [(21896, 37.61), (24633, 35.44)]),
    (ISSUE512, "val_loss", [(10198, 8.30118)]),
])
def test_fairseq_simple_values(path: Path, metric: str, rows: list[tuple]) -> None:
    run = load_run(path)
    assert [src.format for src in run.sources] == ["fairseq"]
    assert run.metrics.filter(metric=metric).select("step", "value").rows() == rows


def test_fairseq_overflow_is_an_overflow_event_at_the_update_it_hit() -> None:
    """"NOTE: overflow detected, setting loss scale to: 16.0" before the line of update 1: an overflow at step 1
    whose value is the new loss scale."""
    assert overflows(FAIRSCALE) == [(1, 16.0)]
    assert load_run(FAIRSCALE).metrics["step"].unique().to_list() == [1]


def test_fairseq_0x_overflow_warnings() -> None:
    """"| WARNING: overflow detected, setting loss scale to: 0.0625" lines, each at the next update printed."""
    assert overflows(ISSUE515) == [(190, 0.0625), (389, 0.03125), (486, 0.015625), (486, 0.0078125), (486, 0.00390625)]


def test_fairseq_overflows_down_to_the_minimum_scale_then_a_traceback() -> None:
    """fairseq #512: twelve overflows after update 10198 halve the scale from 0.25 to 0.0001220703125, then the
    traceback of "Minimum loss scale reached"."""
    run = load_run(ISSUE512)
    got = overflows(ISSUE512)
    assert len(got) == 12 and {step for step, _ in got} == {10199}
    assert [value for _, value in got] == [0.25 / 2 ** k for k in range(12)] and got[-1][1] == 0.0001220703125
    assert run.events.filter(kind="traceback").height == 1


def test_fairseq_json_gradient_overflow_note() -> None:
    """The JSON format's logs print the overflow the newer way: "NOTE: gradient overflow detected, ignoring gradient,
    setting loss scale to: 2.0", then 1.0, before update 3 (whose loss scale is 1), in each of the README's runs."""
    assert overflows(FAIRSEQ / "fairseq_fsdp_README.md") == [(3, 2.0), (3, 1.0), (3, 2.0), (3, 1.0)]


def test_fairseq_simple_log_is_analysed() -> None:
    """The excerpt that was refused ("fairseq log without metrics lines") reads as one attempt at update 1."""
    run = forensics.analyze(load_run(FAIRSCALE)).runs[0]
    assert [(a.start_step, a.end_step) for a in run.attempts] == [(1, 1)]


def test_fairseq_end_of_epoch_averages_left_unread_are_said() -> None:
    """The end-of-epoch averages ("| epoch 009 | loss 3.976 | ... | loss_scale 0.000 | ...") are no steps and are not
    read: said, so that a loss or loss scale printed only there does not read as "Not found" without a word (fairseq
    #1529's only training line is such a summary, its loss_scale 0.000; audit U11)."""
    run = load_run(ISSUE514)
    assert [w.split(": ", 1)[1] for w in run.warnings if "end-of-epoch" in w] == [
        "2 lines of end-of-epoch averages (loss, gnorm, lr, loss_scale over a whole epoch; not steps):"
        " not read"]


def test_an_error_printed_between_an_evaluation_and_its_iteration_line_is_not_the_end(tmp_path: Path) -> None:
    """nanoGPT prints "step N: train loss ..., val loss ..." before "iter N: ...": an error caught there (W&B's HTTP
    500 while logging the evaluation) is followed by the iteration line, so the run went on; a save there is at the
    evaluation's step (review of the event-step change)."""
    lines = [f"iter {i}: loss {4 - i / 2000:.4f}, time 100.00ms, mfu 40.00%" for i in range(0, 5000, 10)]
    tail = ["step 5000: train loss 2.5000, val loss 2.5500", "saving checkpoint to out",
            "wandb: ERROR Error while calling W&B API: internal database error (<Response [500]>)",
            "Traceback (most recent call last):",
            "requests.exceptions.HTTPError: 500 Server Error: Internal Server Error for url: https://api.wandb.ai/graphql",
            "iter 5000: loss 2.5000, time 100.00ms, mfu 40.00%"]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines + tail) + "\n")
    run = forensics.analyze(load_run(log)).runs[0]
    assert (run.attempts[0].end_reason, run.attempts[0].end_step) == ("running", 5000)
    events = load_run(log).events
    assert events.filter(kind="checkpoint_saving")["step"].to_list() == [5000]
    assert events.filter(kind="error")["step"].to_list() == [4990]


def test_a_scale_that_falls_below_1_says_where_it_fell_from(tmp_path: Path) -> None:
    """A scale halving from 128 at every logged update (never holding, as a start-up search does not) down to 0.25:
    the collapse said "from the first point the log shows of it", with the log showing 128 at update 100 (review)."""
    lines = []
    for k in range(1, 11):
        lines.append(f"| epoch 001:    {100 * k} / 1374 loss={14.4 - k / 10:.3f}, ppl=2000.0, num_updates={100 * k}, "
                     f"lr=4.8e-06, gnorm=3.901, loss_scale={128 / 2 ** (k - 1):g}")
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    run = forensics.analyze(load_run(log)).runs[0]
    [collapse] = [a for a in run.anomalies if a.kind == "loss_scale_collapse"]
    assert (collapse.baseline, collapse.value) == (128.0, 0.25)
    assert collapse.detail.startswith("loss scale fell from 128 (step 100) to 0.25 by step 1000")


def test_build_nanogpt_forks_that_print_commas_for_bars() -> None:
    """aakashvardhan/s21-gpt2's log.md (audit Z3): "step 0001, loss: 9.502789, norm: 10.649774551391602, lr: 1.2000e-04,
    time: 449.89ms, tokens/sec: 36418.0" was refused as no known format. 13 pasted runs of steps 0-49 (the first
    ones print the loss alone), then a 5000-step run pasted as steps 1-50 and 4950-4999 around a "...": 14 attempts."""
    run = load_run(REAL / "build_nanogpt" / "aakashvardhan_s21-gpt2_log.md")
    last = run.metrics.filter(pl.col("attempt") == 14)
    assert run.metrics["attempt"].max() == 14
    assert last.filter(pl.col("step") == 1).sort("metric").select("metric", "value").rows() == [
        ("grad_norm", 10.649774551391602), ("iteration_time_ms", 449.89), ("loss", 9.502789), ("lr", 1.2e-4),
        ("tokens_per_second", 36418.0)]
    assert (last["step"].min(), last["step"].max()) == (1, 4999)
    first = run.metrics.filter((pl.col("attempt") == 1) & (pl.col("metric") == "loss"))
    assert first.select("step", "value").row(0) == (0, 10.899394989013672) and first.height == 50


def test_a_blip_a_few_percent_above_its_median_is_not_said_as_1x() -> None:
    """"722 train 4.823770" after 714-721 (lower median "716 train 4.622132"): 1.04x, where one decimal said "1.0x",
    a rise that reads as none."""
    text = render_markdown(forensics.analyze(load_run(LOG_TXT)))
    assert "2 single-step loss blips, largest 1.04x at step 722, within the run's noise tail" in text
