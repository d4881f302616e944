"""Plain step tables written by custom training loops (CSV with a ``step,loss,lr,...`` header, JSON lines of
``{"step": 100, "loss": 2.31}``), appended to across restarts: real files, their values as the lines hold them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import forensics
import reports
from parsers import InputError, load_run, load_runs, registry, step_table
from parsers.reader import NotThisFormat, ReadContext

REAL = Path(__file__).parent / "fixtures" / "real"
TABLES = REAL / "step_table"
SLM = TABLES / "akawslearn-ai+slm_training__metrics.jsonl"
MOSHI = TABLES / "MoshiHead+personaplex-helium-distillation-v4__logs_train_log.csv"
CHESS = TABLES / "adziomdzioraeficode+chess__train_log.csv"
RETRO = TABLES / "AlexCheema+RetroInference__train_log.csv"


def value_at(run, metric: str, step: int, attempt: int) -> float:
    rows = run.metrics.filter(metric=metric, step=step, attempt=attempt)
    assert rows.height == 1, rows
    return rows["value"][0]


def spans(run) -> list[tuple[int, int, int]]:
    return run.metrics.filter(metric="loss").group_by("attempt", maintain_order=True).agg(
        lo=pl.col("step").min(), hi=pl.col("step").max()).rows()


def chronicle(run) -> tuple[forensics.RunFindings, list[str]]:
    findings = forensics.analyze(run)
    return findings.runs[0], reports.render(findings, "markdown").splitlines()


def test_json_lines_appended_by_five_launches_are_five_attempts() -> None:
    """slm_training's metrics.jsonl: a smoke launch logged step 20, another step 20 again (its cost from $0.0758),
    the full run 20-7580, then two resumes from the step-7500 checkpoint, each logging from 7520."""
    run = load_run(SLM)
    assert [src.format for src in run.sources] == ["step-table"]
    assert run.attempts == [1, 2, 3, 4, 5]
    assert spans(run) == [(1, 20, 20), (2, 20, 40), (3, 20, 7580), (4, 7520, 7560), (5, 7520, 7760)]
    # {"step": 7520, "loss": 2.2500650882720947, ...} (line 379), 2.205518923699856 (383), 2.205503799021244 (386)
    assert [value_at(run, "loss", 7520, a) for a in (3, 4, 5)] == [2.2500650882720947, 2.205518923699856,
                                                                    2.205503799021244]
    assert value_at(run, "lr", 7760, 5) == 6.000920772900043e-05  # the last line
    assert run.metrics.filter(metric="loss").height == 398  # every line logs the loss
    assert run.events.select("attempt", "line", "text").rows() == [
        (2, 2, "step 20 logged again: the run was restarted"),
        (3, 4, "step went back from 40 to 20: the run was restarted"),
        (4, 383, "step went back from 7580 to 7520: the run was restarted"),
        (5, 386, "step went back from 7560 to 7520: the run was restarted"),
    ]
    assert run.metrics["wall_time"].null_count() == run.metrics.height  # no clock in the file
    findings, lines = chronicle(run)
    last = findings.attempts[-1]
    assert (last.resumed_from_step, last.resumed_from_inferred, last.rollback) == (7500, True, True)
    assert (last.end_step, last.target_step, last.started_at) == (7760, None, None)  # no planned length, no clock
    assert ("| 5 | 7520–7760 | – | – | – | – | the log ends with no end printed: still running, cut off, or stopped "
            "without a word |") in lines
    assert "- **Other scalars read** (checked for NaN/Inf only): tokens, usd." in lines


def test_a_csv_relaunched_twice_from_step_825_with_a_text_column() -> None:
    """personaplex-helium-distillation-v4's logs/train_log.csv: steps 1, 10, ..., 830, then 826, 830 twice (two
    relaunches from step 825, each logging its first step as the first launch logged step 1), then 840-925. Its
    `phase` column holds text; its total loss is `total`, a name no reader knows."""
    run = load_run(MOSHI)
    assert run.attempts == [1, 2, 3]
    assert run.metrics.filter(metric="grad_norm").group_by("attempt", maintain_order=True).agg(
        lo=pl.col("step").min(), hi=pl.col("step").max(), n=pl.len()).rows() == [(1, 1, 830, 84), (2, 826, 830, 2),
                                                                                 (3, 826, 925, 12)]
    # 790,P3_on_policy,1.24594,...,4.499e-05,5.9528,1,... (line 81); 826,...,26.196,3.818e-05,1.4963 (line 88)
    assert value_at(run, "grad_norm", 790, 1) == 5.9528
    assert value_at(run, "lr", 826, 3) == 3.818e-05
    assert value_at(run, "total", 925, 3) == 0.90588  # read under its own name
    assert value_at(run, "epoch", 925, 3) == 6.0
    assert [e[1] for e in run.events.select("attempt", "line").rows()] == [86, 88]
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "column holding text, phase (P1_align, P2_behavior, P3_on_policy, ...): not read, so nothing here checks "
        "them or rests on them"]
    findings, lines = chronicle(run)
    third = findings.attempts[2]
    # 826 is off the grid of 10 its next steps keep (830, 840): the first step after a resume from 825
    assert (third.resumed_from_step, third.resumed_from_inferred, third.rollback) == (825, True, True)
    assert "- **Rollbacks:** attempt 3 went back to step 825 (inferred)." in lines
    assert any(line.startswith("- **Other scalars read**") and "total" in line and "phase" not in line
               for line in lines)


def test_clock_times_and_a_value_head_loss() -> None:
    """The chess trainer's train_log.csv: an ISO timestamp per iteration, `iter` its step, `val_loss` the value
    head's loss beside `pol_loss` (loss = pol_loss + val_loss: 3.1413 + 0.45429 = 3.59559 on its first line), and a
    start from scratch at line 87."""
    run = load_run(CHESS)
    assert run.attempts == [1, 2]
    assert spans(run) == [(1, 1, 85), (2, 1, 62)]
    assert value_at(run, "loss", 1, 1) == 3.59559
    assert value_at(run, "value_loss", 1, 1) == 0.45429
    assert value_at(run, "grad_norm", 62, 2) == 12.135
    assert "val_loss" not in set(run.metrics["metric"].cast(pl.String))  # not called a validation loss
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "val_loss is the value head's loss beside its policy loss, not a validation loss: read as value_loss, a "
        "scalar of its own"]
    first = run.metrics.filter(metric="loss", attempt=1, step=1)["wall_time"][0]
    assert first == datetime(2026, 3, 29, 8, 25, 14, 213909, tzinfo=UTC).timestamp()
    assert run.events.select("attempt", "step", "line", "text").rows() == [
        (2, 1, 87, "step went back from 85 to 1: the run was restarted")]
    findings, _ = chronicle(run)
    assert [(a.start_step, a.end_step, a.resumed_from_step) for a in findings.attempts] == [(1, 85, None),
                                                                                           (1, 62, None)]
    assert findings.attempts[0].last_step_at == datetime(2026, 3, 29, 12, 17, 46, 873612, tzinfo=UTC).timestamp()
    # the relaunch's first row was written when its first iteration was done: not when it started
    second = findings.attempts[1]
    assert second.started_at is None
    assert second.first_seen_at == datetime(2026, 3, 29, 12, 23, 56, 584523, tzinfo=UTC).timestamp()


def test_an_epoch_only_table_is_read_with_its_epochs_as_steps() -> None:
    """RetroInference's train_log.csv (`Epoch,Train Loss,Validation Loss`, appended by two trainings): epochs 0-29
    twice; the steps are the epochs, and the chronicle says so."""
    run = load_run(RETRO)
    assert run.attempts == [1, 2]
    assert spans(run) == [(1, 0, 29), (2, 0, 29)]
    assert value_at(run, "loss", 0, 2) == 0.939152930427677  # line 32
    assert value_at(run, "val_loss", 29, 1) == 0.8013978006991828  # line 31
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "it has no step column: the steps here are its Epoch column's epochs (each row one epoch's values, as the "
        "program logged them)"]


def test_what_is_not_a_step_table(tmp_path: Path) -> None:
    """ms-swift's logging.jsonl (a fractional epoch, its step in "global_step/max_steps": "1/120") stays the Trainer
    console reader's; a table with a step but no training metric is refused with the one-line reason; a header with
    no rows is not read."""
    swift = REAL / "hf_trainer" / "mswift_logging_jsonl" / "qwen3_17b_text_effective"
    assert [src.format for src in load_run(swift).sources] == ["hf-trainer"]
    header = MOSHI.read_bytes().split(b"\n", 1)[0]
    # the Moshi header with its two recognised columns renamed: no training metric left
    plain = tmp_path / "train_log.csv"
    plain.write_bytes(header.replace(b"lr,grad_norm", b"rate,gnorm_x", 1) + b"\n1,P1_align,3.2\n")
    with pytest.raises(InputError, match=r"CSV with columns `step`, `phase`, `total`, `ce_raw`, .*no reader"):
        load_run(plain)
    empty = tmp_path / "log.csv"
    empty.write_bytes(header + b"\n")
    assert registry.reader_for(empty.read_bytes(), empty.name) is step_table
    with pytest.raises(NotThisFormat, match="header with no rows"):
        step_table.read(empty, ReadContext("log.csv", "r", head=empty.read_bytes()))


def test_evaluation_records_at_a_training_step_are_no_relaunch() -> None:
    """parlatent's metrics.jsonl: an evaluation record (nested per eval set, lists of per-loop values) at steps 0 and
    500, each before that step's training record: one attempt; the lists are said to be not read."""
    run = load_run(TABLES / "6elphegor+parlatent__metrics.jsonl")
    assert run.attempts == [1]
    assert run.events.height == 0
    assert run.metrics.filter(metric="loss")["step"].to_list() == list(range(0, 551, 50))
    assert value_at(run, "loss", 500, 1) == 0.3835797905921936  # {"step": 500, "train_loss": 0.3835797905921936, ...}
    assert value_at(run, "eval.10.loss", 500, 1) == 0.24578875303268433  # under its own name: not the training loss
    [said] = [w.split(": ", 1)[1] for w in run.warnings]
    assert said.startswith("eval.10.loop_losses, eval.10.hole_acc, eval.10.solve_rate, eval.10.exact, ")
    assert said.endswith(" and 13 more: lists or objects, no number: not read, so nothing here checks them or rests on "
                         "them")


