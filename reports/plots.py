"""PNG plots beside the chronicle: an overview of the loss across attempts, and loss and grad norm per attempt on a
shared step axis with anomalies and rollbacks marked.

Millions of points are reduced per attempt to at most ``BINS`` step bins (min, median, max), so a one-step spike
still shows at full height. Output is byte-for-byte the same for the same input (Agg backend, fixed size and dpi,
no timestamp in the PNG metadata).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl

from forensics.findings import RunFindings
from forensics.timeline import step_bins
from parsers import schema as s

BINS = 2000          # step bins per attempt and metric
LOG_RANGE = 20.0     # a metric whose maximum is more than this factor above its 1st percentile gets a log axis
DPI = 110
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
_MARKS = {
    "loss_spike": ("^", "#d62728"), "grad_norm_spike": ("^", "#d62728"), "nan": ("X", "black"),
    "divergence": ("v", "#7f0000"), "loss_scale_collapse": ("s", "#ff9896"), "changepoint": ("D", "#7f7f7f"),
}


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "figure.dpi": DPI, "svg.hashsalt": "forensics"})
    return plt


def binned(metrics: pl.DataFrame, metric: str, bins: int = BINS) -> pl.DataFrame:
    """Per attempt, ``metric`` in at most ``bins`` step bins (see :func:`forensics.timeline.step_bins`)."""
    return step_bins(metrics.filter(pl.col("metric") == metric), bins)


def _log_axis(values: np.ndarray) -> bool:
    positive = values[values > 0]
    if positive.size < 2 or positive.size < values.size:
        return False
    return bool(positive.max() / np.percentile(positive, 1) > LOG_RANGE)


def _draw(ax, data: pl.DataFrame, run: RunFindings, metric: str, label: str) -> None:  # type: ignore[no-untyped-def]
    for i, attempt in enumerate(run.attempts):
        mine = data.filter(pl.col("attempt") == attempt.index)
        if mine.height == 0:
            continue
        color = _COLORS[i % len(_COLORS)]
        steps = mine["step"].to_numpy()
        if mine.height > 1 and (mine["high"] != mine["low"]).any():
            ax.fill_between(steps, mine["low"].to_numpy(), mine["high"].to_numpy(), color=color, alpha=0.25, lw=0)
        ax.plot(steps, mine["mid"].to_numpy(), color=color, lw=0.8, label=f"attempt {attempt.index}")
        if attempt.rollback and attempt.resumed_from_step is not None:
            ax.axvline(attempt.resumed_from_step, color=color, ls="--", lw=0.8)
    for a in run.anomalies:
        if a.metric != metric or a.kind not in _MARKS:
            continue
        marker, color = _MARKS[a.kind]
        y = a.value if a.value is not None and np.isfinite(a.value) else None
        if a.kind == "nan" or y is None:
            ax.axvline(a.step, color=color, lw=0.8, alpha=0.6)
        else:
            ax.plot([a.step], [y], marker=marker, color=color, ms=6, ls="none")
    values = data["high"].to_numpy()
    if values.size and _log_axis(values):
        ax.set_yscale("log")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)


def _save(fig, path: Path) -> None:  # type: ignore[no-untyped-def]
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})


def slug(name: str) -> str:
    """A file-name-safe form of a run name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"


def plot_run(metrics: pl.DataFrame, run: RunFindings, directory: Path) -> dict[str, Path]:
    """Write ``<run>-overview.png`` (loss across attempts) and ``<run>-attempts.png`` (loss and grad norm, anomalies
    and rollbacks marked) into ``directory``; returns {"overview": path, "attempts": path} for what was drawn."""
    out: dict[str, Path] = {}
    loss, grad = binned(metrics, s.LOSS), binned(metrics, s.GRAD_NORM)
    if not loss.height and not grad.height:
        return out
    plt = _pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    if loss.height:
        fig, ax = plt.subplots(figsize=(9, 3))
        _draw(ax, loss, run, s.LOSS, "loss")
        ax.set_title(f"{run.name}: loss across attempts (dashed: rollback resume points)")
        ax.set_xlabel("step")
        ax.legend(loc="upper right", fontsize=7)
        fig.tight_layout()
        out["overview"] = directory / f"{slug(run.name)}-overview.png"
        _save(fig, out["overview"])
        plt.close(fig)
    panels = [(d, m, lbl) for d, m, lbl in ((loss, s.LOSS, "loss"), (grad, s.GRAD_NORM, "grad norm")) if d.height]
    if panels:
        fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.8 * len(panels)), sharex=True, squeeze=False)
        for ax, (data, metric, label) in zip(axes[:, 0], panels, strict=True):
            _draw(ax, data, run, metric, label)
        axes[0, 0].set_title(f"{run.name}: per attempt (▲ spike, ▼ divergence, ■ loss-scale collapse, | NaN)")
        axes[0, 0].legend(loc="upper right", fontsize=7)
        axes[-1, 0].set_xlabel("step")
        fig.tight_layout()
        out["attempts"] = directory / f"{slug(run.name)}-attempts.png"
        _save(fig, out["attempts"])
        plt.close(fig)
    return out


def plot_overlay(overlay: pl.DataFrame, markers: dict[str, int | None], directory: Path) -> dict[str, Path]:
    """Loss and grad norm of all runs on one step axis (and loss on consumed samples / tokens when every run
    logged them), each run's divergence (or NaN) point marked with an x. Returns {label: path}."""
    plt = _pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    names = list(dict.fromkeys(overlay["run"].to_list()))
    axes_to_draw = [("step", s.LOSS, "loss by step"), ("step", s.GRAD_NORM, "grad norm by step")]
    for x, label in (("samples", "loss by consumed samples"), ("tokens", "loss by consumed tokens")):
        loss = overlay.filter(pl.col("metric") == s.LOSS)
        if loss.height and loss[x].null_count() == 0:
            axes_to_draw.append((x, s.LOSS, label))
    for x, metric, label in axes_to_draw:
        data = overlay.filter(pl.col("metric") == metric)
        if data.height == 0:
            continue
        fig, ax = plt.subplots(figsize=(9, 3.6))
        for i, name in enumerate(names):
            mine = data.filter(pl.col("run") == name)
            if mine.height == 0:
                continue
            color = _COLORS[i % len(_COLORS)] if len(names) <= len(_COLORS) else plt.cm.viridis(i / len(names))
            ax.plot(mine[x].to_numpy(), mine["mid"].to_numpy(), color=color, lw=0.8, label=name)
            at = markers.get(name)
            if at is not None:
                hit = mine.filter(pl.col("step") <= at).tail(1)
                if hit.height:
                    ax.plot(hit[x].to_numpy(), hit["high"].to_numpy(), marker="x", color=color, ms=8, mew=2)
        if _log_axis(data["high"].to_numpy()):
            ax.set_yscale("log")
        ax.set_title(f"{label} (x: where a run diverged or hit NaN)")
        ax.set_xlabel({"step": "step", "samples": "consumed samples", "tokens": "consumed tokens"}[x])
        ax.set_ylabel(metric.replace("_", " "))
        ax.grid(alpha=0.3)
        if len(names) <= 12:
            ax.legend(loc="upper right", fontsize=7)
        fig.tight_layout()
        path = directory / f"overlay-{metric}-by-{x}.png"
        _save(fig, path)
        plt.close(fig)
        out[label] = path
    return out
