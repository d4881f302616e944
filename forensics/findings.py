"""The findings of an analysis: plain dataclasses that the reports render and that serialise to the JSON contract."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_VERSION = 1


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN: non-finite numbers become null (the kind of anomaly says what happened)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


INSTABILITY_KINDS: frozenset[str] = frozenset({"loss_spike", "divergence", "nan"})  # what a run's trouble is


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

    kind: str            # loss_spike, grad_norm_spike, nan, divergence, loss_scale_collapse, skipped_iterations
    metric: str          # canonical metric name
    attempt: int
    step: int            # onset
    end_step: int        # last step of the incident
    value: float | None  # the peak (or the value that tripped the check)
    baseline: float | None  # the level it departed from
    detail: str = ""     # one plain sentence for the chronicle
    recovered_step: int | None = None   # spikes: the first step back at the baseline level
    grad_norm_lead: int | None = None   # loss spikes: steps by which a grad-norm spike led it (0: same step)
    averaged_over: int | None = None    # the log interval when each logged value is a mean over iterations
    precursors: list[str] = field(default_factory=list)  # what came before it, one plain sentence each

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["value"] = finite_or_none(self.value)
        out["baseline"] = finite_or_none(self.baseline)
        return out


@dataclass
class Attempt:
    """One run of the training program, from a (re)start to where its log ends."""

    index: int
    start_step: int | None
    end_step: int | None
    resumed_from_step: int | None
    resumed_from_inferred: bool
    rollback: bool
    config_changes: dict[str, list[Any]]
    end_reason: str      # completed, nan, diverged, crashed, killed, stopped, running, no_training
    points: int = 0
    sources: list[str] = field(default_factory=list)
    end_detail: str = ""
    behaviour: list[str] = field(default_factory=list)  # how it behaved differently after its config changes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ModelCheck:
    """The model's size three ways: computed from its shape, printed by the program, and stated in its name."""

    parameters_from_shape: float | None = None
    parameters_logged: float | None = None
    parameters_stated: float | None = None
    shape: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Schedule:
    """Where the learning-rate warm-up and the batch-size ramp-up end, as the curves show and as configured."""

    lr_peak: float | None = None
    lr_peak_step: int | None = None          # first step at the peak LR: the end of warm-up as the LR curve shows it
    warmup_end_step: int | None = None       # the LR curve's, else the configured one
    warmup_end_configured: int | None = None  # from lr_warmup_iters / lr_warmup_fraction / lr_warmup_samples
    batch_rampup_end_step: int | None = None  # first step at the full batch size (the curve's, else the config's)
    batch_size_final: float | None = None
    batch_size_logged: tuple[float, float] | None = None  # first and largest logged batch size
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Cause:
    """A suspected cause, never a verdict: the evidence for it and how sure the rule is."""

    cause: str
    confidence: float
    evidence: list[str]
    check_next: str = ""

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "sources": self.sources,
            "attempts": [a.to_dict() for a in self.attempts],
            "anomalies": [a.to_dict() for a in self.anomalies],
            "model": self.model.to_dict(),
            "suspected_causes": [c.to_dict() for c in self.suspected_causes],
            "warnings": self.warnings,
            "skipped": self.skipped,
            "spike_scores": self.spike_scores,
            "schedule": self.schedule.to_dict(),
            "config_diffs": self.config_diffs,
            "config": self.config,
        }


@dataclass
class Findings:
    """The analysis of one or more runs: what ``forensics analyze`` renders."""

    runs: list[RunFindings]

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "runs": [r.to_dict() for r in self.runs]}