# the layouts below have no real file among the fixtures: their rows are the Moshi table's first values, relaid
def test_a_step_counted_within_each_epoch_is_no_relaunch(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("epoch,step,loss,lr\n0,0,3.2,1.111e-05\n0,10,2.20326,1.111e-04\n0,20,1.50373,2.222e-04\n"
                    "1,0,1.45733,3.000e-04\n1,10,1.39563,2.999e-04\n1,20,1.3667,2.996e-04\n0,0,1.32135,2.992e-04\n")
    run = load_run(path)
    assert run.attempts == [1, 2]  # the last row, epoch 0 and step 0 again, is a relaunch; epoch 1's step 0 is not
    assert spans(run) == [(1, 0, 41), (2, 0, 0)]
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "its step column counts again in each epoch: the steps here are derived, (epoch - 0) x 21 + step (21: one "
        "more than the most it counts in an epoch)"]


def test_several_rows_a_step_are_not_relaunches(tmp_path: Path) -> None:
    path = tmp_path / "train_log.csv"
    values = MOSHI.read_text().splitlines()[1:25]
    path.write_text("epoch,loss\n" + "".join(f"{n // 4},{line.split(',')[2]}\n" for n, line in enumerate(values)))
    run = load_run(path)
    assert run.attempts == [1]
    assert run.metrics.filter(metric="loss", step=0)["value"].to_list() == [3.2, 2.20326, 1.50373, 1.45733]
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "it has no step column: the steps here are its epoch column's epochs (each row one epoch's values, as the "
        "program logged them)",
        "18 rows log the step of the row before them again, with the same metrics: several rows a step (per batch or "
        "per process?), not relaunches: read as logged, at the same step"]


