"""Predicting instability across a sweep of learning rates and model sizes (Wortsman et al. 2023, "Small-scale
proxies for large-scale Transformer training instabilities": LR sensitivity per size, and instabilities predicted
from how norms scale), for ``forensics compare``.

Each run brings (:func:`run_scaling`, filled in by :func:`forensics.comparison.summarize`) its size from the model
check (parameters from the shape, else as named) and, per norm it logged (the grad norm, the max attention logit,
the z-loss), its **level**: the median over the last fifth of its points before it failed (or before its end), the
first tenth (training settling) left out, and its largest value there (``max``).

:func:`sweep` then, over runs that differ in LR and size (and in nothing else that bears on stability but ``min_lr``,
the seed and the init std):

* LR sensitivity per size (:func:`forensics.comparison.lr_sensitivity` on each size's runs);
* fits of log(final loss) and of log(level) as a + b log(LR) + c log(N) by least squares over the runs that did not
  fail (the final loss: over those that finished; R² on the log scale; at least ``MIN_LEVELS`` sizes and LRs, and 2
  more runs than parameters);
* for each norm whose fit is good (R² at least ``MIN_R2``) and rises with LR: the highest level a run survived and
  the lowest at which one diverged or hit NaN (the level must separate them, else no prediction), and per size the
  LR at which the fit reaches the level between them (their geometric mean; and the LRs at which it reaches each):
  "predicted unstable at LR ≥ x", checked against what that size's runs did. With more than ``MIN_LEVELS`` sizes,
  the largest is also predicted from the smaller sizes alone (their fit and their levels). Runs that did not fail
  (still running, or finished) at or above their size's predicted LR, or whose level already passed the lowest at
  which a sibling failed, are flagged. "Survived" means finished (completed or stopped) without failing; a run still
  running is fitted but proves nothing yet. A prediction is a statement about a fit, with its evidence; none is made
  with fewer than 3 sizes or LRs, a poor fit, or no failure to extrapolate to.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from forensics.configs import differing_keys
from forensics.detectors.logits import attention_logits
from forensics.findings import ModelCheck, Outcome, finite_or_none
from forensics.model_shape import size_label
from forensics.timeline import by_step
from parsers import schema as s

SCALING_METRICS: tuple[str, ...] = (s.GRAD_NORM, s.MAX_ATTENTION_LOGIT, s.Z_LOSS)
METRIC_NAMES = {s.GRAD_NORM: "grad norm", s.MAX_ATTENTION_LOGIT: "max attention logit", s.Z_LOSS: "z-loss",
                "final_loss": "final loss"}
FAILED = frozenset({Outcome.DIVERGED, Outcome.NAN})  # instabilities (a crash is not one)
FINISHED = frozenset({Outcome.COMPLETED, Outcome.STOPPED})  # survived: ended without failing (running: not yet known)
BURN_IN = 0.1        # the first tenth of a run's points (norms settle while training starts) is left out
LATE = 0.2           # the level: the median of the last fifth of the rest
MIN_POINTS = 20      # a level needs this many points after the burn-in
MAX_LR = 10.0        # a predicted LR above this is no prediction (no optimizer is run there)
MIN_LEVELS = 3       # a fit needs this many distinct sizes and LRs
MIN_R2 = 0.9         # a fit below this (on the log scale) predicts nothing


def model_size(model: ModelCheck) -> tuple[float | None, str | None]:
    """The model's size for the sweep: parameters from the shape, else as named; and which.

    >>> model_size(ModelCheck(parameters_from_shape=1.3e9, parameters_stated=1e9)), model_size(ModelCheck())
    ((1300000000.0, 'shape'), (None, None))
    """
    if model.parameters_from_shape:
        return model.parameters_from_shape, "shape"
    if model.parameters_stated:
        return model.parameters_stated, "named"
    return None, None


def run_scaling(model: ModelCheck, metrics: pl.DataFrame, failed_at: int | None) -> dict[str, Any]:
    """A run's size (:func:`model_size`) and, per norm in :data:`SCALING_METRICS` it logged, its level before
    ``failed_at`` (the step it diverged or hit NaN, if it did): ``level`` (median of the last fifth after the burn-in),
    ``max`` and ``until_step`` (the last step used).

    >>> m = s.conform(pl.DataFrame({"run": "r", "source": "x", "attempt": 1, "step": range(1, 101), "metric": "grad_norm",
    ...                             "value": [5.0] * 5 + [1.0] * 75 + [2.0] * 20}), s.METRICS_SCHEMA)
    >>> run_scaling(ModelCheck(parameters_stated=1e9), m, None)
    {'parameters': 1000000000.0, 'parameters_from': 'named', 'grad_norm': {'level': 2.0, 'max': 2.0, 'until_step': 100}}
    >>> run_scaling(ModelCheck(), m, 81)["grad_norm"]
    {'level': 1.0, 'max': 1.0, 'until_step': 80}
    """
    size, source = model_size(model)
    out: dict[str, Any] = {"parameters": size, "parameters_from": source}
    for metric in SCALING_METRICS:
        # (the max attention logit: the run's own, else the largest of its per-layer series at each step)
        points = (by_step(metrics, metric, finite=True) if metric != s.MAX_ATTENTION_LOGIT else
                  attention_logits(metrics).select("attempt", "step", "value").sort("attempt", "step")
                  .unique("step", keep="last").sort("step"))
        if failed_at is not None:
            points = points.filter(pl.col("step") < failed_at)
        values, steps = np.abs(points["value"].to_numpy()), points["step"].to_numpy()
        first = int(values.size * BURN_IN)
        values = values[first:]
        if values.size < MIN_POINTS:
            continue
        late = values[-max(5, int(values.size * LATE)):]
        out[metric] = {"level": float(np.median(late)), "max": float(values.max()), "until_step": int(steps[-1])}
    return out


def power_fit(lr: np.ndarray, size: np.ndarray, y: np.ndarray) -> dict[str, Any] | str:
    """y ∝ LR^b · N^c by least squares on the log scale: ``coefficient`` (e^a), ``lr_exponent``, ``size_exponent``,
    ``r2``, ``runs``, ``spread`` (the largest factor between a run's value and the fit's). A sentence saying why not
    with fewer than :data:`MIN_LEVELS` distinct sizes or LRs, or fewer than 5 runs.

    >>> lr, n = np.array([1e-4, 3e-4, 1e-3, 1e-4, 3e-4, 1e-4]), np.array([1e8, 1e8, 1e8, 3e8, 3e8, 1e9])
    >>> fit = power_fit(lr, n, 2.0 * lr ** 0.5 * n ** 0.25)
    >>> round(fit["lr_exponent"], 6), round(fit["size_exponent"], 6), round(fit["r2"], 6)
    (0.5, 0.25, 1.0)
    >>> power_fit(lr[:3], n[:3], lr[:3])
    'fewer than 3 sizes among the runs that did not fail (1)'
    """
    sizes, lrs = np.unique(size).size, np.unique(lr).size
    if sizes < MIN_LEVELS:
        return f"fewer than {MIN_LEVELS} sizes among the runs that did not fail ({sizes})"
    if lrs < MIN_LEVELS:
        return f"fewer than {MIN_LEVELS} LRs among the runs that did not fail ({lrs})"
    if y.size < 5:
        return f"{y.size} runs that did not fail: too few for 3 parameters"
    design = np.column_stack([np.ones(y.size), np.log(lr), np.log(size)])
    target = np.log(y)
    coef, *_ = np.linalg.lstsq(design, target, rcond=None)
    residual = target - design @ coef
    total = float(np.sum((target - target.mean()) ** 2))
    r2 = 1.0 - float(np.sum(residual ** 2)) / total if total > 0 else 0.0
    return {"coefficient": math.exp(coef[0]), "lr_exponent": float(coef[1]), "size_exponent": float(coef[2]),
            "r2": r2, "runs": int(y.size), "spread": math.exp(float(np.abs(residual).max()))}


def _lr_at(fit: dict[str, Any], threshold: float, size: float) -> float:
    """The LR at which the fitted level reaches ``threshold`` for a model of ``size`` (inf beyond any float: a fit
    that barely rises with LR).

    >>> _lr_at({"coefficient": 1.0, "lr_exponent": 0.004, "size_exponent": 0.5}, 50.0, 1.0)
    inf
    """
    log_lr = (math.log(threshold / fit["coefficient"]) - fit["size_exponent"] * math.log(size)) / fit["lr_exponent"]
    return math.exp(log_lr) if log_lr < 700 else math.inf


def _points(runs: list[Any], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    chosen = [(r.config["lr"], r.scaling["parameters"], _value(r, key), r.name) for r in runs]
    chosen = [c for c in chosen if c[2] is not None and c[2] > 0]
    return (np.array([c[0] for c in chosen], float), np.array([c[1] for c in chosen], float),
            np.array([c[2] for c in chosen], float), [c[3] for c in chosen])


def _value(row: Any, key: str) -> float | None:
    if key == "final_loss":
        return finite_or_none(row.final_loss)
    return (row.scaling.get(key) or {}).get("level")


def _predict(metric: str, runs: list[Any], sizes: list[float], observed: list[Any], held_out: float | None = None
             ) -> tuple[list[dict[str, Any]], str | None]:
    """Predictions for ``metric`` at each of ``sizes`` from the fit and threshold of ``runs``, each checked against
    what the ``observed`` runs of its size did (see the module docstring); or a reason."""
    name = METRIC_NAMES[metric]
    stable = [r for r in runs if r.outcome not in FAILED]
    fit = power_fit(*_points(stable, metric)[:3])
    if isinstance(fit, str):
        return [], f"{name}: {fit}"
    if fit["r2"] < MIN_R2:
        return [], f"{name}: the fit is poor (R² {fit['r2']:.2f} < {MIN_R2})"
    if fit["lr_exponent"] <= 0:
        return [], f"{name}: it does not rise with LR in the fit (exponent {fit['lr_exponent']:.2f})"
    failed = [(lvl, r.name, r.outcome) for r in runs if r.outcome in FAILED and (lvl := _value(r, metric)) is not None]
    if not failed:
        return [], f"{name}: no run that diverged or hit NaN logged it before failing: no level to extrapolate to"
    low, at, how = min(failed)
    survived = [(lvl, r.name) for r in stable if r.outcome in FINISHED and (lvl := _value(r, metric)) is not None]
    if not survived:
        return [], f"{name}: no run that finished without failing logged it: no level known to be survivable"
    high, kept = max(survived)
    if high >= low:
        return [], (f"{name}: {kept} did not fail at a level of {high:.4g}, above the {low:.4g} at which {at} did: "
                    "the level does not separate failures")
    threshold = math.sqrt(high * low)  # the boundary lies between them: their geometric mean
    how = "diverged" if how == Outcome.DIVERGED else "hit NaN"
    fitted = sorted({float(x) for x in _points(stable, metric)[1]})  # the sizes in the fit
    source = f"{size_label(fitted[0])}–{size_label(fitted[-1])}"
    out = []
    for size in sizes:
        lr = _lr_at(fit, threshold, size)
        if lr > MAX_LR:
            return [], (f"{name}: the fit reaches the level a run failed at only above LR {MAX_LR:g} for "
                        f"{size_label(size)}: it barely rises with LR")
        between = [_lr_at(fit, high, size), _lr_at(fit, low, size)]
        mine = [r for r in observed if r.scaling["parameters"] == size]
        ok = [r.config["lr"] for r in mine if r.outcome in FINISHED]
        bad = [r.config["lr"] for r in mine if r.outcome in FAILED]
        agrees = None if not ok + bad else all(x < lr for x in ok) and all(x >= lr for x in bad)
        tried = [r.config["lr"] for r in observed]
        beyond = not min(tried) <= lr <= max(tried)  # outside the LRs run: an extrapolation in LR too
        text = (f"predicted unstable at LR ≥ {lr:.2g} for {size_label(size)} from the {source} runs: {name} "
                f"(median of the last fifth before the end) ∝ LR^{fit['lr_exponent']:.2f} · "
                f"N^{fit['size_exponent']:.2f} (R² {fit['r2']:.3f} over {fit['runs']} runs that did not fail) reaches "
                f"{threshold:.3g} there, between the highest level a run survived ({high:.4g}, {kept}) and the lowest "
                f"at which one failed ({low:.4g}, {at} {how}); LR {between[0]:.2g}–{between[1]:.2g} by those two"
                + ("; outside the LRs run" if beyond else ""))
        if agrees is not None:
            seen = (f"stable up to LR {max(ok):g}" if ok else "no stable run") + \
                   (f", failed from LR {min(bad):g}" if bad else ", no run failed")
            text += f"; observed at {size_label(size)}: {seen} ({'agrees' if agrees else 'disagrees'})"
        out.append({"metric": metric, "size": size_label(size), "parameters": size, "lr_at_least": lr,
                    "from_sizes": [size_label(x) for x in fitted], "held_out": size == held_out,
                    "lr_between": between, "threshold": threshold, "highest_survived": {"level": high, "run": kept},
                    "lowest_failed": {"level": low, "run": at, "outcome": how}, "fit": fit,
                    "largest_stable_lr": max(ok, default=None), "smallest_failed_lr": min(bad, default=None),
                    "agrees": agrees, "beyond_lrs_run": beyond, "statement": text})
    return out, None


def _flagged(metric: str, runs: list[Any], predictions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs still going (not failed, not finished) at or above their size's predicted LR, or whose level already
    passed the lowest at which a sibling failed."""
    at = {p["parameters"]: p for p in predictions if not p["held_out"]}
    out = []
    for r in runs:
        p = at.get(r.scaling["parameters"])
        level = _value(r, metric)
        if r.outcome in FAILED or r.outcome in FINISHED or p is None:  # (a finished run: the prediction's
            continue                                                    # "agrees" says whether it held)
        why = []
        if r.config["lr"] >= p["lr_at_least"]:
            why.append(f"its LR {r.config['lr']:g} is at or above the {p['lr_at_least']:.2g} predicted for "
                       f"{p['size']}")
        if level is not None and level >= p["lowest_failed"]["level"]:
            why.append(f"its {METRIC_NAMES[metric]} ({level:.4g}) has passed the {p['lowest_failed']['level']:.4g} "
                       f"at which {p['lowest_failed']['run']} {p['lowest_failed']['outcome']}")
        if why:
            out.append({"run": r.name, "metric": metric, "lr": r.config["lr"], "level": level,
                        "lr_at_least": p["lr_at_least"],
                        "statement": f"{r.name} ({r.outcome!s}) is predicted unstable: {'; '.join(why)}"})
    return out


