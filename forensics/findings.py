"""The findings of an analysis: plain dataclasses that the reports render and that serialise to the JSON contract."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

SCHEMA_VERSION = 2


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN: non-finite numbers become null (the kind of anomaly says what happened)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def shown(value: float) -> str:
    """A logged value as the chronicle quotes it: every digit it was logged with (the shortest exact form).

    >>> shown(2.665295), shown(1048576.0), shown(5.842e-05), shown(float("nan"))
    ('2.665295', '1048576', '5.842e-05', 'nan')
    """
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def times(ratio: float) -> str:
    """A ratio as the chronicle says it: two decimals where one would round a rise away ("1.0x").

    >>> times(1.0384), times(1.6), times(23.44)
    ('1.04x', '1.6x', '23.4x')
    """
    return f"{ratio:.2f}x" if ratio < 1.095 else f"{ratio:.1f}x"


def step_count(n: int) -> str:
    """A count of steps in words.

    >>> step_count(1), step_count(340)
    ('1 step', '340 steps')
    """
    return f"{n} step" if n == 1 else f"{n} steps"


class EndReason(StrEnum):
    """How an attempt (one launch of the training program) ended: the first decisive thing after its last iteration,
    else the trouble it ended in, else what the log shows of it."""

    COMPLETED = "completed"            # reached the last iteration, or said training was done
    EXITED = "exited"                  # a planned exit (exit duration or interval, the end of its data)
    STOPPED = "stopped"                # stopped by the scheduler or a person: cancel, time limit, SIGTERM
    INTERRUPTED = "interrupted"        # interrupted by hand (KeyboardInterrupt)
    KILLED = "killed"                  # killed by a signal (SIGKILL: the system or the scheduler)
    CRASHED = "crashed"                # a fatal error while training
    FAILED_STARTUP = "failed_startup"  # a fatal error before its first iteration
    NAN = "nan"                        # the loss (or grad norm) went NaN and stayed there
    DIVERGED = "diverged"              # the loss left its level and did not come back
    HUNG = "hung"                      # stack dumps or a silence: the program stopped making progress
    UNKNOWN = "unknown"                # the log shows no end, and another attempt followed
    RUNNING = "running"                # the log ends with no end printed: still running, cut off, or a silent stop
    SILENT_EXIT = "silent_exit"        # its processes exited (their shutdown lines say so), no error or reason printed
    NO_TRAINING = "no_training"        # no iteration, no error: nothing to tell


# endings where the training failed (the rest: it finished, was stopped on purpose, or the log does not say)
FAILED_ENDINGS: frozenset[EndReason] = frozenset({
    EndReason.NAN, EndReason.DIVERGED, EndReason.CRASHED, EndReason.FAILED_STARTUP, EndReason.HUNG, EndReason.KILLED,
})
# endings where the training was stopped on purpose or from outside (a kill by a signal is a failure too: the
# chronicle tells an attempt that failed as a failure, never as a stop)
STOPPED_ENDINGS: frozenset[EndReason] = frozenset({
    EndReason.EXITED, EndReason.STOPPED, EndReason.INTERRUPTED, EndReason.KILLED,
})


class Kind(StrEnum):
    """What an anomaly is (:attr:`Anomaly.kind`): every kind a detector may report (the contract test holds every
    detector to it)."""

    LOSS_SPIKE = "loss_spike"
    GRAD_NORM_SPIKE = "grad_norm_spike"
    NAN = "nan"                                  # the loss or grad norm went NaN/Inf
    NON_FINITE = "non_finite"                    # NaN/Inf in another scalar
    DIVERGENCE = "divergence"
    LOSS_SCALE_COLLAPSE = "loss_scale_collapse"
    SKIPPED_ITERATIONS = "skipped_iterations"
    HANG = "hang"
    CHANGEPOINT = "changepoint"
    LOSS_PLATEAU = "loss_plateau"
    LOSS_ABOVE_CHANCE = "loss_above_chance"
    GRAD_NORM_RATIO = "grad_norm_ratio"          # a layer group's share of the grad norm drifted, or a spike began there
    CLIPPING = "clipping"                        # the grad norm above the configured clip threshold (sustained, or 10x)
    LOGIT_GROWTH = "logit_growth"                # attention logits or the z-loss growing log-linearly
    ZERO_LOSS = "zero_loss"                      # the loss logged as exactly 0: no training signal in those batches
    FROZEN_LOSS = "frozen_loss"                  # the loss logged as one value at many points in a row: not moving
    ZERO_GRAD_NORM = "zero_grad_norm"            # the grad norm logged as 0 at every point beside a loss above 0


ANOMALY_KINDS: frozenset[Kind] = frozenset(Kind)
INSTABILITY_KINDS: frozenset[Kind] = frozenset({Kind.LOSS_SPIKE, Kind.DIVERGENCE, Kind.NAN})  # what a run's trouble is
BLOWUP_KINDS: frozenset[Kind] = frozenset({Kind.DIVERGENCE, Kind.NAN})  # what ends a run: a warning is sought for them
# not "what went wrong first": fp16 overflow skips, a change of level, a NaN in a scalar other than loss/grad norm, a
# grad norm never measured (a placeholder as often as a frozen model: tr1-13B's "grad norm: 0.000" beside its spikes)
NOT_FIRST_ANOMALY: frozenset[Kind] = frozenset({Kind.SKIPPED_ITERATIONS, Kind.CHANGEPOINT, Kind.NON_FINITE,
                                                Kind.ZERO_GRAD_NORM})


class Signal(StrEnum):
    """A warning sign before a blow-up (``Anomaly.warning["signals"][i]["kind"]``, :mod:`forensics.warning`)."""

    GRAD_NORM_RISE = "grad_norm_rise"                  # the grad norm rising (its rolling median, or a short climb)
    LOSS_SCALE_OVERFLOWS = "loss_scale_overflows"      # a skipped-iteration burst or a loss-scale collapse
    UNRECOVERED_SPIKE = "unrecovered_spike"            # a loss spike not back to its level before the blow-up
    UNRECOVERED_GRAD_NORM_SPIKE = "unrecovered_grad_norm_spike"  # the same, of the grad norm
    RISING_SPIKE_RATE = "rising_spike_rate"            # spikes and blips coming faster
    GRAD_NORM_RATIO = "grad_norm_ratio"                # a layer group's share of the grad norm rising
    SUSTAINED_CLIPPING = "sustained_clipping"          # the grad norm above the clip threshold at most steps
    LOGIT_GROWTH = "logit_growth"                      # attention logits or the z-loss growing log-linearly


class Outcome(StrEnum):
    """A compared run's final state (:attr:`forensics.comparison.RunRow.outcome`), from how its last attempt ended."""

    COMPLETED = "completed"
    NAN = "nan"
    DIVERGED = "diverged"
    CRASHED = "crashed"
    STOPPED = "stopped"        # stopped on purpose (a planned exit, the scheduler, a person)
    EXITED = "exited"          # its processes exited with no reason printed: no failure seen, no stop on purpose
    RUNNING = "running"        # no end seen: healthy up to its last step
    UNREADABLE = "unreadable"  # nothing could be read


