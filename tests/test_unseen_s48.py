"""Statements that real logs the project had not seen contradicted (stop 48's audit, each chronicle read against its
raw lines): every test here failed on the code before its fix."""

from __future__ import annotations

from pathlib import Path

import forensics
import reports

REAL = Path(__file__).parent / "fixtures" / "real"


def test_torchtitans_validate_step_lines_are_a_validation_loss_not_the_step_again() -> None:
    """QIU023/torchtitan_attention_residual: "validate step: 1000  loss:  4.0249" (line 285) after the training line
    "step: 1000  loss:  4.05317" (line 274) was read as the step again: a rollback to 990 and four attempts of one
    uninterrupted run, and "step 1000 gave a different loss when logged again"."""
    run = forensics.analyze_path(REAL / "torchtitan" / "QIU023_torchtitan_attention_residual_validate_excerpt.log"
                                 ).findings.runs[0]
    assert len(run.attempts) == 1 and run.replay_differences == []
    assert run.coverage["metrics"]["loss"]["points"] == 205
    assert run.coverage["metrics"]["val_loss"] == {"points": 3, "first_step": 1, "last_step": 2000,
                                                   "source_tags": ["val_loss"]}


def test_an_evaluations_inner_progress_bar_is_not_the_trainings() -> None:
    """Ariz-Mohammadi/finetuned-qwen3-medical-qlora: the evaluation's bar under the training's, "238/984
    [01:09<03:34,  3.47it/s]\\x1b[A" (tqdm moves the cursor back up after an inner bar), was read as the training's:
    "its progress bar reached 239/984 ... at least 64 (metrics lines) are missing (a capture that lost lines)"; the
    training's own bar ends at 1755/1755, 175 metrics lines logged every 10 steps."""
    findings = forensics.analyze_path(REAL / "hf_trainer" / "Ariz-Mohammadi_finetuned-qwen3-medical-qlora_training.log"
                                      ).findings
    run = findings.runs[0]
    assert not any("missing" in w or "lost lines" in w for w in run.warnings), run.warnings
    assert "its progress bar at 1755 of 1755" in reports.render(findings, "markdown")


GENERATED = Path(__file__).parent / "fixtures" / "generated"


def test_a_pipeline_stages_validation_placeholder_is_no_validation_loss() -> None:
    """torchtitan prints "validate step: 5  loss: -1.0000" on a pipeline stage that computes no loss, as it prints
    "step: 5  loss: -1.0000": a placeholder, not a validation loss of -1."""
    run = forensics.analyze_path(GENERATED / "review_s48_torchtitan_pipeline_stage_validate_placeholder.log"
                                 ).findings.runs[0]
    assert "val_loss" not in run.coverage["metrics"]
    assert any("val loss printed as -1 on 4 line(s): torchtitan's placeholder" in w for w in run.warnings), run.warnings


def test_a_trainers_bar_drawn_under_an_outer_loop_is_still_the_trainings() -> None:
    """LlamaFactory #2902 with tqdm's cursor-up code after each bar (the Trainer's bar under an outer loop): its one
    metrics dict is at its bar's 10, the crash after it at 13 of 620 (the bars are the training's, not another
    loop's: only the check of the lines' count against the bar leaves such bars out)."""
    run = forensics.analyze_path(GENERATED / "review_s48_trainer_bar_under_an_outer_loop.txt").findings.runs[0]
    [attempt] = run.attempts
    assert (attempt.start_step, attempt.end_step, attempt.bar_step, attempt.bar_total) == (10, 10, 13, 620)