def sweep(rows: list[Any]) -> dict[str, Any] | None:
    """The ``sweep`` object of a comparison over at least 3 runs with an LR and a size, of at least two sizes, that
    differ in nothing else bearing on stability but LR, ``min_lr``, seed, init std and model shape (see the module
    docstring); None otherwise (a one-size LR sweep is :func:`forensics.comparison.lr_sensitivity`'s; a collection
    of unrelated runs is no sweep)."""
    from forensics.comparison import NOT_SEPARATING, STABILITY_GROUPS, is_stability_key, lr_sensitivity

    runs = [r for r in rows if r.outcome != Outcome.UNREADABLE and r.scaling.get("parameters")
            and isinstance(r.config.get("lr"), (int, float)) and not isinstance(r.config.get("lr"), bool)
            and r.config["lr"] > 0]
    # sizes that read the same (1.31B and 1.32B: one model with another vocabulary) are one size, at their smallest
    same: dict[str, float] = {}
    own = {r.name: r.scaling["parameters"] for r in runs}
    for n in sorted(own.values()):
        same.setdefault(size_label(n), n)
    runs = [replace(r, scaling={**r.scaling, "parameters": same[size_label(r.scaling["parameters"])]}) for r in runs]
    sizes = sorted(same.values())
    if len(sizes) < 2 or len(runs) < MIN_LEVELS:
        return None
    runs.sort(key=lambda r: (r.scaling["parameters"], r.config["lr"], r.name))
    swept = {"lr", "min_lr", "seed", "data_seed", "init_method_std", *STABILITY_GROUPS["model shape"], *NOT_SEPARATING}
    if any(k not in swept and is_stability_key(k) for k in differing_keys({r.name: r.config for r in runs})):
        return None  # runs that also differ in something else that bears on stability are no sweep of LR and size
    out: dict[str, Any] = {
        "sizes": {size_label(n): n for n in sizes},
        "lrs": sorted({r.config["lr"] for r in runs}),
        "runs": {r.name: {"lr": r.config["lr"], "size": size_label(r.scaling["parameters"]),
                          "parameters": own[r.name], "parameters_from": r.scaling["parameters_from"],
                          "outcome": str(r.outcome), "final_loss": finite_or_none(r.final_loss),
                          **{m: r.scaling[m] for m in SCALING_METRICS if m in r.scaling}} for r in runs},
        "lr_sensitivity_by_size": {size_label(n): lr_sensitivity([r for r in runs if r.scaling["parameters"] == n],
                                                                 also=frozenset({"min_lr", "data_seed"}))
                                   for n in sizes},
        "fits": {}, "predictions": [], "flagged": [], "no_prediction": [],
    }
    stable = [r for r in runs if r.outcome not in FAILED]
    for key in ("final_loss", *SCALING_METRICS):  # a final loss only of runs that finished (running: not final)
        fit = power_fit(*_points([r for r in stable if key != "final_loss" or r.outcome in FINISHED], key)[:3])
        if any(_value(r, key) is not None for r in runs):
            out["fits"][key] = fit if isinstance(fit, dict) else {"none": fit}
    for metric in SCALING_METRICS:
        if not any(_value(r, metric) is not None for r in runs):
            continue
        found, why = _predict(metric, runs, sizes, runs)
        if why:
            out["no_prediction"].append(why)
            continue
        if len(sizes) > MIN_LEVELS:  # the largest size from the smaller ones alone
            held, why = _predict(metric, [r for r in runs if r.scaling["parameters"] < sizes[-1]], [sizes[-1]], runs,
                                 held_out=sizes[-1])
            found += held
            if why:
                out["no_prediction"].append(f"{size_label(sizes[-1])} from the smaller sizes: {why}")
        out["predictions"] += found
        out["flagged"] += _flagged(metric, runs, found)
    return out
