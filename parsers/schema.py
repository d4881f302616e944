"""Canonical frames and metric names shared by every parser and detector (the one place they are defined).

Three long-form frames describe a run:

* ``metrics``: one row per logged value: run, source, attempt, step, metric, value, wall_time. ``run``,
  ``source`` and ``metric`` are categorical (compare them with plain strings), so millions of rows stay small.
* ``events``: restarts, checkpoint loads/saves, overflows, NaN checks, errors: run, source, attempt, step, kind,
  value, line, wall_time, text.
* ``configs``: per-attempt configuration: run, source, attempt, key, value (as printed), typed (JSON of the
  typed value).

Attempts are numbered from 1 in the order the run made them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

# --- canonical metric names -------------------------------------------------------------------------------------
LOSS = "loss"
GRAD_NORM = "grad_norm"
LR = "lr"
LOSS_SCALE = "loss_scale"
SKIPPED_ITERATIONS = "skipped_iterations"
NAN_ITERATIONS = "nan_iterations"
VAL_LOSS = "val_loss"
VAL_PPL = "val_ppl"
BATCH_SIZE = "batch_size"
CONSUMED_SAMPLES = "consumed_samples"
CONSUMED_TOKENS = "consumed_tokens"
ITERATION_TIME_MS = "iteration_time_ms"
PARAMS_NORM = "params_norm"
NUM_ZEROS = "num_zeros"
LOG_INTERVAL = "log_interval"
TFLOPS_PER_GPU = "tflops_per_gpu"
SAMPLES_PER_SECOND = "samples_per_second"
TOKENS_PER_GPU_PER_SECOND = "tokens_per_gpu_per_second"
SKIPPED_SAMPLES = "skipped_samples"

# a W&B chart export's __MIN/__MAX columns, kept where they differ from the plotted value: "<metric>__max"
MIN_SUFFIX = "__min"
MAX_SUFFIX = "__max"

CANONICAL_METRICS: tuple[str, ...] = (
    LOSS, GRAD_NORM, LR, LOSS_SCALE, SKIPPED_ITERATIONS, NAN_ITERATIONS, VAL_LOSS, VAL_PPL, BATCH_SIZE,
    CONSUMED_SAMPLES, CONSUMED_TOKENS, ITERATION_TIME_MS, PARAMS_NORM, NUM_ZEROS, LOG_INTERVAL, TFLOPS_PER_GPU,
    SAMPLES_PER_SECOND, TOKENS_PER_GPU_PER_SECOND, SKIPPED_SAMPLES,
)

# --- event kinds --------------------------------------------------------------------------------------------------
EV_PROCESS_START = "process_start"          # a new arguments block: a (re)start of the training program
EV_CHECKPOINT_LOAD = "checkpoint_load"      # value = iteration loaded
EV_NO_CHECKPOINT = "no_checkpoint"          # nothing to load: starts from random
EV_CHECKPOINT_SAVE = "checkpoint_save"      # value = iteration saved
EV_MARKER = "marker"                        # "[after megatron is initialized] datetime: ..." and friends
EV_TRAINING_DONE = "training_done"          # "[after training is done] datetime: ..."
EV_EXIT = "exit"                            # deliberate exit: exit interval/duration, kill switch, SIGTERM handler
EV_PARAMETER_COUNT = "parameter_count"      # value = parameters (absolute count)
EV_PADDED_VOCAB = "padded_vocab"            # value = padded vocabulary size
EV_OVERFLOW = "overflow"                    # fp16 loss-scale overflow, value = new loss scale
EV_NAN_CHECK = "nan_check"                  # NaN/Inf check or rerun-machine message
EV_LOSS_MISSING = "loss_missing"            # iteration line without a loss: NaN/Inf or a fully skipped interval
EV_STALE_GRAD_NORM = "stale_grad_norm"      # grad norm repeated exactly while steps were skipped
EV_SKIP_RANGE = "skip_range"                # iterations skipped on purpose (--skip-train-iteration-range)
EV_TRACEBACK = "traceback"
EV_ERROR = "error"                          # Python exception line (RuntimeError: ..., AssertionError: ...)
EV_CUDA_ERROR = "cuda_error"
EV_NCCL_ERROR = "nccl_error"
EV_OOM = "out_of_memory"
EV_KILLED = "killed"                        # SIGTERM, kill switch, bus error
EV_TRUNCATED = "truncated_line"             # an iteration line cut short (damaged or wrapped file)

ERROR_KINDS: frozenset[str] = frozenset({EV_TRACEBACK, EV_ERROR, EV_CUDA_ERROR, EV_NCCL_ERROR, EV_OOM, EV_KILLED})
INFRA_KINDS: frozenset[str] = frozenset({EV_CUDA_ERROR, EV_NCCL_ERROR, EV_OOM, EV_KILLED})

# --- config keys that describe a run rather than configure it (left out of config changes) ------------------------
SUMMARY_PREFIX = "summary/"   # a W&B run's final summary values
RUN_INFO_PREFIX = "wandb/"    # W&B runs-table system columns (State, Created, Runtime, ...)

# --- frame schemas ------------------------------------------------------------------------------------------------
METRICS_SCHEMA: dict[str, pl.DataType] = {
    "run": pl.Categorical(), "source": pl.Categorical(), "attempt": pl.Int32(), "step": pl.Int64(),
    "metric": pl.Categorical(), "value": pl.Float64(), "wall_time": pl.Float64(),
}
EVENTS_SCHEMA: dict[str, pl.DataType] = {
    "run": pl.String(), "source": pl.String(), "attempt": pl.Int32(), "step": pl.Int64(), "kind": pl.String(),
    "value": pl.Float64(), "line": pl.Int64(), "wall_time": pl.Float64(), "text": pl.String(),
}
CONFIGS_SCHEMA: dict[str, pl.DataType] = {
    "run": pl.String(), "source": pl.String(), "attempt": pl.Int32(), "key": pl.String(), "value": pl.String(),
    "typed": pl.String(),
}


def empty(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """An empty frame with the given canonical schema."""
    return pl.DataFrame(schema=schema)


def conform(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Select and cast ``frame`` to ``schema`` (missing columns become nulls), in schema order."""
    return frame.select(
        [
            (pl.col(name) if name in frame.columns else pl.lit(None)).cast(dtype).alias(name)
            for name, dtype in schema.items()
        ]
    )


@dataclass
class ParsedLog:
    """What one Megatron text log holds, with attempts numbered locally from 1."""

    metrics: pl.DataFrame
    events: pl.DataFrame
    configs: pl.DataFrame
    warnings: list[str] = field(default_factory=list)
    n_attempts: int = 0
