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
from enum import StrEnum

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
# the config keys that set the logging interval (Megatron's, the Hugging Face Trainer's)
LOG_INTERVAL_KEYS: tuple[str, ...] = ("log_interval", "logging_steps")
# the Hugging Face Trainer's end of train(): the scalar it logs (TensorBoard) or puts in the summary (W&B)
TRAINER_DONE_KEYS: frozenset[str] = frozenset({"train_runtime", "train/train_runtime"})
TFLOPS_PER_GPU = "tflops_per_gpu"
SAMPLES_PER_SECOND = "samples_per_second"
TOKENS_PER_GPU_PER_SECOND = "tokens_per_gpu_per_second"
TOKENS_PER_SECOND = "tokens_per_second"  # the whole job's (nanoGPT forks' "tok/sec", nanochat's, torchtitan's "tps")
SKIPPED_SAMPLES = "skipped_samples"
EPOCH = "epoch"  # the fraction of the data seen (Hugging Face Trainer, Lightning, fairseq)

# in a source's tags (name as written -> metric), the run's own step key that became the step axis maps to this
STEP_AXIS = "(step axis)"  # never a metric's name

# a W&B chart export's __MIN/__MAX columns, kept where they differ from the plotted value: "<metric>__max"
MIN_SUFFIX = "__min"
MAX_SUFFIX = "__max"

# per-layer / per-parameter gradient norms (``parsers.metric_names.layer_grad_name``), one series per tag:
# "grad_norm/<group>/<layer>/<parameter>", <group> one of LAYER_GROUPS, <layer> the block index or "-" (embedding,
# output head, final norm), <parameter> the tag's own parameter or layer name (keeps two tags of one layer apart).
# The global GRAD_NORM is never one of them, and they never take its role.
LAYER_GRAD_PREFIX = "grad_norm/"
NO_LAYER = "-"
LAYER_GROUPS: tuple[str, ...] = ("embedding", "attention", "mlp", "norm", "block", "head", "other")


def layer_grad_metric(group: str, layer: int | None, parameter: str) -> str:
    """The canonical name of one per-layer grad-norm series.

    >>> layer_grad_metric("attention", 0, "transformer.blocks.0.att_proj.weight")
    'grad_norm/attention/0/transformer.blocks.0.att_proj.weight'
    """
    return f"{LAYER_GRAD_PREFIX}{group}/{NO_LAYER if layer is None else layer}/{parameter}"


def is_layer_grad(metric: str) -> bool:
    """Whether a metric name is a per-layer grad-norm series (see ``layer_grad_metric``).

    >>> is_layer_grad("grad_norm/mlp/3/layers.3.mlp"), is_layer_grad("grad_norm"), is_layer_grad("grad_norm__max")
    (True, False, False)
    """
    parts = metric.split("/", 3)
    return len(parts) == 4 and parts[0] + "/" == LAYER_GRAD_PREFIX and parts[1] in LAYER_GROUPS


# logits (Wortsman et al. 2023: attention-logit growth and output-logit divergence precede instabilities), read when a
# run logs them: the z-loss (log^2 Z of the output softmax, OLMo's train/ZLoss) and the largest attention logit
# (Megatron's log_max_attention_logit, the QK-clip statistic). Not in CANONICAL_METRICS: not needed by every check.
Z_LOSS = "z_loss"
MAX_ATTENTION_LOGIT = "max_attention_logit"
LOGIT_METRICS: tuple[str, ...] = (MAX_ATTENTION_LOGIT, Z_LOSS)
# a layer's own largest attention logits (``parsers.metric_names.layer_logit_name``), one series per tag:
# "max_attention_logit/<layer>/<statistic>", <statistic> the tag's own (``max``; ``max_p95``: the 95th percentile of
# the layer's logits, below their max). The run's max attention logit per step is their largest
# (``forensics.detectors.logits.attention_logits``) where it logs no MAX_ATTENTION_LOGIT of its own.
LAYER_LOGIT_PREFIX = MAX_ATTENTION_LOGIT + "/"