FAILED_OUTCOMES: frozenset[Outcome] = frozenset({Outcome.NAN, Outcome.DIVERGED, Outcome.CRASHED})


class CauseKind(StrEnum):
    """The rule family of a suspected cause (:attr:`Cause.kind`; causes of one kind merge)."""

    LR = "lr"                                # the learning rate too high (for the model size, or lowering it helped)
    LOSS_SCALE = "loss_scale"                # fp16 loss-scale collapse or overflow storm
    LOGITS = "logits"                        # attention or output logit growth
    LAYER_GRADS = "layer_grads"              # one layer group's gradients out of proportion
    CLIPPING = "clipping"                    # gradients clipped at most steps before the trouble
    CLIP_THRESHOLD = "clip_threshold"        # spikes a loose clip threshold let through
    WARMUP = "warmup"                        # trouble shortly after the warm-up ended
    DATA = "data"                            # a bad batch: the trouble came back at the same samples
    STATE = "state"                          # state lost or changed at a resume
    OPTIMIZER_STATE = "optimizer_state"      # the optimizer's state lost at a resume
    HARDWARE = "hardware"                    # a fault the logs name: ECC, Xid, CUDA or NCCL errors, host errors
    STORAGE = "storage"                      # a file write (or read) the logs say failed: disk full, quota, I/O
    RANK_STOPPED = "rank_stopped"            # ranks left waiting in a collective, with no error that says why
    MEMORY = "memory"                        # out of memory
    PROGRAM_ERROR = "program_error"          # an error in the program or its configuration
    UNREACHABLE = "unreachable"              # a connection it could not make: a wrong address, or the network
    NETWORK = "network"                      # a network request dropped just before the error: a remote source
    STOPPED = "stopped"                      # stopped by the scheduler or a person
    PLANNED_EXIT = "planned_exit"            # the program stopped itself as set up (exit interval, end of its data)
    INTERRUPTED = "interrupted"              # interrupted by hand


