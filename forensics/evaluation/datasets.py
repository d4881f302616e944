"""Labelled training curves for evaluating the detectors (in the spirit of ``ruptures.datasets``).

Every curve is simulated step by step and then logged the way Megatron logs it: every ``log_interval`` steps, the
loss as the mean over the interval, grad norm, learning rate and loss scale as of the logged step, skipped
iterations counted over the interval. The truth lists what was injected, at the *logged* step where it shows.

What varies from curve to curve (seeded, so every curve can be rebuilt):

* length 2,000-30,000 steps; final loss 1.5-3.5; power-law decay with exponent 0.15-0.6;
* multiplicative noise 0.3%-4% per step (loss) and 3%-30% (grad norm), partly autocorrelated;
* LR warm-up (1%-10% of the run) then cosine decay to 10% of the peak; grad norm high early and settling;
* benign wiggles that are *not* anomalies: slow oscillations and data-mixture bumps of a few percent over
  hundreds of steps, grad-norm level drifts within a factor of 1.5;
* recovered spikes: rise over 1-5 steps, height 10%-500% (never below 10 noise sigmas of the logged series),
  back within 1-80 steps; with a grad-norm spike that leads the loss by 1-15 steps, or at the same step, or none;
* divergences: the loss leaves its trend and climbs, ending in NaN or not; with a noise family, 85% of them are
  announced by a grad norm growing 2.5-6x over the 150-2,000 steps before (and, in fp16, by scattered overflows);
* fp16 loss-scale collapse: overflows halve the scale down to 1 within tens of steps, iterations are skipped,
  then the loss explodes (the GLM-130B pattern);
* plateaus: from 15%-25% of the run the loss stops improving (its trend frozen) while the learning rate is
  still high;
* regime shifts: the grad norm settles at a level 2.5-6x higher, or the iteration time rises 40-150% (a slow
  node), for the rest of the run; iteration times also carry benign one-step blips (checkpoint saves).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from forensics.detectors.base import RunFrames
from forensics.findings import Kind
from parsers import schema as s

GENERATED = "generated"  # the source every generated point is from

SCENARIOS: tuple[str, ...] = (
    "clean", "spikes", "spikes_grad_lead", "divergence_nan", "divergence", "fp16_collapse", "regime_shift",
)
EXPERIMENTAL_SCENARIOS: tuple[str, ...] = ("plateau",)  # for the opt-in plateau detector
# noise families of the loss and grad norm around their trends ("mixed": the original harness's mix of Gaussian,
# mildly heavy-tailed and correlated noise with benign wiggles, 2k-30k steps; the others: 1k-200k steps)
PRECURSOR_SHARE = 0.85  # noise families: divergences preceded by a growing grad norm (the rest come suddenly)
NOISES: tuple[str, ...] = ("gaussian", "t3", "t4", "t6", "ar1", "outliers", "wiggles")


@dataclass(frozen=True)
class Truth:
    """An injected event: its kind (``loss_spike``, ``grad_norm_spike``, ``divergence``, ``nan``,
    ``loss_scale_collapse``, ``changepoint``, ``loss_plateau``), the logged step it starts at, where it ends, and the
    grad-norm lead in steps.

    >>> Truth("loss_spike", 1000, 1020).kind is Kind.LOSS_SPIKE
    True
    """

    kind: Kind           # what was injected (a plain string is taken as the Kind it names)
    step: int
    end_step: int
    lead: int | None = None
    optional: bool = False  # injected but too faint in the log to demand: not counted in recall, not a false alarm
    margin: int | None = None  # steps a detection may be off, when wider than the default (block-level events)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))


@dataclass
class Curve:
    """One labelled run: canonical metrics and events frames, and the truth."""

    name: str
    scenario: str
    log_interval: int
    metrics: pl.DataFrame
    events: pl.DataFrame
    truths: list[Truth] = field(default_factory=list)
    precursor_from: int | None = None  # a blow-up's growing grad norm begins here (None: it comes suddenly)

    def frames(self) -> RunFrames:
        """The frames the detectors read, the loss known to be a mean over the log interval (as Megatron logs it,
        which the curve imitates).

        >>> generate("clean", 0, 10).frames().loss_is_interval_mean(1)
        True
        """
        return RunFrames(self.metrics, self.events, interval_means=frozenset({GENERATED}))


def _smooth_noise(rng: np.random.Generator, n: int, sigma: float, rho: float) -> np.ndarray:
    """AR(1) noise with stationary standard deviation ``sigma``."""
    from scipy import signal  # here, not at import: scipy.signal takes 1.5 s to load, and only generating needs it

    white = rng.normal(0.0, sigma * math.sqrt(1 - rho * rho), n)
    acc = rng.normal(0.0, sigma)
    return signal.lfilter([1.0], [1.0, -rho], white, zi=[rho * acc])[0]


def _unit_t(rng: np.random.Generator, df: float, n: int) -> np.ndarray:
    """Student-t draws scaled to unit standard deviation, clipped at 12: a t(3) sample of 100k points otherwise holds
    draws of 50 and more, a 1e45 grad norm or a 9x loss from "noise", which no real run makes."""
    return np.clip(rng.standard_t(df, n) / math.sqrt(df / (df - 2)), -12.0, 12.0)


@dataclass(frozen=True)
class NoiseModel:
    """The batch-to-batch noise of one curve's loss and grad norm (log units) for one family of :data:`NOISES`:
    redrawn at will, so the truth can ask how far this noise reaches over a run (:func:`noise_reach`)."""

    family: str
    sigma: float     # loss noise standard deviation
    g_sigma: float   # grad-norm noise standard deviation
    rho: float = 0.0   # ar1: lag-1 correlation
    rate: float = 0.0  # outliers: the chance of a hard batch per step

    @classmethod
    def drawn(cls, rng: np.random.Generator, family: str, sigma: float) -> NoiseModel:
        return cls(family, sigma, float(rng.uniform(0.03, 0.3)), float(rng.uniform(0.5, 0.95)),
                   float(rng.uniform(1 / 3000, 1 / 500)))

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(loss noise, grad-norm noise) for ``n`` steps (the wiggles family's slow movements are not noise)."""
        f = self.family
        if f in ("gaussian", "wiggles"):
            return self.sigma * rng.normal(0.0, 1.0, n), self.g_sigma * rng.normal(0.0, 1.0, n)
        if f.startswith("t"):
            df = float(f[1:])
            return self.sigma * _unit_t(rng, df, n), self.g_sigma * _unit_t(rng, df, n)
        if f == "ar1":  # serially correlated: a hard stretch of data lasts several batches
            return (self.sigma * 0.5 * rng.normal(0.0, 1.0, n) + _smooth_noise(rng, n, self.sigma * 0.85, self.rho),
                    self.g_sigma * 0.5 * rng.normal(0.0, 1.0, n) + _smooth_noise(rng, n, self.g_sigma * 0.85, self.rho))
        if f == "outliers":  # Gaussian, and now and then one hard batch (loss up 4-10 sigma, grad norm 1.5-4x)
            loss, grad = self.sigma * rng.normal(0.0, 1.0, n), self.g_sigma * rng.normal(0.0, 1.0, n)
            hit = rng.random(n) < self.rate
            loss[hit] += self.sigma * rng.uniform(4.0, 10.0, int(hit.sum()))
            hit = rng.random(n) < self.rate
            grad[hit] += np.log(rng.uniform(1.5, 4.0, int(hit.sum())))
            return loss, grad
        raise ValueError(f"unknown noise family {f!r}; choose from {NOISES}")