def layer_logit_metric(layer: int, statistic: str) -> str:
    """The canonical name of one layer's attention-logit series.

    >>> layer_logit_metric(11, "max_p95")
    'max_attention_logit/11/max_p95'
    """
    return f"{LAYER_LOGIT_PREFIX}{layer}/{statistic}"


def is_layer_logit(metric: str) -> bool:
    """Whether a metric name is one layer's attention-logit series (see ``layer_logit_metric``).

    >>> is_layer_logit("max_attention_logit/5/max_p95"), is_layer_logit("max_attention_logit")
    (True, False)
    """
    parts = metric.split("/")
    return len(parts) == 3 and parts[0] == MAX_ATTENTION_LOGIT and parts[1].isdigit()

# derived, never read from a log: the share of logged steps whose grad norm was above the clip threshold (the metric of
# a sustained-clipping finding, forensics.detectors.clipping)
CLIPPED_SHARE = "clipped_share"

CANONICAL_METRICS: tuple[str, ...] = (
    LOSS, GRAD_NORM, LR, LOSS_SCALE, SKIPPED_ITERATIONS, NAN_ITERATIONS, VAL_LOSS, VAL_PPL, BATCH_SIZE,
    CONSUMED_SAMPLES, CONSUMED_TOKENS, ITERATION_TIME_MS, PARAMS_NORM, NUM_ZEROS, LOG_INTERVAL, TFLOPS_PER_GPU,
    SAMPLES_PER_SECOND, TOKENS_PER_GPU_PER_SECOND, SKIPPED_SAMPLES,
)

# --- event kinds --------------------------------------------------------------------------------------------------
EV_PROCESS_START = "process_start"          # a new arguments block: a (re)start of the training program
EV_RELAUNCH = "relaunch"                    # a line that shows the program ran again right after it exited: argparse's
                                            # "usage: P ..." just after its "P: error: ..." (the one before exited 2)
EV_CHECKPOINT_LOAD = "checkpoint_load"      # value = iteration loaded
EV_NO_CHECKPOINT = "no_checkpoint"          # nothing to load: starts from random
EV_CHECKPOINT_SAVE = "checkpoint_save"      # a save the log says is done ("successfully saved"): value = iteration
EV_CHECKPOINT_SAVING = "checkpoint_saving"  # a save begun ("saving checkpoint at iteration N"): value = iteration;
                                            # done unless an error follows it before the next step (forensics.saves)
EV_MARKER = "marker"                        # "[after megatron is initialized] datetime: ..." and friends
EV_TRAINING_ENDED = "training_ended"        # the end of training as a structured log shows it, in its reader's words
                                            # (no line printed it): the Trainer's summary entry, a Lightning version's
                                            # planned last epoch ended, an MLflow run FINISHED; value as training_done
EV_TRAINING_DONE = "training_done"          # "[after training is done] datetime: ..."; value, where the program
# counted it: the seconds its training ran (the Hugging Face Trainer's train_runtime)
EV_EXIT = "exit"                            # planned exit: exit interval or duration, the end of its data
EV_PARAMETER_COUNT = "parameter_count"      # value = parameters (absolute count)
EV_PLANNED_STEPS = "planned_steps"          # a training header's planned length ("Total optimization steps =
                                            # 17,000", the Hugging Face Trainer's max_steps): value = the steps
EV_PARAMETER_COUNT_SHARD = "parameter_count_shard"  # one model-parallel rank's count (their sum: the next kind)
EV_PARAMETER_COUNT_SUM = "parameter_count_sum"  # the sum of the model-parallel ranks' counts, where no total is
                                            # printed: value = the sum, text = over how many ranks
