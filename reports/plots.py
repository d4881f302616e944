"""PNG plots beside the chronicle: the loss across attempts (one lane per attempt, for runs with more than one), and
loss, grad norm and (fp16) loss scale on a shared step axis with anomalies and rollbacks marked, and, for a run that
logs per-layer grad norms, a heatmap of grad norm by layer group and step (log colour scale; ``HEAT_BINS`` step bins,
the largest value in each).

Millions of points are reduced per attempt to at most ``BINS`` step bins (min, median, max), so a one-step spike
still shows at full height. A run with many attempts (a log whose steps were duplicated or reordered can have hundreds)
gets at most ``MAX_LANES`` lanes in its overview, the others drawn together as one grey series of at most
``CONTEXT_POINTS`` points, so the cost grows with points and attempts, not with their product. Legends sit outside
the axes, so they never cover data, and name only the marker kinds drawn in that figure. Output is byte-for-byte the
same for the same input (Agg backend, fixed size and dpi, no timestamp in the PNG metadata).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from forensics.findings import Attempt, EndReason, Kind, RunFindings
from forensics.timeline import step_bins
from parsers import schema as s

BINS = 2000          # step bins per attempt and metric
LOG_RANGE = 20.0     # a metric whose maximum is more than this factor above its 1st percentile gets a log axis
DPI = 110
LEGEND_ATTEMPTS = 8  # at most this many attempts get a legend entry each (the colours repeat after that)
LABEL_CHARS = 48     # a longer run name is shortened in a legend (in a title: TITLE_CHARS)
TITLE_CHARS = 64
MAX_LANES = 12       # an overview gives at most this many attempts a lane of their own (the others: grey in each lane)
CONTEXT_POINTS = 40_000  # the grey "other attempts" behind an overview lane: at most about this many points
ABSURD = 1e300       # an axis limit beyond this (or not finite) gets no ticks: a tick locator overflows on it
HEAT_BINS = 400     # step bins of the per-layer grad-norm heatmap
PERPLEXITY = "perplexity"  # the exp(loss) panel (``perplexity_panel``): drawn from the binned loss, never a metric read
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
_CONTEXT = "#c7c7c7"  # the other attempts behind an overview lane
# anomaly kind -> (marker, colour, legend label); a NaN is a vertical line, the rest a marker at the value
_MARKS: dict[str, tuple[str, str, str]] = {
    Kind.LOSS_SPIKE: ("^", "#d62728", "spike"), Kind.GRAD_NORM_SPIKE: ("^", "#d62728", "spike"),
    Kind.DIVERGENCE: ("v", "#7f0000", "divergence"), Kind.NAN: ("|", "black", "NaN"),
    Kind.LOSS_SCALE_COLLAPSE: ("s", "#ff9896", "loss-scale collapse"), Kind.CHANGEPOINT: ("D", "#7f7f7f", "change of level"),
}
_ENDED = {EndReason.NAN: "ended in NaN/Inf", EndReason.UNKNOWN: "no end logged", EndReason.RUNNING: "log ends",
          EndReason.FAILED_STARTUP: "failed start-up", EndReason.NO_TRAINING: "no training",
          EndReason.SILENT_EXIT: "exited, no reason"}


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "figure.dpi": DPI, "svg.hashsalt": "forensics"})
    return plt


def binned(metrics: pl.DataFrame, metric: str, bins: int = BINS) -> pl.DataFrame:
    """Per attempt, ``metric`` in at most ``bins`` step bins (see :func:`forensics.timeline.step_bins`)."""
    return step_bins(metrics.filter(pl.col("metric") == metric), bins)


def is_fp16(scales: pl.DataFrame) -> bool:
    """Whether binned loss-scale points are an fp16 run's: bf16 and fp32 runs log none, or 1.0 throughout."""
    return bool(scales.height) and bool((scales["high"] != 1.0).any() or (scales["low"] != 1.0).any())


def _log_axis(values: np.ndarray) -> bool:
    positive = values[values > 0]
    if positive.size < 2 or positive.size < values.size:
        return False
    return bool(positive.max() / np.percentile(positive, 1) > LOG_RANGE)


def _color(i: int) -> str:
    return _COLORS[i % len(_COLORS)]


