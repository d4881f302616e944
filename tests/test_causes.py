"""Suspected causes, schedule positions and config changes linked to behaviour, on the samples, real logs and
small frames built for one rule each."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import SAMPLES, real

import forensics
from forensics.causes import lr_causes, reference_lr
from forensics.config_effects import link_config_changes
from forensics.detectors import HangDetector, RunFrames
from forensics.findings import Anomaly, Attempt, EndReason, ModelCheck, Schedule
from forensics.infra import infrastructure
from forensics.resumes import optimizer_state_lost, skipped_batches
from parsers import load_run
from parsers import schema as s


@pytest.fixture(scope="module")
def tr8_sample():
    return forensics.analyze(load_run(SAMPLES / "tr8-104B-sample")).runs[0]


def cause(run, start: str):
    return [c for c in run.suspected_causes if c.cause.startswith(start)]


def test_sample_schedule_from_the_curves_agrees_with_the_config(tr8_sample):
    sched = tr8_sample.schedule
    assert (sched.lr_peak, sched.lr_peak_step, sched.warmup_end_step) == (6e-05, 6500, 6500)
    assert sched.warmup_end_configured == 6500        # lr_warmup_samples 174240 on the consumed-samples curve
    assert sched.batch_size_final == 2048 and sched.batch_rampup_end_step is None  # still ramping when it died
    assert sched.batch_size_logged == (16.0, 592.0)
    assert sched.notes == []


def test_sample_spike_after_warmup_is_suspected_for_both_attempts(tr8_sample):
    [warm] = cause(tr8_sample, "instability shortly after the learning-rate warm-up ended")
    assert warm.evidence == [
        "the learning rate reached its peak (6e-05) at step 6500",
        "attempt 1: first loss spike at step 7010, 510 steps later",
        "attempt 2: first loss spike at step 6930, 430 steps later",
    ]


def test_sample_setup_findings_are_not_ranked_as_causes(tr8_sample):
    assert tr8_sample.setup == [
        "this is a ~58B model, not 104B: ffn_hidden_size 20480 is 1.25x hidden (expected 65536)",
        "init_method_std 0.02 is 4.0x the small-init value sqrt(2/(5·hidden)) = 0.0049 for hidden 16384",
    ]
    assert not [c for c in tr8_sample.suspected_causes if c.kind in ("shape", "init") or "shape" in c.cause]


def test_sample_warmup_cause_names_the_attempt_that_spiked_in_warmup_against_it(tr8_sample):
    [warm] = cause(tr8_sample, "instability shortly after the learning-rate warm-up ended")
    assert warm.counter_evidence == ["attempt 3: first loss spike at step 4960, while still in warm-up (it ends at "
                                     "step 6500)"]
    assert warm.confidence == pytest.approx(0.4)


def test_sample_config_changes_are_linked_to_what_followed(tr8_sample):
    a = tr8_sample.attempts
    assert a[1].behaviour == ["after seed 42 → 43: first loss spike at step 6930, 80 steps sooner than attempt 1's "
                              "(step 7010)"]
    assert a[2].behaviour == ["after adam_beta2 0.999 → 0.95: first loss spike at step 4960, 2050 steps sooner than "
                              "attempt 1's (step 7010)"]
    assert tr8_sample.config_diffs == {
        "adam_beta2": {"1": 0.999, "2": 0.999, "3": 0.95}, "seed": {"1": 42, "2": 43, "3": 43},
    }


def test_clean_sample_has_no_causes():
    run = forensics.analyze(load_run(SAMPLES / "clean-1.3B")).runs[0]
    assert run.suspected_causes == [] and run.schedule.warmup_end_step == 300


def test_tr1_13b_hardware_is_suspected_on_the_ecc_error_and_the_planned_exit_is_not_a_crash():
    run = forensics.analyze(load_run(real("tr1-13B"))).runs[0]
    [infra] = cause(run, "hardware or infrastructure failure")
    assert infra.confidence == 0.8 and infra.counter_evidence == []
    assert ("attempt 3 crashed after step 43680: RuntimeError: transform: failed to synchronize: "
            "cudaErrorECCUncorrectable: uncorrectable ECC error encountered") in infra.evidence
    [oom] = cause(run, "out of memory")
    assert oom.evidence[0] == "attempt 4, with no step read from its logs: RuntimeError: CUDA error: out of memory"
    [stop] = cause(run, "a planned exit: the program stopped itself, as its own line says")
    assert stop.evidence == ["attempt 2 ended after step 33240: [exiting program after 1190.0357275923093 minutes] "
                             "datetime: 2021-08-08 01:00:51"]
    assert run.suspected_causes[0] is infra


# --- one rule at a time, on small frames ---------------------------------------------------------------------------

def metrics(rows: dict[str, list[tuple[int, int, float]]], wall: dict[int, float] | None = None) -> pl.DataFrame:
    """rows: metric -> [(attempt, step, value)]; wall: step -> wall time for every row at that step."""
    frame = pl.DataFrame(
        [{"metric": m, "attempt": a, "step": st, "value": v, "run": "r", "source": "x"}
         for m, pts in rows.items() for a, st, v in pts]
    )
    if wall:
        frame = frame.with_columns(wall_time=pl.col("step").replace_strict(wall, default=None, return_dtype=pl.Float64))
    return s.conform(frame, s.METRICS_SCHEMA)


def attempt(index: int, start: int, end: int, resumed: int | None, **kw) -> Attempt:
    return Attempt(index=index, start_step=start, end_step=end, resumed_from_step=resumed,
                   resumed_from_inferred=False, rollback=kw.pop("rollback", False),
                   config_changes=kw.pop("changes", {}), end_reason=kw.pop("end", EndReason.RUNNING), **kw)


def spike(attempt_: int, step: int, kind: str = "loss_spike") -> Anomaly:
    return Anomaly(kind=kind, metric="loss", attempt=attempt_, step=step, end_step=step, value=9.0, baseline=3.0)


def test_optimizer_state_lost_from_a_reset_loss_scale_and_a_spike_right_after():
    m = metrics({s.LOSS_SCALE: [(1, 990, 2048.0), (1, 1000, 2048.0), (2, 1010, 65536.0)],
                 s.LOSS: [(1, 1000, 3.0), (2, 1010, 3.0), (2, 1040, 9.0)]})
    atts = [attempt(1, 10, 1000, None), attempt(2, 1010, 1100, 1000)]
    [c] = optimizer_state_lost(atts, [spike(2, 1040)], m, s.empty(s.EVENTS_SCHEMA), {2: {}})
    assert c.cause == "optimizer state lost on resume" and c.confidence == 0.6
    assert c.evidence == [
        "fp16 loss scale restarted at 65536 after the resume, 32x the 2048 before it (the grad scaler is part of the "
        "optimizer state)",
        "loss spike at step 1040, 40 steps after resuming from 1000",
    ]


def test_optimizer_state_lost_from_the_config_without_trouble_is_weaker():
    m = metrics({s.LOSS: [(1, 1000, 3.0), (2, 1010, 3.0)]})
    atts = [attempt(1, 10, 1000, None), attempt(2, 1010, 5000, 1000)]
    [c] = optimizer_state_lost(atts, [], m, s.empty(s.EVENTS_SCHEMA), {2: {"no_load_optim": True}})
    assert (c.cause, c.confidence, c.evidence) == (
        "optimizer state lost on resume", 0.3, ["attempt 2 ran with no_load_optim=True"])


def test_a_line_that_says_the_optimizer_state_was_not_loaded_is_an_event_of_its_own_kind(tmp_path):
    """The reader gives a line that says the optimizer state was not loaded a second event, optimizer_not_loaded,
    beside its own kind, and the cause reads that kind, not the words (issue 17). No real log found prints it on a
    line the reader takes: the line is liguodongiot/llm-action's real checkpoint load line with a clause added."""
    lines = real("llm-train_megatron_gpt2_model_train").read_text(
        encoding="utf-8").splitlines()
    assert lines[286] == "  successfully loaded checkpoint from /workspace/model/megatron-models/345m at iteration 5000"
    lines[286] += " (not loading optimizer state)"
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    events = load_run(log).events.filter(pl.col("line") == 287)
    assert sorted(events["kind"].to_list()) == [s.EV_CHECKPOINT_LOAD, s.EV_OPTIMIZER_NOT_LOADED]
    said = events.filter(pl.col("kind") == s.EV_OPTIMIZER_NOT_LOADED).select("step", "value", "text").row(0)
    assert said == (5000, None, lines[286])
    m = metrics({s.LOSS: [(1, 1000, 3.0), (2, 1010, 3.0)]})
    atts = [attempt(1, 10, 1000, None), attempt(2, 1010, 5000, 1000)]
    line = s.conform(pl.DataFrame({"attempt": [2], "step": [1010], "kind": [s.EV_CHECKPOINT_LOAD],
                                   "text": ["loaded checkpoint (not loading optimizer state)"]}), s.EVENTS_SCHEMA)
    assert optimizer_state_lost(atts, [], m, line, {2: {}}) == []  # its words alone are not read here
    [c] = optimizer_state_lost(atts, [], m, line.with_columns(kind=pl.lit(s.EV_OPTIMIZER_NOT_LOADED)), {2: {}})
    assert c.evidence == ["attempt 2 logged: loaded checkpoint (not loading optimizer state)"]


