"""Causes of how attempts ended that lie outside the training dynamics: hardware and infrastructure (only with their
evidence: ECC, Xid, CUDA or NCCL errors, host errors, a node named as failed), storage (a file the logs say could not
be written or read: a full disk, a quota, an I/O error), a rank that stopped answering (a collective timed out or
ranks stuck in one, with no error that says why), memory, stops by the scheduler or a person, interruptions by hand,
and errors in the program or its configuration."""

from __future__ import annotations

import re

import polars as pl

from forensics.endings import quote
from forensics.findings import Anomaly, Attempt, Cause, CauseKind, EndReason, Kind
from forensics.saves import saved_steps, saves_said
from parsers import schema as s
from parsers.ranks import same_line

NO_STEP_READ = "with no step read from its logs"  # (not "before any step": a log may show steps in a form no reader takes)


def _has(events: pl.DataFrame, *kinds: str) -> bool:
    """Whether any event is of one of ``kinds`` (a Series test: most logs have none of a kind, and a DataFrame
    query costs polars about 0.2 ms of planning whatever its size)."""
    return bool(events.get_column("kind").is_in(kinds).any())


def _after_first(events: pl.DataFrame, trigger: str, later: pl.DataFrame, same_step: pl.Expr) -> pl.DataFrame:
    """The rows of ``later`` printed after the first event of kind ``trigger`` in the same log and attempt, where
    ``same_step`` holds (an expression of their ``step`` and the trigger's, ``trigger_step``); callers check first
    that a ``trigger`` was printed."""
    first = (events.filter(pl.col("kind") == trigger).sort("line").group_by("attempt", "source")
             .agg(pl.col("line").first().alias("trigger_line"), pl.col("step").first().alias("trigger_step")))
    return later.join(first, on=["attempt", "source"]).filter(
        (pl.col("line") > pl.col("trigger_line")) & same_step).drop("trigger_line", "trigger_step")


def error_aftermath(events: pl.DataFrame) -> pl.DataFrame:
    """The NCCL errors printed after an error of the program or its set-up in the same log and attempt, at its step
    (or both before any): NCCL failing on what the error said (NCCL's "Duplicate GPU detected", two ranks on one GPU,
    then its "internal error"), or ranks seeing the failed one go. Consequences of that error, not evidence of a
    fault of the hardware."""
    same_step = ((pl.col("step").is_null() & pl.col("trigger_step").is_null())
                 | (pl.col("step") == pl.col("trigger_step")))
    if not _has(events, s.EV_ERROR):
        return events.clear()
    return _after_first(events, s.EV_ERROR, events.filter(pl.col("kind") == s.EV_NCCL_ERROR), same_step)


def _where(attempt: int | None, step: int | None, source: str | None = None, attempts: list[Attempt] | None = None,
           stepped: frozenset[str] = frozenset()) -> str:
    """Where a line was printed: its attempt and the last step before it. A line with no step in a log no metric was
    read from (``stepped``: the sources that were), beside one that logs the attempt's steps (a W&B run's output.log
    beside its history), is not before any iteration: where it fell among them is not known."""
    at = f"attempt {attempt}" if attempt is not None else "between attempts"
    if step is not None:
        return f"{at}, after step {step}"
    own = next((a for a in attempts or [] if a.index == attempt), None)
    if own is not None and own.end_step is not None and source is not None and source not in stepped:
        return f"{at}, in {source}, where no step was read (the attempt's steps end at {own.end_step})"
    return f"{at}, {NO_STEP_READ}"


def _trouble_before(attempt: Attempt, anomalies: list[Anomaly]) -> Anomaly | None:
    return next((a for a in anomalies if a.attempt == attempt.index and (
        (a.kind == Kind.NAN and a.metric in (s.LOSS, s.GRAD_NORM)) or a.kind == Kind.DIVERGENCE)), None)


