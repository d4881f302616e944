"""What was read and what could be checked: per source, the metrics recognised (points, step range, the tags they
came from), the metrics the detectors need that were not found, and roles given to scalars by their names.

A run whose loss tag the readers did not recognise (``train/lm_xent``) is not left unchecked: a scalar whose name
looks like a training loss (``loss``, ``xent``, ``nll``, ``ce``, ``cross_entropy``, ``perplexity``) or a grad
norm (``gnorm``, ``grad_norm``, ``gradient_norm``) takes that role, and the report says which tag it took. NaN/Inf
checks run on every scalar whatever its name (:mod:`forensics.detectors.nan`).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from forensics.timeline import attempt_groups
from parsers import schema as s

# what each metric lets the detectors check: a missing one is reported with what could not be checked
NEEDED: dict[str, str] = {
    s.LOSS: "loss spikes, divergence and NaN in the loss",
    s.GRAD_NORM: "grad-norm spikes and the grad norm as a precursor",
    s.LR: "the warm-up and the learning-rate schedule",
    s.LOSS_SCALE: "fp16 loss-scale collapse (bf16 and fp32 runs log no loss scale)",
}
_SPLIT = re.compile(r"[/_\-. :]+")
_EVAL = frozenset({"val", "valid", "validation", "eval", "evaluation", "test", "dev"})
_NOT_MAIN = frozenset({"aux", "z", "zloss", "moe", "balance", "balancing", "kl", "reg", "scale", "mtp", "router"})
_LOSS_WORDS = ("loss", "xent", "crossentropy", "cross_entropy", "nll", "ce")
_PPL_WORDS = ("perplexity", "ppl")
_GRAD_NAMES = ("gnorm", "grad_norm", "gradnorm", "gradient_norm", "grad-norm", "gradient-norm", "grad norm")


def _words(name: str) -> list[str]:
    return [w for w in _SPLIT.split(name.lower()) if w]


_RUN_MEANS = frozenset({"train/train_loss"})  # the Trainer's summary: a mean over the run, not a series


def role_score(name: str, role: str) -> int:
    """How well a scalar's name fits a role (0: not at all): the exact word beats a relative of it, a training
    tag beats an unmarked one, a per-epoch mean loses to the per-step series (Lightning's ``train/loss_step`` and
    ``train/loss_epoch``); validation and auxiliary losses never take the training-loss role.

    >>> role_score("train/lm_xent", "loss") > 0, role_score("val/loss", "loss"), role_score("optim/gnorm", "grad_norm")
    (True, 0, 2)
    >>> role_score("train/loss_step", "loss") > role_score("train/loss_epoch", "loss")
    True
    >>> role_score("train/train_loss", "loss")  # the Trainer's end-of-training mean
    0
    """
    words = _words(name)
    lowered = name.lower()
    if role == s.GRAD_NORM:
        if any(g in lowered for g in _GRAD_NAMES):
            per_layer = any(w.isdigit() for w in words) or "layer" in lowered or "." in name.split("/")[-1]
            return 1 if per_layer else 2
        return 0
    if role != s.LOSS or _EVAL & set(words) or _NOT_MAIN & set(words):
        return 0
    if lowered in _RUN_MEANS:  # the Hugging Face Trainer's end-of-training mean over the whole run
        return 0
    joined = "_".join(words)
    if "loss" in words:
        base = 4
    elif any(w in words for w in ("xent", "nll", "ce")) or "cross_entropy" in joined or "crossentropy" in joined:
        base = 3
    elif any(w in words for w in _PPL_WORDS):
        base = 2
    else:
        return 0
    return base + (1 if words[0] in {"train", "training"} else 0) - (1 if {"epoch", "epochs"} & set(words) else 0)


def assign_roles(metrics: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, str]]:
    """Give the loss and grad-norm roles to the best-named scalars when no recognised metric holds them. Returns the
    metrics with those scalars renamed to their role, and ``{role: original name}``."""
    present = set(metrics["metric"].unique().cast(pl.String).to_list())
    roles: dict[str, str] = {}
    for role in (s.LOSS, s.GRAD_NORM):
        if role in present:
            continue
        unknown = [m for m in present if m not in s.CANONICAL_METRICS and m not in roles.values()
                   and not m.startswith(("val_", "test_"))]
        scored = sorted(((role_score(m, role), m) for m in unknown), key=lambda x: (-x[0], x[1]))
        if scored and scored[0][0] > 0:
            roles[role] = scored[0][1]
    if not roles:
        return metrics, roles
    rename = {name: role for role, name in roles.items()}
    return metrics.with_columns(
        metric=pl.col("metric").cast(pl.String).replace(rename).cast(pl.Categorical)
    ), roles


def timed_sources(metrics: pl.DataFrame, events: pl.DataFrame) -> dict[str, list[str]]:
    """``{"timed_sources": [...]}``: the sources whose points or lines carry a wall-clock time (the timeline's times
    come from them)."""
    timed = {str(x) for frame in (metrics, events) if frame.height
             for x in frame["source"].filter(frame["wall_time"].is_not_null()).unique().to_list() if x is not None}
    return {"timed_sources": sorted(timed)}


def coverage(metrics: pl.DataFrame, tags: list[dict[str, str]], roles: dict[str, str],
             sources: list[str], checks: dict[str, dict[int, dict[str, Any]]] | None = None,
             short_holes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The coverage record of a run (its JSON form): ``metrics`` (per canonical metric: points, first_step,
    last_step, source_tags), ``by_source`` (the same per source), ``other_scalars`` (unrecognised names),
    ``roles`` (role -> the scalar that took it), ``missing`` (needed metrics not found), ``step_axis`` (per source,
    the run's own step key when it was used instead of the logger's counter), ``silent`` (the sources that logged no
    scalar at all), ``overlaid`` (per source whose values
    all gave way to a full-resolution source at the same steps, the metrics it had), ``spikes_judged`` (per metric and
    attempt, the points the spike detector judged against the noise: not the burn-in at the start of training, not
    the first 10 points of a stretch) and ``spike_checks`` (per metric and attempt: those points, the points that
    had the absolute checks only, and the thresholds; see :func:`forensics.analysis.spike_checks`) and
    ``short_holes`` (points missing from regular logging, too few to be a gap: :func:`forensics.gaps.short_holes`)."""
    stats = (
        metrics.lazy().select("source", "metric", "step").group_by("source", "metric")
        .agg(points=pl.len(), first_step=pl.col("step").min(), last_step=pl.col("step").max())
        .with_columns(pl.col("source").cast(pl.String), pl.col("metric").cast(pl.String))
        .sort("source", "metric").collect()
    )
    tag_of: dict[tuple[str, str], list[str]] = {}
    axis = {t["source"]: t["tag"] for t in tags if t["metric"] == s.STEP_AXIS}
    for t in (t for t in tags if t["metric"] != s.STEP_AXIS):
        metric = roles_back(t["metric"], roles)
        tag_of.setdefault((t["source"], metric), []).append(t["tag"])
    by_source: dict[str, dict[str, Any]] = {src: {} for src in sources}
    totals: dict[str, dict[str, Any]] = {}
    for source, metric, points, lo, hi in stats.rows():
        entry = {"points": points, "first_step": lo, "last_step": hi,
                 "source_tags": sorted(set(tag_of.get((source, metric), [])))}
        by_source.setdefault(source, {})[metric] = entry
        total = totals.setdefault(metric, {"points": 0, "first_step": lo, "last_step": hi, "source_tags": []})
        total["points"] += points
        # a source's metric may have no step at all (None): the other sources' steps stand
        total["first_step"] = min((x for x in (total["first_step"], lo) if x is not None), default=None)
        total["last_step"] = max((x for x in (total["last_step"], hi) if x is not None), default=None)
        total["source_tags"] = sorted(set(total["source_tags"]) | set(entry["source_tags"]))
    recognised = {m: v for m, v in totals.items() if _recognised(m)}
    # a source whose names were read but whose rows are all gone: a full-resolution source had the same steps
    overlaid = {src: sorted({metric for (tag_src, metric) in tag_of if tag_src == src and _recognised(metric)})
                for src in sources if not any(_recognised(m) for m in by_source.get(src, {}))}
    return {
        "overlaid": {src: metrics for src, metrics in overlaid.items() if metrics},
        "silent": [src for src in sources if not by_source.get(src) and not overlaid.get(src)],
        "metrics": recognised,
        "by_source": {src: {m: v for m, v in ms.items() if _recognised(m)} for src, ms in by_source.items()},
        "other_scalars": sorted(m for m in totals if not _recognised(m)),
        "roles": dict(roles),
        "missing": [m for m in NEEDED if m not in recognised],
        "step_axis": axis,
        "spikes_judged": {m: {str(a): c["statistical"] for a, c in sorted(per.items())}
                          for m, per in (checks or {}).items() if per},
        "spike_checks": {m: {str(a): c for a, c in sorted(per.items())} for m, per in (checks or {}).items() if per},
        "short_holes": short_holes,
        "unjudged_losses": _unjudged(metrics, {a: c["statistical"] for a, c in (checks or {}).get(s.LOSS, {}).items()}),
    }