def _line(ax, mine: pl.DataFrame, color: str, label: str | None = None) -> None:  # type: ignore[no-untyped-def]
    steps = mine["step"].to_numpy()
    if mine.height > 1 and (mine["high"] != mine["low"]).any():
        ax.fill_between(steps, mine["low"].to_numpy(), mine["high"].to_numpy(), color=color, alpha=0.25, lw=0)
    ax.plot(steps, mine["mid"].to_numpy(), color=color, lw=0.8, label=label)


def _marks(ax, anomalies: list[Any], metric: str, log: bool) -> set[str]:  # type: ignore[no-untyped-def]
    """Mark ``metric``'s anomalies; returns the kinds drawn. One without a value to show is marked at the top."""
    drawn: set[str] = set()
    for a in anomalies:
        if a.metric != metric or a.kind not in _MARKS:
            continue
        marker, color, _ = _MARKS[a.kind]
        drawn.add(a.kind)
        if a.kind == Kind.NAN:
            ax.axvline(a.step, color=color, lw=0.8, alpha=0.6)
            continue
        y = a.value if a.value is not None and np.isfinite(a.value) and (a.value > 0 or not log) else None
        if y is None:  # at the top edge of the axes, above the step
            ax.plot([a.step], [0.97], marker=marker, color=color, ms=6, ls="none", transform=ax.get_xaxis_transform(),
                    clip_on=False)
        else:
            ax.plot([a.step], [y], marker=marker, color=color, ms=6, ls="none")
    return drawn


def _panel(ax, data: pl.DataFrame, run: RunFindings, metric: str, label: str,  # type: ignore[no-untyped-def]
           log: bool | None = None) -> tuple[set[str], bool]:
    """Every attempt's ``metric`` on one axes; returns the anomaly kinds drawn and whether a resume point was."""
    values = data["high"].to_numpy()
    log = bool(values.size and _log_axis(values)) if log is None else log
    if log:
        ax.set_yscale("log", base=2 if metric == s.LOSS_SCALE else 10)
    resumed = False
    parts = _by_attempt(data)
    for i, attempt in enumerate(run.attempts):
        mine = parts.get(attempt.index)
        if mine is None or mine.height == 0:
            continue
        _line(ax, mine, _color(i), f"attempt {attempt.index}")
        if attempt.rollback and attempt.resumed_from_step is not None:
            ax.axvline(attempt.resumed_from_step, color=_color(i), ls="--", lw=0.8)
            resumed = True
    kinds = _marks(ax, run.anomalies, metric, log)
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    return kinds, resumed


def _handles(kinds: set[str], resumed: bool, extra: list[Any] | None = None) -> list[Any]:
    """Legend entries: ``extra`` first, then the rollback resume line and each marker drawn (a label once)."""
    from matplotlib.lines import Line2D

    handles = list(extra or [])
    if resumed:
        handles.append(Line2D([], [], color="#555555", ls="--", lw=0.8, label="rollback resume point"))
    seen: set[str] = set()
    for kind, (marker, color, label) in _MARKS.items():
        if kind not in kinds or label in seen:
            continue
        seen.add(label)
        if kind == Kind.NAN:
            handles.append(Line2D([], [], color=color, lw=0.8, alpha=0.6, label=label))
        else:
            handles.append(Line2D([], [], marker=marker, color=color, ms=6, ls="none", label=label))
    return handles


def _legend_outside(ax, handles: list[Any]) -> None:  # type: ignore[no-untyped-def]
    """The legend to the right of ``ax``, outside every axes of the column: it never covers data."""
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7,
                  frameon=False)


def _ended(attempt: Attempt) -> str:
    return _ENDED.get(attempt.end_reason, attempt.end_reason.value.replace("_", " "))