def oom_aftermath(events: pl.DataFrame) -> pl.DataFrame:
    """The NCCL and CUDA errors printed after an out-of-memory in the same log and attempt (not one that names the
    hardware: ECC, Xid): a process out of GPU memory fails its next CUDA calls (NCCL's "unhandled cuda error"), and the
    ranks it talked to see it exit ("remote process exited"). Consequences of the out-of-memory, not evidence of a
    fault of the hardware: those printed at its step (before the log shows a later one)."""
    # (at the out-of-memory's step: an NCCL error iterations later, after the run went on, is not its consequence)
    same_step = pl.col("step").is_null() | pl.col("trigger_step").is_null() | (pl.col("step") == pl.col("trigger_step"))
    if not _has(events, s.EV_OOM):
        return events.clear()
    named = events.filter(pl.col("kind") == s.EV_HARDWARE_NAMED).select("attempt", "source", "line")
    errors = events.filter(pl.col("kind").is_in([s.EV_NCCL_ERROR, s.EV_CUDA_ERROR])).join(
        named, on=["attempt", "source", "line"], how="anti", nulls_equal=True)
    return _after_first(events, s.EV_OOM, errors, same_step)


def infrastructure(events: pl.DataFrame, attempts: list[Attempt], anomalies: list[Anomaly],
                   stepped: frozenset[str] = frozenset()) -> list[Cause]:
    """Hardware or infrastructure, with every piece of its evidence (ECC, Xid, CUDA or NCCL errors, host errors);
    storage when the only fault named is a file that could not be written or read (its own wording and check).
    Ranks left waiting with no such error in the logs (a collective that timed out, ranks stuck in one) are a weaker
    cause of their own: some rank stopped answering, and the log does not say why (a lost node or link, or a rank
    that hung or failed on its own). Against either, a loss already NaN or diverging before the error (then the
    error may be a consequence); against the waiting, an error printed before it (a rank that fails leaves the
    others waiting until the timeout). The NCCL and CUDA errors that follow an out-of-memory are not among its
    evidence (:func:`oom_aftermath`)."""
    waiting = set(events.get_column("attempt").filter(events.get_column("kind") == s.EV_COLLECTIVE_WAIT).to_list())
    stuck = [a for a in anomalies if a.kind == Kind.HANG and a.attempt in waiting]  # its dumps wait in a collective
    if not stuck and not _has(events, *s.INFRA_KINDS):  # (most logs: no fault printed)
        return []
    infra = events.filter(pl.col("kind").is_in(list(s.INFRA_KINDS))).join(
        pl.concat([oom_aftermath(events), error_aftermath(events)]),
        on=["attempt", "source", "line", "kind"], how="anti", nulls_equal=True)
    if not infra.height and not stuck:
        return []
    faulty = infra.filter(pl.col("kind").is_in(list(s.HARDWARE_KINDS)))
    faults = set(faulty["attempt"].to_list())
    # (an attempt that completed its steps, then failed on one of these on its way out, ended on it too: a final
    # checkpoint save that could not be written)
    after = {(a, quote(t)) for a, t in faulty.select("attempt", "text").rows()}
    on_it = {a.index for a in attempts if a.end_kind in s.INFRA_KINDS or (a.index, a.failed_after_training) in after}
    ended = on_it | {a.index for a in attempts if a.end_reason == EndReason.HUNG
                     and any(h.attempt == a.index for h in stuck)}
    evidence = [f"attempt {a.index} {a.end_reason.value.replace('_', ' ')} "
                + (f"after step {a.end_step}" if a.end_step is not None else NO_STEP_READ)
                + f": {a.end_detail}" for a in attempts if a.index in ended and a.end_kind in s.INFRA_KINDS]
    rows = infra.unique(["attempt", "kind", "text"], keep="first").sort("attempt", "line")
    evidence += [f"{_where(a, st, src, attempts, stepped)}: {quote(t)}"
                 for a, st, src, t in rows.select("attempt", "step", "source", "text").rows()
                 if not any(quote(t) in e for e in evidence)][:6]
    evidence += [f"attempt {a.attempt}, after step {a.step}: {a.detail}" for a in stuck[:2]]
    counter = []
    for att in attempts:
        trouble = _trouble_before(att, anomalies)
        if att.index in ended and trouble is not None:
            counter.append(f"attempt {att.index} was already {trouble.trouble} "
                           f"from step {trouble.step}, before the error: the error may follow from it")
    relaunched = [a.index for a in attempts if any(p.index < a.index and p.index in ended for p in attempts)]
    if not faults:
        return [_rank_stopped(events, infra, ended, evidence, counter, relaunched, attempts, stepped)]
    # an error that stopped training is stronger evidence than one at start-up (a driver, a busy GPU, a setting)
    errors = {a.index for a in attempts if a.index in ended & faults & on_it and a.end_step is not None}
    confidence = 0.8 if errors and not counter else 0.5 if ended & faults else 0.3
    if set(faulty["kind"].to_list()) <= s.STORAGE_KINDS:  # the only fault named is a file that failed
        return [Cause(
            kind=CauseKind.STORAGE,
            cause="storage: writing (or reading) a file failed: a full disk or shared memory, a quota, an I/O error "
                  "or a lost mount",
            confidence=confidence, evidence=evidence, counter_evidence=counter,
            # (torch's DataLoader workers pass tensors through /dev/shm: "unable to write to file </torch_...>: No
            # space left on device" is the shared memory, a container's --shm-size, not the checkpoint disk)
            check_next=("the shared memory /dev/shm (its size: a container's --shm-size), where the DataLoader's "
                        "workers pass tensors" if (faulty["kind"] == s.EV_SHARED_MEMORY_ERROR).any()
                        else "free space, quota and I/O errors on the file systems it writes to (its checkpoint "
                        "directory first)") + saves_said(events),
        )]
    check = "node health (ECC, Xid, NCCL timeouts) around those steps"
    if relaunched:
        check += f", and whether attempt {relaunched[0]} ran on the same node"
    return [Cause(
        kind=CauseKind.HARDWARE,
        cause="hardware or infrastructure failure",
        confidence=confidence,
        evidence=evidence,
        counter_evidence=counter,
        check_next=check,
    )]


