"""The line formats of Megatron-LM, Megatron-DeepSpeed (BigScience and Microsoft) and DeepSpeed, as regexes.

See ``shared/reference/megatron-logs.md`` for the source of every pattern. Polars (Rust ``regex``) syntax.
"""

from __future__ import annotations

from parsers import schema as s

# launcher prefixes, stacked in any order: srun --label "0: ", torchrun --tee "[default7]:", pdsh "host: ". A pdsh
# host is stripped when the log names it in its "cmd = pdsh ... -w h1,h2" line, or when it looks like a host name
# (letters then a digit somewhere: "sd-2", "r7i4n1", "jean-zay-iam01"); words like "WARNING: " are never stripped.
SRUN_OR_TORCHRUN = r" *\d+: | *\[[A-Za-z_]+\d+\]: ?"  # srun --label right-aligns its numbers: "   0: "; a paste may indent
# what a paste into an issue or a doc puts in front of an iteration line: quote markers, a stray back-tick, a shell
# prompt (other lines keep theirs: Megatron prints "> building train, validation, and test datasets ...")
PASTE_MARKS = r"(?:\s*>+ ?|`+|\$ )*"
HOST_LIKE = r"[A-Za-z][\w-]*\d[\w.-]*: "  # pdsh writes "host: " (one space): the indentation after it is the line's
# what a launcher writes before each line of a rank's output, for the patterns anchored at a line's start
# ("localhost: [rank0]: ", "[default0]:", srun's "3: ")
RANK_PREFIX = rf"(?:(?:{HOST_LIKE}|localhost: )?(?:{SRUN_OR_TORCHRUN}))?"
PDSH_CMD = rb"cmd = pdsh [^\n]*?-w\s+(\S+)"