RUN_LENGTHS = (1, 2, 3, 5, 8)


def noise_reach(model: NoiseModel, n: int, k: int, metric: str, rng: np.random.Generator,
                runs: int = 20) -> dict[int, float]:
    """How far the noise alone reaches over a run of ``n`` steps logged every ``k``: per run length L, the 95th
    percentile over ``runs`` fresh runs of the largest L-point minimum of the logged noise's residual from the
    median of the 8 points before (what any detector sees), in units of that residual's robust sigma (1.4826 x MAD).
    A spike is beyond the noise when it exceeds this, in the local robust sigma of the run's own residuals."""
    runs = max(5, min(runs, 4_000_000 // max(n, 1)))
    m = n // k
    loss, grad = model.draw(rng, runs * m * k)
    logged = np.log(np.exp(loss).reshape(-1, k).mean(axis=1)) if metric == s.LOSS else grad[k - 1::k]
    x = logged[: runs * m].reshape(runs, m)
    recent = pl.DataFrame(x.T).select(pl.all().shift(1).rolling_median(window_size=8, min_samples=1)).to_numpy().T
    resid = x - recent
    finite = resid[:, 1:][np.isfinite(resid[:, 1:])]
    resid = resid / (1.4826 * float(np.median(np.abs(finite - np.median(finite)))))
    out = {}
    for length in RUN_LENGTHS:
        if m < length + 1:
            out[length] = float("inf")
            continue
        lows = np.lib.stride_tricks.sliding_window_view(resid[:, 1:], length, axis=1).min(axis=2)
        out[length] = float(np.quantile(np.nanmax(lows, axis=1), 0.95))
    return out


def _base_curves(rng: np.random.Generator, n: int,
                 family: str = "mixed") -> tuple[dict[str, np.ndarray], NoiseModel | None]:
    t = np.arange(n, dtype=float)
    final = rng.uniform(1.5, 3.5)
    alpha = rng.uniform(0.15, 0.6)
    t0 = rng.uniform(5, 50)
    amp = (rng.uniform(9.0, 11.0) - final) * t0**alpha
    trend = final + amp * (t + t0) ** -alpha
    sigma = 10 ** rng.uniform(math.log10(0.003), math.log10(0.04))
    if family == "mixed":
        df = rng.choice([np.inf, 30.0, 10.0])  # sometimes mildly heavy-tailed batch-to-batch noise
        white = rng.standard_t(df, n) / math.sqrt(df / (df - 2)) if np.isfinite(df) else rng.normal(0.0, 1.0, n)
        noise = sigma * 0.7 * white + _smooth_noise(rng, n, sigma * 0.7, rng.uniform(0.0, 0.9))
        wiggle = np.zeros(n)
        for _ in range(rng.integers(0, 4)):  # slow oscillations and data-mixture bumps: benign
            period = rng.uniform(300, 4000)
            wiggle += rng.uniform(0.002, 0.015) * np.sin(2 * math.pi * t / period + rng.uniform(0, 6.3))
        for _ in range(rng.integers(0, 4)):
            centre, width = rng.uniform(0.1, 0.95) * n, rng.uniform(150, 900)
            wiggle += rng.uniform(0.01, 0.03) * np.exp(-0.5 * ((t - centre) / width) ** 2)
        loss = trend * np.exp(noise + wiggle)
        warm = max(10, int(n * rng.uniform(0.01, 0.1)))
    else:
        warm = max(10, int(n * rng.uniform(0.01, 0.1)))
        model = NoiseModel.drawn(rng, family, sigma)
        noise, g_noise = model.draw(rng, n)
        if family == "wiggles":  # slow oscillations, data-mixture bumps and a bump around the end of warm-up
            for _ in range(int(rng.integers(1, 5))):
                period = rng.uniform(300, 4000)
                noise = noise + rng.uniform(0.002, 0.015) * np.sin(2 * math.pi * t / period + rng.uniform(0, 6.3))
            for _ in range(int(rng.integers(1, 5))):
                centre, width = rng.uniform(0.05, 0.95) * n, rng.uniform(150, 900)
                noise = noise + rng.uniform(0.01, 0.03) * np.exp(-0.5 * ((t - centre) / width) ** 2)
            noise = noise + rng.uniform(0.01, 0.04) * np.exp(-0.5 * ((t - warm) / max(warm * 0.3, 5.0)) ** 2)
        loss = trend * np.exp(noise)
    peak = 10 ** rng.uniform(-4.5, -3)
    lr = np.where(t < warm, peak * (t + 1) / warm,
                  peak * (0.1 + 0.45 * (1 + np.cos(math.pi * np.clip((t - warm) / max(n - warm, 1), 0, 1)))))
    g_level = rng.uniform(0.15, 1.5)
    g_sigma = rng.uniform(0.03, 0.3)
    drift = np.exp(rng.uniform(-0.2, 0.2) * np.sin(2 * math.pi * t / rng.uniform(2000, 20000)))
    g_shape = g_level * (1 + 8 * np.exp(-t / (warm * 0.7))) * drift
    if family == "mixed":
        grad = g_shape * np.exp(_smooth_noise(rng, n, g_sigma, rng.uniform(0.0, 0.7)))
    else:
        grad = g_shape * np.exp(g_noise)
    out = {"trend": trend, "loss": loss, "lr": lr, "grad": grad, "warm": np.array([warm])}
    return (out, None) if family == "mixed" else (out, model)


def _logged_steps(n: int, k: int) -> np.ndarray:
    return np.arange(k, n + 1, k)  # 1-based iteration numbers as Megatron prints them


def _interval_mean(x: np.ndarray, k: int) -> np.ndarray:
    m = (x.size // k) * k
    return x[:m].reshape(-1, k).mean(axis=1)


def _spike_shape(n: int, onset: int, height: float, rise: int, back: int) -> np.ndarray:
    """Multiplicative excess in log space: ramps to ``height`` over ``rise`` steps, decays over ``back`` steps."""
    out = np.zeros(n)
    up = np.arange(1, rise + 1) / rise
    top = onset + rise
    out[onset:min(top, n)] = (height * up)[: max(0, min(top, n) - onset)]
    if top < n:
        tail = np.arange(0, n - top)
        out[top:] = height * np.exp(-tail / max(back / 3.0, 0.3))
    return out


def generate(scenario: str, seed: int, log_interval: int = 1, noise: str = "mixed", steps: int | None = None) -> Curve:
    """One labelled curve of a scenario (see :data:`SCENARIOS`) with noise of one family (see :data:`NOISES`;
    ``steps``: its length, else drawn: 2k-30k steps for "mixed", 1k-200k log-uniform for the others).

    >>> curve = generate("spikes", seed=3, log_interval=10)
    >>> {t.kind for t in curve.truths} == {Kind.LOSS_SPIKE}
    True
    """
    known = SCENARIOS + EXPERIMENTAL_SCENARIOS
    if scenario not in known:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {known}")
    if noise != "mixed" and noise not in NOISES:
        raise ValueError(f"unknown noise family {noise!r}; choose from {NOISES}")
    family = () if noise == "mixed" else (100 + NOISES.index(noise),)
    rng = np.random.default_rng([known.index(scenario), seed, log_interval, *family])
    k = log_interval
    drawn = int(rng.integers(2000, 30000)) if noise == "mixed" else int(10 ** rng.uniform(3.0, math.log10(2e5)))
    n = max(steps or drawn, 10 * k) // k * k
    base, model = _base_curves(rng, n, noise)
    log_loss = np.log(base["loss"])
    log_grad = np.log(base["grad"])
    warm = int(base["warm"][0])
    scale = np.full(n, 65536.0)
    skipped = np.zeros(n, dtype=bool)
    truths: list[Truth] = []
    end = n  # steps after a NaN are not logged: the run stops

    def logged_step(step: int) -> int:
        return (step // k + 1) * k

    spikes: list[tuple[int, int, int | None, int | None]] = []  # onset, width, grad start, lead
    if scenario in {"spikes", "spikes_grad_lead"}:
        count = int(rng.integers(1, 6))
        onsets = np.sort(rng.choice(np.arange(max(warm, n // 10), n - 200), size=count, replace=False))
        onsets = [o for i, o in enumerate(onsets) if i == 0 or o - onsets[i - 1] > 300]
        clean_loss, clean_grad = log_loss.copy(), log_grad.copy()
        for onset in onsets:
            rise, back = int(rng.integers(1, 6)), int(rng.integers(1, 81))
            height = math.log(1 + 10 ** rng.uniform(math.log10(0.03), math.log10(5.0)))
            log_loss += _spike_shape(n, int(onset), height, rise, back)
            start: int | None = None
            lead: int | None = None
            if scenario == "spikes_grad_lead" or rng.random() < 0.5:
                lead = int(rng.integers(1, 16)) if scenario == "spikes_grad_lead" else 0
                start = int(onset) - lead
                g_height = math.log(10 ** rng.uniform(math.log10(1.5), math.log10(60)))
                log_grad += _spike_shape(n, start, g_height, 1, int(rng.integers(1, 10)) + lead)
            spikes.append((int(onset), rise + back, start, lead))
    elif scenario in {"divergence", "divergence_nan", "fp16_collapse"}:
        onset = int(rng.integers(max(warm * 2, n // 3), n - 300))
        collapse_at = None
        precursor_from = None
        if scenario == "fp16_collapse":
            collapse_at = onset
            onset = onset + int(rng.integers(10, 60))
            halvings = 16
            steps = np.sort(rng.choice(np.arange(collapse_at, onset), size=min(halvings, onset - collapse_at),
                                       replace=False))
            for j, st in enumerate(steps):
                scale[st:] = 65536.0 / 2 ** (j + 1)
                skipped[st] = True
            truths.append(Truth(Kind.LOSS_SCALE_COLLAPSE, logged_step(collapse_at), logged_step(onset)))
        if noise != "mixed" and rng.random() < PRECURSOR_SHARE:
            # most blow-ups announce themselves (OLMo 2): the grad norm grows for a while before the loss leaves
            lead = int(min(rng.uniform(150, 2000), max(onset - 2 * warm, 0)))
            if lead > 0:
                grow = np.clip((np.arange(n) - (onset - lead)) / lead, 0.0, 1.0)
                log_grad += grow * math.log(rng.uniform(2.5, 6.0))
                precursor_from = logged_step(onset - lead)
                # a detector may rightly see the growing grad norm as a level shift or a spike: not required
                truths += [Truth(kind, logged_step(onset - lead), logged_step(onset), optional=True)
                           for kind in (Kind.CHANGEPOINT, Kind.GRAD_NORM_SPIKE)]
            if collapse_at is not None and lead > 0:  # and fp16 overflows come more often before the collapse
                for st in np.sort(rng.choice(np.arange(onset - lead, collapse_at), size=min(8, max(
                        collapse_at - onset + lead, 1)), replace=False)):
                    skipped[st] = True
        climb = np.clip(np.arange(n) - onset, 0, None).astype(float)
        rate = rng.uniform(0.005, 0.05)
        log_loss += np.log1p(rate * climb) * rng.uniform(0.8, 2.0) + np.where(climb > 0, math.log(1.3), 0.0)
        log_grad += np.where(climb > 0, math.log(rng.uniform(5, 50)), 0.0) + 0.02 * np.minimum(climb, 500.0)
        if scenario in {"divergence_nan", "fp16_collapse"}:
            nan_at = onset + int(rng.integers(20, 250))
            end = min(n, (nan_at // k + 3) * k)
            log_loss[nan_at:] = np.nan
            truths.append(Truth(Kind.NAN, logged_step(nan_at), logged_step(nan_at)))
        truths.append(Truth(Kind.DIVERGENCE, logged_step(onset), end, None))
    if scenario == "plateau":
        at = int(n * rng.uniform(0.15, 0.25))
        trend = base["trend"]
        log_loss[at:] += np.log(trend[at]) - np.log(trend[at:])  # the trend frozen at its value there
        truths.append(Truth(Kind.LOSS_PLATEAU, logged_step(at), n, margin=max(5 * k, n // 20)))
    iter_ms = rng.uniform(200, 5000) * np.exp(rng.normal(0.0, 0.02, n))
    iter_ms[rng.choice(np.arange(n), size=n // 1000, replace=False)] *= 2.0  # checkpoint saves: benign blips
    if scenario == "regime_shift":
        at = int(rng.integers(n // 4, 3 * n // 4))
        if rng.random() < 0.5:
            log_grad[at:] += math.log(rng.uniform(2.5, 6.0))
        else:
            iter_ms[at:] *= rng.uniform(1.4, 2.5)
        truths.append(Truth(Kind.CHANGEPOINT, logged_step(at), logged_step(at), margin=max(5 * k, n // 500)))
    # periodic benign fp16 behaviour: an overflow now and then halves the scale, which recovers later
    if scenario != "fp16_collapse" and rng.random() < 0.5:
        for st in np.arange(int(rng.integers(0, 2000)), n, int(rng.integers(1500, 6000))):
            scale[st:st + 1000] /= 2  # one overflow, scale doubled back 1,000 clean steps later
            skipped[st] = True
    loss = np.exp(log_loss[:end])
    grad = np.exp(log_grad[:end])
    curve = _log(scenario, seed, k, loss, grad, base["lr"][:end], scale[:end], skipped[:end], truths, iter_ms[:end])
    if scenario in {"divergence", "divergence_nan", "fp16_collapse"}:
        curve.precursor_from = precursor_from
    if spikes:
        plain = _log(scenario, seed, k, np.exp(clean_loss), np.exp(clean_grad), base["lr"], scale, skipped, [],
                     iter_ms)
        curve.truths.extend(_visible_spikes(curve, plain, spikes, k, model, rng))
    return curve


def _logged(curve: Curve, metric: str) -> tuple[np.ndarray, np.ndarray]:
    rows = curve.metrics.filter(metric=metric).sort("step")
    return rows["step"].to_numpy(), np.log(rows["value"].to_numpy())


def _visible_spikes(curve: Curve, plain: Curve, spikes: list[tuple[int, int, int | None, int | None]], k: int,
                    model: NoiseModel | None = None, rng: np.random.Generator | None = None) -> list[Truth]:
    """Truth for injected spikes, judged on the logged series against the same run without them. With a noise
    family, a spike is required when for some run length L its logged excess, as a detector sees it (against the
    median of the 8 points before), stays over L consecutive points 1.25x above what the noise alone reaches over
    such a run (:func:`noise_reach`, in the robust sigma of the 100 residuals before it) plus one sigma for the noise
    riding on the spike, and is at least 5% (loss) or 3x (grad norm); below what the noise reaches it is optional
    (a detector may not tell it from noise, and may not be blamed for finding it). With fewer than 30 points before
    it the noise cannot be known from the log: only a spike an absolute check sees (loss 2x, 1.5x for a mean over
    10 or more iterations; grad norm 10x) is required. The "mixed" harness keeps its original rule: at least 8
    noise sigmas and 5% or 3x."""
    out = []
    for metric, kind, least in ((s.LOSS, Kind.LOSS_SPIKE, math.log(1.05)), (s.GRAD_NORM, Kind.GRAD_NORM_SPIKE, math.log(3))):
        steps, with_spikes = _logged(curve, metric)
        _, without = _logged(plain, metric)
        excess = with_spikes - without
        noise = np.diff(without[len(without) // 10:])
        sigma = float(np.median(np.abs(noise - np.median(noise)))) * 1.4826 / math.sqrt(2)
        reach = noise_reach(model, plain.metrics["step"].max(), k, metric, rng) if model and rng else None
        resid = without - pl.Series(without).shift(1).rolling_median(window_size=8, min_samples=1).to_numpy()
        # the excess as a detector sees it: against the median of the 8 points before, which a lasting spike lifts
        visible = with_spikes - pl.Series(with_spikes).shift(1).rolling_median(window_size=8, min_samples=1).to_numpy()
        visible = visible - resid
        for onset, width, g_start, lead in spikes:
            start = onset if kind == Kind.LOSS_SPIKE else g_start
            if start is None:
                continue
            span = width if kind == Kind.LOSS_SPIKE else 10 + (lead or 0)
            window = (steps > start) & (steps <= start + span + k)
            if not window.any():
                continue
            first = int(steps[window][0])
            peak = float(excess[window].max())
            if reach is None:
                faint = peak < max(8 * sigma, least)
            else:
                at = int(np.flatnonzero(window)[0])
                before = resid[max(1, at - 100):at]  # the local noise, as a detector sees it
                if before.size < 30:  # too little history to know the noise: only what an absolute check sees
                    faint = peak < (math.log(1.5 if k >= 10 else 2.0) if kind == Kind.LOSS_SPIKE else math.log(10))
                else:
                    local = 1.4826 * float(np.median(np.abs(before - np.median(before))))
                    seen = visible[window]
                    beyond = any(seen.size >= length and float(np.nanmax(np.lib.stride_tricks.sliding_window_view(
                        seen, length).min(axis=1))) >= (1.25 * limit + 1.0) * local for length, limit in reach.items())
                    faint = peak < least or not beyond
            out.append(Truth(kind, first, int(steps[window][-1]), lead if kind == Kind.LOSS_SPIKE else None,
                             optional=faint))
    return out


def _log(scenario: str, seed: int, k: int, loss: np.ndarray, grad: np.ndarray, lr: np.ndarray,
         scale: np.ndarray, skipped: np.ndarray, truths: list[Truth], iter_ms: np.ndarray) -> Curve:
    n = loss.size
    steps = _logged_steps(n, k)
    idx = steps - 1
    with np.errstate(invalid="ignore"):
        mean_loss = _interval_mean(np.where(skipped, np.nan, loss), k) if k > 1 else loss.copy()
    if k > 1:  # Megatron averages the advanced iterations of an interval
        m = (n // k) * k
        ok = (~skipped[:m]).reshape(-1, k) & np.isfinite(loss[:m]).reshape(-1, k)
        sums = np.where(ok, loss[:m].reshape(-1, k), 0.0).sum(axis=1)
        counts = ok.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_loss = np.where(counts > 0, sums / counts, np.nan)
        mean_loss = np.where(np.isnan(loss[:m]).reshape(-1, k).any(axis=1), np.nan, mean_loss)
    skipped_counts = np.add.reduceat(skipped.astype(float), np.arange(0, n, k))[: steps.size]
    name = f"{scenario}-{seed}-k{k}"
    columns = {
        s.LOSS: mean_loss[: steps.size], s.GRAD_NORM: grad[idx], s.LR: lr[idx], s.LOSS_SCALE: scale[idx],
        s.SKIPPED_ITERATIONS: skipped_counts, s.LOG_INTERVAL: np.full(steps.size, float(k)),
        s.ITERATION_TIME_MS: _interval_mean(iter_ms, k) if k > 1 else iter_ms.copy(),
    }
    # an interval whose iterations were all skipped prints no loss (Megatron), which is not a NaN
    all_skipped = skipped_counts >= k
    frames = [
        pl.DataFrame({"step": steps, "value": values}).with_columns(metric=pl.lit(metric)).filter(
            ~pl.lit(all_skipped) | pl.lit(metric != s.LOSS) | pl.col("value").is_not_nan()
        )
        for metric, values in columns.items()
    ]
    metrics = s.conform(
        pl.concat(frames).with_columns(run=pl.lit(name), source=pl.lit(GENERATED), attempt=pl.lit(1),
                                       wall_time=pl.lit(None, dtype=pl.Float64)),
        s.METRICS_SCHEMA,
    )
    return Curve(name=name, scenario=scenario, log_interval=k, metrics=metrics, events=s.empty(s.EVENTS_SCHEMA),
                 truths=truths)