def _rank_stopped(events: pl.DataFrame, waits: pl.DataFrame, ended: set[int], evidence: list[str], counter: list[str],
                  relaunched: list[int], attempts: list[Attempt], stepped: frozenset[str]) -> Cause:
    """Ranks waited in a collective (it timed out, or their dumps show them in it) and no error names a fault of
    the hardware: some rank stopped answering. An error printed before the first wait in the same log is the
    likelier start (a rank that raises leaves the others waiting)."""
    first = waits.group_by("attempt", "source").agg(pl.col("line").min().alias("first_wait"))
    before = events.filter(pl.col("kind").is_in([s.EV_ERROR, s.EV_OOM])).join(
        first, on=["attempt", "source"]).filter(pl.col("line") < pl.col("first_wait")).sort("attempt", "line")
    counter = counter + [f"{_where(a, st, src, attempts, stepped)}: {quote(t)} was printed before the wait: a rank "
                         "that fails leaves the others waiting in the collective until it times out"
                         for a, st, src, t in before.unique(["attempt", "text"], keep="first").sort("attempt", "line")
                         .select("attempt", "step", "source", "text").rows()[:2]]
    check = ("which rank never reached the collective: its own log for an error, a stack dump (py-spy) for a hang; "
             "then that node's health (ECC, Xid)")
    if relaunched:
        check += f", and whether attempt {relaunched[0]} ran on the same node"
    return Cause(
        kind=CauseKind.RANK_STOPPED,
        cause="a rank stopped answering in a collective (no hardware error in the logs says why)",
        confidence=(0.3 if ended else 0.2) if not counter else 0.15,
        evidence=evidence,
        counter_evidence=counter,
        check_next=check,
    )


