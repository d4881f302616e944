"""Learning-rate warm-up, LR peak and batch-size ramp-up: where they end, from the logged curves and the config."""

from __future__ import annotations

import math
import re
from typing import Any

import polars as pl

from forensics.findings import Attempt, Discontinuity, Schedule, shown
from forensics.gaps import printed_digit
from forensics.timeline import by_step
from parsers import schema as s

PEAK_TOLERANCE = 1e-3  # a logged LR within 0.1% of the maximum is at the peak (printed with 4-7 digits)
LR_DISAGREES = 0.10    # a logged peak this far from the configured lr is noted (the first logged point may already
                       # be past the peak of a short warm-up)


def _curve(metrics: pl.DataFrame, metric: str) -> pl.DataFrame:
    """A metric by step, each step's value from the first attempt that logged it (later attempts repeat it)."""
    return by_step(metrics, metric, keep="first", finite=True).select("step", "value")


def _falls_from(curve: pl.DataFrame, lr: float) -> bool:
    """The curve falls from its first logged point, logged after step 1, on a straight line that meets ``lr`` at
    step 0 (within ``LR_DISAGREES``): a linear decay from the configured lr whose start was not logged (the Trainer's
    first LR logged at step 500 of 3100 is 5e-05 x (1 - 500/3100)); its highest point is no peak to compare.

    >>> c = pl.DataFrame({"step": [500, 1000, 1500], "value": [4.1935e-05, 3.3871e-05, 2.5806e-05]})
    >>> _falls_from(c, 5e-05), _falls_from(c, 1e-04)
    (True, False)
    """
    if curve.height < 2 or curve["step"][0] <= 1 or not curve["value"][1] < curve["value"][0]:
        return False
    (s0, v0), (s1, v1) = curve.head(2).rows()
    slope = (v1 - v0) / (s1 - s0)
    # (and its third point on that line too, where there is one: a step decay or a cosine is no straight line)
    on_line = curve.height < 3 or abs((v0 + slope * (curve["step"][2] - s0)) / curve["value"][2] - 1) <= LR_DISAGREES
    return on_line and abs((v0 - slope * s0) / lr - 1) <= LR_DISAGREES


def _step_at_samples(samples: pl.DataFrame, target: float) -> int | None:
    reached = samples.filter(pl.col("value") >= target)
    return int(reached["step"][0]) if reached.height else None


def _number(value: Any) -> float | None:
    """A setting as a finite number, or None (text that is not a number, NaN, 1e400, an integer of 400 digits).

    >>> [_number(v) for v in (3e-4, "6_000_000", float("nan"), 10**400, "1e400", True)]
    [0.0003, 6000000.0, None, None, None, None]
    """
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            number = float(value.replace("_", ""))
        else:
            return None
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def rampup_samples(config: dict[str, Any]) -> float | None:
    """The sample count at which Megatron's ``--rampup-batch-size start increment samples`` reaches the full batch."""
    value = config.get("rampup_batch_size")
    parts = value if isinstance(value, list) else re.findall(r"[\d_]+", value) if isinstance(value, str) else []
    return _number(parts[2]) if len(parts) == 3 else None