class SizeBasis(StrEnum):
    """Which of the model's counts the size in its name is (:attr:`ModelCheck.name_matches`): the total, or the count
    without the word embedding (and an untied output layer, and learned positions) that some families name their
    models by (Gemma-2-2B has 2.61B parameters, 2.02B of them outside its 256,000 x 2,304 embedding)."""

    TOTAL = "total"
    NON_EMBEDDING = "non_embedding"


# cause families that say how a run was stopped, not why it failed (never "the top cause")
NOT_WHY_CAUSES: frozenset[CauseKind] = frozenset({CauseKind.STOPPED, CauseKind.PLANNED_EXIT, CauseKind.INTERRUPTED})


def first_anomaly(anomalies: list[Anomaly]) -> Anomaly | None:
    """The run's first anomaly that says something went wrong (see ``NOT_FIRST_ANOMALY``), by attempt and step."""
    return next((a for a in sorted(anomalies, key=lambda a: (a.attempt, a.step)) if a.kind not in NOT_FIRST_ANOMALY),
                None)


def first_trouble(anomalies: list[Anomaly]) -> dict[int, Anomaly]:
    """Per attempt, its first instability (loss spike, divergence or NaN), by step."""
    first: dict[int, Anomaly] = {}
    for a in sorted(anomalies, key=lambda a: (a.step, a.end_step, a.kind)):  # a spike before the divergence it opens
        if a.kind in INSTABILITY_KINDS:
            first.setdefault(a.attempt, a)
    return first


@dataclass
class Anomaly:
    """Something that departed from the run's own recent behaviour, at a step of an attempt."""

    kind: Kind           # what it is (a plain string is taken as the Kind it names)
    metric: str          # canonical metric name
    attempt: int
    step: int            # onset
    end_step: int        # last step of the incident
    value: float | None  # the peak (or the value that tripped the check)
    baseline: float | None  # the level it departed from
    detail: str = ""     # one plain sentence for the chronicle
    recovered_step: int | None = None   # spikes: the first step back at the baseline level; NaN: finite again
    grad_norm_lead: int | None = None   # loss spikes: steps by which a grad-norm spike led it (0: same step)
    averaged_over: int | None = None    # the log interval when each logged value is a mean over iterations
    precursors: list[str] = field(default_factory=list)  # what came before it, one plain sentence each
    warning: dict[str, Any] | None = None  # divergence, NaN: the earliest warning sign (forensics.warning)

    def __post_init__(self) -> None:
        self.kind = Kind(self.kind)

    @property
    def trouble(self) -> str:
        """The word for what the series was in: "Inf" for a NaN/Inf incident whose values were all infinite, "NaN"
        for another, "diverging" for a divergence.

        >>> [Anomaly(Kind.NAN, "loss", 1, 5, 9, v, None).trouble for v in (float("inf"), float("nan"))]
        ['Inf', 'NaN']
        """
        if self.kind != Kind.NAN:
            return "diverging"
        return "Inf" if self.value is not None and math.isinf(self.value) else "NaN"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = str(self.kind)
        out["value"] = finite_or_none(self.value)
        out["baseline"] = finite_or_none(self.baseline)
        return out


