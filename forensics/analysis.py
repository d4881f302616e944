"""``forensics.analyze(run)``: attempts, anomalies, model check and suspected causes of a loaded run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import polars as pl

from forensics.attempts import build_attempts, replay_differences
from forensics.causes import suspect
from forensics.config_effects import link_config_changes
from forensics.configs import config_table, differing_keys, settings
from forensics.coverage import (
    assign_roles,
    coverage,
    timed_sources,
    with_evaluation_passes,
    with_overflow_scales,
    with_unprinted_loss,
)
from forensics.detectors import DEFAULT_DETECTORS, Detector, RunFrames, SpikeDetector
from forensics.detectors.chance import LossAboveChanceDetector
from forensics.detectors.clipping import ClippingDetector, fold_into_divergences, thresholds
from forensics.detectors.layer_grads import LayerGradDetector, layer_coverage, layer_grad_metrics, spike_origins
from forensics.detectors.logits import logit_coverage
from forensics.detectors.loss_scale import startup_searches
from forensics.detectors.skipped import SkippedIterationsDetector, untrained
from forensics.findings import BLOWUP_KINDS, Anomaly, Blips, Findings, RunFindings
from forensics.gaps import SETTINGS, discontinuities, short_holes
from forensics.log_entries import log_entries
from forensics.model_shape import check_model, init_spread, vocabulary
from forensics.precursors import annotate, consolidate
from forensics.progress import learning
from forensics.schedule import as_configured, schedule
from forensics.spike_score import spike_scores
from forensics.warning import warning_before
from parsers import schema as s


class RunLike(Protocol):
    """What ``analyze`` needs of a run: its name, path, canonical frames and what was read."""

    name: str
    path: str
    metrics: pl.DataFrame
    events: pl.DataFrame
    configs: pl.DataFrame
    sources: list
    warnings: list[str]
    skipped: list[str]
    tags: list[dict[str, str]]


def detect(frames: RunFrames, detectors: tuple[Detector, ...] = DEFAULT_DETECTORS) -> list[Anomaly]:
    """Run every detector, fold spikes that are part of a divergence into it, attach precursors and, to each
    divergence and NaN, its earliest warning sign; return the anomalies in (attempt, step, kind) order."""
    found = consolidate([a for d in detectors for a in d.detect(frames)])
    found = annotate(sorted(found, key=lambda a: (a.attempt, a.step, a.end_step, a.kind)), frames)
    seen = blips(frames, detectors)
    for a in found:
        if a.kind in BLOWUP_KINDS:
            a.warning = warning_before(a, found, frames, seen)
    return found


def analyze_run(run: RunLike, detectors: tuple[Detector, ...] = DEFAULT_DETECTORS) -> RunFindings:
    """Analyze one loaded run (see :func:`parsers.load_run`)."""
    metrics, roles = _assign_roles(run.metrics)
    frames = RunFrames(metrics=metrics, events=run.events, interval_means=frozenset(
        src.path for src in getattr(run, "sources", []) if src.format in s.INTERVAL_MEAN_FORMATS))
    table = config_table(run.configs)
    config = table[max(table)] if table else {}
    vocab = vocabulary(config, run.events)  # known: a loss above chance is an absolute check
    limits = thresholds(table)  # the clip threshold, when the config sets one
    clip = (ClippingDetector(limits.get(max(table), None) if table else None, limits),) if limits else ()
    extra = (*((LossAboveChanceDetector(vocab, init_spread=init_spread(config)),) if vocab else ()), *clip)
    anomalies = detect(frames, (*detectors, *extra) if extra else detectors)
    anomalies = fold_into_divergences(anomalies)  # clipping and layer-group drift that a divergence's course is
    origins = spike_origins(anomalies, frames) if any(isinstance(d, LayerGradDetector) for d in detectors) else []
    if origins:  # where each spike's grad norm started, among the per-layer grad norms
        anomalies = sorted([*anomalies, *origins], key=lambda a: (a.attempt, a.step, a.end_step, a.kind))
    counted = frozenset(src.path for src in run.sources if getattr(src, "counted", False))
    attempts = build_attempts(metrics, run.events, table, anomalies, frames.steps(), frames.spacing(), counted)
    link_config_changes(attempts, anomalies, frames, table)
    for attempt in attempts:  # no logged iteration changed the weights: every one of them skipped
        if (skipped := untrained(frames).get(attempt.index)) is not None:
            attempt.all_skipped = {"iterations": skipped[0], "first_step": skipped[1], "last_step": skipped[2],
                                   "overflow": skipped[3]}
    model = check_model(config, run.events, run.name, run.path)
    # the settings' curves, read once from the (possibly millions of) points for the schedule and the discontinuities
    curves = metrics.filter(pl.col("metric").is_in([*SETTINGS, s.CONSUMED_SAMPLES, s.SKIPPED_ITERATIONS]))
    timing = schedule(curves, config, attempts)
    searched = {a: search.last_step for a, search in startup_searches(frames).items()}
    causes = suspect(metrics, run.events, attempts, anomalies, model, table, timing, frames.intervals(), searched)
    gaps = frames.gaps()
    return RunFindings(
        name=run.name,
        path=run.path,
        sources=[{"path": src.path, "format": src.format, "sampled": src.sampled} for src in run.sources],
        attempts=attempts,
        anomalies=anomalies,
        model=model,
        suspected_causes=causes,
        warnings=list(run.warnings),
        skipped=list(run.skipped),
        spike_scores={m: spike_scores(metrics, m, frames.points(m), frames.spacing()) for m in (s.LOSS, s.GRAD_NORM)},
        schedule=timing,
        config=settings(config),
        config_diffs=differing_keys({str(n): cfg for n, cfg in sorted(table.items())}) if len(table) > 1 else {},
        coverage=with_unprinted_loss(with_evaluation_passes(with_overflow_scales(logit_coverage(layer_coverage(coverage(
            metrics, getattr(run, "tags", []), roles, [src.path for src in run.sources],
            checks={m: spike_checks(SpikeDetector(m), frames) for m in (s.LOSS, s.GRAD_NORM)},
            short_holes=short_holes(frames.steps(), frames.spacing())), frames), frames, getattr(run, "tags", [])),
            run.events), run.events),
            run.events, metrics)
        | _lone_skips(frames, detectors) | timed_sources(metrics, run.events),
        blips=blips(frames, detectors),
        # (not judged where the log starts mid-run: an excerpt, or a resume far into a training, flat by nature)
        learning=None if attempts and (attempts[0].begins_mid_run or (attempts[0].resumed_from_step or 0) > 0)
        else learning(metrics, vocab),
        gaps=gaps,
        discontinuities=[d for d in discontinuities(curves, gaps, frames.steps(), frames.spacing())
                         if not as_configured(d, table.get(d.attempt_after, config))],
        replay_differences=replay_differences(metrics, attempts),
        log_entries=log_entries(run.events),
        setup=[*model.notes, *(x.sentence() for x in startup_searches(frames).values())],
        summary={k: v for k, v in config.items() if k.startswith((s.SUMMARY_PREFIX, s.RUN_INFO_PREFIX))},
    )


def _lone_skips(frames: RunFrames, detectors: tuple[Detector, ...]) -> dict[str, list[dict]]:
    """``lone_skips`` for the coverage record: the skipped iterations too few to be a burst (the skipped-iterations
    detector's groups below its threshold: ``attempt``, ``start``, ``end``, ``total``) and ``skip_burst``, that
    threshold, when there are any."""
    found = next((d for d in detectors if isinstance(d, SkippedIterationsDetector)), None)
    lone = found.lone(frames) if found is not None else None
    return {"lone_skips": lone.to_dicts(), "skip_burst": found.min_total} \
        if found is not None and lone is not None and lone.height else {}


def _assign_roles(metrics: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, str]]:
    """:func:`~forensics.coverage.assign_roles`, with the per-layer grad norms out of the running: one layer's norm
    never stands in for the global grad norm."""
    layered = layer_grad_metrics(metrics)
    if not layered:
        return assign_roles(metrics)
    mine = pl.col("metric").cast(pl.String).is_in(layered)
    rest, roles = assign_roles(metrics.filter(~mine))
    return (pl.concat([rest, metrics.filter(mine)]) if roles else metrics), roles


def blips(frames: RunFrames, detectors: tuple[Detector, ...] = DEFAULT_DETECTORS) -> list[Blips]:
    """Per attempt and metric, the spike detectors' blips (lone points inside the noise tail), in attempt order
    (computed once per run: the warnings and the findings both use them)."""
    spikes = tuple(d for d in detectors if isinstance(d, SpikeDetector))
    return frames.remember(("blips", tuple(repr(d) for d in spikes)), lambda: _blips(frames, spikes))


def _blips(frames: RunFrames, spikes: tuple[SpikeDetector, ...]) -> list[Blips]:
    out = []
    for d in spikes:
        per: dict[int, list] = {}
        for b in d.blips(frames):
            per.setdefault(b.attempt, []).append(b)
        for attempt, found in per.items():
            top = max(found, key=lambda b: b.value / b.baseline if b.baseline > 0 else 0.0)
            out.append(Blips(attempt, d.series or d.metric, len(found),
                             round(top.value / top.baseline, 4) if top.baseline > 0 else float("inf"), top.step,
                             [b.step for b in found]))
    return sorted(out, key=lambda b: (b.attempt, b.metric))


def spike_checks(detector: SpikeDetector, frames: RunFrames) -> dict[int, dict]:
    """Per attempt, how the spike detector could judge the metric: points judged against the noise, points with the
    absolute checks only, the thresholds (robust sigmas) a lone point and two points in a row had to reach, and the
    largest rise of a judged point over the median of the 8 before it (``ratio``, ``step``, ``value``)."""
    tails, unknown, judged = detector.tails(frames), detector.unknown(frames), detector.judged(frames)
    rises = detector.largest_rises(frames)
    checks = {a: {"statistical": judged.get(a, 0), "absolute_only": unknown.get(a, 0),
                  "tail": tail.rule, "lone_point_sigma": round(tail.thresholds[0], 2),
                  "two_in_a_row_sigma": round(tail.thresholds[1], 2), "mean_of": tail.mean_of,
                  "largest_rise": {"ratio": rises[a][0], "step": rises[a][1], "value": rises[a][2]}
                  if a in rises else None} for a, tail in sorted(tails.items())}
    # and the points neither could judge: with no point before them in their stretch of the log (of those the detector
    # looks at: finite and above 0; a loss of 0 is the zero-loss check's)
    points = frames.points(detector.series or detector.metric).filter(pl.col("value").is_finite()
                                                                      & (pl.col("value") > 0))
    counts = dict(points.group_by("attempt").len().rows())
    for a, c in checks.items():
        c["not_judged"] = max(int(counts.get(a, 0)) - c["statistical"] - c["absolute_only"], 0)
    # a metric that goes below 0 is not judged (see RunFrames.negative): said, with its lowest value
    for a, (value, step) in frames.negative(detector.series or detector.metric).items():
        checks[a] = {"statistical": 0, "absolute_only": 0, "negative": {"value": value, "step": step}}
    return dict(sorted(checks.items()))


def analyze(*runs: RunLike) -> Findings:
    """Analyze loaded runs.

    >>> import parsers, forensics
    >>> findings = forensics.analyze(parsers.load_run("sample_logs/tr8-104B-sample"))
    >>> [str(a.end_reason) for a in findings.runs[0].attempts]
    ['nan', 'nan', 'diverged']
    """
    return Findings(runs=[analyze_run(r) for r in runs])


@dataclass
class Analysis:
    """What ``forensics analyze`` produces: the findings, each run's metrics (for the plots) and the path that was
    read (which nothing may be written into). :func:`reports.write` writes it."""

    findings: Findings
    metrics: dict[str, pl.DataFrame] = field(default_factory=dict)
    read: Path | None = None


def analyze_path(path: str | Path) -> Analysis:
    """Load a run directory or a log file (every run it holds) and analyze it: the library call behind
    ``forensics analyze``. ``path`` may be a URL (``s3://bucket/runs/tr8/``, see :func:`parsers.load_runs`). Bad
    input raises :class:`parsers.InputError` with a one-line message.

    >>> analysis = analyze_path("sample_logs/tr8-104B-sample")
    >>> analysis.findings.runs[0].attempts[1].config_changes
    {'seed': [42, 43]}
    >>> import json, reports
    >>> json.loads(reports.render(analysis.findings, "json"))["runs"][0]["model"]["parameters_stated"]
    104000000000.0
    """
    from parsers import load_runs, remote

    runs = load_runs(path)
    # a URL's run is protected where it is local (file://); a remote one cannot be written into by a local report
    read = remote.local_path(str(path)) if remote.is_url(path) else Path(path)
    return Analysis(analyze(*runs), {r.name: r.metrics for r in runs}, read)