def _unjudged(metrics: pl.DataFrame, judged: dict[int, int]) -> list[dict[str, Any]]:
    """For each attempt whose loss the spike detector could not judge against its noise, what its loss did, as
    facts: its first, highest and last logged values with their steps."""
    attempts = [a for a, n in judged.items() if n == 0]
    if not attempts:
        return []
    loss = metrics.filter((pl.col("metric") == s.LOSS) & pl.col("attempt").is_in(attempts)
                          & pl.col("value").is_finite()).sort("attempt", "step")
    out = []
    for attempt, own in attempt_groups(loss):
        top = own.row(int(own["value"].arg_max()), named=True)  # type: ignore[arg-type]
        out.append({"attempt": int(attempt), "points": own.height,
                    "first": [own["step"][0], own["value"][0]], "highest": [top["step"], top["value"]],
                    "last": [own["step"][-1], own["value"][-1]]})
    return out


def roles_back(metric: str, roles: dict[str, str]) -> str:
    """The metric a source tag now feeds: its role when it took one."""
    return next((role for role, name in roles.items() if name == metric), metric)


def _recognised(metric: str) -> bool:
    return metric in s.CANONICAL_METRICS or metric.startswith(("val_", "test_"))


def with_evaluation_passes(record: dict[str, Any], events: pl.DataFrame) -> dict[str, Any]:
    """A coverage record with ``evaluation_passes``, the sources that are an evaluation pass (a file of evaluation
    scalars only, no training step: Lightning's ``validate()`` / ``test()``), when any is."""
    passes = events.filter(pl.col("kind") == s.EV_EVALUATION_PASS)["source"] if events.height else None
    return {**record, "evaluation_passes": sorted(passes.unique().to_list())} if passes is not None and passes.len() \
        else record