_CUDA_OOM = re.compile(r"total capacity of ([\d.]+) ([GM])iB.*?this process has ([\d.]+) ([GM])iB memory in use")


def _held_by_itself(texts: list[str]) -> str | None:
    """From PyTorch's CUDA out-of-memory message, that the failing process itself held (nearly) all of the GPU's
    memory, as words; None when no message says so.

    >>> print(_held_by_itself(["CUDA out of memory. Tried to allocate 144.00 MiB. GPU 0 has a total capacity of 79.25 GiB "
    ...                        "of which 98.75 MiB is free. Including non-PyTorch memory, this process has 79.15 GiB "
    ...                        "memory in use."]))
    the process that failed held 79.15 GiB of the GPU's 79.25 GiB itself (its own message)
    """
    said = None
    for text in texts:  # (every message that gives the numbers must say so: another may name another process)
        if "out of memory" not in text.lower():
            continue
        found = _CUDA_OOM.search(text)
        if found is None:
            return None
        total, held = (float(v) * (1024 if unit == "G" else 1) for v, unit in (found.group(1, 2), found.group(3, 4)))
        if not (total > 0 and held >= 0.9 * total):
            return None
        said = said or (f"the process that failed held {found[3]} {found[4]}iB of the GPU's {found[1]} {found[2]}iB "
                        "itself (its own message)")
    return said


def memory(events: pl.DataFrame, attempts: list[Attempt], stepped: frozenset[str] = frozenset()) -> list[Cause]:
    """Out of memory, on the GPU or the host (``stepped``: the sources that log metrics, see :func:`_where`)."""
    if not _has(events, s.EV_OOM):
        return []
    ooms = events.filter(pl.col("kind") == s.EV_OOM).with_columns(same=same_line(pl.col("text"))).unique(
        ["attempt", "same"], keep="first").sort("attempt", "line")
    if not ooms.height:
        return []
    ended = [a for a in attempts if a.end_kind == s.EV_OOM]
    evidence = [f"{_where(a, st, src, attempts, stepped)}: {quote(t)}"
                for a, st, src, t in ooms.select("attempt", "step", "source", "text").rows()][:4]
    after_fault = [a for a in ended if any(p.index < a.index and p.end_kind in s.HARDWARE_KINDS for p in attempts)]
    if after_fault:
        evidence.append(f"attempt {after_fault[0].index} ran out of memory after an earlier attempt's hardware error: "
                        "a relaunch on the same faulty node can fail this way")
    followed = oom_aftermath(events).sort("attempt", "line").group_by("attempt", maintain_order=True).agg(
        pl.len(), pl.col("text").first())
    evidence += [f"attempt {a}: the {n} NCCL or CUDA error line{'s' if n > 1 else ''} printed after it in the same log "
                 f"(first: {quote(t)}) follow from it, not from the hardware: a process out of memory fails its next "
                 "CUDA calls, and the ranks it talked to see it exit" for a, n, t in followed.rows()]
    check = "memory per GPU (micro-batch, activation checkpointing, sequence length) and other processes on the node"
    if held := _held_by_itself(ooms["text"].to_list()):
        check = (f"memory per GPU (micro-batch, activation checkpointing, sequence length, the model's size per GPU): "
                 f"{held}, so no other process took it")
    # (the out-of-memory lines NCCL printed, parsers.schema.EV_NCCL_OUT_OF_MEMORY)
    nccl = {(a, quote(t)) for a, t in events.filter(pl.col("kind") == s.EV_NCCL_OUT_OF_MEMORY)
            .select("attempt", "text").rows()}
    if ended and all(a.end_step is None and (a.index, a.end_detail) in nccl for a in ended):  # no batch had run yet
        check = ("other processes on the node first (a previous launch still holding the GPUs: nvidia-smi): NCCL's own "
                 "allocation ran out of memory before any step was logged; then NCCL's buffers (NCCL_BUFFSIZE, for "
                 "each process group) and the model's size per GPU; micro-batch, activation checkpointing and "
                 "sequence length only if it failed in the first step")
    if after_fault:
        check += "; a relaunch that fails at start-up on a node that had a hardware error points at the node"
    return [Cause(kind=CauseKind.MEMORY, cause="out of memory", confidence=0.7 if ended else 0.3, evidence=evidence,
                  check_next=check)]