@dataclass
class Blips:
    """Lone points of one metric in one attempt that passed the spike screen but lie inside what the attempt's own
    noise produces (:mod:`forensics.detectors.noise_tail`): counted, never incidents (the OLMo spike score is computed
    on every point, these included)."""

    attempt: int
    metric: str
    count: int
    largest: float        # the largest, as a multiple of the trailing median before it
    largest_step: int
    steps: list[int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Attempt:
    """One launch of the training program, from its (re)start to where its log ends (or one stretch of a log whose
    step counter went back: a relaunch whose start-up was not logged)."""

    index: int
    start_step: int | None
    end_step: int | None
    resumed_from_step: int | None   # the checkpoint's iteration; inferred: the first logged step minus one interval
    resumed_from_inferred: bool     # no line said where it started (no checkpoint load, no "no checkpoint"): its start
                                    # is read off its first logged step (resumed_from_step None: the start of training)
    rollback: bool
    config_changes: dict[str, list[Any]]
    end_reason: EndReason
    points: int = 0
    sources: list[str] = field(default_factory=list)
    end_detail: str = ""              # the line that decided how it ended, quoted, or what the log shows
    end_kind: str | None = None       # the event kind of that line (``parsers.schema`` vocabulary)
    end_trouble: str | None = None    # the trouble its loss was already in when that line was printed ("NaN from
                                      # step 1")
    end_at_step: int | None = None    # the last step logged before that line (None: before any, or not known)
    target_step: int | None = None    # the last iteration it was configured to reach (train_iters), when known
    bar_step: int | None = None       # the count of its last progress bar (tqdm's N of N/M) up to its ending, when
                                      # past its last logged step (or it logged none): how far its loop got
    bar_total: int | None = None      # that bar's total (its M)
    target_from_bar: bool = False     # target_step is the total of its last progress bar (no length configured)
    behaviour: list[str] = field(default_factory=list)  # how it behaved differently after its config changes
    started_at: float | None = None   # wall clock (Unix seconds) of its start-up, when the log shows and times it
    first_seen_at: float | None = None  # the first time the attempt printed
    last_step_at: float | None = None   # when its last logged step was logged (when steps carry times)
    last_line_at: float | None = None   # its last sign of life: its ending or last step by the clock (or, when it
                                        # logged no step, its last timed line)
    ended_at: float | None = None     # when the line that ended it was printed
    ran_for_s: float | None = None    # from its start to its end (or its own exit line's count of minutes)
    downtime_after_s: float | None = None  # from its last timed line to the next attempt's start (or first line)
    short: bool = False               # a short launch: at most three steps and no anomaly (a relaunch that died at
                                      # once, a failed start-up, a reshaping test), listed in one line
    config_compared: bool = False     # both it and the attempt before it logged a config (so changes could be seen)
    begins_mid_run: bool = False      # the log's first attempt begins after the start of training with no checkpoint
                                      # load in it (an excerpt, or a resume not logged): what came before is unseen
    first_epoch: float | None = None  # its first logged epoch, when that is how the log shows it began mid-run
    loaded_weights: bool = False      # it began from a checkpoint's weights, its steps counted from 0 (a fine-tune)
    load_without_step: bool = False   # its log has a checkpoint-load line that names no step (nanoGPT's "Resuming
                                      # training from out"): a resume point inferred from its first step is not
                                      # inferred for want of a load line
    failed_after_training: str | None = None  # it completed, then the program failed: the error line it printed
    stopped_after_training: str | None = None  # it completed, then the program was stopped (a later stage
                                               # interrupted by hand, the job cancelled): the line that says so
    stopped_after_how: EndReason | None = None  # how it was stopped then: interrupted, stopped, killed
    warmup_logs_before: int | None = None  # points a linear warm-up from 0 would have logged before its first (a
                                           # console that prints no step, whose first LR is N rises up)
    steps_counted: bool = False       # its steps count the metrics lines a console printed (it prints no step)
    all_skipped: dict[str, Any] | None = None  # every iteration its lines count was skipped, so no step changed the
                                      # weights: ``iterations``, ``first_step``, ``last_step``, ``overflow`` (fp16's)
    exit_code: int | None = None      # the exit status its log printed last, after every error (a wrapper's "RC=1")
    log_interval: int | None = None   # its logging interval: as logged, else as configured, else its usual step,
                                      # else 1 (None: it logged no step)
    clock_note: str | None = None     # why its wall-clock times are not the times it trained (a history written
                                      # all at once: an upload after the fact), so its duration is not known

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["end_reason"] = self.end_reason.value
        return out

    def nothing_left_to_train(self) -> bool:
        """It logged no step, resumed at its last planned iteration (Megatron loaded the checkpoint at
        ``train_iters``) and completed: its loop had nothing to run (one that failed loading it did not resume)."""
        return self.end_reason == EndReason.COMPLETED and self.end_step is None and self.resumed_from_step is not None \
            and self.resumed_from_step == self.target_step

    def interval(self) -> float | None:
        """Its logging interval; for an Attempt built without one (by hand), its mean step between logged points
        (None with fewer than two points)."""
        if self.log_interval is not None:
            return float(self.log_interval)
        if self.points < 2 or self.start_step is None or self.end_step is None:
            return None
        return max((self.end_step - self.start_step) / (self.points - 1), 1.0)

    def past_target(self) -> bool:
        """It completed at least one logging interval past its configured length (OLMo's [step=110/100])."""
        return self.end_reason == EndReason.COMPLETED and not self.target_from_bar and self.target_step is not None \
            and self.end_step is not None and self.end_step - self.target_step >= (self.interval() or 1.0)

    def ended_early(self) -> bool:
        """It printed that its training completed more than two logging intervals (measured over three points or
        more) before its configured length: an early-stopping rule, a stop asked of the trainer, a time budget."""
        return self.end_reason == EndReason.COMPLETED and not self.target_from_bar and self.points >= 3 \
            and self.target_step is not None and self.end_step is not None \
            and self.target_step - self.end_step > 2 * (self.interval() or 1.0)

    def short_of_target(self, intervals: float = 1.0) -> bool:
        """Its last logged step is at least ``intervals`` logging intervals short of its configured length: a later
        point would have been logged had it gone on. A log that stops within one interval of its length (nanoGPT's
        1000 of 1005, logging every 10) has logged all it would.

        >>> a = Attempt(1, 0, 1000, None, False, False, {}, EndReason.UNKNOWN, points=101, target_step=1005)
        >>> a.short_of_target(), Attempt(1, 0, 990, None, False, False, {}, EndReason.UNKNOWN, points=100,
        ...                              target_step=1005).short_of_target()
        (False, True)
        """
        if self.target_step is None or self.end_step is None:
            return False
        return self.target_step - self.end_step >= intervals * (self.interval() or 1.0)


@dataclass
class Gap:
    """A hole in the logged steps: nothing between ``after_step`` and ``before_step``. Inside one attempt, or between
    one attempt's last step and the next attempt's first (``attempt`` None; ``attempts`` says which)."""

    after_step: int
    before_step: int
    attempt: int | None
    attempts: tuple[int, int] | None = None
    interval: int = 1                 # the usual step between logged points there

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Discontinuity:
    """A setting that changed where the log cannot show how: across a gap, a relaunch, or in one jump."""

    metric: str
    before: float
    after: float
    step_before: int
    step_after: int
    attempt_before: int
    attempt_after: int
    across: str                       # "gap", "relaunch" or "jump" (consecutive points, no gap)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ReplayDifference:
    """A step logged again by a later attempt that gave a different value (values in attempt order)."""

    step: int
    metric: str
    values: list[tuple[int, float]]   # (attempt, value)
    last_step: int | None = None      # the last step the later attempt logged again (its replay runs step..last_step)
    replayed: int = 1                 # how many steps the later attempt logged again

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "metric": self.metric,
                "values": [{"attempt": a, "value": finite_or_none(v)} for a, v in self.values],
                "last_step": self.last_step, "replayed": self.replayed}