def test_an_evaluations_file_and_its_epoch_end_rows(tmp_path: Path) -> None:
    """sentence-transformers' eval_loss.csv layout: `epoch,steps,loss`, steps within the epoch, -1 at its end."""
    path = tmp_path / "eval_loss.csv"
    path.write_text("epoch,steps,loss\n0,1000,2.20326\n0,-1,1.50373\n1,1000,1.45733\n1,-1,1.39563\n")
    run = load_run(path)
    assert run.attempts == [1]
    assert run.metrics.filter(metric="val_loss").select("step", "value").rows() == [(1000, 2.20326), (2001, 1.45733)]
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "2 rows whose steps is negative (-1: an epoch's end?): not read",
        "its steps column counts again in each epoch: the steps here are derived, (epoch - 0) x 1001 + steps (1001: "
        "one more than the most it counts in an epoch)",
        "its name says it is an evaluation's: loss read as the validation loss"]


def test_a_tsv_and_json_lines_under_any_name(tmp_path: Path) -> None:
    """The Moshi table with tabs for commas, and slm_training's JSON lines named train.log: the same frames."""
    tsv, log = tmp_path / "train_log.tsv", tmp_path / "train.log"
    tsv.write_text(MOSHI.read_text().replace(",", "\t"))
    log.write_bytes(SLM.read_bytes())
    for copy, real in ((tsv, MOSHI), (log, SLM)):
        run, original = load_run(copy), load_run(real)
        assert [src.format for src in run.sources] == ["step-table"]
        assert run.metrics.drop("run", "source").equals(original.metrics.drop("run", "source"))
        assert run.events.drop("run", "source").equals(original.events.drop("run", "source"))