def stops(attempts: list[Attempt], anomalies: list[Anomaly], events: pl.DataFrame | None = None) -> list[Cause]:
    """Attempts stopped on purpose or from outside: by the scheduler or a person (cancel, time limit, SIGTERM), by
    the program itself as set up (a planned exit: its exit interval or duration, the end of its data), or by hand
    (Ctrl-C). Not failures; against it, trouble the loss was already in."""
    out = []
    last_save = _last_save(events)
    for reason, kind, cause in (
        ((EndReason.STOPPED,), CauseKind.STOPPED, "stopped by the scheduler or a person"),
        ((EndReason.EXITED,), CauseKind.PLANNED_EXIT, "a planned exit: the program stopped itself, as its own line says"),
        ((EndReason.INTERRUPTED,), CauseKind.INTERRUPTED, "interrupted by hand"),
    ):
        mine = [a for a in attempts if a.end_reason in reason]
        if not mine:
            continue
        counter = [f"attempt {a.index} was already {t.trouble} from step {t.step}"
                   for a in mine if (t := _trouble_before(a, anomalies)) is not None]
        # the scheduler said why: its time limit (slurm's "CANCELLED AT ... DUE TO TIME LIMIT")
        timed_out = kind == CauseKind.STOPPED and all(a.end_kind == s.EV_TIME_LIMIT for a in mine)
        if timed_out:
            cause = "the job's time limit: the scheduler stopped it, as its own line says"
        out.append(Cause(
            kind=kind, cause=cause,
            confidence=(0.9 if timed_out or kind == CauseKind.PLANNED_EXIT else 0.3) if not counter else 0.15,
            evidence=[f"attempt {a.index} ended " + (f"after step {max(a.end_step, a.end_at_step or 0)}"
                                                     if a.end_step is not None else NO_STEP_READ)
                      + f": {a.end_detail}" for a in mine][:6],
            counter_evidence=counter,
            check_next="the stop came after the trouble: look at the trouble, not the stop" if counter
            else f"nothing failed here; the last checkpoint saved in the logs is at step {last_save:.0f}"
            if last_save is not None else "nothing failed here; no checkpoint save appears in the logs",
        ))
    return out


def _last_save(events: pl.DataFrame | None) -> float | None:
    """The step of the last checkpoint saved in the logs (where a relaunch can resume), if any."""
    if events is None or not events.height:
        return None
    saved = saved_steps(events)
    return saved.max() if saved.len() else None  # type: ignore[return-value]