def configured_warmup(config: dict[str, Any], samples: pl.DataFrame) -> int | None:
    """The warm-up length the config asks for, in steps: ``lr_warmup_iters``, ``lr_warmup_fraction`` of
    ``train_iters``, or ``lr_warmup_samples`` (located on the consumed-samples curve, or divided by the batch).

    >>> none = pl.DataFrame()
    >>> configured_warmup({"lr_warmup_fraction": 0.1, "train_iters": 2353}, none)  # HF: ceil(0.1 * 2353)
    236
    >>> configured_warmup({"lr_warmup_fraction": 0.1, "train_iters": -1}, none) is None  # HF max_steps -1: epochs
    True
    >>> configured_warmup({"lr_warmup_fraction": 0.01, "lr_decay_iters": 320000, "train_iters": 2000}, none)
    3200
    """
    iters = _number(config.get("lr_warmup_iters"))
    fraction = _number(config.get("lr_warmup_fraction"))
    if iters and iters < 1:  # the Hugging Face Trainer takes warmup_steps below 1 as a ratio of the training steps
        fraction, iters = iters, None
    if iters:
        return int(iters)
    # Megatron: a fraction of lr_decay_iters, which defaults to train_iters; the LR rises while the step is at most
    # that product and peaks at the next whole step (the Hugging Face Trainer rounds the product up: the same step)
    # (the Trainer's max_steps -1 means "run num_train_epochs": no horizon known here)
    horizon = next((h for h in (_number(config.get("lr_decay_iters")), _number(config.get("train_iters")))
                    if h and h > 0), None)
    if fraction and horizon:
        return math.ceil(round(fraction * horizon, 9))
    warm_samples = _number(config.get("lr_warmup_samples"))
    if not warm_samples:
        return None
    if samples.height:
        return _step_at_samples(samples, warm_samples)
    batch = _number(config.get("global_batch_size"))
    if batch and config.get("rampup_batch_size") in (None, "None"):
        return int(warm_samples // batch)
    return None


def _before(curve: pl.DataFrame, step: int) -> int | None:
    """The step logged before ``step`` on a curve when it is not the step right before it: the change happened
    somewhere between them (a log interval above 1, or a hole in the log), else None."""
    before = curve.filter(pl.col("step") < step)["step"]
    if not before.len():
        return None
    last = int(before.max())  # type: ignore[arg-type]
    return last if step - last > 1 else None


def _hole_after_rise(curve: pl.DataFrame, step: int, peak: float) -> int | None:
    """When the LR rose to its highest seen value at ``step`` and the next logged point comes after a hole (more
    than twice the curve's usual step between points) and lower, the step of that next point: the peak, and the end
    of the warm-up, may lie in the hole.

    >>> lr = pl.DataFrame({"step": [3, 4, 5, 998, 999], "value": [1e-7, 2e-7, 3e-7, 1e-7, 1e-7]})
    >>> _hole_after_rise(lr, 5, 3e-7), _hole_after_rise(lr.filter(pl.col("step") != 998), 5, 3e-7)
    (998, 999)
    """
    steps, values = curve["step"].to_list(), curve["value"].to_list()
    i = steps.index(step)
    if i == 0 or i + 1 >= len(steps) or values[i - 1] >= peak * (1 - PEAK_TOLERANCE):
        return None
    usual = float(curve["step"].diff().drop_nulls().median() or 1)  # type: ignore[arg-type]
    return int(steps[i + 1]) if steps[i + 1] - step > max(2 * usual, 1) else None


def _hole_before(curve: pl.DataFrame, step: int) -> bool:
    """Whether the point before ``step`` lies across a hole (more than twice the curve's usual step between points
    before it): the rise to ``step`` is not seen.

    >>> lr = pl.DataFrame({"step": [5, 6, 7, 8, 2400], "value": [2e-5, 1e-5, 6e-6, 6e-6, 5e-5]})
    >>> _hole_before(lr, 2400), _hole_before(lr, 8), _hole_before(lr.filter(pl.col("step") > 6), 2400)
    (True, False, True)
    """
    steps = curve["step"]
    i = int(steps.search_sorted(step))
    if i == 0:
        return False
    usual = float(steps.head(i).diff().drop_nulls().median() or 1)  # type: ignore[arg-type]  # (the gap itself not in it)
    return steps[i] - steps[i - 1] > max(2 * usual, 1)


def schedule(metrics: pl.DataFrame, config: dict[str, Any], attempts: list[Attempt] | None = None) -> Schedule:
    """Warm-up end, LR peak and batch ramp-up end of a run; notes where the curves and the config disagree.

    The curves are those of the run's latest training from scratch and the attempts that resumed it (an earlier
    attempt that started from scratch too was another training, with its own schedule)."""
    out = Schedule()
    fresh = [a.index for a in attempts or [] if a.start_step is not None and a.resumed_from_step is None]
    if fresh and max(fresh) > min(fresh):
        out.from_attempt = max(fresh)
        metrics = metrics.filter(pl.col("attempt") >= out.from_attempt)
    lr = _curve(metrics, s.LR).filter(pl.col("value").is_finite() & (pl.col("value") >= 0))  # (no rate is NaN or < 0)
    samples = _curve(metrics, s.CONSUMED_SAMPLES)
    if lr.height >= 3:
        peak = float(lr["value"].max())  # type: ignore[arg-type]
        # within the tolerance, and no more than about one printed digit below the peak (3.996E-04 is not 4.000E-04;
        # the digits judged on those points only, not on a million-point curve)
        near = lr.filter(pl.col("value") >= peak * (1 - PEAK_TOLERANCE))
        digit = printed_digit(near["value"].to_numpy(), most=7)
        at_peak = near.filter(pl.Series(digit == 0) | (near["value"] >= peak - 1.5 * pl.Series(digit)))
        out.lr_peak, out.lr_peak_step = peak, int(at_peak["step"][0])
        out.lr_constant = float(lr["value"].min()) == peak  # type: ignore[arg-type]
        rising_at_end = out.lr_peak_step == int(lr["step"][-1])  # type: ignore[arg-type]
        # (below: not flat; and risen to the last point without a hole: nothing is inferred across one)
        out.still_warming_up = (rising_at_end and lr["value"][0] < peak * (1 - PEAK_TOLERANCE)
                                and not _hole_before(lr, out.lr_peak_step))
        # a last point at the configured peak LR is the end of the warm-up, not a curve still rising
        configured = _number(config.get("lr"))
        reached = out.still_warming_up and bool(configured) and abs(peak / configured - 1) <= PEAK_TOLERANCE
        out.still_warming_up &= not reached
        out.peak_before_hole = None if rising_at_end else _hole_after_rise(lr, out.lr_peak_step, peak)
        if reached or (lr["value"][0] < 0.5 * peak and out.lr_peak_step > lr["step"][0] and not rising_at_end
                       and out.peak_before_hole is None):
            out.warmup_end_step = out.lr_peak_step
            out.warmup_end_after = _before(lr, out.lr_peak_step)
    out.warmup_end_configured = configured_warmup(config, samples)
    if out.warmup_end_step is None and not out.still_warming_up:
        out.warmup_end_step = out.warmup_end_configured
    elif out.warmup_end_step is not None and out.warmup_end_configured is not None:
        # Megatron does not step the LR schedule on an iteration it skipped (an fp16 overflow): the warm-up ends as
        # many iterations later as were skipped before it
        skipped = _curve(metrics, s.SKIPPED_ITERATIONS).filter(pl.col("step") <= out.warmup_end_step)
        n_skipped = int(skipped["value"].sum()) if skipped.height else 0
        step_gaps = lr["step"].diff().drop_nulls()
        tolerance = max(2 * (step_gaps.median() or 1), 0.02 * out.warmup_end_step)  # type: ignore[operator]
        if abs(out.warmup_end_step - out.warmup_end_configured - n_skipped) > tolerance:
            out.notes.append(f"the LR curve peaks at step {out.warmup_end_step} but the config's warm-up ends at "
                             f"step {out.warmup_end_configured}"
                             + (f" ({n_skipped} skipped iterations before it included)" if n_skipped else ""))
        elif n_skipped and abs(out.warmup_end_step - out.warmup_end_configured) > tolerance:
            out.notes.append(f"the LR curve peaks at step {out.warmup_end_step}, after the config's warm-up end (step "
                             f"{out.warmup_end_configured}): the {n_skipped} iterations skipped before it (fp16 "
                             "overflows) did not advance the schedule")
    configured_lr = _number(config.get("lr"))
    newest = metrics["attempt"].max()
    last = _curve(metrics.filter(pl.col("attempt") == newest), s.LR) if newest is not None else lr.clear()
    own_peak = float(last["value"].max()) if last.height else None  # type: ignore[arg-type]
    warming = last.height > 1 and last["value"][-1] >= own_peak * (1 - PEAK_TOLERANCE) > last["value"][0]
    if own_peak and configured_lr and abs(own_peak / configured_lr - 1) > LR_DISAGREES and not warming \
            and not _falls_from(last, configured_lr):
        out.notes.append(f"the logged LR of the last attempt peaks at {shown(own_peak)} but its config's lr is "
                         f"{shown(configured_lr)}")

    batch = _curve(metrics, s.BATCH_SIZE)
    full = _number(config.get("global_batch_size"))
    if batch.height:
        out.batch_size_final = full or float(batch["value"].max())  # type: ignore[arg-type]
        out.batch_size_configured = full is not None
        out.batch_size_logged = (float(batch["value"][0]), float(batch["value"].max()))  # type: ignore[arg-type]
        reached = batch.filter(pl.col("value") >= out.batch_size_final)
        if full is not None and batch["value"][0] < out.batch_size_final and reached.height:
            out.batch_rampup_end_step = int(reached["step"][0])
            out.batch_rampup_end_after = _before(batch, out.batch_rampup_end_step)
    ramp = rampup_samples(config)
    if ramp and samples.height:
        configured = _step_at_samples(samples, ramp)
        if out.batch_rampup_end_step is None:
            out.batch_rampup_end_step = configured
        elif configured is not None and abs(configured - out.batch_rampup_end_step) > 0.02 * configured:
            out.notes.append(f"the batch size reaches {out.batch_size_final:.0f} at step {out.batch_rampup_end_step} "
                             f"but the config's ramp-up ends at step {configured}")
    return out


def as_configured(jump: Discontinuity, config: dict[str, Any]) -> bool:
    """Whether an LR jump is the configured schedule's own: a fall to ``min_lr`` at the end of the decay (a warm-up
    that ends a step or two before the decay does falls from its peak to ``min_lr`` in one step).

    >>> j = Discontinuity(metric="lr", before=1e-05, after=1e-06, step_before=19, step_after=20, attempt_before=1,
    ...                   attempt_after=1, across="jump")
    >>> as_configured(j, {"min_lr": 1e-06, "train_iters": 20}), as_configured(j, {"min_lr": 0.0, "train_iters": 20})
    (True, False)
    """
    floor = _number(config.get("min_lr"))
    end = _number(config.get("lr_decay_iters")) or _number(config.get("train_iters"))
    return (jump.metric == s.LR and jump.across == "jump" and floor is not None and end is not None
            and jump.step_after >= end and abs(jump.after - floor) <= 0.01 * max(floor, 1e-12))