def test_a_header_written_again_by_a_relaunch(tmp_path: Path) -> None:
    """A loop that opens its table to append and writes the header each launch: the Moshi table's lines 1-45, its
    header again, then lines 46-60 (steps 440-580): a relaunch that went on from step 440."""
    lines = MOSHI.read_text().splitlines(keepends=True)
    path = tmp_path / "train_log.csv"
    path.write_text("".join(lines[:45] + lines[:1] + lines[45:60]))
    run = load_run(path)
    assert spans(run) == [] and run.attempts == [1, 2]  # (no column is the loss)
    assert run.metrics.filter(metric="lr").group_by("attempt", maintain_order=True).agg(
        lo=pl.col("step").min(), hi=pl.col("step").max()).rows() == [(1, 1, 430), (2, 440, 580)]
    assert run.events.select("attempt", "line", "text").rows() == [
        (2, 47, "the log began again at step 440 (after 430): the run was restarted")]
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        "its header again at line 46: a relaunch wrote it; a new attempt starts after each",
        "column holding text, phase (P1_align, P2_behavior, P3_on_policy): not read, so nothing here checks them or "
        "rests on them"]


def test_a_table_pandas_wrote_with_its_index(tmp_path: Path) -> None:
    """``DataFrame.to_csv`` writes its index first, under an empty name: RetroInference's table so written."""
    lines = RETRO.read_text().splitlines()
    path = tmp_path / "train_log.csv"
    path.write_text("".join(f"{'' if n == 0 else n - 1},{line}\n" for n, line in enumerate(lines)))
    run, original = load_run(path), load_run(RETRO)
    assert [src.format for src in run.sources] == ["step-table"]
    assert run.metrics.drop("run", "source").equals(original.metrics.drop("run", "source"))


def test_a_cumulative_time_that_starts_again_is_a_relaunch(tmp_path: Path) -> None:
    """A loop that appends `step,loss,lr,elapsed_min` and resumes from its last checkpoint without going back a step
    (it saved at the step it died at): the Moshi table's steps 1-130 and their losses, its elapsed time from 0 again
    after step 70."""
    rows = [line.split(",") for line in MOSHI.read_text().splitlines()[1:15]]
    path = tmp_path / "log.csv"
    path.write_text("step,loss,lr,elapsed_min\n" + "".join(
        f"{r[0]},{r[2]},{r[9]},{(n if n < 8 else n - 8) * 3.45:.2f}\n" for n, r in enumerate(rows)))
    run = load_run(path)
    assert spans(run) == [(1, 1, 70), (2, 80, 130)]
    assert run.events.select("attempt", "line", "text").rows() == [
        (2, 10, "the log began again at step 80 (after 70): the run was restarted")]
    assert [w.split(": ", 1)[1] for w in run.warnings] == ["its elapsed_min starts again at line 10: a relaunch"]
    assert value_at(run, "elapsed_min", 80, 2) == 0.0  # read under its own name, not as wall time
    assert run.metrics["wall_time"].null_count() == run.metrics.height


