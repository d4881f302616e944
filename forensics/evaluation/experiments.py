"""Generated experiment sets with known outcomes, written as Megatron text logs (one directory per run), for
``forensics compare`` tests and its benchmark.

* :func:`write_lr_sweep`: runs that differ only in the learning rate; the high ones diverge (or hit NaN), the
  stable ones end lower the higher their LR.
* :func:`write_tr8_sequence`: tr8-104B's story told as separate experiments: two runs with the FFN width left at
  20480 (the second also with Adam beta2 0.95) diverge; the one with the fixed width (65536) survives.
* :func:`write_size_lr_sweep`: an LR x model-size grid whose grad norm and max attention logit scale as powers of
  the LR and the size (Wortsman et al. 2023: logits grow with both); a run whose logit level reaches
  ``diverge_at`` diverges, so the larger models break at lower LRs, as the fit across the smaller ones predicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BASE_ARGS: dict[str, object] = {
    "num_layers": 24, "hidden_size": 2048, "ffn_hidden_size": 8192, "num_attention_heads": 16, "seq_length": 2048,
    "max_position_embeddings": 2048, "micro_batch_size": 4, "global_batch_size": 512, "lr": 2e-4, "min_lr": 2e-5,
    "lr_decay_style": "cosine", "lr_warmup_iters": 200, "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1e-8,
    "clip_grad": 1.0, "weight_decay": 0.1, "bf16": True, "fp16": False, "seed": 1234, "init_method_std": 0.0138,
    "log_interval": 10, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
    "save": "/ckpt/run", "load": "/ckpt/run",
}


@dataclass
class Trajectory:
    """How a generated run goes: its LR, where it breaks (None: it does not) and how."""

    lr: float
    break_step: int | None = None
    ends_in_nan: bool = False
    grad_norm: float = 0.3            # the grad norm's level (log-normal noise about it)
    max_logit: float | None = None    # the max attention logit's level, logged when given
    loss_floor: float = 2.6           # the loss the run tends to


def _args_block(args: dict[str, object]) -> list[str]:
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (48 - len(k))} {args[k]}" for k in sorted(args, key=str.lower)]
    return [*lines, "-------------------- end of arguments ---------------------"]


def write_run(directory: Path, args: dict[str, object], path: Trajectory, steps: int, seed: int,
              log_interval: int = 10, vocab: int = 50304) -> Path:
    """One Megatron-LM log of ``steps`` iterations (every ``log_interval``-th logged), loss falling faster with a
    higher LR; from ``break_step`` the loss runs away (divergence) or turns NaN. Returns the log's path."""
    rng = np.random.default_rng(seed)
    args = {**args, "lr": path.lr, "train_iters": steps, "log_interval": log_interval}
    its = np.arange(log_interval, steps + 1, log_interval)
    warm = int(args.get("lr_warmup_iters") or 0)  # type: ignore[call-overload]
    lr = np.where(its < warm, path.lr * its / max(warm, 1), path.lr)
    speed = (path.lr / 2e-4) ** 0.35
    loss = path.loss_floor + 8.3 * (1 + speed * its / 150.0) ** -0.5 * np.exp(rng.normal(0, 0.004, its.size))
    grad = np.exp(rng.normal(math.log(path.grad_norm), 0.08, its.size))
    logit = None if path.max_logit is None else np.exp(rng.normal(math.log(path.max_logit), 0.05, its.size))
    nan = np.zeros(its.size, dtype=bool)
    if path.break_step is not None:
        after = its >= path.break_step
        if path.ends_in_nan:
            nan = its >= path.break_step + 20 * log_interval
        ramp = np.clip((its - path.break_step) / (40.0 * log_interval), 0, 1)
        loss = np.where(after, loss + 4.5 * ramp + 1.5 * after, loss)
        grad = np.where(after, grad * (25 + 200 * ramp), grad)
        logit = None if logit is None else np.where(after, logit * (3 + 30 * ramp), logit)
    lines = [*_args_block(args), f"> padded vocab (size: 50257) with {vocab - 50257} dummy tokens (new size: {vocab})",
             "    will not load any checkpoints and will start from random"]
    logits = [None] * its.size if logit is None else logit.tolist()
    for it, l_r, lo, gn, bad, lg in zip(its.tolist(), lr.tolist(), loss.tolist(), grad.tolist(), nan.tolist(), logits,
                                        strict=True):
        core = (f" iteration {it:8d}/{steps:8d} | consumed samples: {it * 512:12d} | elapsed time per iteration (ms): "
                f"{1400 + (it * 7919) % 40:.1f} | learning rate: {l_r:.6E} | global batch size:   512 |")
        shown_logit = "" if lg is None else f" max attention logit: {lg:.3f} |"
        core += (" grad norm: nan | number of skipped iterations:   0 | number of nan iterations:  10 |" if bad else
                 f" lm loss: {lo:.6E} | loss scale: 1.0 | grad norm: {gn:.3f} |{shown_logit} number of skipped "
                 "iterations:   0 | number of nan iterations:   0 |")
        lines.append(core)
    if path.break_step is None:
        lines.append("[after training is done] datetime: 2024-01-01 00:00:00 ")
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "train.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return log