def with_overflow_scales(record: dict[str, Any], events: pl.DataFrame) -> dict[str, Any]:
    """A coverage record with ``overflow_scales`` when the loss scale is missing as a series but fp16 overflow lines
    print the scale they reduced it to (DeepSpeed's "Attempted loss scale: 256, reducing to 128"): ``lines``, ``first``
    and ``last`` (the scales), so the report does not say the loss scale was not found where the log prints it; else,
    with ``overflow_stop`` (that line's text) where the program said it stopped on overflows, so the report does not
    say a collapse could not be checked beside the collapse that line shows."""
    if s.LOSS_SCALE not in record.get("missing", []) or not events.height:
        return record
    scales = events.filter(pl.col("kind").is_in(list(s.OVERFLOW_KINDS)) & pl.col("value").is_not_null()).sort(
        "line", nulls_last=True)["value"]
    if not scales.len():
        # (or the program's own word that it stopped on overflows: "Current loss scale already at minimum")
        stops = events.filter(pl.col("kind") == s.EV_OVERFLOW_STOP).sort("line", nulls_last=True)
        return {**record, "overflow_stop": str(stops["text"][0])} if stops.height else record
    return {**record, "overflow_scales": {"lines": scales.len(), "first": float(scales[0]), "last": float(scales[-1])}}


def with_unprinted_loss(record: dict[str, Any], events: pl.DataFrame, metrics: pl.DataFrame) -> dict[str, Any]:
    """A coverage record with ``loss_unprinted`` when no loss was read but the log's iteration lines leave it out
    (Megatron prints no loss for an interval whose iterations were all skipped, nor for a NaN/Inf one): ``lines``,
    ``first_step``, ``last_step`` and ``all_skipped`` (the lines whose skipped count is their whole interval), so the
    report does not say a loss was not recognised where the log printed none."""
    if s.LOSS not in record.get("missing", []) or not events.height:
        return record
    missing = events.filter((pl.col("kind") == s.EV_LOSS_MISSING) & pl.col("step").is_not_null())
    if not missing.height:
        return record
    interval = metrics.filter(pl.col("metric") == s.LOG_INTERVAL).select("attempt", "step", interval=pl.col("value"))
    lines = missing.join(interval, on=["attempt", "step"], how="left").with_columns(
        skipped=pl.col("value").is_not_null() & (pl.col("value") >= pl.col("interval").fill_null(1)))
    return {**record, "loss_unprinted": {
        "lines": lines.height, "first_step": int(lines["step"].min()), "last_step": int(lines["step"].max()),  # type: ignore[arg-type]
        "all_skipped": int(lines["skipped"].sum())}}