EV_PARAMETER_COUNT_RANKS = "parameter_count_ranks"  # beside each such sum: value = how many ranks it sums
EV_PADDED_VOCAB = "padded_vocab"            # value = padded vocabulary size
EV_OVERFLOW = "overflow"                    # fp16 loss-scale overflow, value = new loss scale
EV_OVERFLOW_SCALE_KEPT = "overflow_scale_kept"  # an overflow that left the scale as it was ("Attempted loss scale:
                                            # 1, reducing to 1"): at its minimum, or DeepSpeed's hysteresis holding
                                            # it for an overflow or more; value = the scale (none where the
                                            # line says only that hysteresis held it: "Attempted loss scale:
                                            # 65536, but hysteresis is 2. Reducing hysteresis to 1")
OVERFLOW_KINDS = frozenset({EV_OVERFLOW, EV_OVERFLOW_SCALE_KEPT})  # every fp16 overflow line (a skipped step)
EV_OVERFLOW_ITERATION = "overflow_iteration"  # an fp16 overflow line that names the iteration it skipped (Apex's
                                            # and Megatron's "Grad overflow on iteration: 8"): a second event of
                                            # that line, beside its overflow kind; value = the iteration named
EV_OVERFLOW_STOP = "overflow_stop"          # the program stops on fp16 overflows (too many in a row, the scale
                                            # at its minimum): an error, whose cause the line names
EV_SKIPPED_COUNT = "skipped_count"          # DeepSpeed's running count of skipped steps ("step=N, skipped=M"):
                                            # value = M, step = N
EV_NAN_CHECK = "nan_check"                  # NaN/Inf check or rerun-machine message
EV_LOSS_MISSING = "loss_missing"            # iteration line without a loss: NaN/Inf or a fully skipped interval
EV_STALE_GRAD_NORM = "stale_grad_norm"      # grad norm repeated exactly while steps were skipped
EV_SKIP_RANGE = "skip_range"                # iterations skipped on purpose (--skip-train-iteration-range)
EV_OPTIMIZER_NOT_LOADED = "optimizer_not_loaded"  # a line that says the optimizer state was not loaded ("not
                                            # loading optimizer", "optimizer state not ..."): a second event of that
                                            # line, beside the one of its own kind (a checkpoint load, a warning)
EV_HARDWARE_NAMED = "hardware_named"        # a CUDA or NCCL error line that names the hardware itself (ECC, Xid): a
                                            # second event of that line, beside its own kind; never explained away as
                                            # what an out-of-memory before it brought on
EV_UNREACHABLE = "unreachable"              # a line that says a connection could not be made ("No route to host",
                                            # "Connection refused", a host name not resolved): a second event of
                                            # that line, beside its own kind (an error): a wrong address or the network
EV_NETWORK_DROPPED = "network_dropped"     # a request over the network that dropped ("Connection reset by peer", a
                                            # read that timed out, the remote end gone): a dataset streamed from a
                                            # hub, a remote store; said, not an error (the client may retry); also a
                                            # second event of an error line whose words say so
EV_NETWORK_ERROR = "network_error"          # an error a network client raised (a request it could not send or read,
                                            # its connection closed): a second event of that error line
EV_UPLOAD_DROPPED = "upload_dropped"        # a telemetry client's upload that dropped (W&B's file stream, MLflow):
                                            # nothing of the training's own data
EV_TRACEBACK = "traceback"
EV_SURVIVED_EXCEPTION = "survived_exception"  # "Exception ignored in: ...", "Exception in thread ...", "Error in
                                            # atexit._run_exitfuncs:": an exception
                                            # printed with its traceback that did not end the program
EV_ERROR = "error"                          # Python exception line (RuntimeError: ..., AssertionError: ...)
EV_CUDA_ERROR = "cuda_error"                # CUDA errors, ECC, Xid
EV_NCCL_ERROR = "nccl_error"                # NCCL errors (system, internal, unhandled CUDA, communicator aborted)
EV_COLLECTIVE_TIMEOUT = "collective_timeout"  # a collective timed out (NCCL watchdog): some rank stopped answering
EV_OOM = "out_of_memory"                    # GPU or host out of memory (CUDA OOM, the kernel's oom-killer)
EV_NCCL_OUT_OF_MEMORY = "nccl_out_of_memory"  # an out-of-memory line NCCL printed ("NCCL WARN Cuda failure 2 'out of
                                            # memory'": its own buffers could not be allocated): a second event of
                                            # that line, beside its out_of_memory
