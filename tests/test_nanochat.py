"""karpathy's nanochat consoles (a whole ``speedrun.sh`` in ``screen``: base_train, mid_train, chat_sft and the
evaluations between them) and karpathy/autoresearch's ``run.log`` (its steps joined by carriage returns): real files
from public repositories (see fixtures/real/SOURCES.md), values pinned from their lines."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import polars as pl
import pytest

import forensics
from parsers import Run
from parsers import load_run as _load_run
from reports import render_markdown

REAL = Path(__file__).parent / "fixtures" / "real" / "nanochat"
SPEEDRUN = REAL / "dwarkeshsp_nanochat_speedrun_excerpt.log"
AUTORESEARCH = REAL / "alexmorleyfinch_autoresearch-win-rtx_run.log"
NEWER = REAL / "c-ding-math_nanochat_speedrun.log"  # base_train's "| bf16_mfu: ... | epoch: 1 | ... | eta: ..." lines
RELAUNCHED = REAL / "jonhenshaw_nanochat_speedrun.log"  # launches that failed, then one that ran to step 2369


@cache
def load_run(path: Path) -> Run:
    """Each log read once per test process (the frames are not changed by the tests; the whole speedrun logs take a
    second each)."""
    return _load_run(path)


def points(path: Path, metric: str, attempt: int | None = None) -> list[tuple]:
    metrics = load_run(path).metrics.filter(metric=metric)
    if attempt is not None:
        metrics = metrics.filter(attempt=attempt)
    return metrics.sort("attempt", "step").select("step", "value").rows()


@pytest.mark.parametrize(("path", "metric", "attempt", "first", "last", "n"), [
    # base_train: "step 00000/21400 (0.00%) | loss: 11.090355 | lrm: 1.00 | dt: 39643.02ms | tok/sec: 13,225 | ..."
    # ... "step 21399/21400 (100.00%) | loss: 2.719005 | lrm: 0.00 | dt: 475.63ms | tok/sec: 1,102,299 | ..."
    (SPEEDRUN, "loss", 1, (0, 11.090355), (21399, 2.719005), 402),
    (SPEEDRUN, "iteration_time_ms", 1, (0, 39643.02), (21399, 475.63), 402),
    (SPEEDRUN, "tokens_per_second", 1, (0, 13225.0), (21399, 1102299.0), 402),
    # "Step 00000 | Validation bpb: 3.3013", "Step 00250 | Validation bpb: 1.2016", "Step 21400 | Validation bpb: 0.8118"
    (SPEEDRUN, "val_bpb", 1, (0, 3.3013), (21400, 0.8118), 3),
    (SPEEDRUN, "core_metric", 1, (21400, 0.2086), (21400, 0.2086), 1),  # "Step 21400 | CORE metric: 0.2086"
    # mid_train: "step 00001 (0.28%) | loss: 1.274502 | ..." ... "step 00765 (100.00%) | loss: 1.284091 | ..."
    (SPEEDRUN, "loss", 2, (1, 1.274502), (765, 1.284091), 45),
    (SPEEDRUN, "val_bpb", 2, (0, 0.6886), (765, 0.3954), 3),
    # chat_sft: "Step 00000/00651 | Training loss: 0.843050| lrm: 1.000000| num_tokens: 15,432" ... step 649
    (SPEEDRUN, "loss", 3, (0, 0.84305), (649, 1.107621), 45),
    (SPEEDRUN, "val_loss", 3, (0, 1.009291), (650, 1.011768), 2),
    # autoresearch: "step 00000 (0.0%) | loss: 9.010729 | lrm: 1.00 | dt: 12071ms | tok/sec: 43,435 | ..." ... step 36
    (AUTORESEARCH, "loss", 1, (0, 9.010729), (36, 2.90063), 37),
    (AUTORESEARCH, "iteration_time_ms", 1, (0, 12071.0), (36, 11889.0), 37),
    (AUTORESEARCH, "tokens_per_second", 1, (0, 43435.0), (36, 44097.0), 37),
    (AUTORESEARCH, "val_bpb", 1, (36, 0.855121), (36, 0.855121), 1),  # its summary's "val_bpb:          0.855121"
    # "step 00000/05742 (0.00%) | loss: 10.397083 | lrm: 1.00 | dt: 113785.11ms | tok/sec: 9,215 | bf16_mfu: 16.05 |
    # epoch: 1 | total time: 0.00m" ... "step 05741/05742 (99.98%) | loss: 2.574317 | ... | eta: 0.0m"
    (NEWER, "loss", 1, (0, 10.397083), (5741, 2.574317), 5742),
    (NEWER, "tokens_per_second", 1, (0, 9215.0), (5741, 23510.0), 5742),
    (NEWER, "val_bpb", 1, (0, 3.16909), (5742, 0.76207), 24),
    (NEWER, "core_metric", 1, (2000, 0.1816), (5742, 0.233), 3),
    # chat_sft of March 2026: "step 00001 (0.17%) | loss: 1.084291 | lrm: 1.00 | dt: 93382.51ms | ..." ... step 502
    # (attempt 3: base_eval, launched between them, is attempt 2)
    (NEWER, "loss", 3, (1, 1.084291), (502, 0.89942), 502),
    # "step 00000/21400 (0.00%) | loss: 11.090355 | grad norm: 0.4282 | lrm: 1.00 | dt: 46222.92ms | ..."
    # (attempt 4: three torchrun launches failed before it)
    (RELAUNCHED, "loss", 4, (0, 11.090355), (2369, 3.205507), 2370),
    (RELAUNCHED, "grad_norm", 4, (0, 0.4282), (2369, 0.1101), 2370),
])
def test_nanochat_values(path: Path, metric: str, attempt: int, first: tuple, last: tuple, n: int) -> None:
    assert [src.format for src in load_run(path).sources] == ["nanochat"]
    rows = points(path, metric, attempt)
    assert len(rows) == n and rows[0] == first and rows[-1] == last


def test_carriage_returns_between_steps_are_line_ends() -> None:
    """autoresearch prints each step over the one before ("\\rstep 00001 ..."): a saved run.log holds all 37 steps on
    one physical line, each read as its own step."""
    raw = AUTORESEARCH.read_bytes()  # (written on Windows: CRLF line ends besides the lone carriage returns)
    assert raw.count(b"\r") - raw.count(b"\r\n") == 37
    assert [line.count(b"| loss: ") for line in raw.split(b"\n") if b"| loss: " in line] == [37]
    assert [step for step, _ in points(AUTORESEARCH, "loss")] == list(range(37))
    assert (27, 3.424124) in points(AUTORESEARCH, "loss")  # "step 00027 (63.2%) | loss: 3.424124 | lrm: 0.92 | ..."


def test_a_step_line_behind_echoed_arrow_keys_is_read() -> None:
    """Keys pressed in the terminal are echoed in front of the step line ("^[[B^[[B...step 04354/21400 ..."): the
    step is read, not taken for a hole in the log."""
    loss = dict(points(SPEEDRUN, "loss", 1))
    assert loss[4354] == 3.036728 and loss[4366] == 3.027056 and loss[4382] == 3.017453
    assert [step for step in loss if 4342 <= step <= 4392] == list(range(4342, 4393))


def test_speedrun_stages_are_launches_each_with_its_end() -> None:
    """base_train, mid_train and chat_sft each count their steps from 0: three launches, each ended by its own last
    line; the planned length is base_train's "/21400" (chat_sft's "/00651" counts iterations whose last, 650, only
    evaluates: it is not read as a plan its step 649 fell short of)."""
    run = load_run(SPEEDRUN)
    assert run.attempts == [1, 2, 3, 4]  # 4: chat_eval's start at the end of the excerpt
    assert run.configs.select("attempt", "key", "value").rows() == [(1, "train_iters", "21400")]
    done = run.events.filter(kind="training_done")
    assert done.select("attempt", "step").rows() == [(1, 21400), (2, 765), (3, 650)]
    assert done["text"].to_list()[:2] == ["Total training time: 170.39m", "Total training time: 6.65m"]
    assert run.events.filter(kind="checkpoint_save").select("attempt", "value").rows() == [
        (1, 21400.0), (2, 765.0), (3, 650.0)]  # "Saved model file to: .../model_021400.pt" ...
    assert run.events.filter(kind="parameter_count")["value"].to_list() == [560988160.0]
    findings = forensics.analyze(run).runs[0]
    assert [(a.index, a.start_step, a.end_step, a.end_reason.value) for a in findings.attempts[:3]] == [
        (1, 0, 21400, "completed"), (2, 0, 765, "completed"), (3, 0, 650, "completed")]


def test_speedrun_chronicle_keeps_its_stages_apart() -> None:
    """The chronicle does not set chat_sft's start beside base_train's end ("the loss did not fall over steps
    0–21399"), starts mid_train and chat_sft from the weights they load, and says what it did not read."""
    text = render_markdown(forensics.analyze(load_run(SPEEDRUN)))
    assert "did not fall" not in text and "ends before the planned length" not in text
    assert text.count("from weights loaded from a checkpoint") == 4  # attempts 2 and 3, in the table and their sections
    assert "debiased exponential moving average of the step losses" in text
    assert "also print lrm, mfu, num\\_tokens, total time: not read" in text
    assert "1 line of other evaluations: not read (mmlu\\_acc)" in text


def test_autoresearch_summary() -> None:
    run = load_run(AUTORESEARCH)
    assert run.attempts == [1]
    assert run.events.select("kind", "value").rows() == [("parameter_count", 80937778.0), ("training_done", 308.4)]
    findings = forensics.analyze(run).runs[0]
    assert [(a.start_step, a.end_step, a.end_reason.value) for a in findings.attempts] == [(0, 36, "completed")]
    text = render_markdown(forensics.analyze(run))
    assert "also print epoch, lrm, mfu, remaining: not read" in text


def test_newer_base_train_and_chat_sft() -> None:
    """March 2026's nanochat: "Parameter counts:" with its "total" row, the planned length printed and on every step
    line, saves "Saved model parameters to: .../model_005742.pt"; each stage ended by "Total training time"; each
    script a launch of its own ("Autodetected device type: cuda" as it starts: base_eval's between base_train and
    chat_sft, with no training step, and chat_eval's after it)."""
    run = load_run(NEWER)
    assert run.attempts == [1, 2, 3, 4]
    assert run.configs.select("attempt", "key", "value").rows() == [(1, "train_iters", "5742")]
    assert run.events.filter(kind="planned_steps")["value"].to_list() == [5742.0]  # "...param ratio: 5,742"
    assert run.events.filter(kind="parameter_count")["value"].to_list() == [1384124976.0]  # "total : 1,384,124,976"
    assert run.events.filter(kind="checkpoint_save").select("attempt", "value").rows() == [(1, 5742.0), (3, 502.0)]
    findings = forensics.analyze(run).runs[0]
    assert [(a.index, a.start_step, a.end_step, a.end_reason.value) for a in findings.attempts] == [
        (1, 0, 5742, "completed"), (2, None, None, "no_training"), (3, 0, 502, "completed"),
        (4, None, None, "no_training")]
    text = render_markdown(forensics.analyze(run))
    assert "did not fall" not in text  # (the SFT's loss, from step 1, is not set beside the pretraining's end)
    assert "also print bf16\\_mfu, epoch, eta, lrm, mfu, total time: not read" in text


def test_failed_launches_then_a_run_the_log_cuts_off() -> None:
    """torchrun launches that died on "CUDA error: invalid device ordinal", two Ctrl-C, then a one-GPU launch whose
    log ends at step 2369 of 21400 with its last save at step 2000. The three torchrun launches (base_train,
    base_loss, base_eval: each "Autodetected device type: cuda", its ranks' tracebacks, then torchrun's
    "ChildFailedError" and "scripts.base_train FAILED") were one attempt, "crashed": each is one now, with its own
    ending (their errors were taken for start-up warnings, iterations following much later)."""
    run = load_run(RELAUNCHED)
    assert run.attempts == [1, 2, 3, 4]
    assert run.events.filter(kind="keyboard_interrupt", attempt=3).height == 2
    assert run.events.filter(kind="checkpoint_save")["value"].to_list() == [500.0, 1000.0, 1500.0, 2000.0]
    failed = run.events.filter(pl.col("text").str.contains("ChildFailedError: ", literal=True))
    assert failed["attempt"].to_list() == [1, 2, 3]
    findings = forensics.analyze(run).runs[0]
    *launches, last = findings.attempts
    assert [(a.start_step, a.end_reason.value) for a in launches] == [(None, "failed_startup")] * 3
    assert all("invalid device ordinal" in a.end_detail for a in launches)
    assert (last.start_step, last.end_step, last.target_step) == (0, 2369, 21400)
    text = render_markdown(forensics.analyze(run))
    assert "attempt 4 at step 2369 of 21400" in text and "the last checkpoint saved in the logs is at step 2000" in text


def test_chat_rls_periodic_save_is_no_end_of_training(tmp_path: Path) -> None:
    """karpathy/nanochat scripts/chat_rl.py prints "Saved model checkpoint to .../chatrl_checkpoints/d20" every
    save_every steps, not only at its last: an RL run that ran out of memory at step 100 of 181, after its save at step
    60, was "completed ... then the program failed after its training" (review s39). Only the older chat_sft.py's
    save to chatsft_checkpoints is its last line."""
    lines = [f"step {n:05d}/00020 ({n * 5:.2f}%) | loss: {9 - n * 0.1:.6f} | lrm: 1.00 | dt: 1338.63ms | "
             f"tok/sec: 12,239 | mfu: 48.52 | total time: {n / 60:.2f}m" for n in range(20)]
    lines += ["Total training time: 0.33m",
              "2025-10-16 14:00:00,000 - nanochat.common - INFO - Distributed world size: 8"]
    for step in range(101):
        lines.append(f"Step {step}/181 | Average reward: 0.1 | Average sequence length: 200.00")
        if step and step % 60 == 0:
            lines.append("Saved model checkpoint to /x/chatrl_checkpoints/d20")
    lines += ["Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory."]
    path = tmp_path / "rl.log"
    path.write_text("\n".join(lines) + "\n")
    run = load_run(path)
    assert [src.format for src in run.sources] == ["nanochat"]
    assert run.events.filter(kind="training_done")["text"].to_list() == ["Total training time: 0.33m"]


def test_a_step_line_printed_twice_is_not_said_to_come_from_several_ranks(tmp_path: Path) -> None:
    """A pasted Windows console of a single-process base_train ("Distributed world size: 1") keeps some step lines
    twice, as the console redrew them; the warning said "one line printed by several ranks". Here the real
    c-ding-math log with its step 10 line printed again right after it."""
    lines = NEWER.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if line.startswith("step 00010/05742"))
    (tmp_path / "speedrun.log").write_text("".join([*lines[:at + 1], lines[at], *lines[at + 1:]]), encoding="utf-8")
    [said] = [w for w in _load_run(tmp_path / "speedrun.log").warnings if "repeat the step" in w]
    assert said.endswith("the same line printed again as it was (a console's redraw kept in a paste, or several "
                         "ranks), each step read once")
    assert f"(first: step 10, line {at + 1})" in said  # (the line it repeats)