# patterns ending in _AFTER_PREFIX are anchored at the start of a line by the launcher-prefix pattern put before them
TIMESTAMP_AFTER_PREFIX = r"\s*\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)\]"
# a line that opens with a bare date (Python logging's "%(asctime)s ..."), and Megatron's print_datetime, which puts
# the time last: "[after megatron is initialized] datetime: 2021-08-08 01:00:51 ", as does slurm's
# "*** JOB 1809579 ON r8i3n1 CANCELLED AT 2021-05-23T08:45:57 ***"
BARE_TIMESTAMP_AFTER_PREFIX = r"\s*(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)(?:\s|$)"
# torch's glog-like stamp (its C++ warnings, NCCL's watchdog): "[rank0]:[E410 17:25:53.848336558 ProcessGroupNCCL.cpp:683]",
# its month (not zero-padded) and day, no year
GLOG_STAMP_AFTER_PREFIX = r"\s*(?:\[rank\d+\]:)?\[[EWIF](\d{1,2})(\d{2}) (\d{2}:\d{2}:\d{2})(\.\d{1,6})?\d* "
DATETIME_FIELD = r"(?:datetime:|CANCELLED AT) (\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)"
# the counter "iteration N/ M |"; an iteration line has only junk, a timestamp and/or fields before it (GPT-NeoX
# prints "samples/sec: 7.799 | " first)
# (argonne-lcf's Megatron-DeepSpeed prints its fields as key=value: "iteration=       1/  635782 | lm loss=11.16 |")
COUNTER_SEP = r"(?:\s+|\s*=\s*)"
ITERATION_CORE = r"iteration" + COUNTER_SEP + r"\d+\s*/\s*\d+\s*\|"
ITERATION = r"iteration" + COUNTER_SEP + r"(\d+)\s*/\s*(\d+)\s*\|"
COUNTER_CELL = r"iteration" + COUNTER_SEP + r"(\d+)\s*/\s*(\d+)\s*$"  # the counter's cell of a line split at '|'
# junk a damaged or coloured log leaves in front of a line: ANSI escapes, replacement characters, other non-ASCII
ANSI = r"\x1b\[[0-9;]*[A-Za-z]"  # a terminal colour or cursor code
JUNK = rf"(?:{ANSI}|[^\x00-\x7F])*"
# ... and the level and place a Python logger prints after the time ("[2024-09-16 22:59:19.287338][INFO]
# [training_log:661] - ", ezpz's format)
LOGGER_TAGS = r"(?:\[[A-Z]+\]\[[\w.]+:\d+\]\s*-\s)?"
LEADING = r"^" + PASTE_MARKS + JUNK + r"\s*(?:\[[^\]]*\])?" + LOGGER_TAGS
# a whole iteration line: junk, a timestamp, fields printed before the counter (GPT-NeoX), then the counter
ITERATION_LINE_AFTER_PREFIX = LEADING[1:] + r"\s*(?:[^|\[\]]*?:[^|]*\|\s*)*" + ITERATION_CORE
# groups: step, which set (the text naming it), key, value, PPL; "validation loss at iteration 20 on 320-sample
# draw from validation set | ...", "... loss at the end of training for test data | ..."
VALIDATION = (
    r"^\s*(?:validation\S*|\S+) loss at (?:iteration (\d+)(?: on ([^|]*?))?|"
    r"the end of training for (val|test) data) \|\s*([^|]+?) value: (\S+) \|(?:[^|]*? PPL: (\S+))?"
)
ARGS_START = r"^\s*-{8,} arguments -{8,}\s*$"
ARGS_END = r"^\s*-{8,} end of arguments -{8,}\s*$"
# an argument as Megatron prints it: "  name ......... value", the dots padding the name to 48 columns (none for a
# name that long). Other processes' output (DeepSpeed's environment report) may be glued in front of the name.
ARGS_CANDIDATE = r"^\s+[A-Za-z_]\w* |[A-Za-z_]\w* \.+(?: |$)"  # lines that may be one (decided by position later)
ARGS_LINE = r"(?:^\s*|\s\s)([A-Za-z_]\w*) \.+(?: (.*?))?\s*$"  # two spaces before: not a label's last word
# no dots: a name as long as the padding (48 columns; 32 in Megatron 1.x), then two spaces
ARGS_LONG_LINE = r"^\s+([A-Za-z_]\w*)\s{2,}(\S.*?)\s*$"
# GPT-NeoX ends each argument with whether the config set it: "num_layers ...... 12.........updated", the tag glued
# to a value that fills the column ("log_dir ...... /runs/x/logsupdated"); a block whose values end so is NeoX's
NEOX_ARG_TAG = r"(?:updated|default)\s*$"
NEOX_DOTTED_TAG = r"\.{3,}" + NEOX_ARG_TAG

# iteration-line keys -> canonical metric names (anything else is kept under a slug of its own name)
FIELD_NAMES: dict[str, str] = {
    "lm loss": s.LOSS,
    "lm-loss": s.LOSS,
    "lm_loss": s.LOSS,
    "grad norm": s.GRAD_NORM,
    "learning rate": s.LR,
    "loss scale": s.LOSS_SCALE,
    "number of skipped iterations": s.SKIPPED_ITERATIONS,
    "number of nan iterations": s.NAN_ITERATIONS,
    "global batch size": s.BATCH_SIZE,
    "consumed samples": s.CONSUMED_SAMPLES,
    "consumed tokens": s.CONSUMED_TOKENS,
    "skipped samples": s.SKIPPED_SAMPLES,
    "elapsed time per iteration (ms)": s.ITERATION_TIME_MS,
    "elapsed time per iteration (s)": s.ITERATION_TIME_MS,  # scaled by 1000 in the parser
    "params norm": s.PARAMS_NORM,
    "num zeros": s.NUM_ZEROS,
    "throughput per GPU (TFLOP/s/GPU)": s.TFLOPS_PER_GPU,
    "TFLOPs": s.TFLOPS_PER_GPU,
    "samples per second": s.SAMPLES_PER_SECOND,
    "samples/sec": s.SAMPLES_PER_SECOND,
    "tokens per gpu per second (tgs)": s.TOKENS_PER_GPU_PER_SECOND,
    "decoupled learning rate": "decoupled_lr",
    "energy per GPU (J/iter/GPU)": "energy_per_gpu_j",
    "power per GPU (W/GPU)": "power_per_gpu_w",
    "curriculum seqlen": "curriculum_seqlen",
    "actual seqlen": "actual_seqlen",
    "random ltd reserved length": "random_ltd_reserved_length",
    # argonne-lcf's Megatron-DeepSpeed (AuroraGPT) names its key=value fields with underscores
    "learning_rate": s.LR,
    "loss_scale": s.LOSS_SCALE,
    "grad_norm": s.GRAD_NORM,
    "number_of_skipped_iterations": s.SKIPPED_ITERATIONS,
    "number_of_nan_iterations": s.NAN_ITERATIONS,
    "global_batch_size": s.BATCH_SIZE,
    "consumed_samples": s.CONSUMED_SAMPLES,
    "consumed_tokens": s.CONSUMED_TOKENS,
    "elapsed_time_per_iteration_ms": s.ITERATION_TIME_MS,
    "samples_per_second": s.SAMPLES_PER_SECOND,
    "tokens_per_gpu_per_second_tgs": s.TOKENS_PER_GPU_PER_SECOND,
    "[LM]TFLOPs": s.TFLOPS_PER_GPU,
    "actual_seqlen": "actual_seqlen",
}
SECONDS_KEYS = ("elapsed time per iteration (s)",)

