"""NeMo's console (``parsers.console.nemo``): the Lightning progress bar with NeMo's metrics, and NeMo 2's per-step
line, read on real pastes."""

from __future__ import annotations

import math
from pathlib import Path

import forensics
import reports
from parsers import load_run

REAL = Path(__file__).parent / "fixtures" / "real"
NEMO = REAL / "nemo"
PP_NAN = NEMO / "nemo_issue5928_pipeline_parallel_nan.txt"


def _chronicle(path: Path) -> tuple[forensics.RunFindings, list[str]]:
    analysis = forensics.analyze_path(path)
    return analysis.findings.runs[0], reports.render(analysis.findings, "markdown").splitlines()


def test_the_progress_bar_of_a_pipeline_parallel_run_that_goes_nan_at_its_second_step() -> None:
    """NVIDIA/NeMo #5928: "reduced_train_loss=11.00, global_step=0.000", then "reduced_train_loss=nan.0,
    global_step=1.000" (line 4) and 2.000 (line 6); Lightning's "loss=11" (a running mean) is not the loss. The log
    was refused: "not a recognised training log"."""
    run = load_run(PP_NAN)
    loss = run.metrics.filter(metric="loss").select("step", "value").rows()
    assert [step for step, _ in loss] == [0, 1, 2] and loss[0][1] == 11.0
    assert all(math.isnan(v) for _, v in loss[1:])
    assert [src.format for src in run.sources] == ["nemo"]
    repeats, unread = run.warnings
    assert repeats.endswith(f"{PP_NAN.name}: 2 metrics lines repeat the step, loss and time of the line before (first: "
                            "step 0, line 2): the progress bar printing the step again as it refreshes, each step read "
                            "once")
    assert unread.endswith(f"{PP_NAN.name}: its metrics lines also print consumed_samples: not read, so nothing here "
                           "checks them or rests on them")
    [attempt] = forensics.analyze(run).runs[0].attempts
    assert (attempt.end_reason, attempt.end_detail) == ("nan", "NaN from step 1 to the end of its log (step 2)")


def test_nemo_2_prints_one_line_per_step() -> None:
    """NVIDIA-BioNeMo/bionemo-recipes PR #740: "Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples:
    121 | ... | global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146 | val_loss: 4.106"."""
    run = load_run(NEMO / "bionemo_recipes_pr740_nemo2_progress_excerpt.txt")
    row = {m: run.metrics.filter(metric=m, step=120)["value"].to_list() for m in
           ("loss", "lr", "consumed_samples", "iteration_time_ms", "val_loss")}
    assert row == {"loss": [1.233], "lr": [3e-05], "consumed_samples": [121.0], "iteration_time_ms": [31.46],
                   "val_loss": []}  # (the last evaluation's loss, carried on every line: not a new evaluation)
    assert run.metrics.filter(metric="loss")["step"].to_list() == list(range(120, 126))


def test_a_step_the_bar_prints_to_three_digits_is_not_read_and_said() -> None:
    """pytorch/pytorch #118369: NeMo's bar at "32040/500150 [...] reduced_train_loss=2.590, global_step=3.2e+4", then
    NCCL watchdog timeouts. tqdm prints 32,040 as "3.2e+4" (any step from 31,950 to 32,049): the line was read as step
    32000, a step the run never logged. It is left out, said; the watchdog lines end the run."""
    run, _ = _chronicle(REAL / "console_errors" / "pytorch_issue118369_nccl_watchdog.txt")
    assert run.coverage["metrics"] == {} and run.sources[0]["format"] == "nemo"
    assert any(w.endswith("pytorch_issue118369_nccl_watchdog.txt: 1 line of NeMo's progress bar with global_step "
                          "printed to 3 significant digits (3.2e+4: the step is not known): not read")
               for w in run.warnings)
    assert (run.attempts[0].end_step, run.attempts[0].end_kind) == (None, "collective_timeout")


def test_refreshes_glued_into_one_line_pair_each_step_with_its_own_loss() -> None:
    """aws-neuron/neuronx-nemo-megatron PR #28: the bar's refreshes glued into one line ("...reduced_train_loss=3.910,
    ..., global_step=564.0 ... reduced_train_loss=4.000, ..., global_step=565.0"): "loss 3.91 at step 565" took the
    step from the last refresh and the loss from the first."""
    run = load_run(NEMO / "neuronx_nemo_pr28_glued_refreshes.txt")
    assert run.metrics.filter(metric="loss").select("step", "value").rows() == [(564, 3.91)]


def test_the_bars_fields_not_read_are_named() -> None:
    """aws-neuron/neuronx-nemo-megatron PR #28: the bar prints consumed_samples=1.45e+5 (rounded), parameter_norm,
    throughput and val_loss_step beside the loss; none is read, and the chronicle did not say so (audit s38 A, NeMo
    launcher #55). Lightning's own loss= (a running mean) and v_num= are left on purpose and not listed."""
    run = load_run(NEMO / "neuronx_nemo_pr28_glued_refreshes.txt")
    [unread] = [w for w in run.warnings if "also print" in w]
    assert unread.endswith("neuronx_nemo_pr28_glued_refreshes.txt: its metrics lines also print consumed_samples, "
                           "parameter_norm, throughput, val_loss_step: not read, so nothing here checks them or rests on "
                           "them")
