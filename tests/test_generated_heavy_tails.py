"""Generated runs with heavy-tailed (Student-t, AR(1)) noise in the formats the tool reads, each with a known
injected incident: the chronicle's statements about them, checked against what was injected (audit s39 D)."""

from __future__ import annotations

from pathlib import Path

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
