"""Write the bundled sample runs (deterministic): ``python sample_logs/generate.py``.

* ``tr8-104B-sample/``: in the spirit of the BigScience tr8-104B chronicle. A run named 104B whose FFN width was
  left at the 13B value (hidden 16384, ffn_hidden_size 20480: really ~58B). Attempt 1 spikes at 7010 and ends in
  NaN; attempt 2 rolls back to 6210 with seed 43, spikes sooner and ends in NaN; attempt 3 rolls back to 3000 with
  adam_beta2 0.95 and diverges near 5000.
* ``clean-1.3B/``: a healthy bf16 run that completes: the report must find nothing.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
START = datetime(2021, 9, 22, 10, 0, 0)


def args_block(args: dict[str, object]) -> list[str]:
    lines = ["------------------------ arguments ------------------------"]
    for name in sorted(args, key=str.lower):
        lines.append(f"  {name} {'.' * (48 - len(name))} {args[name]}")
    lines.append("-------------------- end of arguments ---------------------")
    return lines


def iteration_line(
    it: int, total: int, samples: int, ms: float, lr: float, gbs: int, loss: float | None, scale: float | None,
    gn: float | str, skipped: int = 0, nan: int = 0,
) -> str:
    s = f" iteration {it:8d}/{total:8d} | consumed samples: {samples:12d} | elapsed time per iteration (ms): {ms:.1f} |"
    s += f" learning rate: {lr:.3E} | global batch size: {gbs:5d} |"
    if loss is not None:
        s += f" lm loss: {loss:.6E} |"
    if scale is not None:
        s += f" loss scale: {scale:.1f} |"
    s += f" grad norm: {gn if isinstance(gn, str) else f'{gn:.3f}'} | num zeros: 0.0 |"
    s += f" number of skipped iterations: {skipped:3d} | number of nan iterations: {nan:3d} |"
    return s


def tr8_args(seed: int, beta2: float) -> dict[str, object]:
    return {
        "num_layers": 32, "hidden_size": 16384, "ffn_hidden_size": 20480, "num_attention_heads": 32,
        "seq_length": 2048, "max_position_embeddings": 2048, "micro_batch_size": 1, "global_batch_size": 2048,
        "rampup_batch_size": "['16', '16', '2_600_960']", "lr": 6e-05, "min_lr": 6e-06, "lr_decay_style": "cosine",
        "lr_warmup_samples": 174240, "adam_beta1": 0.9, "adam_beta2": beta2, "adam_eps": 1e-08,
        "clip_grad": 1.0, "weight_decay": 0.1, "fp16": True, "bf16": False, "seed": seed, "init_method_std": 0.02,
        "log_interval": 10, "save_interval": 300, "eval_interval": 1000, "train_samples": 300000000,
        "tensor_model_parallel_size": 4, "pipeline_model_parallel_size": 32,
        "save": "/gpfsscratch/rech/six/checkpoints/tr8-104B", "load": "/gpfsscratch/rech/six/checkpoints/tr8-104B",
        "tensorboard_dir": "/gpfsscratch/rech/six/tr8-104B/tensorboard", "train_iters": None,
        "padded_vocab_size": None, "tokenizer_type": "GPT2BPETokenizer", "data_impl": "mmap",
    }


def base_loss(it: int) -> float:
    return 2.9 + 8.2 * (1 + it / 300) ** -0.55


def batch_size(it: int) -> int:
    return min(2048, 16 + 16 * (it // 200))


def tr8_lines() -> list[str]:
    rng = np.random.default_rng(8104)
    out: list[str] = []
    total = 159576
    clock = START
    warmup_end = 6500

    def lr_at(it: int) -> float:
        return 6e-5 * min(1.0, it / warmup_end)

    def attempt(seed: int, beta2: float, resume: int | None, stop: int, spike: int, nan_at: int | None) -> None:
        nonlocal clock
        out.extend(["using world size: 512, data-parallel-size: 4, tensor-model-parallel size: 4, "
                    "pipeline-model-parallel size: 32 ", "using torch.float16 for parameters ..."])
        out.extend(args_block(tr8_args(seed, beta2)))
        out.append("> padded vocab (size: 50257) with 431 dummy tokens (new size: 50688)")
        out.append(f"[after megatron is initialized] datetime: {clock:%Y-%m-%d %H:%M:%S} ")
        out.append("estimated model parameters: 57.7452")
        if resume is None:
            out.append("WARNING: could not find the metadata file /gpfsscratch/rech/six/checkpoints/tr8-104B/"
                       "latest_checkpointed_iteration.txt ")
            out.append("    will not load any checkpoints and will start from random")
            first = 10
        else:
            out.append(f" loading checkpoint from /gpfsscratch/rech/six/checkpoints/tr8-104B at iteration {resume}")
            out.append(f"  successfully loaded checkpoint from /gpfsscratch/rech/six/checkpoints/tr8-104B at "
                       f"iteration {resume}")
            first = resume + 10
        out.append(f"[before the start of training step] datetime: {clock:%Y-%m-%d %H:%M:%S} ")
        scale, level = 4096.0, 0.0
        gn_prev = 1.0
        for it in range(first, stop + 1, 10):
            clock += timedelta(seconds=187)
            gbs = batch_size(it)
            samples = sum(batch_size(i) for i in range(0, it, 10)) * 10 // 10
            noise = rng.normal(0, 0.006)
            loss: float | None = base_loss(it) * math.exp(noise) + level
            gn: float | str = float(np.exp(rng.normal(math.log(1.2e5), 0.12)))
            skipped = 0
            if it == spike:
                loss, gn, level = 11.42026 if spike == 7010 else 9.121927, 2.8e6, 0.9
            elif spike < it and (nan_at is None or it < nan_at):
                level = max(level * 0.985, 0.75)
            if nan_at is not None and it >= nan_at:
                loss, gn, skipped = None, "nan", 3
                scale = max(scale / 8, 1.0)
            if nan_at is None and it > spike:  # attempt 3: the loss does not come back
                level = min(level + 0.02, 3.0)
            out.append(iteration_line(it, total, samples, 18706.1 + rng.normal(0, 150), lr_at(it), gbs, loss,
                                      scale, gn, skipped=skipped))
            out.append("time (ms)")
            gn_prev = gn
            if it % 300 == 0 and (nan_at is None or it < nan_at):
                out.append(f"saving checkpoint at iteration {it:7d} to /gpfsscratch/rech/six/checkpoints/tr8-104B")
                out.append(f"  successfully saved checkpoint at iteration {it:7d} to "
                           "/gpfsscratch/rech/six/checkpoints/tr8-104B")
            if it % 1000 == 0:
                out.append("-" * 96)
                val = (loss or base_loss(it)) + 0.05
                out.append(f" validation loss at iteration {it} | lm loss value: {val:.6E} | "
                           f"lm loss PPL: {math.exp(min(20, val)):.6E} | ")
                out.append("-" * 96)
        del gn_prev
        if nan_at is not None:
            out.append("Traceback (most recent call last):")
            out.append('  File "/gpfswork/rech/six/commun/code/Megatron-DeepSpeed/pretrain_gpt.py", line 215, in <module>')
            out.append("RuntimeError: Rank 37: found NaN in local forward loss calculation. Device: 1, node: r7i4n3")
        clock += timedelta(hours=3)

    attempt(seed=42, beta2=0.999, resume=None, stop=7360, spike=7010, nan_at=7320)
    attempt(seed=43, beta2=0.999, resume=6210, stop=7150, spike=6930, nan_at=7100)
    attempt(seed=43, beta2=0.95, resume=3000, stop=5400, spike=4960, nan_at=None)
    return out


def clean_lines() -> list[str]:
    rng = np.random.default_rng(13)
    total = 3000
    args = {
        "num_layers": 24, "hidden_size": 2048, "ffn_hidden_size": 8192, "num_attention_heads": 16,
        "seq_length": 2048, "max_position_embeddings": 2048, "global_batch_size": 512, "lr": 2e-4,
        "min_lr": 2e-5, "lr_warmup_iters": 300, "lr_decay_style": "cosine", "adam_beta2": 0.95, "bf16": True,
        "fp16": False, "seed": 1234, "log_interval": 1, "train_iters": total, "init_method_std": 0.0138,
        "save": "/data/ckpt/clean-1.3B", "load": "/data/ckpt/clean-1.3B",
    }
    out = ["using world size: 64, data-parallel-size: 64, tensor-model-parallel size: 1, "
           "pipeline-model-parallel size: 1 ", "using torch.bfloat16 for parameters ..."]
    out += args_block(args)
    out.append("> padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)")
    out.append(" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 1315577856")
    out.append("WARNING: could not find the metadata file /data/ckpt/clean-1.3B/latest_checkpointed_iteration.txt ")
    out.append("    will not load any checkpoints and will start from random")
    clock = datetime(2024, 9, 3, 15, 54, 0)
    for it in range(1, total + 1):
        clock += timedelta(seconds=1.4)
        lr = 2e-4 * min(1.0, it / 300) if it <= 300 else 2e-5 + 0.5 * (1.8e-4) * (
            1 + math.cos(math.pi * (it - 300) / (total - 300)))
        loss = (2.3 + 8.5 * (1 + it / 40) ** -0.6) * math.exp(rng.normal(0, 0.012))
        gn = math.exp(rng.normal(math.log(0.35 + 3.0 / (1 + it / 30)), 0.15))
        line = (f" [{clock:%Y-%m-%d %H:%M:%S}] iteration {it:8d}/{total:8d} | consumed samples: {it * 512:12d} | "
                f"elapsed time per iteration (ms): {1400 + rng.normal(0, 20):.1f} | learning rate: {lr:.6E} | "
                f"global batch size:   512 | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {gn:.3f} | "
                f"number of skipped iterations:   0 | number of nan iterations:   0 |")
        out.append(line)
        if it % 1000 == 0:
            out.append(f"saving checkpoint at iteration {it:7d} to /data/ckpt/clean-1.3B in torch format")
    out.append(f"[after training is done] datetime: {clock:%Y-%m-%d %H:%M:%S} ")
    return out


def main() -> None:
    for name, lines in (("tr8-104B-sample/main_log.txt", tr8_lines()), ("clean-1.3B/train.log", clean_lines())):
        path = HERE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(HERE.parent)} ({len(lines)} lines)")


if __name__ == "__main__":
    main()