def test_a_table_cut_inside_its_last_line_does_not_read_that_line(tmp_path: Path) -> None:
    """MoshiHead's train_log.csv ends "925,P4_polish,0.90588,2.13801,...,0,6.0"; the same table cut while it was being
    written ends inside that line ("925,P4_polish,0.9"): its ce_raw, lr and grad_norm were read as empty and its total
    as 0.9 (not 0.90588). A table whose last line has no line end has it dropped, with a warning."""
    data = MOSHI.read_bytes()
    cut = data[:data.rindex(b"925,P4_polish,0.9") + len(b"925,P4_polish,0.9")]
    (tmp_path / "train_log.csv").write_bytes(cut)
    run = load_run(tmp_path / "train_log.csv")
    assert run.metrics.filter(metric="total")["step"].max() == 920
    assert value_at(run, "total", 920, 3) == 0.94864
    assert any(w.endswith("train_log.csv: its last line has no line end: cut short by the end of the file (a table "
                          "still being written, or a cut copy), so its values may be cut too: not read")
               for w in run.warnings)
    # the whole file ends its last line: nothing is dropped
    whole = load_run(MOSHI)
    assert whole.metrics.filter(metric="total")["step"].max() == 925
    assert not any("no line end" in w for w in whole.warnings)


def test_an_elapsed_column_of_per_interval_durations_is_no_relaunch(tmp_path: Path) -> None:
    """`elapsed` written as the seconds since the previous line (a timing per log interval, jittered): it goes back
    on about half its rows, which is no cumulative time starting again (review s39: 97 attempts of 1-4 rows)."""
    rows = [line.split(",") for line in MOSHI.read_text().splitlines()[1:41]]
    jitter = [4.1, 3.9, 4.3, 4.0, 3.8, 4.2, 4.4, 3.7]
    path = tmp_path / "train_log.csv"
    path.write_text("step,loss,lr,elapsed\n" + "".join(
        f"{r[0]},{r[2]},{r[9]},{jitter[n % len(jitter)]}\n" for n, r in enumerate(rows)))
    run = load_run(path)
    assert run.attempts == [1]
    assert not any("a relaunch" in w for w in run.warnings)


def test_evaluation_rows_that_carry_the_lr_are_no_relaunch(tmp_path: Path) -> None:
    """A loop that writes `{"step", "loss", "lr"}` each interval and, at each evaluation, `{"step", "val_loss", "lr"}`
    at the same step: the evaluation row shares the lr column with the training row before it, not its metrics
    (review s39: an attempt per evaluation, 'the run was restarted' 20 times)."""
    rows = [line.split(",") for line in MOSHI.read_text().splitlines()[1:41]]
    lines = []
    for n, r in enumerate(rows):
        lines.append(f'{{"step": {r[0]}, "loss": {r[2]}, "lr": {r[9]}}}')
        if n % 10 == 9:
            lines.append(f'{{"step": {r[0]}, "val_loss": {float(r[2]) + 0.1}, "lr": {r[9]}}}')
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(lines) + "\n")
    run = load_run(path)
    assert run.attempts == [1]
    assert run.events.height == 0


def test_a_training_table_named_for_training_and_validation_keeps_its_loss(tmp_path: Path) -> None:
    """`train_val_log.csv` with `step,loss,val_loss,lr`: its name holds "val", but also "train", and the table has a
    validation loss of its own; its loss is the training loss (review s39: read as the validation loss beside the
    real one, and the chronicle said 'no loss metric recognised')."""
    rows = [line.split(",") for line in MOSHI.read_text().splitlines()[1:41]]
    path = tmp_path / "train_val_log.csv"
    path.write_text("step,loss,val_loss,lr\n" + "".join(
        f"{r[0]},{r[2]},{float(r[2]) + 0.1 if n % 10 == 9 else ''},{r[9]}\n" for n, r in enumerate(rows)))
    run = load_run(path)
    assert run.metrics.filter(metric="loss").height == 40
    assert run.metrics.filter(metric="val_loss").height == 4
    assert not any("evaluation's" in w for w in run.warnings)


