"""MLX LM's training output: ``Iter 200: Train loss 2.913, Learning Rate 1.000e-05, It/sec 0.512, Tokens/sec 411.3,
Trained Tokens 160543, Peak mem 7.1 GB`` and ``Iter 200: Val loss 3.102, Val took 12.3s``; "Iter 800: Saved adapter
weights to ..." is a checkpoint save."""

from __future__ import annotations

import re

from parsers import schema as s
from parsers.console.engine import NUMBER, LineFormat, Rule

SPEC = LineFormat(
    FORMAT="mlx-lm",
    detect=re.compile(rb"\bIter \d+: (?:Train|Val) loss [-+\w.]+"),
    rules=(
        Rule(r"\bIter (\d+): Train loss ", {s.LOSS: rf"Train loss ({NUMBER})", s.LR: rf"Learning Rate ({NUMBER})",
                                            s.CONSUMED_TOKENS: rf"Trained Tokens ({NUMBER})"}),
        Rule(r"\bIter (\d+): Val loss ", {s.VAL_LOSS: rf"Val loss ({NUMBER})"}, per_step=False),
    ),
    # "Iter 800: Saved adapter weights to adapters/adapters.safetensors and adapters/0000800_adapters.safetensors."
    events=((s.EV_CHECKPOINT_SAVE, r"\bIter (\d+): Saved adapter weights to "),),
)
FORMAT, sniff, read, parse = SPEC.FORMAT, SPEC.sniff, SPEC.read, SPEC.parse
