"""How an attempt ended: the first decisive line printed after its last iteration, quoted; else the trouble its loss
ended in; else what the log shows of it.

After the last iteration line, the first decisive line is the cause and what follows it is the consequence: other
ranks' tracebacks after an ECC error, NCCL errors once the scheduler's SIGTERM has killed the peers, the launcher's
``ChildFailedError``. A planned exit ("exiting program after 1190 minutes") is an exit, not a crash; a scheduler
cancel, a time limit or SIGTERM is a stop by the scheduler or a person; ``KeyboardInterrupt`` is an interruption by
hand; a stack dump is someone looking at a hang; a process's shutdown line after its last step, with nothing
decisive before it, says it exited, not why. An error after the last step the attempt was configured to reach
(a final checkpoint save that failed) came after its training: it completed, then the program failed. A wrapper's exit
code (W&B) only speaks when nothing the program printed does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from forensics.findings import Anomaly, EndReason, Kind, shown
from forensics.saves import save_events, saved_steps
from parsers import schema as s
from parsers.ranks import without_ranks_or_times

DECISIVE: dict[str, EndReason] = {
    **dict.fromkeys(s.DONE_KINDS, EndReason.COMPLETED),
    s.EV_EXIT: EndReason.EXITED,
    s.EV_SIGTERM: EndReason.STOPPED,
    s.EV_CANCELLED: EndReason.STOPPED,
    s.EV_TIME_LIMIT: EndReason.STOPPED,
    s.EV_PREEMPTED: EndReason.STOPPED,
    s.EV_INTERRUPT: EndReason.INTERRUPTED,
    s.EV_KILLED: EndReason.KILLED,
    s.EV_NAN_CHECK: EndReason.NAN,
    s.EV_STACK_DUMP: EndReason.HUNG,
    s.EV_COLLECTIVE_WAIT: EndReason.HUNG,
    **{kind: EndReason.CRASHED for kind in s.ERROR_KINDS},
}
# a stop printed after training was done or a planned exit: the program was stopped in what it did next
AFTER_TRAINING_STOPS: frozenset[str] = frozenset({s.EV_INTERRUPT, s.EV_SIGTERM, s.EV_KILLED, *s.SCHEDULER_STOP_KINDS})
QUOTE = 240  # characters of the deciding line kept


@dataclass
class Ending:
    """How one attempt ended (see the module docstring)."""

    reason: EndReason
    detail: str
    kind: str | None = None        # the deciding event's kind
    wall_time: float | None = None  # when the deciding line was printed
    step: int | None = None         # the last step logged before the deciding line (None: not known)
    failed_after: str | None = None  # completed, then the program failed on its way out: the error it printed
    stopped_after: str | None = None  # completed, then the program was stopped (by hand, the scheduler): its line
    stopped_after_how: EndReason | None = None  # how: interrupted, stopped, killed
    trouble: str | None = None      # the trouble the loss was already in when the deciding line was printed


_PROGRESS = re.compile(r"\d+/\d+ \[\d[^\]]*\]")  # a tqdm bar ("2905/25120 [2:12:37<17:37:09, 2.86s/it, loss=3.2]")


def quote(text: str | None) -> str:
    """A log line as the chronicle quotes it: without a progress bar printed before it on the same line, stripped and
    cut to ``QUOTE`` characters.

    >>> quote(" 12%|█▏  | 2905/25120 [2:12:37<17:37:09,  2.86s/it]WARNING:torch...:Received 1 death signal")
    'WARNING:torch...:Received 1 death signal'
    >>> quote("Epoch 0: 1%| 11/750 [05:05<5:36:58, 27.36s/it, loss=3.2, v_num=1]RuntimeError: CUDA error")
    'RuntimeError: CUDA error'
    >>> quote("RuntimeError: CUDA error 11/750 [05:05<5:36:58, 27.36s/it]")  # (nothing after the bar: kept whole)
    'RuntimeError: CUDA error 11/750 [05:05<5:36:58, 27.36s/it]'
    """
    text = (text or "").strip()
    bars = list(_PROGRESS.finditer(text))
    if bars and text[bars[-1].end():].strip():  # (a message after the last bar: the bars before it are left out)
        text = text[bars[-1].end():].strip()
    return text if len(text) <= QUOTE else text[: QUOTE - 1] + "…"


def _root_cause(events: pl.DataFrame, printed: pl.DataFrame, first: dict) -> dict:
    """The error quoted under torchrun's root-cause header after ``first`` in the same file (the first error line
    after that header), else ``first`` (a root cause with no Python error: its error_file <N/A>)."""
    header = events.filter((pl.col("kind") == s.EV_ROOT_CAUSE) & (pl.col("source") == first["source"])
                           & (pl.col("line").fill_null(0) > (first["line"] or 0)))
    if not header.height:
        return first
    after = int(header["line"].min())  # type: ignore[arg-type]
    quoted = printed.filter(pl.col("kind").is_in(list(s.ERROR_KINDS)) & (pl.col("source") == first["source"])
                            & (pl.col("line").fill_null(0) > after))
    return quoted.row(0, named=True) if quoted.height else first


def ending_block(events: pl.DataFrame, end_step: int | None, stepped: frozenset[str] = frozenset()) -> pl.DataFrame:
    """The decisive events printed after the attempt's last iteration (all of them when it logged none), in the order
    they were printed. An event's step is the last iteration printed before it, so those after the last iteration
    carry the last step; an event with no step came before the first iteration of a source that logs iterations
    (``stepped``), or from a console whose lines carry no step (a W&B run's output.log)."""
    decisive = events.filter(pl.col("kind").is_in([*DECISIVE, s.EV_TRACEBACK, s.EV_EXIT_CODE]))
    if end_step is not None:
        unplaced = pl.col("step").is_null() & ~pl.col("source").is_in(list(stepped))
        decisive = decisive.filter((pl.col("step") >= end_step) | unplaced)
    return decisive.sort("line", "wall_time", nulls_last=True, maintain_order=True)


def end_of(
    events: pl.DataFrame, anomalies: list[Anomaly], end_step: int | None, *, shows_start: bool, is_last: bool,
    next_index: int | None, target: int | None, last_loss_step: int | None = None, stepped: frozenset[str] = frozenset(),
    tested: bool = False,
) -> Ending:
    """How the attempt whose events and anomalies these are ended.

    ``shows_start``: its start-up is in the logs (so an error before any iteration is a failed start-up);
    ``target``: the last step it was configured to reach (train_iters; None: not known), reached when its last step
    is at or past it (an error after it then failed the program on its way out: it completed, then failed);
    ``next_index``: the attempt that followed it; ``last_loss_step``: its last step with a finite loss (a NaN after it
    is how the loss ended); ``stepped``: the sources that logged its steps; ``tested``: it logged a test evaluation
    at its last step (a program evaluates its test set once its training is done).
    """
    completed = target is not None and end_step is not None and end_step >= target
    block = ending_block(events, end_step, stepped) if events.height else events
    printed = block.filter(~pl.col("kind").is_in([s.EV_TRACEBACK, s.EV_EXIT_CODE])) if block.height else block
    swept = _next_sweep_job(events, printed, end_step, completed or tested)
    if swept is not None:
        return swept
    if printed.height and printed["kind"].is_in(list(s.DONE_KINDS)).any():
        # training done: a thread dump at its exit (another file's lines may come first) is no hang
        printed = printed.filter(~pl.col("kind").is_in([s.EV_STACK_DUMP, s.EV_COLLECTIVE_WAIT]))
    if printed.height:
        first = printed.row(0, named=True)
        if first["kind"] == s.EV_CANCELLED:  # srun's "Job step aborted" before slurm's line that says why
            why = printed.filter(pl.col("kind").is_in([s.EV_TIME_LIMIT, s.EV_PREEMPTED]))
            first = why.row(0, named=True) if why.height else first
        elif first["kind"] == s.EV_ERROR:
            # torchrun's ChildFailedError only wraps the failure: the error its "Root Cause (first observed failure)"
            # section quotes, in the same file, is the failing rank's own (the ranks it then stopped come before it)
            first = _root_cause(events, printed, first)
        reason = DECISIVE[first["kind"]]
        if reason == EndReason.CRASHED and end_step is None and shows_start:
            reason = EndReason.FAILED_STARTUP
        # when: the deciding line's time, else the first time printed after it on the way out (slurm's CANCELLED AT
        # after srun's untimed abort, the launcher's timed lines after ranks' untimed tracebacks)
        when = first["wall_time"] if first["wall_time"] is not None else _first_time_after(block, first)
        if reason == EndReason.CRASHED and completed:  # its last planned step ran: it failed on its way out (a final
            # checkpoint save, an evaluation), after its training
            return Ending(EndReason.COMPLETED, f"reached its last step ({end_step} of {target})", None, when,
                          first["step"], quote(first["text"]))
        failed, stopped = None, (None, None)
        if reason in (EndReason.COMPLETED, EndReason.EXITED):  # training done or stopped as planned (Keras's early
            # stopping), then the program failed on its way out (a next stage): an error after it, and for a completed
            # run the exit code a wrapper recorded not 0 (a shutdown's "Exception ignored" is printed by programs that
            # exit 0)
            after = _raised(events, printed.filter(pl.col("kind").is_in(list(s.ERROR_KINDS))
                                                   & (pl.col("line").fill_null(0) >= (first["line"] or 0))))
            codes = block.filter(pl.col("kind") == s.EV_EXIT_CODE)
            # (an exit code 0 a wrapper recorded says the errors did not end it)
            raised = not codes.height or (codes["value"] != 0).any()
            failed = quote(after["text"][0]) if after.height and raised else None
            # or stopped in what it did next (a later stage interrupted by hand, the job cancelled): not a failure,
            # but not the end its training line says either
            stops = printed.filter(pl.col("kind").is_in(list(AFTER_TRAINING_STOPS))
                                   & (pl.col("line").fill_null(0) > (first["line"] or 0)))
            if failed is None and stops.height:
                stop = stops.row(0, named=True)
                stopped = (quote(stop["text"]), DECISIVE[stop["kind"]])
        at = first["step"]
        if at is None and end_step is None:  # no metric logged: DeepSpeed's own count says how far it got
            counted = events.filter((pl.col("kind") == s.EV_SKIPPED_COUNT) & (pl.col("step") > 0)
                                    & (pl.col("line") < (first["line"] or 0)))
            at = int(counted["step"].max()) if counted.height else None  # type: ignore[arg-type]
        return Ending(reason, quote(first["text"]), first["kind"], when, at, failed, *stopped,
                      trouble=_trouble(reason, anomalies))
    if block.height and block.filter(pl.col("kind") == s.EV_TRACEBACK).height:
        first = block.filter(pl.col("kind") == s.EV_TRACEBACK).row(0, named=True)
        reason = EndReason.FAILED_STARTUP if end_step is None and shows_start else EndReason.CRASHED
        return Ending(reason, "a traceback with no error line after it in the log", s.EV_TRACEBACK,
                      first["wall_time"], first["step"])
    nan = next((a for a in anomalies if a.kind == Kind.NAN and (last_loss_step is None or last_loss_step <= a.end_step)),
               None)
    if nan is not None and nan.metric not in (None, s.LOSS) and last_loss_step is not None \
            and last_loss_step >= nan.step and not any(
                a.kind == Kind.ZERO_LOSS and a.end_step == last_loss_step for a in anomalies):
        # the grad norm NaN, the loss still finite after it went NaN (its updates skipped, or trouble to come: the
        # log does not tell): what went wrong, not how the attempt ended
        nan = None
    if nan is not None:
        # which series went NaN; a loss still finite where it did is said (an fp16 overflow skipped, or trouble to
        # come: the log does not tell which)
        what = "" if nan.metric in (None, s.LOSS) else f" ({nan.metric.replace('_', ' ')})"
        zero = next((a for a in anomalies if a.kind == Kind.ZERO_LOSS and a.end_step == last_loss_step), None)
        still = ("" if nan.metric in (None, s.LOSS) or last_loss_step is None or last_loss_step < nan.step
                 else (f"; the loss was logged as 0 at step {zero.step}" if zero.step == last_loss_step else
                       f"; the loss was logged as 0 from step {zero.step} to {last_loss_step}") if zero is not None
                 else f"; the loss was still finite at step {last_loss_step}")
        return Ending(EndReason.NAN, f"{nan.trouble}{what} from step {nan.step} to the end of its log (step {end_step})"
                      f"{still}" + _saved_before(events, nan.step))
    div = next((a for a in anomalies if a.kind == Kind.DIVERGENCE), None)
    if div is not None and completed:  # it ran its course: the divergence is what happened in it, not its end
        return Ending(EndReason.COMPLETED, f"reached the last iteration; its loss had diverged from step {div.step} "
                                           "and was not back by then")
    if div is not None and div.step == end_step:  # it rests on the log's last point: nothing after it to say more
        grad_nan = any(a.kind == Kind.NAN and a.metric == s.GRAD_NORM and a.step == end_step for a in anomalies)
        return Ending(EndReason.DIVERGED, f"at its last logged point (step {end_step}), with no point after it to show "
                      "whether the loss came back" + ("; its grad norm NaN there" if grad_nan else "")
                      + _saved_before(events, div.step))
    if div is not None:
        return Ending(EndReason.DIVERGED, f"from step {div.step}, not back by the end of its log (step {end_step})"
                      + _saved_before(events, div.step))
    codes = block.filter(pl.col("kind") == s.EV_EXIT_CODE) if block.height else block
    if codes.height:
        code = codes.row(-1, named=True)
        if code["value"] == 0:
            return Ending(EndReason.COMPLETED, quote(code["text"]), s.EV_EXIT_CODE, code["wall_time"], code["step"])
        return Ending(EndReason.CRASHED, quote(code["text"]) + "; no error in what the program printed",
                      s.EV_EXIT_CODE, code["wall_time"], code["step"])
    if completed:
        return Ending(EndReason.COMPLETED, "reached the last iteration")
    gone = (events.filter((pl.col("kind") == s.EV_SHUTDOWN) & (pl.col("step") >= end_step))
            if end_step is not None and events.height else None)
    later = (events.filter((pl.col("kind") != s.EV_SHUTDOWN) & (pl.col("line") > gone["line"].min()))
             if gone is not None and gone.height else None)
    # its processes printed their shutdown lines, and nothing after them (a save after one is more work): gone
    if gone is not None and gone.height and not later.height:  # type: ignore[union-attr]
        line = gone.row(0, named=True)
        return Ending(EndReason.SILENT_EXIT, quote(line["text"]), s.EV_SHUTDOWN, line["wall_time"], line["step"])
    cut = (events.filter((pl.col("kind") == s.EV_ELISION) & (pl.col("step") >= end_step))
           if end_step is not None and events.height else None)
    if cut is not None and cut.height:  # whoever pasted the log left out what followed (or the file was cut)
        said = cut["text"][0] or ""
        return Ending(EndReason.UNKNOWN if next_index is not None else EndReason.RUNNING,
                      "the log leaves out what followed its last step ("
                      + (f"{said})" if cut["value"][0] is not None else "a “...” line)"), s.EV_ELISION,
                      cut["wall_time"][0], step=int(cut["value"][0] if cut["value"][0] is not None else cut["step"][0]))
    if end_step is None:
        return _unnumbered(events, next_index) or Ending(EndReason.NO_TRAINING, "")
    if is_last or next_index is None:
        return Ending(EndReason.RUNNING, "still running, cut off, or stopped without a word" + _saved_after(events,
                                                                                                           end_step))
    return Ending(EndReason.UNKNOWN, f"attempt {next_index} started next" + _saved_after(events, end_step))


def _saved_after(events: pl.DataFrame, step: int) -> str:
    """"; its last trace: a checkpoint saved at step N, after its last logged step" (Lightning's
    ``epoch=19-step=1440.ckpt`` after a metrics.csv that logs every 50 steps, to 1399), when the attempt's logs show
    one."""
    if not events.height:
        return ""
    saves, _ = save_events(events)
    later = saves.filter(pl.col("at") > step)
    if not later.height:
        return ""
    done = later.filter(pl.col("kind") == s.EV_CHECKPOINT_SAVE)
    if done.height:
        return f"; its last trace: a checkpoint saved at step {done['at'].max():.0f}, after its last logged step"
    return (f"; its last trace: a checkpoint save begun at step {later['at'].max():.0f}, after its last logged step "
            "(no line says it finished)")


def _next_sweep_job(events: pl.DataFrame, printed: pl.DataFrame, end_step: int | None, done: bool) -> Ending | None:
    """How an attempt ended whose sweep launched its next job in the same process (Hydra's multirun) after its last
    step and before any decisive line: its job had returned by then, and what was printed after that launch (a
    Ctrl-C, an error) is a later job's, not this one's (a W&B run that later jobs re-use, logging nothing, ends with
    their ending). Completed when it reached its target or evaluated its test set at its last step (``done``), else
    its end is not known; None when no sweep job was launched after its last step."""
    if end_step is None or not events.height:
        return None
    jobs = events.filter((pl.col("kind") == s.EV_SWEEP_JOB) & (pl.col("step").is_null() | (pl.col("step") >= end_step)))
    if printed.height:
        first = printed.row(0, named=True)
        jobs = jobs.filter((pl.col("source") == first["source"]) & (pl.col("line") < (first["line"] or 0)))
    if not jobs.height:
        return None
    # each job by its number and its overrides (the parser's: parsers.schema.EV_SWEEP_JOB)
    labels = [f"{number:.0f} ({overrides})" for number, overrides in jobs.sort("line").select("value", "text").rows()
              if number is not None and overrides is not None]
    if not labels:
        return None
    seen = ", ".join(f"#{label}" for label in labels)
    said = (f"its test evaluation at its last logged step ({end_step}) was done" if done
            else f"no end printed after its last logged step ({end_step})")
    later = (f"; the “{quote(printed['text'][0])}” printed later came during #{labels[-1]}, not in this job"
             if printed.height else "")
    return Ending(EndReason.COMPLETED if done else EndReason.UNKNOWN,
                  f"{said}; then the sweep launched its next job in the same process (Hydra's {seen}){later}")


def _first_time_after(block: pl.DataFrame, first: dict) -> float | None:
    """The first wall time printed on the way out at or after the deciding line (the block is in printed order)."""
    rows = block.with_row_index("_at")
    at = rows.filter(pl.col("line").eq_missing(first["line"]) & pl.col("source").eq_missing(first["source"]))["_at"]
    later = rows.filter(pl.col("_at") >= (at[0] if at.len() else 0))["wall_time"].drop_nulls()
    return float(later[0]) if later.len() else None


def _unnumbered(events: pl.DataFrame, next_index: int | None) -> Ending | None:
    """How an attempt that logged no metric ended when its fp16 lines show it trained: overflow lines are steps,
    skipped ones (DeepSpeed's "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768"), and
    DeepSpeed's running count ("step=262, skipped=4") says how far it got; None without them."""
    over = events.filter(pl.col("kind").is_in(list(s.OVERFLOW_KINDS))) if events.height else events
    counts = events.filter((pl.col("kind") == s.EV_SKIPPED_COUNT) & pl.col("step").is_not_null()) \
        if events.height else events
    if not (over.height or counts.height):
        return None
    said = []
    if counts.height:
        last = counts.sort("step").row(-1, named=True)
        said.append(f"DeepSpeed's count reached step={last['step']}, skipped={last['value']:.0f}")
    if over.height:
        # (one skip can print two lines: "Grad overflow on iteration: 0", then "... reducing to 32768.0")
        # (each rank prints its copy of one skip, one after the other: "Rank 6 Skipping step", "Rank 4 ...")
        # (or prints them apart: "Grad overflow on iteration 8" three times between other lines names one iteration)
        same = without_ranks_or_times(pl.col("text"))
        ordered = over.sort("line", nulls_last=True).with_columns(same=same).filter(
            ~((pl.col("same") == pl.col("same").shift(1)) & (pl.col("line") - pl.col("line").shift(1) <= 1))
            .fill_null(False))
        # a line that names its iteration (the parser's second event of it: parsers.schema.EV_OVERFLOW_ITERATION) is
        # that iteration's overflow, whoever printed it and wherever: one per iteration named; a skip line near one
        # (before or after it) is that overflow's own
        iterations = events.filter(pl.col("kind") == s.EV_OVERFLOW_ITERATION).select("source", "line", it="value") \
            .unique(["source", "line"], keep="first")
        ordered = ordered.join(iterations, on=["source", "line"], how="left", maintain_order="left")
        named = ordered.filter(pl.col("it").is_not_null())
        rest = ordered.filter(pl.col("it").is_null())
        if named.height and rest.height:
            at, lines = np.sort(named["line"].drop_nulls().to_numpy()), rest["line"].fill_null(-(10**9)).to_numpy()
            nearest = np.minimum(np.abs(lines - at[np.clip(np.searchsorted(at, lines), 0, at.size - 1)]),
                                 np.abs(lines - at[np.clip(np.searchsorted(at, lines) - 1, 0, at.size - 1)]))
            rest = rest.filter(pl.Series(nearest > 6))
        # (a line without a scale is the first of two, its scale on the next: not one that kept the scale, such as
        # DeepSpeed's "Skipping step. Attempted loss scale: 65536, but hysteresis is 2", a skip of its own)
        paired = (rest["value"].is_null() & (rest["kind"] != s.EV_OVERFLOW_SCALE_KEPT)
                  & rest["value"].shift(-1).is_not_null()
                  & ((rest["line"].shift(-1) - rest["line"]) <= 3)).fill_null(False)
        n = named["it"].n_unique() + rest.height - int(paired.sum())
        scales = ordered["value"].drop_nulls()
        to = (f" (the loss scale reduced to {shown(scales[0])}" + (f", and at last to {shown(scales[-1])}"
                                                                   if scales[-1] != scales[0] else "") + ")"
              if scales.len() else "")
        said.append(f"{n} fp16 overflow{'s, each' if n != 1 else ','} a step skipped{to}")
    return Ending(EndReason.RUNNING if next_index is None else EndReason.UNKNOWN, "no metric logged, but " + "; ".join(said))


def _trouble(reason: EndReason, anomalies: list[Anomaly]) -> str | None:
    """The trouble the loss was already in when the line that ended the attempt was printed ("NaN from step 1")."""
    if reason in (EndReason.NAN, EndReason.COMPLETED, EndReason.EXITED):
        return None
    trouble = next((a for a in anomalies if a.kind == Kind.NAN and a.metric in (s.LOSS, s.GRAD_NORM)), None) or next(
        (a for a in anomalies if a.kind == Kind.DIVERGENCE), None)
    return f"{trouble.trouble} from step {trouble.step}" if trouble is not None else None


def _raised(events: pl.DataFrame, errors: pl.DataFrame) -> pl.DataFrame:
    """``errors`` without those Python printed as survived: an error after "Exception ignored in: ..." or
    "Exception in thread ..." (and no other error between) ended a destructor or a thread, not the program."""
    survived = np.sort(events.filter(pl.col("kind") == s.EV_SURVIVED_EXCEPTION)["line"].drop_nulls().to_numpy())
    if not survived.size or not errors.height:
        return errors
    lines = errors["line"].fill_null(0).to_numpy()
    before = np.concatenate([[-1], lines[:-1]])
    own = np.searchsorted(survived, lines) > np.searchsorted(survived, before, side="right")
    return errors.filter(pl.Series(~own))


def _saved_before(events: pl.DataFrame, step: int) -> str:
    """"; the last checkpoint saved before it: step N" (where a relaunch can roll back to), when the attempt's log
    shows a save before ``step``."""
    if not events.height:
        return ""
    saved = saved_steps(events)
    before = saved.filter(saved < step)
    return f"; the last checkpoint saved before it: step {before.max():.0f}" if before.len() else ""