def test_the_summary_names_three_attempts_with_no_end_and_counts_the_rest() -> None:
    """slm_training's five launches: the first four have no end in the log, each followed by the next; the summary
    named every one (a table of a hundred relaunches made a 12 kB line, review s39 #8): three are named, the rest
    counted."""
    _, lines = chronicle(load_run(SLM))
    assert ("- **What went wrong:** no attempt's log ends in NaN, divergence, a crash or a hang, but how attempt 1 "
            "ended is not in the log (attempt 2 started next); how attempt 2 ended is not in the log (attempt 3 "
            "started next); how attempt 3 ended is not in the log (attempt 4 started next, back at step 7500 "
            "(inferred)); nor how 1 more attempt ended (see *Timeline*).") in lines


def test_a_loss_that_did_not_fall_is_said_of_the_stage_it_was_judged_on(tmp_path: Path) -> None:
    """A second training counted from step 0 again (the next stage of a pipeline) is judged alone: the summary said
    "The loss did not fall over steps 0-99" of a run whose first stage fell from 10 to 3 (review s39 #5)."""
    rng = np.random.default_rng(0)
    first = [{"step": k, "loss": round(10 * 0.988 ** k + 0.01 * rng.standard_normal(), 4)} for k in range(100)]
    second = [{"step": k, "loss": round(2.0 + 0.01 * rng.standard_normal(), 4)} for k in range(100)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first + second))
    run, lines = chronicle(load_run(tmp_path / "metrics.jsonl"))
    assert run.learning["from_attempt"] == 2
    [said] = [line for line in lines if line.startswith("- **The loss did not fall**")]
    assert said.startswith("- **The loss did not fall** over steps 0–99 of attempt 2 on (the last to count its steps "
                           "from the start again) (median 2")


def test_flat_json_lines_read_at_once_give_the_run_the_line_by_line_reader_gives(monkeypatch) -> None:
    """slm_training's metrics.jsonl (flat records of numbers) is read by Polars in one pass; the same file read line
    by line gives the same frames and warnings. A damaged line sends a file to the line-by-line reader, which says
    what it skipped."""
    from parsers import wandb_history

    assert wandb_history._flat_json_lines(SLM) is not None
    fast = load_run(SLM)
    monkeypatch.setattr(wandb_history, "_flat_json_lines", lambda path: None)
    slow = load_run(SLM)
    assert fast.metrics.equals(slow.metrics) and fast.events.equals(slow.events) and fast.warnings == slow.warnings
    monkeypatch.undo()
    assert fast.metrics.height == 1592


def test_a_json_lines_table_with_a_damaged_line_is_read_line_by_line(tmp_path: Path) -> None:
    from parsers import wandb_history

    lines = SLM.read_text().splitlines()
    (tmp_path / "metrics.jsonl").write_text("\n".join([*lines[:10], '{"step": 220, "lo', *lines[10:]]) + "\n")
    assert wandb_history._flat_json_lines(tmp_path / "metrics.jsonl") is None
    run = load_run(tmp_path / "metrics.jsonl")
    assert any(w.endswith("metrics.jsonl: 1 line(s) that are not JSON were skipped (first: line 11)") for w in run.warnings)
    assert run.metrics.height == 1592


def test_a_table_of_several_runs_told_apart_by_a_run_column_is_a_run_each(tmp_path: Path) -> None:
    """A sweep's results concatenated into one table with a run_id column were one run whose step went back at each
    run's first row: read as relaunches of one run, each run's loss overlaid on the last's."""
    rows = [f"{step},{loss},{run}" for run, start in (("lr3e-4", 4.0), ("lr1e-3", 6.0)) for step, loss in
            zip(range(10, 60, 10), np.linspace(start, start - 1.0, 5), strict=True)]
    (tmp_path / "sweep.csv").write_text("step,loss,run_id\n" + "\n".join(rows) + "\n")
    runs = {r.name: r for r in forensics.analyze(*load_runs(tmp_path / "sweep.csv")).runs}
    assert sorted(runs) == ["lr1e-3", "lr3e-4"]
    assert [len(r.attempts) for r in runs.values()] == [1, 1]
    loaded = {r.name: r for r in load_runs(tmp_path / "sweep.csv")}
    assert loaded["lr1e-3"].metrics.filter(metric="loss")["value"].to_list()[0] == 6.0