@dataclass
class LogEntry:
    """An error, a stop or a scheduler notice the logs printed, with where it was (``count``: identical lines)."""

    attempt: int | None
    step: int | None
    kind: str
    text: str
    wall_time: float | None = None
    source: str = ""
    line: int | None = None
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ModelCheck:
    """The model's size three ways: computed from its shape, printed by the program, and stated in its name."""

    parameters_from_shape: float | None = None
    parameters_logged: float | None = None
    parameters_stated: float | None = None
    parameters_logged_how: str = ""                    # how the program's count was put together, if not printed whole
    size_headline: str = ""                            # "this is a ~58B model, not 104B: ..." (also notes[0]), if so
    shape: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)     # what is off in the setup, most telling first
    caveats: list[str] = field(default_factory=list)   # what the check could not see
    parameters_non_embedding: float | None = None      # from the shape, without word/position embeddings and head
    name_matches: SizeBasis | str = ""                 # which count the size in the name is within 25% of, if any
    size_ratio: float | None = None                    # parameters from the shape / parameters in the name
    size_ratio_non_embedding: float | None = None      # the count without the embeddings / parameters in the name
    ffn_ratio: float | None = None                     # ffn_hidden_size / hidden_size, when outside the usual range

    @property
    def size_mismatch(self) -> bool:
        """Whether the shape gives a size more than 25% off the one in the run's name, counted with its embeddings or
        without them (the headline's case).

        >>> gemma_2_2b = ModelCheck(size_ratio=1.31, size_ratio_non_embedding=1.01)
        >>> ModelCheck(size_ratio=0.553).size_mismatch, gemma_2_2b.size_mismatch
        (True, False)
        """
        return self.size_ratio is not None and not self.sizes_within()

    def sizes_within(self) -> dict[SizeBasis, float]:
        """The counts from the shape (the total, the count without the embeddings) within 25% of the size in the
        run's name, each with its ratio to it.

        >>> ModelCheck(size_ratio=1.31, size_ratio_non_embedding=1.01).sizes_within()
        {<SizeBasis.NON_EMBEDDING: 'non_embedding'>: 1.01}
        >>> ModelCheck(size_ratio=0.553).sizes_within(), ModelCheck().sizes_within()
        ({}, {})
        """
        return {basis: ratio for basis, ratio in ((SizeBasis.TOTAL, self.size_ratio),
                                                  (SizeBasis.NON_EMBEDDING, self.size_ratio_non_embedding))
                if ratio is not None and size_within(ratio)}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["size_ratio"], out["ffn_ratio"], out["size_ratio_non_embedding"]  # said in the notes and headline
        return out