def _by_attempt(data: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """``data``'s rows by attempt, in one pass (a filter per attempt costs attempts x rows)."""
    if data.height == 0:
        return {}
    return {int(key[0]): part for key, part in data.partition_by("attempt", as_dict=True, maintain_order=True).items()}


def _choose_lanes(lanes: list[tuple[int, Attempt]], run: RunFindings) -> list[tuple[int, Attempt]]:
    """At most ``MAX_LANES`` of ``lanes``, in run order: the first and the last attempt, then those with a loss
    anomaly, with any anomaly, with a rollback, then others spread evenly across the run."""
    if len(lanes) <= MAX_LANES:
        return lanes
    loss_flagged = {a.attempt for a in run.anomalies if a.metric == s.LOSS}
    flagged = {a.attempt for a in run.anomalies}
    inner = range(1, len(lanes) - 1)
    rest = [k for k in inner if lanes[k][1].index not in flagged and not lanes[k][1].rollback]
    spread = [rest[int(k)] for k in np.unique(np.linspace(0, len(rest) - 1, min(len(rest), MAX_LANES)).round())] \
        if rest else []
    order = [0, len(lanes) - 1, *(k for k in inner if lanes[k][1].index in loss_flagged),
             *(k for k in inner if lanes[k][1].index in flagged), *(k for k in inner if lanes[k][1].rollback), *spread]
    chosen = list(dict.fromkeys(order))[:MAX_LANES]
    return [lanes[k] for k in sorted(chosen)]


def _context(parts: dict[int, pl.DataFrame], lanes: list[tuple[int, Attempt]]):  # type: ignore[no-untyped-def]
    """All attempts' loss as one series (a NaN between attempts), each cut evenly to its share of ``CONTEXT_POINTS``,
    and each attempt's slice of it: a lane's grey is the series without its own slice."""
    per = max(2, CONTEXT_POINTS // max(1, len(lanes) - 1))
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    where: dict[int, tuple[int, int]] = {}
    at = 0
    for _, attempt in lanes:
        steps, mids = parts[attempt.index]["step"].to_numpy(), parts[attempt.index]["mid"].to_numpy()
        if steps.size > per:
            keep = np.unique(np.linspace(0, steps.size - 1, per).round().astype(np.int64))
            steps, mids = steps[keep], mids[keep]
        xs += [steps.astype(np.float64), np.array([np.nan])]
        ys += [mids.astype(np.float64), np.array([np.nan])]
        where[attempt.index] = (at, at + steps.size + 1)
        at += steps.size + 1
    return np.concatenate(xs), np.concatenate(ys), where


def _overview(plt, loss: pl.DataFrame, run: RunFindings):  # type: ignore[no-untyped-def]
    """The loss across attempts, one lane each (the other attempts grey behind it), for a run with at least two
    attempts that logged a loss; None otherwise (one lane would repeat the per-attempt loss panel). With more than
    ``MAX_LANES`` such attempts only those that matter get a lane (:func:`_choose_lanes`); the title says so."""
    parts = _by_attempt(loss)
    every = [(i, a) for i, a in enumerate(run.attempts) if a.index in parts and parts[a.index].height]
    if len(every) < 2:
        return None
    from matplotlib.lines import Line2D

    lanes = _choose_lanes(every, run)
    grey_x, grey_y, where = _context(parts, every)
    anomalies: dict[int, list[Any]] = {}
    for a in run.anomalies:
        anomalies.setdefault(a.attempt, []).append(a)
    lane = max(0.3, min(1.1, 8 / len(lanes)))
    hidden = len(every) - len(lanes)
    fig, axes = plt.subplots(len(lanes), 1, figsize=(9, 1.1 + lane * len(lanes) + (0.2 if hidden else 0)),
                             sharex=True, sharey=True, squeeze=False)
    log = _log_axis(loss["high"].to_numpy())
    kinds: set[str] = set()
    resumed = False
    for ax, (i, attempt) in zip(axes[:, 0], lanes, strict=True):
        if log:
            ax.set_yscale("log")
        start, stop = where[attempt.index]
        ax.plot(np.concatenate([grey_x[:start], grey_x[stop:]]), np.concatenate([grey_y[:start], grey_y[stop:]]),
                color=_CONTEXT, lw=0.6)
        _line(ax, parts[attempt.index], _color(i))
        if attempt.rollback and attempt.resumed_from_step is not None:
            ax.axvline(attempt.resumed_from_step, color=_color(i), ls="--", lw=0.8)
            resumed = True
        kinds |= _marks(ax, anomalies.get(attempt.index, []), s.LOSS, log)
        ax.set_ylabel(f"attempt {attempt.index}: {_ended(attempt)}", rotation=0, ha="right", va="center", fontsize=7)
        ax.grid(alpha=0.3)
        if lane < 0.6:  # thin lanes: no y tick labels, no tick marks between lanes
            ax.tick_params(axis="y", labelleft=False)
            ax.tick_params(axis="x", length=0 if ax is not axes[-1, 0] else 3.5)
    title = f"{_short(run.name, TITLE_CHARS)}: loss across attempts, one lane each"
    if hidden:
        title = (f"{_short(run.name, TITLE_CHARS)}: loss across attempts, {len(lanes)} of {len(every)} in a lane each\n"
                 f"(first, last, with anomalies or rollbacks, then spread out); {hidden} attempts are not drawn "
                 "individually, only in the grey")
    axes[0, 0].set_title(title)
    axes[-1, 0].set_xlabel("step")
    others = Line2D([], [], color=_CONTEXT, lw=0.6, label="the other attempts")
    _legend_outside(axes[0, 0], _handles(kinds, resumed, [others]))
    _tight(fig)
    if lane < 0.6:
        fig.subplots_adjust(hspace=0.15)
    return fig


def perplexity(loss: pl.DataFrame) -> pl.DataFrame:
    """Binned loss (:func:`binned`) as exp(loss): exp is increasing, so each bin's min, median and max carry over;
    a loss too large for exp (above ~709) is left out (NaN) rather than drawn at infinity.

    >>> b = pl.DataFrame({"attempt": [1, 1], "step": [10, 20], "low": [2.0, 1.0], "mid": [2.0, 1.5],
    ...                   "high": [2.0, 800.0]})
    >>> [round(v, 3) for v in perplexity(b)["mid"]], perplexity(b)["high"].is_nan().to_list()
    ([7.389, 4.482], [False, True])
    """
    exp = {c: pl.col(c).exp() for c in ("low", "mid", "high")}
    return loss.with_columns(pl.when(e.is_finite()).then(e).otherwise(float("nan")).alias(c) for c, e in exp.items())


def _as_perplexity(run: RunFindings) -> RunFindings:
    """``run`` with its loss anomalies moved to the perplexity panel (their values as exp(value))."""
    import math
    from dataclasses import replace

    def ppl(v: float | None) -> float | None:
        return math.exp(v) if v is not None and math.isfinite(v) and v < 709 else None

    marks = [replace(a, metric=PERPLEXITY, value=ppl(a.value)) for a in run.anomalies if a.metric == s.LOSS]
    return replace(run, anomalies=marks)


def _attempts(plt, run: RunFindings, panels: list[tuple[pl.DataFrame, str, str]]):  # type: ignore[no-untyped-def]
    """Each metric of ``panels`` on its own axes, every attempt on a shared step axis, anomalies marked."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 0.6 + 2.5 * len(panels)), sharex=True, squeeze=False)
    kinds: set[str] = set()
    resumed = False
    for ax, (data, metric, label) in zip(axes[:, 0], panels, strict=True):
        shown_run = _as_perplexity(run) if metric == PERPLEXITY else run
        drawn, back = _panel(ax, data, shown_run, metric, label, log=True if metric == s.LOSS_SCALE else None)
        kinds, resumed = kinds | drawn, resumed or back
    names = [label for _, _, label in panels]
    what = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    axes[0, 0].set_title(f"{_short(run.name, TITLE_CHARS)}: {what} per attempt")
    axes[-1, 0].set_xlabel("step")
    lines = {h.get_label(): h for ax in axes[:, 0] for h in ax.get_lines() if not h.get_label().startswith("_")}
    attempts = list(lines.values()) if len(lines) <= LEGEND_ATTEMPTS else []
    _legend_outside(axes[0, 0], _handles(kinds, resumed, attempts))
    _tight(fig)
    return fig


def run_figures(metrics: pl.DataFrame, run: RunFindings, perplexity_panel: bool = False) -> dict[str, Any]:
    """The figures :func:`plot_run` saves, by name: "overview" (the loss across attempts, one lane each; only for a run
    with at least two attempts that logged a loss), "attempts" (loss, with ``perplexity_panel`` exp(loss) under it,
    grad norm and, for an fp16 run, the loss scale, on a shared step axis) and "layer_grads" (:func:`layer_heatmap`,
    for a run with per-layer grad norms). The caller closes them."""
    loss, grad, scale = binned(metrics, s.LOSS), binned(metrics, s.GRAD_NORM), binned(metrics, s.LOSS_SCALE)
    ppl = perplexity(loss) if perplexity_panel else loss.clear()
    panels = [(d, m, label) for d, m, label in ((loss, s.LOSS, "loss"), (ppl, PERPLEXITY, "perplexity exp(loss)"),
                                                (grad, s.GRAD_NORM, "grad norm"), (scale, s.LOSS_SCALE, "loss scale"))
              if d.height and (m != s.LOSS_SCALE or is_fp16(d))]
    if not panels:
        return {}
    plt = _pyplot()
    figures: dict[str, Any] = {}
    with warnings.catch_warnings():  # overflow in matplotlib's arithmetic on limits near 1e308 (see _tight)
        warnings.simplefilter("ignore", RuntimeWarning)
        overview = _overview(plt, loss, run) if loss.height else None
        if overview is not None:
            figures["overview"] = overview
        figures["attempts"] = _attempts(plt, run, panels)
        heat = layer_heatmap(plt, metrics, run)
        if heat is not None:
            figures["layer_grads"] = heat
    return figures


def layer_heatmap(plt, metrics: pl.DataFrame, run: RunFindings):  # type: ignore[no-untyped-def]
    """Grad norm by layer group (rows) and step (``HEAT_BINS`` bins, the largest value in each; every attempt), on a
    log colour scale, with the grad-norm-ratio findings marked; None for a run with no per-layer grad norms."""
    from matplotlib.colors import LogNorm

    from forensics.detectors.layer_grads import _unit_norms, unit_label, unit_order

    units, names = _unit_norms(metrics)
    if units.height == 0:
        return None
    low, high = int(units["step"].min()), int(units["step"].max())  # type: ignore[arg-type]
    edges = np.linspace(low, high + 1, HEAT_BINS + 1)
    ids = sorted(units["unit"].unique().to_list(), key=lambda i: unit_order(names[i][0]))
    rows = [names[i][0] for i in ids]
    bins = np.clip(np.searchsorted(edges, units["step"].to_numpy(), "right") - 1, 0, HEAT_BINS - 1)
    cells = (units.select(row=pl.col("unit").replace_strict(ids, list(range(len(ids)))), bin=pl.Series(bins),
                          norm="norm")
             .group_by("row", "bin").agg(pl.col("norm").max()))
    grid = np.full((len(rows), HEAT_BINS), np.nan)
    grid[cells["row"].to_numpy(), cells["bin"].to_numpy()] = cells["norm"].to_numpy()
    positive = grid[np.isfinite(grid) & (grid > 0)]
    fig, ax = plt.subplots(figsize=(9, 1.5 + min(0.18 * len(rows), 9)))
    mesh = ax.pcolormesh(edges, np.arange(len(rows) + 1), np.ma.masked_invalid(grid), cmap="viridis", shading="flat",
                         norm=LogNorm(vmin=float(positive.min()), vmax=float(positive.max())))
    ax.invert_yaxis()
    every = max(1, len(rows) // 40)  # at most about 40 row labels
    ax.set_yticks(np.arange(0, len(rows), every) + 0.5,
                  [unit_label(*r.split("/")[1:]) for r in rows[::every]], fontsize=6)
    for a in run.anomalies:
        if a.kind == Kind.GRAD_NORM_RATIO and a.metric in rows:
            ax.plot([a.step], [rows.index(a.metric) + 0.5], marker=">", color="#d62728", ms=5, ls="none")
    fig.colorbar(mesh, ax=ax, label="grad norm (log scale)")
    ax.set_title(f"{_short(run.name, TITLE_CHARS)}: grad norm by layer group and step")
    ax.set_xlabel("step")
    _tight(fig)
    return fig


def _save(fig, path: Path) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():  # a glyph the font lacks (a run name in another script) is drawn as a box
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow on limits near 1e308 (their ticks: see _tight)
        fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})


def _tight(fig: Any) -> None:
    """``tight_layout`` without its warning on stderr when a figure is too crowded to tighten (it is kept as is). An
    axis whose limits are not finite or beyond ``ABSURD`` (a value of 1e308), or whose ticks cannot be computed, gets
    none: matplotlib's tick locator fails on it ("arange: cannot compute length") when laid out or saved."""
    from matplotlib.ticker import NullLocator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow in matplotlib's arithmetic on such limits
        for ax in fig.axes:
            for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
                low, high = sorted(float(v) for v in limits)
                sane = np.isfinite(low) and np.isfinite(high) and np.isfinite(high - low) and max(-low, high) < ABSURD
                if sane:
                    try:
                        sane = bool(np.all(np.isfinite(axis.get_majorticklocs())))
                    except (ValueError, OverflowError, ZeroDivisionError):
                        sane = False
                if not sane:
                    axis.set_major_locator(NullLocator())
                    axis.set_minor_locator(NullLocator())
        fig.tight_layout()


def slug(name: str) -> str:
    """A file-name-safe form of a run name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"


def plot_run(metrics: pl.DataFrame, run: RunFindings, directory: Path, perplexity_panel: bool = False
             ) -> dict[str, Path]:
    """Write ``<run>-overview.png`` (the loss across attempts, one lane each, when the run has more than one attempt)
    and ``<run>-attempts.png`` (loss, with ``perplexity_panel`` exp(loss), grad norm and the fp16 loss scale,
    anomalies and rollbacks marked) into ``directory``; returns {"overview": path, "attempts": path} for what was
    drawn."""
    made = not directory.is_dir()
    directory.mkdir(parents=True, exist_ok=True)  # first: a folder that cannot be made fails before a second of drawing
    figures = run_figures(metrics, run, perplexity_panel)
    if not figures:
        if made:
            directory.rmdir()
        return {}
    plt = _pyplot()
    out: dict[str, Path] = {}
    for name, fig in figures.items():
        out[name] = directory / f"{slug(run.name)}-{name}.png"
        _save(fig, out[name])
        plt.close(fig)
    return out


def _short(name: str, width: int = LABEL_CHARS) -> str:
    """``name`` cut in the middle to ``width`` characters (a legend entry that does not squeeze the plot)."""
    if len(name) <= width:
        return name
    keep = width - 1
    return f"{name[:(keep + 1) // 2]}…{name[len(name) - keep // 2:]}"


def overlay_figures(overlay: pl.DataFrame, markers: dict[str, int | None]) -> dict[str, tuple[str, Any]]:
    """The figures :func:`plot_overlay` saves: {label: (file stem, figure)}. The caller closes them."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    out: dict[str, tuple[str, Any]] = {}
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
        hit_any = False
        for i, name in enumerate(names):
            mine = data.filter(pl.col("run") == name)
            if mine.height == 0:
                continue
            color = _COLORS[i % len(_COLORS)] if len(names) <= len(_COLORS) else plt.cm.viridis(i / len(names))
            ax.plot(mine[x].to_numpy(), mine["mid"].to_numpy(), color=color, lw=0.8, label=_short(name))
            at = markers.get(name)
            if at is not None:
                hit = mine.filter(pl.col("step") <= at).tail(1)
                if hit.height:
                    ax.plot(hit[x].to_numpy(), hit["high"].to_numpy(), marker="x", color=color, ms=8, mew=2, ls="none")
                    hit_any = True
        if _log_axis(data["high"].to_numpy()):
            ax.set_yscale("log")
        ax.set_title(label)
        ax.set_xlabel({"step": "step", "samples": "consumed samples", "tokens": "consumed tokens"}[x])
        ax.set_ylabel(metric.replace("_", " "))
        ax.grid(alpha=0.3)
        handles = [h for h in ax.get_lines() if not h.get_label().startswith("_")] if len(names) <= 12 else []
        if hit_any:
            handles.append(Line2D([], [], marker="x", color="#555555", ms=8, mew=2, ls="none",
                                  label="diverged or hit NaN"))
        _legend_outside(ax, handles)
        _tight(fig)
        out[label] = (f"overlay-{metric}-by-{x}", fig)
    return out


def plot_overlay(overlay: pl.DataFrame, markers: dict[str, int | None], directory: Path) -> dict[str, Path]:
    """Loss and grad norm of all runs on one step axis (and loss on consumed samples / tokens when every run
    logged them), each run's divergence (or NaN) point marked with an x. Returns {label: path}."""
    plt = _pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for label, (stem, fig) in overlay_figures(overlay, markers).items():
        path = directory / f"{stem}.png"
        _save(fig, path)
        plt.close(fig)
        out[label] = path
    return out