def test_a_long_silence_is_a_hang_but_not_evidence_of_hardware():
    steps = list(range(10, 210, 10))
    wall = {st: 20.0 * st for st in steps} | {st: 20.0 * st + 7200 for st in steps if st > 100}
    m = metrics({s.LOSS: [(1, st, 3.0) for st in steps]}, wall)
    [hang] = HangDetector().detect(RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
    assert (hang.step, hang.end_step, hang.value) == (100, 110, 7400.0)
    assert hang.detail == "nothing logged for 2.1 h between steps 100 and 110 (usually 200 s between logged steps)"
    assert infrastructure(s.empty(s.EVENTS_SCHEMA), [attempt(1, 10, 200, None)], [hang]) == []


def test_a_silence_before_the_end_is_a_hang_whatever_was_printed_at_start_up():
    """A start-up error (no step: printed before the first iteration of a source that logs steps) is not what came
    after the last step: the 3-hour silence before the scheduler's cancel is still found."""
    steps = list(range(10, 210, 10))
    m = metrics({s.LOSS: [(1, st, 3.0) for st in steps]}, {st: 20.0 * st for st in steps})
    events = s.conform(pl.DataFrame({
        "run": "r", "source": "x", "attempt": 1, "step": [None, 200], "line": [5, 900],
        "kind": [s.EV_CUDA_ERROR, s.EV_CANCELLED], "wall_time": [1.0, 4000.0 + 3 * 3600],
        "text": ["CUDA error: busy or unavailable (retried)", "*** JOB 1 CANCELLED AT 2021-01-01 DUE TO TIME LIMIT ***"],
    }), s.EVENTS_SCHEMA)
    [hang] = HangDetector().detect(RunFrames(m, events))
    assert hang.detail == ("nothing logged for 3.0 h after step 200 before: *** JOB 1 CANCELLED AT 2021-01-01 DUE TO "
                           "TIME LIMIT ***")


def test_lowering_the_lr_that_got_further_is_suspected_and_gpt3_reference():
    atts = [attempt(1, 10, 5000, None), attempt(2, 3010, 9000, 3000, changes={"lr": [3e-4, 1.5e-4]}, rollback=True)]
    [c] = lr_causes(atts, [spike(1, 4200)], ModelCheck(), Schedule(), {})
    assert c.cause == "learning rate too high: lowering it got further" and c.confidence == 0.6
    assert c.evidence == ["attempt 1 (lr 0.0003): loss spike at step 4200",
                          "attempt 2 lowered lr to 0.00015 and ran to step 9000 without trouble"]
    assert reference_lr(13e9) == pytest.approx(1e-4) and reference_lr(1e6) == pytest.approx(6e-4)
    high = lr_causes([attempt(1, 10, 5000, None)], [spike(1, 4200)], ModelCheck(parameters_from_shape=1.3e9),
                     Schedule(lr_peak=6e-4), {})
    assert high[0].evidence == ["peak LR 0.0006 is 3.0x the 0.0002 GPT-3 used at 1.3B parameters"]


def test_trouble_gone_after_skipping_batches_points_at_data():
    events = s.conform(pl.DataFrame({"attempt": [2], "kind": [s.EV_SKIP_RANGE], "value": [4100.0], "step": [4100]}),
                       s.EVENTS_SCHEMA)
    atts = [attempt(1, 10, 4300, None), attempt(2, 4010, 9000, 4000, rollback=True)]
    [c] = skipped_batches(atts, [spike(1, 4200)], events)
    assert c.confidence == 0.7 and c.evidence[1] == "attempt 2 skipped iterations from 4100 and ran on to step 9000 " \
                                                    "without trouble"


def test_a_regime_change_at_the_start_of_a_changed_attempt_is_linked():
    steps = range(10, 1010, 10)
    m = metrics({s.LOSS: [(1, st, 3.0) for st in steps] + [(2, st, 3.3) for st in steps if st > 500],
                 s.GRAD_NORM: [(1, st, 1.0) for st in steps] + [(2, st, 2.0) for st in steps if st > 500]})
    shift = Anomaly(kind="changepoint", metric="grad_norm", attempt=2, step=510, end_step=1000, value=2.0,
                    baseline=1.0, detail="grad norm level 1 before step 510, 2 after")
    atts = [attempt(1, 10, 1000, None), attempt(2, 510, 1000, 500, changes={"lr": [1e-4, 3e-4]}, rollback=True)]
    link_config_changes(atts, [shift], RunFrames(m, s.empty(s.EVENTS_SCHEMA)))
    assert atts[1].behaviour == [
        "after lr 0.0001 → 0.0003: loss 10% higher than attempt 1 over steps 510–1000 (3.3 vs 3)",
        "after lr 0.0001 → 0.0003: grad norm 2.00x attempt 1's over steps 510–1000",
        "after lr 0.0001 → 0.0003: grad norm changed level at the start: grad norm level 1 before step 510, 2 after",
    ]
    assert shift.precursors == ["attempt 2 began at step 510 with lr 0.0001 → 0.0003"]


def test_tr8b_chronicle_spike_after_the_resume_with_overflow_lines():
    run = forensics.analyze(load_run(real("tr8b-104B"))).runs[0]
    spike_ = next(a for a in run.anomalies if a.kind == "loss_spike")
    # the stretch after the hole 16801-17060 holds two points before the spike: judged on those alone
    assert (spike_.attempt, spike_.step, spike_.value, spike_.baseline) == (2, 17062, 4.374269, 2.665295)
    assert [a.step for a in run.anomalies if a.kind == "divergence"] == [17062]
    assert cause(run, "fp16 loss-scale collapse")[0].confidence == 0.6


def test_a_scheduler_cancel_is_a_stop_not_hardware():
    run = forensics.analyze(load_run(real("meg_gpt2_base_n4"))).runs[0]
    assert cause(run, "hardware or infrastructure failure") == []
    [stop] = cause(run, "stopped by the scheduler or a person")
    assert stop.evidence == ["attempt 1 ended after step 200: srun: Job step aborted: Waiting up to 62 seconds for "
                             "job step to finish."]


def test_logit_growth_before_trouble_becomes_a_cause():
    from forensics.causes import logit_growth

    a = spike(1, 900)
    a.precursors = ["max_attention_logit grew 12.0x before this (80 -> 960; attention or output logit growth "
                    "precedes divergence, Wortsman et al. 2023)"]
    [c] = logit_growth([a, spike(1, 950)])
    assert c.cause == "attention or output logit growth" and c.evidence == [f"attempt 1, before step 900: "
                                                                            f"{a.precursors[0]}"]


def test_an_error_printed_before_the_collective_timed_out_counts_against_a_lost_rank(tmp_path):
    """A rank that raises leaves the others in the all-reduce until the watchdog fires: the sample's first 1,000
    lines, a Python error, then the timeout lines of pytorch/pytorch#118369. The ending is the error (printed first),
    and the rank that stopped answering has the error as evidence against it; with no error, the same lines are
    the weaker cause alone."""
    head = (SAMPLES / "clean-1.3B" / "train.log").read_text(encoding="utf-8").splitlines()[:1000]
    timeouts = [
        "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96117, "
        "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625613 milliseconds before timing out.",
        "[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=64088, "
        "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625251 milliseconds before timing out."]
    error = "IndexError: index 50304 is out of bounds for dimension 0 with size 50257"
    for name, lines in (("raised", [*head, "Traceback (most recent call last):", error, *timeouts]),
                        ("silent", [*head, *timeouts])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    raised = forensics.analyze(load_run(tmp_path / "raised")).runs[0]
    assert (raised.attempts[0].end_kind, raised.attempts[0].end_detail) == ("error", error)
    [stopped] = cause(raised, "a rank stopped answering")
    last = raised.attempts[0].end_step
    assert stopped.confidence == 0.15 and stopped.counter_evidence == [
        f"attempt 1, after step {last}: {error} was printed before the wait: a rank that fails leaves the others "
        "waiting in the collective until it times out"]
    assert [c.kind for c in raised.suspected_causes] == ["program_error", "rank_stopped"]
    silent = forensics.analyze(load_run(tmp_path / "silent")).runs[0]
    assert silent.attempts[0].end_kind == "collective_timeout"
    assert [(c.kind, c.confidence, c.counter_evidence) for c in silent.suspected_causes] == [("rank_stopped", 0.3, [])]


def test_every_cause_kind_is_of_the_one_vocabulary(tr8_sample):
    """Cause families are typed (forensics.findings.CauseKind), as anomaly kinds are: never matched as prose."""
    from forensics.findings import CauseKind

    runs = [tr8_sample, *(forensics.analyze(load_run(real(name))).runs[0] for name in ("tr1-13B", "MoE_log_gpt3"))]
    kinds = [c.kind for run in runs for c in run.suspected_causes]
    assert {"hardware", "memory", "planned_exit", "interrupted", "warmup", "state", "loss_scale"} <= set(kinds)
    assert all(isinstance(kind, CauseKind) for kind in kinds)


def test_an_ecc_error_after_an_out_of_memory_stays_evidence_of_the_hardware(tmp_path):
    """A CUDA error that names the hardware (ECC, Xid) is an event of its own kind beside its CUDA error
    (parsers.schema.EV_HARDWARE_NAMED), given by the reader: the NCCL error an out-of-memory brings on is explained
    away as its consequence, the ECC error at the same step is not (forensics/infra.py matched the line's words)."""
    from forensics.infra import oom_aftermath

    log = tmp_path / "train.log"
    log.write_text(
        " iteration       10/     100 | consumed samples:          160 | lm loss: 7.500000E+00 |\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "NCCL error in: ProcessGroupNCCL.cpp:825, unhandled cuda error, NCCL version 2.10.3\n"
        "RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    events = load_run(log).events
    named = events.filter(pl.col("kind") == s.EV_HARDWARE_NAMED)
    assert named["line"].to_list() == [4]
    after = oom_aftermath(events)
    assert after.select("kind", "line").rows() == [(s.EV_NCCL_ERROR, 3)]


def test_the_time_limit_cause_is_decided_by_the_ending_kind_not_the_quoted_words():
    """The time-limit cause reads the attempt's end kind (parsers.schema.EV_TIME_LIMIT), not the words "DUE TO TIME
    LIMIT" in its quoted line: spyysalo/lumi-llm-scaling's slurm line with another rank's output glued in front of
    it (constructed: ranks' output interleaves) is quoted cut at 240 characters, before those words."""
    from forensics.endings import quote
    from forensics.infra import stops

    line = ("x" * 200 + "0: slurmstepd: error: *** STEP 3660463.0 ON nid005740 CANCELLED AT 2023-06-09T17:33:54 "
            "DUE TO TIME LIMIT ***")
    assert "DUE TO TIME LIMIT" not in quote(line)
    ended = attempt(1, 10, 200, None, end_kind=s.EV_TIME_LIMIT, end_detail=quote(line))
    ended.end_reason = EndReason.STOPPED
    [cause] = stops([ended], [])
    assert (cause.cause, cause.confidence) == ("the job's time limit: the scheduler stopped it, as its own line says",
                                               0.9)
    cancelled = attempt(1, 10, 200, None, end_kind=s.EV_CANCELLED,
                        end_detail="srun: Job step aborted: Waiting up to 32 seconds for job step to finish.")
    cancelled.end_reason = EndReason.STOPPED
    assert stops([cancelled], [])[0].cause == "stopped by the scheduler or a person"