def write_lr_sweep(root: Path, lrs: tuple[float, ...] = (1e-4, 2e-4, 4e-4, 8e-4, 1.6e-3), stable_up_to: float = 4e-4,
                   steps: int = 3000, log_interval: int = 10) -> dict[str, Trajectory]:
    """Runs ``lr-<lr>`` that differ only in LR; above ``stable_up_to`` they diverge, sooner the higher the LR, and
    the highest ends in NaN. Returns each run's trajectory."""
    out = {}
    for i, lr in enumerate(sorted(lrs)):
        unstable = lr > stable_up_to
        brk = int(steps * 0.6 * stable_up_to / lr) // log_interval * log_interval + log_interval if unstable else None
        path = Trajectory(lr=lr, break_step=brk, ends_in_nan=unstable and lr == max(lrs))
        name = f"lr-{lr:g}"
        write_run(root / name, {**BASE_ARGS, "seed": 1234}, path, steps, seed=100 + i, log_interval=log_interval)
        out[name] = path
    return out


def write_tr8_sequence(root: Path, steps: int = 3000) -> dict[str, Trajectory]:
    """Three experiments named 104B: FFN width 20480 (diverges), 20480 with beta2 0.95 (diverges later), and the
    fixed width 65536 with beta2 0.95 (survives)."""
    big = {**BASE_ARGS, "num_layers": 32, "hidden_size": 16384, "num_attention_heads": 32, "lr": 6e-5,
           "init_method_std": 0.0049, "pipeline_model_parallel_size": 32, "tensor_model_parallel_size": 4}
    runs = {
        "exp1-104B": ({**big, "ffn_hidden_size": 20480, "adam_beta2": 0.999, "seed": 42}, Trajectory(6e-5, 1510)),
        "exp2-104B-beta2": ({**big, "ffn_hidden_size": 20480, "adam_beta2": 0.95, "seed": 43}, Trajectory(6e-5, 2210)),
        "exp3-104B-ffn-fixed": ({**big, "ffn_hidden_size": 65536, "adam_beta2": 0.95, "seed": 43}, Trajectory(6e-5)),
    }
    for i, (name, (args, path)) in enumerate(runs.items()):
        write_run(root / name, args, path, steps, seed=200 + i)
    return {name: path for name, (_, path) in runs.items()}


# model shapes of the size sweep: 125M, 356M, 760M and 1.3B parameters from the shape (vocabulary 50304)
SWEEP_SHAPES: dict[str, dict[str, int]] = {
    "s": {"num_layers": 12, "hidden_size": 768, "ffn_hidden_size": 3072, "num_attention_heads": 12},
    "m": {"num_layers": 24, "hidden_size": 1024, "ffn_hidden_size": 4096, "num_attention_heads": 16},
    "l": {"num_layers": 24, "hidden_size": 1536, "ffn_hidden_size": 6144, "num_attention_heads": 16},
    "xl": {"num_layers": 24, "hidden_size": 2048, "ffn_hidden_size": 8192, "num_attention_heads": 16},
}


def sweep_levels(lr: float, parameters: float) -> tuple[float, float]:
    """The grad norm and max attention logit levels of a sweep run: 0.3 (lr/3e-4)^0.5 (N/1.6e8)^0.3 and
    20 (lr/3e-4)^0.8 (N/1.6e8)^0.5.

    >>> [round(v, 3) for v in sweep_levels(3e-4, 1.6e8)]
    [0.3, 20.0]
    """
    return (0.3 * (lr / 3e-4) ** 0.5 * (parameters / 1.6e8) ** 0.3,
            20.0 * (lr / 3e-4) ** 0.8 * (parameters / 1.6e8) ** 0.5)


def write_size_lr_sweep(root: Path, shapes: tuple[str, ...] = ("s", "m", "l", "xl"),
                        lrs: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3), diverge_at: float = 100.0,
                        steps: int = 2000, log_interval: int = 10, logits: bool = True) -> dict[str, Trajectory]:
    """Runs ``<shape>-lr<lr>`` over :data:`SWEEP_SHAPES` x ``lrs``, otherwise alike: grad norm and (with ``logits``)
    max attention logit at :func:`sweep_levels` for the size from the shape, the loss tending to a floor that falls
    with size; a run whose logit level reaches ``diverge_at`` diverges (sooner the further past it). Returns each
    run's trajectory."""
    from forensics.model_shape import parameters_from_shape

    out = {}
    for i, shape in enumerate(shapes):
        args = {**BASE_ARGS, **SWEEP_SHAPES[shape]}
        n, _ = parameters_from_shape(args, 50304)
        for j, lr in enumerate(sorted(lrs)):
            grad, logit = sweep_levels(lr, n or 0.0)
            over = logit / diverge_at
            brk = None if over < 1 else int(steps * 0.7 / over) // log_interval * log_interval + log_interval
            path = Trajectory(lr=lr, break_step=brk, grad_norm=grad, max_logit=logit if logits else None,
                              loss_floor=2.6 * ((n or 1.6e8) / 1.6e8) ** -0.07)
            name = f"{shape}-lr{lr:g}"
            write_run(root / name, args, path, steps, seed=300 + 10 * i + j, log_interval=log_interval)
            out[name] = path
    return out
