"""Generated runs with heavy-tailed (Student-t, AR(1)) noise in the formats the tool reads, each with a known
injected incident: the chronicle's statements about them, checked against what was injected (audit s39 D)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tb_writer as tb

import forensics
import reports
from parsers import load_runs

GENERATED = Path(__file__).parent / "fixtures" / "generated"


def chronicle(path: Path) -> list[str]:
    return reports.render(forensics.analyze(*load_runs(path)), "markdown").splitlines()


def test_a_loss_left_out_of_the_last_lines_is_not_where_the_attempt_ends():
    """fp16 overflows halve the loss scale to 1, then every iteration of steps 571-610 is skipped: Megatron prints
    those four lines (580-610) without an lm loss. The last loss is at step 570, the attempt's log ends at 610; the
    spike and the divergence said step 570 was "where the log of the attempt ends" / "the end of the attempt"."""
    lines = chronicle(GENERATED / "megatron_fp16_loss_unprinted_to_the_end.log")
    text = "\n".join(lines)
    assert "where the log of the attempt ends" not in text and "the end of the attempt" not in text
    divergence = next(line for line in lines if "**divergence**" in line)
    assert divergence.endswith("still 16.33301 at step 570, its last logged loss (the attempt's log goes on to "
                               "step 610 without one)")
    spike = next(line for line in lines if "**loss spike**" in line)
    assert ("still above its level at step 570, its last logged loss (the attempt's log goes on to step 610 without "
            "one)") in spike
    assert "| 1 | 10–610 | from scratch |" in text


def test_a_loss_spike_that_turns_nan_before_the_attempt_ends_says_so():
    """The same kind of run as TensorBoard logs it (Megatron's tags): the loss is NaN at steps 570-610; the spike's
    last finite point (560) was "where the log of the attempt ends"."""
    lines = chronicle(GENERATED / "tb_fp16_loss_nan_to_the_end")
    spike = next(line for line in lines if "**loss spike**" in line)
    assert spike.endswith("still above its level at step 560, its last finite loss: NaN/Inf from step 570 (the "
                          "attempt's log goes on to step 610)")
    assert any("**nan** (loss): NaN/Inf at steps 570-610" in line for line in lines)


def test_a_whole_history_of_exactly_1000_steps_is_not_called_sampled(tmp_path: Path):
    """A W&B history CSV of a run logged at every step 1-1000 (generated: power-law loss, t(4) noise, seed 4): every
    step between the first and the last is there, so nothing was thinned out. Its 1,000 rows are one of W&B's
    sample sizes, and the chronicle warned "sampled history dump: 1,000 points over 999 steps; single-step spikes may
    be missing"."""
    rng = np.random.default_rng(4)
    steps = np.arange(1, 1001)
    loss = (2.5 + 8.0 * (1 + steps / 30) ** -0.5) * np.exp(0.02 * rng.standard_t(4, steps.size))
    rows = [f"{i},{0.8 * st},{1.74e9 + 0.8 * st},{st},{float(v)!r}"
            for i, (st, v) in enumerate(zip(steps, loss, strict=True))]
    path = tmp_path / "history.csv"
    path.write_text("_step,_runtime,_timestamp,train/global_step,train/loss\n" + "\n".join(rows) + "\n")
    (run,) = load_runs(path)
    assert run.metrics.filter(metric="loss").height == 1000
    assert not run.sources[0].sampled and not any("sampled" in w for w in run.warnings)
    assert not any("sampled" in line for line in chronicle(path))
    # the same 1,000 rows as every other row of a 2,000-row history: a sample's size and regular, still flagged
    thinned = tmp_path / "thinned.csv"
    thinned.write_text("_step,train/loss\n" + "\n".join(
        f"{2 * st},{float(v)!r}" for st, v in zip(steps, loss, strict=True)) + "\n")
    (run,) = load_runs(thinned)
    assert run.sources[0].sampled


def _restarted(tmp_path: Path) -> Path:
    """Two TensorBoard event files of one generated run (t(5) noise, seed 11): the first logs steps 10-800, the
    second, an hour later, steps 610-1500 (a restart from the checkpoint at 600)."""
    rng = np.random.default_rng(11)
    steps = np.arange(10, 1501, 10)
    trend = 2.4 + 8.0 * (1 + steps / 40) ** -0.45
    for name, first, last, start in (("a", 10, 800, 0.0), ("b", 610, 1500, 3600.0)):
        own = (steps >= first) & (steps <= last)
        noise = 0.015 * rng.standard_t(5, int(own.sum()))
        tb.write(tmp_path / f"events.out.tfevents.{1740000000 + int(start)}.{name}",
                 tb.version(1.74e9 + start),
                 *(tb.scalar("lm loss", float(v), int(st), 1.74e9 + start + 0.8 * st)
                   for st, v in zip(steps[own], trend[own] * np.exp(noise), strict=True)))
    return tmp_path


def test_an_attempt_with_no_end_before_a_rollback_is_not_cleared(tmp_path: Path):
    """Nothing says how the first process of :func:`_restarted` ended; the summary said "no attempt ended in NaN,
    divergence, a crash or a hang"."""
    lines = chronicle(_restarted(tmp_path))
    assert "- **What went wrong:** no attempt's log ends in NaN, divergence, a crash or a hang, but how attempt 1 " \
           "ended is not in the log (attempt 2 started next, back at step 600 (inferred))." in lines
    assert not any("no attempt ended in" in line for line in lines)


def _short_run_with_nan(path: Path, nan_from: int) -> Path:
    """A 77-step TensorBoard run (t(3) noise, seed 3) whose LR warms up over 5 steps, with the loss NaN from
    ``nan_from`` to the end."""
    rng = np.random.default_rng(3)
    steps = np.arange(1, 78)
    lr = np.where(steps <= 5, 3e-4 * steps / 5, 3e-5 + 1.35e-4 * (1 + np.cos(np.pi * (steps - 5) / 115)))
    loss = (2.6 + 8.0 * (1 + steps / 20) ** -0.5) * np.exp(0.015 * rng.standard_t(3, steps.size))
    loss[steps >= nan_from] = np.nan
    tb.write(path / "events.out.tfevents.1740000000.n", tb.version(1.74e9), *(
        record for st, v, r in zip(steps, loss, lr, strict=True)
        for record in (tb.scalar("lm loss", float(v), int(st), 1.74e9 + st), tb.scalar("learning-rate", float(r),
                                                                                        int(st), 1.74e9 + st))))
    return path


def test_a_nan_14_warm_ups_after_a_short_warm_up_is_not_shortly_after_it(tmp_path: Path):
    """The LR peaks at step 5 and the loss turns NaN at step 73: the chronicle's most likely cause was "instability
    shortly after the learning-rate warm-up ended" (the window after a warm-up was at least 1,000 steps, so any
    trouble in any run shorter than that was 'shortly after' a short warm-up)."""
    (late := tmp_path / "late").mkdir()
    text = "\n".join(chronicle(_short_run_with_nan(late, 73)))
    assert "warm-up ends at step 5" in text and "NaN from step 73 to the end of its log (step 77)" in text
    assert "shortly after the learning-rate warm-up" not in text
    (soon := tmp_path / "soon").mkdir()  # NaN at step 9: four steps after the warm-up ended
    lines = chronicle(_short_run_with_nan(soon, 9))
    assert ("- **Most likely why (suspected):** instability shortly after the learning-rate warm-up ended "
            "(confidence 0.40).") in lines


def test_a_resume_line_after_a_crash_starts_the_next_attempt_not_the_crashed_one():
    """nanoGPT's stdout of a generated run (t(3) AR(1) noise, seed 21): "Initializing a new model from scratch", iters
    10-190, a CUDA OOM traceback, then "Resuming training from out" (line 42) and iters 190-300 (its banner line
    "tokens per iteration will be" not printed again). The resume line was counted in attempt 1: "Start: from weights
    loaded from a checkpoint ... (a fine-tune ...)" for the run initialised from scratch, and attempt 2 was
    "inferred: no checkpoint-load line"."""
    path = GENERATED / "nanogpt_oom_then_resume_without_banner.log"
    lines = chronicle(path)
    assert "| 1 | 10–190 | from the start of training | - | step 190 | crashed |" in lines
    assert ("| 2 | 190–300 | resumed from step 180 (inferred: its checkpoint-load line names no step; its first "
            "logged step is 190) **(rollback)** | no config to compare | step 300 | the log ends with no end printed |"
            ) in lines
    assert not any("weights loaded" in line or "no checkpoint-load line" in line for line in lines)
    (run,) = load_runs(path)
    load = run.events.filter(kind="checkpoint_load")
    assert load.select("line", "attempt").rows() == [(42, 2)]


def test_a_loss_nan_on_consecutive_lines_of_a_log_every_100_steps_is_one_incident(tmp_path: Path):
    """A generated run (t(4) noise, seed 5) logged every 100 steps to TensorBoard, its loss and grad norm NaN at
    every logged step from 5100 to 5500: the chronicle listed five NaN incidents, "step 5100: nan ... at step 5100",
    "step 5200: ..." (points more than 50 steps apart were never one stretch, whatever the log interval)."""
    rng = np.random.default_rng(5)
    steps = np.arange(100, 5501, 100)
    loss = (2.4 + 8.0 * (1 + steps / 300) ** -0.4) * np.exp(0.02 * rng.standard_t(4, steps.size))
    grad = 0.5 * np.exp(0.1 * rng.standard_t(4, steps.size))
    loss[steps >= 5100], grad[steps >= 5100] = np.nan, np.nan
    tb.write(tmp_path / "events.out.tfevents.1740000000.n", tb.version(1.74e9), *(
        record for st, v, g in zip(steps, loss, grad, strict=True)
        for record in (tb.scalar("lm loss", float(v), int(st), 1.74e9 + st),
                       tb.scalar("grad-norm", float(g), int(st), 1.74e9 + st))))
    lines = chronicle(tmp_path)
    nans = [line for line in lines if "**nan**" in line]
    assert nans == ["  - steps 5100–5500: **nan** (loss): NaN/Inf at steps 5100-5500: loss NaN; grad\\_norm NaN"]


def test_an_overflow_storm_over_consecutive_lines_of_a_log_every_100_steps_is_one_burst():
    """Megatron lines every 100 steps (generated, t(4) AR(1) noise, seed 31): 35 skipped iterations at step 10100,
    then 100 on each line of 10200-10500. The chronicle listed five bursts, "step 10100: ... 35 iterations skipped",
    "step 10200: ... 100 iterations skipped", ... (skips more than 20 steps apart were never one burst)."""
    lines = chronicle(GENERATED / "megatron_k100_overflow_storm_to_the_end.log")
    skipped = [line for line in lines if "**skipped iterations**" in line]
    assert skipped == ["  - steps 10100–10500: **skipped iterations** (skipped\\_iterations): 435 iterations skipped "
                       "(fp16 overflow) between steps 10100 and 10500"]


def test_a_replay_says_how_many_steps_were_logged_again(tmp_path: Path):
    """The second attempt of :func:`_restarted` logs steps 610-800 again (20 logged steps, each with a new loss); the
    chronicle named step 610 alone: "step 610 gave a different loss when logged again"."""
    lines = chronicle(_restarted(tmp_path))
    [replay] = [line for line in lines if "when logged again" in line]
    assert replay.startswith("- **step 610 gave a different loss when logged again:** ")
    assert replay.endswith(" (attempt 2) (the first of 20 logged steps, 610–800, logged again)")


def test_an_attempt_still_skipping_its_iterations_where_its_log_ends_is_not_cleared():
    """The same log stops at 10500 of 20000, its last 435 iterations skipped at loss scale 1 (audit s39 D #3): the
    summary said "no attempt ended in NaN, divergence, a crash or a hang" and nothing of the storm it ended in."""
    lines = chronicle(GENERATED / "megatron_k100_overflow_storm_to_the_end.log")
    assert ("- **What went wrong:** no attempt ended in NaN, divergence, a crash or a hang, but attempt 1 was still "
            "skipping its iterations where its log ends: 435 iterations skipped (fp16 overflow) between steps 10100 "
            "and 10500, its loss scale down to 1.") in lines