EV_OOM_RECOVERED = "out_of_memory_recovered"  # an out-of-memory the program caught: it skipped the batch, went on
EV_HOST_ERROR = "host_error"                # the machine: bus error (shared memory), node failure
EV_STORAGE_ERROR = "storage_error"          # a file could not be written or read: disk full, quota, I/O error, a
                                            # stale network mount, a failed write (a checkpoint save)
EV_SHARED_MEMORY_ERROR = "shared_memory_error"  # a storage error in the shared memory (/dev/shm, torch's "</torch_...>"
                                            # files): where DataLoader workers pass tensors (a container's --shm-size)
STORAGE_KINDS: frozenset[str] = frozenset({EV_STORAGE_ERROR, EV_SHARED_MEMORY_ERROR})
EV_KILLED = "killed"                        # killed by a signal (SIGKILL, "Killed")
EV_SIGTERM = "sigterm"                      # asked to stop (SIGTERM, a kill switch): the scheduler or a person
EV_CANCELLED = "cancelled"                  # the scheduler ended the job: scancel, srun abort (the line says not why)
EV_TIME_LIMIT = "time_limit"                # the scheduler ended the job at its time limit (slurm's DUE TO TIME LIMIT)
EV_PREEMPTED = "preempted"                  # the scheduler ended the job for another one (slurm's DUE TO PREEMPTION)
# the scheduler's word that it ended the job; the last two say why
SCHEDULER_STOP_KINDS: frozenset[str] = frozenset({EV_CANCELLED, EV_TIME_LIMIT, EV_PREEMPTED})
EV_INTERRUPT = "keyboard_interrupt"         # stopped by hand (Ctrl-C)
EV_SCHEDULER = "scheduler"                  # a scheduler notice: job pending, scheduled to start, not running
EV_STARTUP = "startup"                      # a start-up line: distributed init, random seeds, model build, launcher
EV_ROOT_CAUSE = "root_cause"                # torchrun's "Root Cause (first observed failure):" header: the error
                                             # quoted after it is the failing rank's own (its ChildFailedError wraps it)
EV_TRAINING_LOOP = "training_loop"          # a traceback frame inside a training loop (the Trainer's _inner_training_loop):
                                             # a training was running; after a training's end, the next one began
EV_STACK_DUMP = "stack_dump"                # a thread of a py-spy or faulthandler stack dump (someone looked at a hang)
EV_COLLECTIVE_WAIT = "collective_wait"      # a dumped frame waiting in a collective (broadcast, all_reduce, barrier)
EV_EXIT_CODE = "exit_code"                  # the exit code a wrapper recorded (W&B), value = the code
EV_SHUTDOWN = "shutdown"                    # a line a process prints as it exits (multiprocessing's resource_tracker:
                                            # "... leaked semaphore objects to clean up at shutdown"): it is gone
EV_TRUNCATED = "truncated_line"             # an iteration line cut short (damaged or wrapped file)
EV_STEP_REGRESSION = "step_regression"      # a scalar's step went back (TensorBoard, W&B): the run was restarted
EV_SESSION_START = "session_start"          # TensorBoard SessionLog.START (torch purge_step): the writer (re)started
EV_SESSION_STOP = "session_stop"            # TensorBoard SessionLog.STOP
EV_SESSION_CHECKPOINT = "session_checkpoint"  # TensorBoard SessionLog.CHECKPOINT
EV_SESSION_OTHER = "session_status_unspecified"  # TensorBoard SessionLog with no (or an unknown) status
EV_UNDECODABLE = "undecodable_record"      # TensorBoard: a record whose bytes are not an event
EV_DUPLICATE_STEP = "duplicate_step"        # TensorBoard: a tag logged twice at one step
EV_ELISION = "elision"                      # a pasted log's "..." line: output was left out there
EV_FILE_START = "event_file_start"          # TensorBoard: an event file's first record
EV_EVALUATION_PASS = "evaluation_pass"      # TensorBoard: a file of evaluation scalars only (Lightning's validate() or
                                            # test(), a Trainer's evaluate()): an evaluation, no training step