def size_within(ratio: float) -> bool:
    """Whether a size from the shape is the size in the name (within 25% either way)."""
    return 0.8 <= ratio <= 1.25


@dataclass
class Schedule:
    """Where the learning-rate warm-up and the batch-size ramp-up end, as the curves show and as configured."""

    lr_peak: float | None = None
    lr_peak_step: int | None = None          # first step at the peak LR: the end of warm-up as the LR curve shows it
    warmup_end_step: int | None = None       # the LR curve's, else the configured one
    warmup_end_configured: int | None = None  # from lr_warmup_iters / lr_warmup_fraction / lr_warmup_samples
    batch_rampup_end_step: int | None = None  # first step at the full batch size (the curve's, else the config's)
    batch_size_final: float | None = None    # the configured global batch size, else the largest logged
    batch_size_configured: bool = False      # whether batch_size_final is the configured one
    batch_size_logged: tuple[float, float] | None = None  # first and largest logged batch size
    warmup_end_after: int | None = None      # the warm-up ended after this logged step, by warmup_end_step
    still_warming_up: bool = False           # the LR was still rising at the last logged point
    peak_before_hole: int | None = None      # the highest LR seen was still rising into a hole in the log that ends
                                             # at this step: its peak (and warm-up end) may lie in the hole
    batch_rampup_end_after: int | None = None  # likewise for the batch ramp-up
    from_attempt: int | None = None          # the curves are those of this attempt on (a later start from scratch)
    lr_constant: bool = False                # the LR is the same at every logged point (no warm-up or decay seen)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Cause:
    """A suspected cause of the instability or of how the run ended, never a verdict: the evidence for it, the
    evidence against it, and how sure the rule is. ``kind`` names the rule family (causes of one kind merge)."""

    cause: str
    confidence: float
    evidence: list[str]
    check_next: str = ""
    kind: CauseKind | str = ""
    counter_evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunFindings:
    """Everything the analysis found about one run."""

    name: str
    path: str
    sources: list[dict[str, str]]
    attempts: list[Attempt]
    anomalies: list[Anomaly]
    model: ModelCheck
    suspected_causes: list[Cause]
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    spike_scores: dict[str, Any] = field(default_factory=dict)  # OLMo 2 spike score per metric (percent)
    schedule: Schedule = field(default_factory=Schedule)
    config_diffs: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> {attempt: value}, differing keys
    config: dict[str, Any] = field(default_factory=dict)  # the last attempt's settings (no bookkeeping keys)
    coverage: dict[str, Any] = field(default_factory=dict)  # what was read and checked (see forensics.coverage)
    gaps: list[Gap] = field(default_factory=list)
    discontinuities: list[Discontinuity] = field(default_factory=list)
    replay_differences: list[ReplayDifference] = field(default_factory=list)
    log_entries: list[LogEntry] = field(default_factory=list)  # errors, stops and scheduler notices, in order
    setup: list[str] = field(default_factory=list)  # setup findings: the model against its name, init, FFN width
    summary: dict[str, Any] = field(default_factory=dict)  # W&B summary values and runs-table columns of the run
    blips: list[Blips] = field(default_factory=list)  # per attempt and metric: lone points inside the noise tail
    learning: dict[str, Any] | None = None  # whether the loss fell at all (see forensics.progress)

    def to_dict(self) -> dict[str, Any]:
        return {
            "coverage": self.coverage,
            "name": self.name,
            "path": self.path,
            "sources": self.sources,
            "attempts": [a.to_dict() for a in self.attempts],
            "anomalies": [a.to_dict() for a in self.anomalies],
            "blips": [b.to_dict() for b in self.blips],
            "model": self.model.to_dict(),
            "suspected_causes": [c.to_dict() for c in self.suspected_causes],
            "warnings": self.warnings,
            "skipped": self.skipped,
            "spike_scores": self.spike_scores,
            "schedule": self.schedule.to_dict(),
            "config_diffs": self.config_diffs,
            "config": self.config,
            "gaps": [g.to_dict() for g in self.gaps],
            "discontinuities": [d.to_dict() for d in self.discontinuities],
            "replay_differences": [r.to_dict() for r in self.replay_differences],
            "log_entries": [e.to_dict() for e in self.log_entries],
            "setup": self.setup,
            "summary": self.summary,
            "learning": self.learning,
        }


@dataclass
class Findings:
    """The analysis of one or more runs: what ``forensics analyze`` renders."""

    runs: list[RunFindings]

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "runs": [r.to_dict() for r in self.runs]}