def _network_dropped(events: pl.DataFrame | None, attempts: list[Attempt]) -> dict[int, str]:
    """Per attempt, the network request that dropped, quoted: the error that ended it when that line is itself a
    dropped request ("ConnectionResetError: [Errno 104] Connection reset by peer"), else the last drop printed after
    its last logged step and before that error, when the error is a network client's ("Cannot send a request, as the
    client has been closed"; the parsers' second event kinds). A telemetry client's dropped upload is another kind."""
    if events is None or not events.height or not attempts:
        return {}
    ending = {a.index: a for a in attempts}
    errors = events.filter((pl.col("kind") == s.EV_ERROR) & pl.col("attempt").is_in(list(ending))).select(
        "attempt", "line", "text")
    # the line that ended each attempt (its quoted text), and the second kinds of that line
    ended = {a: line for a, line, text in errors.iter_rows() if quote(text) == ending[a].end_detail}
    seconds = events.filter(pl.col("kind").is_in([s.EV_NETWORK_DROPPED, s.EV_NETWORK_ERROR])).select(
        "attempt", "line", "kind", "step", "text")
    out: dict[int, str] = {}
    networked = set()
    for attempt, line, kind, _, _ in seconds.iter_rows():
        if ended.get(attempt) == line:
            if kind == s.EV_NETWORK_DROPPED:
                out[attempt] = ending[attempt].end_detail
            networked.add(attempt)
    drops = seconds.filter(pl.col("kind") == s.EV_NETWORK_DROPPED).select("attempt", "line", "step", "text")
    for attempt, line, step, text in drops.iter_rows():
        a = ending.get(attempt)
        if a is None or (attempt in out and out[attempt] == a.end_detail) or attempt not in networked:
            continue
        if line is not None and line < ended[attempt] and (a.end_step is None or step == a.end_step):
            out[attempt] = quote(text)  # (the last one before the error)
    return out


def program_errors(attempts: list[Attempt], anomalies: list[Anomaly], events: pl.DataFrame | None = None
                   ) -> list[Cause]:
    """Attempts that ended on an error of the program or its configuration (no hardware or memory evidence); what
    to check next says where the last checkpoint saved in the logs is."""
    ended = [a for a in attempts if a.end_reason in (EndReason.CRASHED, EndReason.FAILED_STARTUP)
             and a.end_kind == s.EV_ERROR]
    # an error that says a connection could not be made: a wrong address or port, or the network (the other host
    # down or unreachable); the log does not tell which
    said = set() if events is None or not events.height else {
        (a, quote(t)) for a, t in events.filter(pl.col("kind") == s.EV_UNREACHABLE).select("attempt", "text").rows()}
    unreachable = [a for a in ended if (a.index, a.end_detail) in said]
    # a request over the network that dropped after the attempt's last step, before its error: the error is the
    # client's (a dataset streamed from a hub, a remote store), not the training's
    dropped = _network_dropped(events, [a for a in ended if a not in unreachable])
    network = [a for a in ended if a.index in dropped]
    out = []
    for mine, kind, cause, check in (
        ([a for a in ended if a not in unreachable and a not in network], CauseKind.PROGRAM_ERROR,
         "an error in the program or its configuration",
         "the error's traceback and the arguments of the attempt that raised it"),
        (unreachable, CauseKind.UNREACHABLE,
         "a connection the program could not make: a wrong address or port in its configuration, or the network "
         "(that host down, or no route to it); the log does not tell which",
         "whether the address it could not reach is the one it should be (for the ranks' rendezvous, MASTER_ADDR "
         "and MASTER_PORT), and whether that host was up and reachable from this one"),
        (network, CauseKind.NETWORK,
         "a network request that dropped, ending the program: a remote source it reads from (a dataset streamed "
         "from a hub, a remote store), not the training",
         "whether that source was reachable then; a local copy of the data, or a client that retries, avoids it"),
    ):
        if not mine:
            continue
        counter = [f"attempt {a.index} was already {t.trouble} from step {t.step}"
                   for a in mine if (t := _trouble_before(a, anomalies)) is not None]
        out.append(Cause(
            kind=kind, cause=cause, confidence=0.5,
            evidence=[f"attempt {a.index} ended " + (f"after step {a.end_step}" if a.end_step is not None
                                                     else NO_STEP_READ) + f": {a.end_detail}"
                      for a in mine][:6] + [f"before attempt {a.index}'s error, after its last step, a request "
                                            f"dropped: {dropped[a.index]}" for a in mine
                                            if a.index in dropped and dropped[a.index] != a.end_detail][:6],
            counter_evidence=counter,
            check_next=check + saves_said(events),
        ))
    return out