EV_WANDB_RUN_START = "wandb_run_start"      # a W&B run (or a resume of it) began: one per .wandb file
EV_PROGRESS = "progress_bar"              # a tqdm progress bar with no label ("  2%|▏   | 13/620 [01:07<50:20, 4.98s/it]"):
                                            # step = its count (13), value = its total (620); how far the loop it
                                            # counts got, and how far it was to go (forensics.attempts)
EV_LAST_TIMED_LINE = "last_timed_line"      # a text log's last line that prints a time: when its processes were
                                            # last heard from (a rank hanging on after another failed)
EV_SWEEP_JOB = "sweep_job"                  # a sweep launched its next job in the same process (Hydra's multirun:
                                            # "[HYDRA]        #3 : hidden_dim=1028"): value = its number (3), text =
                                            # its overrides as printed ("hidden_dim=1028"); the job before it had
                                            # returned

# errors, as the chronicle lists them; the hardware / infrastructure evidence among them
# formats whose logged loss is a mean over the iterations since the point before (Megatron's log interval, the
# Trainer's logging steps, MMEngine's window, fairseq's log interval, mlx-lm's steps per report); other formats log
# one iteration's loss, or (TensorBoard, W&B, MLflow, Lightning) whatever the program gave them: not known
# the formats whose times are instants, shown in UTC: Unix times, or (a step table's) stamps converted to UTC; the
# others' times are their stamps' digits as printed
UNIX_TIME_FORMATS: frozenset[str] = frozenset({"tensorboard", "wandb", "wandb-history", "mlflow", "step-table"})
INTERVAL_MEAN_FORMATS: frozenset[str] = frozenset({"megatron", "hf-trainer", "hf-trainer-state", "llamafactory",
                                                   "mmengine", "fairseq", "mlx-lm"})
ERROR_KINDS: frozenset[str] = frozenset({EV_ERROR, EV_CUDA_ERROR, EV_NCCL_ERROR, EV_COLLECTIVE_TIMEOUT, EV_OOM,
                                         EV_HOST_ERROR, *STORAGE_KINDS, EV_OVERFLOW_STOP})
# a fault of the hardware, its links or its storage, as the log names it
HARDWARE_KINDS: frozenset[str] = frozenset({EV_CUDA_ERROR, EV_NCCL_ERROR, EV_HOST_ERROR, *STORAGE_KINDS})
# ranks left waiting: some rank stopped answering (a lost node or link, or a rank that hung or failed on its own)
WAITING_KINDS: frozenset[str] = frozenset({EV_COLLECTIVE_TIMEOUT, EV_COLLECTIVE_WAIT})
INFRA_KINDS: frozenset[str] = HARDWARE_KINDS | WAITING_KINDS
# stopped from outside the program, or by its own plan: not a failure of the training
STOP_KINDS: frozenset[str] = frozenset({EV_EXIT, EV_SIGTERM, EV_INTERRUPT, *SCHEDULER_STOP_KINDS})
# events after which the program is gone (a later iteration line belongs to a new launch); the errors among them
# only when the iterations do not carry on right after them
# the events whose text their reader wrote (the chronicle does not quote it as a line of the log)
COMPOSED_KINDS: frozenset[str] = frozenset({EV_TRAINING_ENDED})
# the end of training, printed or read off a structured log
DONE_KINDS: frozenset[str] = frozenset({EV_TRAINING_DONE, EV_TRAINING_ENDED})
ENDING_KINDS: frozenset[str] = frozenset({EV_EXIT, *DONE_KINDS, EV_KILLED, EV_SIGTERM, EV_INTERRUPT,
                                          *SCHEDULER_STOP_KINDS})