# the error that ends a traceback logged as a Python list on one line (group 1), as :data:`EVENT_PATTERNS` reads it
# (the list may reach over several lines: a source line it quotes can hold a line break)
# (Python quotes an element that holds a ' with ": "KeyError: 'input_ids'\n": group 2 then)
_LISTED_NAME = r"(?:[A-Za-z_][\w.]*\.)?\w*(?:Error|Exception|StopIteration|Interrupt|Exit)\b"
LISTED_ERROR = rf"', (?:'({_LISTED_NAME}[^']*?)\\n'|\"({_LISTED_NAME}[^\"]*?)\\n\")\]\s*$"

# One regex per event kind; the first that matches a line wins. Group 1, when present, is the event's value.
_COLLECTIVES = r"(?:broadcast\w*|all_reduce\w*|all_gather\w*|reduce_scatter\w*|all_to_all\w*|barrier|reduce|gather|scatter)"
# slurm's own stop line ("slurmstepd: error: *** JOB 1 ON g002 CANCELLED AT ..."), found glued onto another line too
SLURM_STOP = r"slurmstepd: error: \*\*\* (?:JOB|STEP) .*(?:CANCELLED AT|DUE TO TIME LIMIT|DUE TO PREEMPTION)"
# a network request that dropped (parsers.schema.EV_NETWORK_DROPPED), a telemetry client's upload among them
# (EV_UPLOAD_DROPPED), and the words of an error a network client raised (EV_NETWORK_ERROR)
NETWORK_DROPPED = (r"Connection reset by peer|RemoteDisconnected|Read timed out|IncompleteRead|ChunkedEncodingError"
                   r"|Connection aborted|Max retries exceeded with url")
UPLOAD_DROPPED = r"(?i)(?:wandb|file_stream|mlflow|comet_ml|neptune).*(?:" + NETWORK_DROPPED + ")"
NETWORK_ERROR = r"(?i)\brequest|connection|https?\b|socket|urllib|\bssl\b|remote end|\bhub\b"
EVENT_PATTERNS: list[tuple[str, str]] = [
    (s.EV_CHECKPOINT_LOAD, r"(?:loading|loaded) (?:distributed |release )?checkpoint from .*? at iteration (\d+)"),
    (s.EV_CHECKPOINT_LOAD, r"\[Torch\] Loading checkpoint from .*?global_step(\d+)"),
    (s.EV_NO_CHECKPOINT, r"could not find the metadata file|will not load any checkpoints|Unable to find latest file"
                         r"|no checkpoint was found"),
    # a save begun (the line before the write: a full disk fails it after) and a save done
    (s.EV_CHECKPOINT_SAVE, r"successfully saved checkpoint (?:at|from) iteration\s+(\d+)"),
    (s.EV_CHECKPOINT_SAVING, r"saving checkpoint at iteration\s+(\d+)"),
    (s.EV_CHECKPOINT_SAVING, r"Saving model checkpoint: .*?global_step(\d+)"),
    (s.EV_CHECKPOINT_SAVING, r"Saving model checkpoint to \S*?checkpoint-(\d+)"),  # the Hugging Face Trainer
    # PyTorch Lightning's ModelCheckpoint (verbose): "Epoch 3, global step 400: 'val_loss' reached 0.31 (best 0.31),
    # saving model to '.../epoch=3-step=400.ckpt' as top 1", its global step the optimizer steps
    (s.EV_CHECKPOINT_SAVING, r"\bglobal step (\d+): .*?\bsaving model to '"),
    (s.EV_CHECKPOINT_SAVING, r"\bsaving model to '\S*?\bepoch=\d+-step=(\d+)(?:-v\d+)?\.ckpt'"),
    (s.EV_CHECKPOINT_SAVING, r"^saving checkpoint to \S"),  # nanoGPT's console: no step in the line
    (s.EV_ELISION, r"^\s*(?:\.{3,}|…|\[(?:\.{3}|…)\]|\((?:\.{3}|…)\))\s*$"),  # a paste's "...": lines left out
    # (torchrun's agent passes a signal it received on to its workers: "Received 15 death signal, shutting down
    # workers", then "SignalException: Process 9724 got signal: 15")
    # (Megatron's kill switch too: "Detected kill switch at ...", a file a person created to ask it to stop)
    (s.EV_SIGTERM, r"exiting program after receiving SIGTERM|(?i:received SIGTERM|SIGTERM received)"
                   r"|Signal 15 \(SIGTERM\) received|Received (?:15|Signals\.SIGTERM) death signal|got signal: 15\b"
                   r"|Detected kill switch"),
    # (SIGINT: Ctrl-C; a terminal echoes it as a line "^C")
    (s.EV_INTERRUPT, r"Received (?:2|Signals\.SIGINT) death signal|got signal: 2\b|^\s*\^C\s*$"),
    # SIGHUP: the terminal or session the launcher ran in went away (an ssh connection closed without nohup)
    (s.EV_KILLED, r"Received (?:1|Signals\.SIGHUP) death signal|got signal: 1\b"),
    (s.EV_EXIT, r"exiting program after (\d+(?:\.\d*)?) minutes"),  # value: the minutes it ran
    (s.EV_EXIT, r"exiting program at iteration \d+|exiting program after"),
    (s.EV_TRAINING_DONE, r"\[after training is done\]"),
    # Hydra's multirun launches its jobs one after the other in one process: "[...][HYDRA] \t#3 : hidden_dim=1028"
    (s.EV_SWEEP_JOB, r"\[HYDRA\]\s+#(\d+) : \S"),
    # the Hugging Face Trainer's summary at the end of train() (ms-swift prints it too); value: its train_runtime, the
    # seconds that train() call ran
    (s.EV_TRAINING_DONE, r"\{['\"]train_runtime['\"]: ['\"]?(\d+(?:\.\d*)?)"),
    # OLMo's "Training complete", torchtitan's "Training completed", the Trainer's "Training completed. Do not forget
    # to share your model"
    # (a logger's whole message, not a stage of a pipeline: "Stage 1 of 2: Training complete.")
    (s.EV_TRAINING_DONE, r"(?:\bINFO\W+|^\W*)Training complete(?:d)?(?:[.!]|\s*$)"),
    (s.EV_MARKER, r"^\s*\[[^\]]+\] datetime: "),
    (s.EV_PARAMETER_COUNT, r"number of parameters on \((?:tensor, )?(?:gtp_weight_remat, )?pipeline\) model parallel "
                           r"rank \([\d, ]+\): (\d+)"),
    (s.EV_PARAMETER_COUNT, r"number of parameters on model parallel rank \d+\s*:?\s+([\d.]+)"),
    (s.EV_PARAMETER_COUNT, r"Total number of parameters in billions:\s*([\d.]+)"),
    # DeepSpeed's pipeline engine: UNIQUE_PARAMS counts a tied embedding once, TOTAL_PARAMS once per stage holding it
    (s.EV_PARAMETER_COUNT, r"UNIQUE_PARAMS=(\d+)"),
    (s.EV_PARAMETER_COUNT, r"TOTAL_PARAMS=(\d+)"),
    (s.EV_PARAMETER_COUNT, r"estimated model parameters:\s*([\d.]+)"),
    (s.EV_PADDED_VOCAB, r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)"),
    # the program gives up on fp16 overflows: GPT-NeoX's overflow monitor, DeepSpeed's scale at its minimum
    (s.EV_OVERFLOW_STOP, r"Skipped (\d+) iterations in a row due to Overflow|Current loss scale already at minimum"),
    # DeepSpeed: "[deepspeed] OVERFLOW! Rank 0 Skipping step", its fused optimizer's "Overflow detected. Skipping
    # step", "fp16 dynamic loss scale overflow! Skipping step"; Megatron, Apex
    (s.EV_OVERFLOW, r"(?:OVERFLOW!|loss scale overflow!|Grad overflow on iteration|Overflow detected\. Skipping step)"
                    r".*?(?:reducing to (\d+(?:\.\d*)?))?$"),
    # Apex's amp: "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0" (its scaler's
    # number, then the scale it set, down to 1e-205 when every step overflows)
    (s.EV_OVERFLOW, r"Gradient overflow\.\s+Skipping step, loss scaler \d+ reducing loss scale to "
                    r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"),
    # DeepSpeed's progress line every steps_per_print: "[Rank 0] step=2500, skipped=1586, lr=[...], mom=[...]"
    (s.EV_SKIPPED_COUNT, r"\bstep=\d+, skipped=(\d+)"),
    (s.EV_NAN_CHECK, r"found (?:NaN|Inf) in|Unexpected result|Bad grad_norm detected|Need to rerun step"
                     r"|(?:First|Second) rerun:|Possible (?:transient|persistent) error|Spiky loss"
                     r"|found unexpected large grads|loss is nan|Loss is NaN"
                     # detectron2's anomaly check (not scikit-learn's "Input contains NaN": bad input data says it too)
                     r"|Loss became infinite or NaN at iteration=\d"),
    (s.EV_SKIP_RANGE, r"Skipped iterations (\d+) to \d+"),
    # (torch's DataParallel re-raises a replica's error as "RuntimeError: Caught RuntimeError in replica 0 on device 0."
    # then "Original Traceback (most recent call last):" and the error itself: the wrapper says nothing of its own)
    # a traceback logged as a Python list on one line (Megatron's "WARNING:megatron.core.utils:" then
    # "['Traceback (most recent call last):\n', '  File ...', 'StopIteration\n']"): its last element is the error
    (s.EV_ERROR, LISTED_ERROR),
    (s.EV_TRACEBACK, r"Traceback \(most recent call last\)|Caught \w+ in replica \d+ on device \d+\."),
    (s.EV_ROOT_CAUSE, r"^\W*Root Cause \(first observed failure\):"),
    # Python's word that the traceback after it did not end the program (a destructor's, another thread's)
    (s.EV_SURVIVED_EXCEPTION, r"^\W*(?:Exception (?:ignored in\b|in thread\b)|Error in atexit\._run_exitfuncs:)"),
    # py-spy ("Thread 12 (active): ...") and faulthandler ("Thread 0x7f... (most recent call first):") dumps
    (s.EV_STACK_DUMP, r"^\s*(?:Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:active|idle)[^)]*\)|(?:Current thread|Thread) "
                      r"0x[0-9A-Fa-f]+ \(most recent call first\):|Stack \(most recent call first\):"
                      r"|Timeout \(\d+:\d\d:\d\d\)!)"),
    # a dumped frame inside a collective: py-spy "    broadcast (torch/distributed/distributed_c10d.py:1191)",
    # faulthandler '  File ".../distributed_c10d.py", line 2420 in barrier' (a traceback has ', in barrier')
    (s.EV_COLLECTIVE_WAIT, r"^\s+" + _COLLECTIVES + r" \(\S*distributed_c10d\.py:\d+\)"
                           r"|distributed_c10d\.py\", line \d+ in " + _COLLECTIVES + r"\s*$"),
    (s.EV_HOST_ERROR, r"(?i)bus error|NODE[_ ]FAIL|DUE TO NODE FAILURE|node failure"),
    # torch.save's "RuntimeError: [enforce fail at inline_container.cc:858] . PytorchStreamWriter failed writing file
    # data/19: file write failed" (the disk full, a quota, an I/O error: its zip writer does not say which)
    (s.EV_STORAGE_ERROR, r"(?i)No space left on device|Disk quota exceeded|Input/output error|Stale file handle"
                         r"|PytorchStreamWriter failed writing|file write failed"),
    # caught and survived: fairseq's "WARNING: ran out of memory on GPU #2, skipping batch", "attempting to recover
    # from OOM in forward/backward pass", "OOM in all workers, skipping update"; Composer's automatic microbatching
    # ("device_train_microbatch_size: auto"), which halves the microbatch and trains the batch again: "RuntimeWarning:
    # CUDA out of memory detected. Train microbatch size will be decreased from 1024 -> 512."
    (s.EV_OOM_RECOVERED, r"(?i)(?:ran out of memory|\bOOM\b).*skipping (?:batch|step|update)"
                         r"|attempting to recover from OOM|Train microbatch size will be decreased from \d+ -> \d+"),
    (s.EV_OOM, r"(?i)out of memory|OutOfMemoryError|oom-kill|OOM when allocating tensor"),  # (the last: TensorFlow's)
    # a collective that timed out says only that some rank did not reach it (the watchdog's own lines; the word, not
    # a C++ frame's "c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(...)")
    (s.EV_COLLECTIVE_TIMEOUT, r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*\b[Tt]imed? ?out"
                              r"|NCCL operations have failed or timed out|watchdog got stuck for \d+ seconds"),
    # NCCL's "invalid usage" is the program calling it wrongly (mismatched collectives, a bad communicator); its
    # "NCCL WARN Duplicate GPU detected : rank 0 and rank 7 both on CUDA device 3000" is the launch putting two ranks
    # on one GPU (each rank's device not set from its local rank), which NCCL then fails on ("internal error")
    (s.EV_ERROR, r"ncclInvalidUsage|NCCL error.*invalid usage|NCCL WARN Duplicate GPU detected"),
    (s.EV_NCCL_ERROR, r"NCCL error|nccl(?:Internal|System|UnhandledCuda)Error|NCCL communicator was aborted"),
    # a cuBLAS / cuDNN status error is a library call failing (bad shapes, NaN inputs, memory), not evidence of
    # the hardware
    (s.EV_ERROR, r"\[?(?i:cuBLAS|cuDNN|CUBLAS_STATUS|CUDNN_STATUS)\w*[ _:]+(?i:error)"),
    # CUDA errors that name a bug or a setting: a kernel's own assertion (an index out of range), a build for
    # another GPU
    (s.EV_ERROR, r"\.cu:\d+: .*Assertion `.*` failed"),
    (s.EV_ERROR, r"CUDA error: (?:device-side assert triggered|invalid device ordinal|no kernel image is available"
                 r"|invalid configuration argument|misaligned address|operation not supported on global/shared)"),
    (s.EV_CUDA_ERROR, r"CUDA error|cudaError\w*|c10::CUDAError|(?i:uncorrectable ECC|ECC error)|\bXid\b"),
    # the launcher's word on a process (DeepSpeed): a wrapper's exit code, which only speaks when nothing printed does
    (s.EV_EXIT_CODE, r"exits with return code = (-?\d+)"),
    # a wrapper script's and pdsh's word on the job as a whole: "RC=1 RUN_ID=...", "ssh exited with exit code 1"
    (s.EV_EXIT_CODE, r"^RC=(-?\d+)\b"),
    (s.EV_EXIT_CODE, r"\bssh exited with exit code (-?\d+)"),
    (s.EV_TIME_LIMIT, r"DUE TO TIME LIMIT"),
    (s.EV_PREEMPTED, r"DUE TO PREEMPTION"),
    (s.EV_CANCELLED, r"CANCELLED AT|srun: Job step aborted"
                     r"|srun: forcing job termination"),
    (s.EV_SCHEDULER, r"scheduled to start|won't start|will not start|not RUNNING or SCHEDULED|\bPULSE: "
                     r"|queued and waiting for resources|has been allocated resources"),
    # ranks' output interleaves: "KeyboardInterruptresult.wait()"
    (s.EV_INTERRUPT, r"^" + RANK_PREFIX + r"\s*KeyboardInterrupt"),
    # (not the launcher's "sigkill_handler] Killing subprocess": it cleans up after another ending)
    (s.EV_KILLED, r"(?i)killed by signal|\bSIGKILL\b|exitcode\s*:\s*-9\b|^\s*Killed\s*$"),
    # multiprocessing's resource tracker as its process exits: "UserWarning: resource_tracker: There appear to be 56
    # leaked semaphore objects to clean up at shutdown" (one per process: each has its own tracker)
    (s.EV_SHUTDOWN, r"resource_tracker: There appear to be \d+ leaked \w+ objects to clean up at shutdown"),
    # torchrun's word on a worker: "failed (exitcode: -6) local_rank: 1", "exitcode  : -6 (pid: 3016739)"
    (s.EV_EXIT_CODE, r"\bexitcode\s*:\s*(-?\d+)\b"),
    # argparse refusing the command line: "train_bash.py: error: argument --fp16: invalid choice: ..." (after its
    # "usage:" lines; the program exits with status 2 before it does anything)
    (s.EV_ERROR, r"^[\w.-]+: error: (?:argument |unrecognized arguments: |the following arguments are required: "
                 r"|one of the arguments )"),
    # OLMo's "CRITICAL [olmo.util:158, rank=0] Uncaught OLMoThreadError: generator thread data thread 3 failed"
    (s.EV_ERROR, r"\bUncaught (?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception)\b"),
    (s.EV_ERROR, r"^" + RANK_PREFIX + r"\s*:?\s*(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]*(?:Error|Exception)(?::|$)"
                 r"|^" + RANK_PREFIX + r"\s*Fatal Python error:"),
    # a network request that dropped, where no error pattern above took the line (a client's warning as it retries:
    # "'[Errno 104] Connection reset by peer' thrown while requesting GET https://huggingface.co/datasets/...")
    (s.EV_UPLOAD_DROPPED, UPLOAD_DROPPED),
    (s.EV_NETWORK_DROPPED, NETWORK_DROPPED),
    # start-up lines (after iterations or an ending, one of these begins a new launch)
    (s.EV_STARTUP, r"^\s*> initializing torch distributed|^\s*> initializing tensor model parallel with size"
                   r"|^\s*> setting random seeds to|^\s*using world size: \d+|^\s*> building \S+ model"
                   r"|^\s*> compiling dataset index builder|initializing model parallel cuda seeds"
                   r"|\[launch\.py:\d+:main\] WORLD INFO DICT|Setting OMP_NUM_THREADS environment variable"
                   r"|Initializing TorchBackend in DeepSpeed|\[runner\.py:\d+:main\] cmd = "),
]
# the same line's step (DeepSpeed's own: it counts skipped ones) and its first param group's LR, the canonical one
DEEPSPEED_LR = r"\bstep=(\d+), skipped=\d+, lr=\[?\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
# a training script's header ("***** Running training *****", as the Hugging Face Trainer and the scripts that copy it
# print) and DeepSpeed's config print: how many steps the script plans, of how many batches each, and how many
# batches DeepSpeed accumulates into one of its steps ("[config.py:999:print]   gradient_accumulation_steps .. 2")
PLANNED_STEPS = r"^\s*Total optimization steps = (\d+)\s*$"
SCRIPT_ACCUMULATION = r"^\s*Gradient Accumulation steps = (\d+)\s*$"
DEEPSPEED_ACCUMULATION = r"\[config\.py:\d+:print\]\s+gradient_accumulation_steps \.+ (\d+)\s*$"
# one rank's parameter report, as many times as a line holds them (ranks' output interleaves)
RANK_COUNT = r"model parallel rank (?:\([\d, ]+\)|\d+)\s*:?\s*\d+"  # "(0, 1): 805433344"; older: "0: 125262336"
# the kinds whose group-1 value is an iteration number (the event's step)
# a tqdm bar with no label before its percentage (the Hugging Face Trainer's training bar, a plain training loop's):
# group 1 its count, group 2 its total ("  2%|▏         | 13/620 [01:07<50:20,  4.98s/it]"); a labelled bar ("Map: 100%|",
# "Loading checkpoint shards: 50%|") counts something else. A line may hold several (redrawn in place): the last is read
PROGRESS_BAR = r"(?:^|[^\w:\s])\s*\d{1,3}%\|[^|]*\|\s*(\d+)/(\d+) \[[\d:]+<"
PROGRESS_BAR_ANYWHERE = r"\d{1,3}%\|[^|]*\|\s*\d+/\d+ \[[\d:]+<"  # (a quick test before the exact one)

STEP_VALUED = frozenset({s.EV_CHECKPOINT_LOAD, s.EV_CHECKPOINT_SAVE, s.EV_CHECKPOINT_SAVING, s.EV_SKIP_RANGE})
# a storage error in the shared memory (parsers.schema.EV_SHARED_MEMORY_ERROR)
SHARED_MEMORY = r"</torch_|/dev/shm|shared memory"
# DeepSpeed's overflow line: the scale it tried and the one it set (the same: parsers.schema.EV_OVERFLOW_SCALE_KEPT)
ATTEMPTED_SCALE = r"Attempted loss scale: ([\d.]+(?:[eE][-+]?\d+)?), reducing to ([\d.]+(?:[eE][-+]?\d+)?)"
# the job a Hydra sweep launched: its number and its overrides (parsers.schema.EV_SWEEP_JOB)
SWEEP_JOB = r"\[HYDRA\]\s+#(\d+) : (.*?)\s*$"
# the iteration an fp16 overflow line names (parsers.schema.EV_OVERFLOW_ITERATION): "Grad overflow on iteration: 8"
OVERFLOW_ITERATION = r"\biteration:? (\d+)"
# an out-of-memory line that NCCL printed (parsers.schema.EV_NCCL_OUT_OF_MEMORY)
NCCL_NAMED = r"\bNCCL\b"  # NCCL's own words ("NCCL WARN ..."), not ProcessGroupNCCL.cpp or an NCCL_ variable
# a CUDA or NCCL error that names the hardware itself (parsers.schema.EV_HARDWARE_NAMED)
NAMES_HARDWARE = r"(?i)\bECC\b|\bXid\b"
# a line that says a resume did not load the optimizer state (parsers.schema.EV_OPTIMIZER_NOT_LOADED)
NO_OPTIMIZER_STATE = (r"(?i)(not|without|skip\w*|no)\s+(loading\s+)?(the\s+)?optimi[sz]er(\s+state)?"
                      r"|optimi[sz]er state (not|was not)")
# a connection the program could not make (parsers.schema.EV_UNREACHABLE): torch's c10d store ("The client socket has
# failed to connect to 10.2.76.66:16500 (errno: 113 - No route to host)"), a refused or timed-out connection, a host
# name that does not resolve
UNREACHABLE = (r"(?i)No route to host|Connection refused|Network is unreachable|failed to connect to any network "
               r"address|Name or service not known|Temporary failure in name resolution")
# DeepSpeed's hysteresis holding the scale for an overflow ("OVERFLOW! Rank 0 Skipping step. Attempted loss scale:
# 65536, but hysteresis is 2. Reducing hysteresis to 1"): the scale kept, a step skipped, no scale it was reduced to
HYSTERESIS_HELD = r"Attempted loss scale: [\d.]+(?:[eE][-+]?\d+)?, but hysteresis is \d+"
# the group-1 value is in billions for these parameter-count patterns
BILLIONS = ("Billion", "in billions", "estimated model parameters")
MILLIONS = r"\d(?:\.\d+)?M\s*$"  # a count printed in millions ("number of parameters: 10.65M", nanoGPT)