FATAL_KINDS: frozenset[str] = ERROR_KINDS | {EV_NAN_CHECK}
# lines printed while a program starts: one after iterations or an ending begins a new launch
STARTUP_KINDS: frozenset[str] = frozenset({EV_STARTUP, EV_MARKER})
# lines that describe the setup (a size, a planned length), not anything the training did
SETUP_KINDS: frozenset[str] = frozenset({EV_PARAMETER_COUNT, EV_PLANNED_STEPS, EV_PADDED_VOCAB,
                                         EV_PARAMETER_COUNT_SHARD, EV_PARAMETER_COUNT_SUM, EV_PARAMETER_COUNT_RANKS})
# evidence that an attempt's start is in the logs (so its first timestamp is when it started)
START_KINDS: frozenset[str] = STARTUP_KINDS | {EV_PROCESS_START, EV_RELAUNCH, EV_WANDB_RUN_START, EV_SESSION_START,
                                               EV_FILE_START,
                                               EV_STEP_REGRESSION}

# --- config keys that describe a run rather than configure it (left out of config changes) ------------------------
SUMMARY_PREFIX = "summary/"   # a W&B run's final summary values
RUN_INFO_PREFIX = "wandb/"    # W&B runs-table system columns (State, Created, Runtime, ...)
RUN_STATE_KEY = f"{RUN_INFO_PREFIX}State"        # the state W&B recorded for a run (see RunState)
RUN_END_KEY = f"{RUN_INFO_PREFIX}End Time"       # when W&B recorded its end


class RunState(StrEnum):
    """W&B's run states (a runs-table export's State column)."""

    FINISHED = "finished"  # the program exited 0
    FAILED = "failed"      # it exited non-zero
    CRASHED = "crashed"    # it stopped sending heartbeats: the machine or the process died
    KILLED = "killed"      # stopped by a person
    RUNNING = "running"    # still running when the table was exported

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


def format_text(template: str, *columns: str | pl.Expr) -> pl.Expr:
    """``template``'s ``{}`` filled with the columns as text, like ``pl.format`` (built from ``concat_str``: polars
    2.1's ``pl.format`` panics on some filtered frames).

    >>> pl.DataFrame({"tag": ["loss"], "step": [7]}).select(format_text("{} at step {}", "tag", "step")).item()
    'loss at step 7'
    """
    pieces = template.split("{}")
    if len(pieces) != len(columns) + 1:
        raise ValueError(f"{template!r} has {len(pieces) - 1} placeholders for {len(columns)} columns")
    parts: list[pl.Expr] = []
    for n, piece in enumerate(pieces):
        if piece:
            parts.append(pl.lit(piece))
        if n < len(columns):
            column = columns[n]
            parts.append((pl.col(column) if isinstance(column, str) else column).cast(pl.String))
    return pl.concat_str(parts)


def coalesce_text(first: str, second: str) -> pl.Expr:
    """``pl.coalesce(first, second)`` for text columns, built so that no row copies a whole string buffer: polars
    2.1's ``coalesce`` (and ``when/then/otherwise``) of two text columns, one gathered by a join, copies the gathered
    column's buffer into every row (a 1 MB line in a 1,000-row frame cost 1 GB).

    >>> frame = pl.DataFrame({"a": ["x", None, None], "b": ["y", "z", None]})
    >>> frame.select(coalesce_text("a", "b")).to_series().to_list()
    ['x', 'z', None]
    """
    a, b = pl.col(first), pl.col(second)
    either = pl.concat_str(a, pl.when(a.is_null()).then(b), ignore_nulls=True)
    return pl.when(a.is_null() & b.is_null()).then(None).otherwise(either).alias(first)


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
    tags: dict[str, str] = field(default_factory=dict)  # each name as the source wrote it -> the metric it became
    counted_steps: bool = False  # it prints no step: its steps number its printed metrics lines 1, 2, ...
    bar_steps: bool = False  # it prints no step: its steps are derived, from the counts of the progress bar after each
                             # metrics line or from the logging interval its step-named checkpoint saves show
