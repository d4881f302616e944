"""Attempts (launches of the training program) and rollbacks: where each resumed from, what changed, how far it got,
how it ended, when it ran by the wall clock, and which were only short replays of steps already logged."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import polars as pl

from forensics.configs import INFERRED_KEYS, config_changes
from forensics.endings import Ending, end_of, ending_block
from forensics.findings import Anomaly, Attempt, EndReason, ReplayDifference
from forensics.gaps import logged_steps, usual_intervals
from forensics.timeline import metric_rows, mid_run_epoch, one_per_step
from parsers import schema as s

SHORT_STEPS = 3  # an attempt with no anomaly that logged at most this many steps is listed in one line, not a section

def _resume_point(events: pl.DataFrame, start: int | None, interval: int,
                  after: list[int] | None = None) -> tuple[int | None, bool]:
    """The checkpoint iteration an attempt resumed from, and whether that was inferred (no checkpoint-load line):
    then it is the first logged step minus one interval (None when that is the start of training), or the step before
    it when it is off the grid its next logged steps (``after``) keep (826, then 830, 840: a program that logs its
    first step after a resume, from 825, as it logged step 1 at the start).

    >>> _resume_point(pl.DataFrame(), 826, 10, [830, 840]), _resume_point(pl.DataFrame(), 830, 10, [840, 850])
    ((825, True), (820, True))
    """
    loads = events.filter((pl.col("kind") == s.EV_CHECKPOINT_LOAD) & pl.col("value").is_not_null()) \
        if events.height else events
    if loads.height:
        it = int(loads["value"][-1])
        # a counter that starts at or below the step it loaded counts from the start: weights loaded (a fine-tune from
        # another run's checkpoint, torchtitan's initial_load_path), not a resume of that run
        return (it if it > 0 and (start is None or it < start) else None), False
    if start is None or (events.height and events.filter(pl.col("kind") == s.EV_NO_CHECKPOINT).height):
        return None, False
    if start - max(interval, 1) < 2:  # its first logged step is the first or second of training
        return None, True
    # a training bar (of a total past its first logged step) that counted a step before that one, within an interval
    # of the start: the loop ran from the start in this log, its first point lost (a paste cut the line), no resume
    early = events.filter((pl.col("kind") == s.EV_PROGRESS) & pl.col("step").is_between(1, start - 1)
                          & (pl.col("value") >= start)) if events.height else events
    if early.height and int(early["step"].min()) <= max(interval, 1):
        return None, False
    if interval > 1 and start % interval and after and all(step % interval == 0 for step in after):
        return start - 1, True
    return start - max(interval, 1), True


def _last_bar(events: pl.DataFrame, ending: Ending, end_step: int | None, stepped: frozenset[str],
              past: int | None, planned: int | None = None) -> tuple[int, int] | None:
    """The count and total of the attempt's last progress bar (:data:`parsers.schema.EV_PROGRESS`) printed up to the
    line that ended it (in that line's file), when its count is at or past ``past`` (the attempt's last logged step
    or the step its ending names, the later; None: it logged none), and its total too: how far the loop the bar
    counts got, and how far it was to go (a bar of fewer steps counts something else, an evaluation's batches). A bar
    of that total whose count went back is one bar per epoch (or per evaluation), not the training's: none then.
    With no step logged, the training's bar is the one of the ``planned`` length, else the one of the most steps (an
    evaluation's bar, printed after it, counts its batches)."""
    bars = events.filter((pl.col("kind") == s.EV_PROGRESS) & pl.col("step").is_not_null()) if events.height \
        else events
    if not bars.height:
        return None
    if ending.kind is not None:
        deciding = ending_block(events, end_step, stepped).filter(pl.col("kind") == ending.kind).head(1)
        if deciding.height and deciding["line"][0] is not None:
            bars = bars.filter((pl.col("source") == deciding["source"][0]) & (pl.col("line") <= deciding["line"][0]))
    if past is None and bars.height and bars["value"].n_unique() > 1:
        bars = bars.filter(pl.col("value") == (planned if planned in bars["value"] else bars["value"].max()))
    if not bars.height or bars.filter(pl.col("value") == bars["value"][-1]).select(
            (pl.col("step").diff() < 0).any()).item():
        return None
    if past is not None:
        bars = bars.filter((pl.col("step") >= past) & (pl.col("value") >= past))
    return (int(bars["step"][-1]), int(bars["value"][-1])) if bars.height else None


def _mid_warmup(metrics: pl.DataFrame, attempt: int) -> int | None:
    """How many points a linear warm-up from zero would have logged before the attempt's first, when its first points
    lie on a linear rise and the first is already a whole number (3 or more) of its rises between points, else None;
    for a console that prints no step, whose steps count its lines and cannot tell where the log began. (A warm-up
    that starts above zero, as torch's LinearLR does at a third, can give a whole number too: the report says both.)

    >>> lr = pl.DataFrame({"attempt": 1, "step": [1, 2, 3], "metric": "lr", "value": [1.2143e-4, 1.2857e-4, 1.3571e-4]})
    >>> _mid_warmup(lr, 1), _mid_warmup(lr.with_columns(value=pl.Series([4e-6, 8e-6, 1.2e-5])), 1)
    (16, None)
    """
    lr = metrics.filter((pl.col("attempt") == attempt) & (pl.col("metric") == s.LR) & pl.col("value").is_finite())
    first = lr.sort("step").head(4)
    if first.height < 3 or first["step"].n_unique() < first.height:
        return None
    steps, values = first["step"].to_numpy().astype(float), first["value"].to_numpy()
    rises = (values[1:] - values[:-1]) / (steps[1:] - steps[:-1])
    if not (rises > 0).all() or rises.max() > 1.01 * rises.min():
        return None
    rises_to_first = values[0] / (rises.mean() * (steps[1] - steps[0]))
    before = round(rises_to_first) - 1
    return int(before) if before >= 2 and abs(rises_to_first - round(rises_to_first)) < 0.05 else None


def _spans(metrics: pl.DataFrame, logged: pl.DataFrame, spacing: dict[int, int]) -> dict[int, dict[str, Any]]:
    """Per attempt: first and last step, loss points, usual step between points, first and last wall time, sources
    (``logged``: the run's logged steps and ``spacing``: their usual interval, see :mod:`forensics.gaps`)."""
    # small queries over the few columns each needs: one group-by over every column of millions of rows costs
    # hundreds of MB
    lazy = metrics.lazy()
    loss = lazy.filter(pl.col("metric") == s.LOSS).group_by("attempt").agg(
        points=pl.len(), last_loss=pl.col("step").filter(pl.col("value").is_finite()).max(),
        first_loss=pl.col("step").min(), loss_interval=pl.col("step").unique().sort().diff().median())
    clock = lazy.select("attempt", "wall_time").drop_nulls().group_by("attempt").agg(
        first_seen=pl.col("wall_time").min(), last_seen=pl.col("wall_time").max())
    sources = lazy.select("attempt", "source").unique().group_by("attempt").agg(
        sources=pl.col("source").cast(pl.String))
    extent = logged.lazy().group_by("attempt").agg(lo=pl.col("step").min(), hi=pl.col("step").max(), n_steps=pl.len(),
                                                   after=pl.col("step").sort().slice(1, 3))
    out: dict[int, dict[str, Any]] = {}
    for part in pl.collect_all([loss, clock, sources, extent]):
        for row in part.iter_rows(named=True):
            out.setdefault(int(row["attempt"]), {}).update(row)
    for attempt, interval in spacing.items():
        if int(attempt) in out and interval:
            out[int(attempt)]["interval"] = interval
    return out


def _exit_code(events: pl.DataFrame) -> int | None:
    """The exit status an attempt's log printed last ("RC=1", pdsh's "ssh exited with exit code 1"), when no error,
    stop or other exit status came after it; None without one (a W&B exit record is read with the ending)."""
    final = events.filter(pl.col("line").is_not_null() & pl.col("kind").is_in(
        [*s.ERROR_KINDS, *s.ENDING_KINDS, s.EV_EXIT_CODE])).sort("line") if events.height else events
    if not final.height or final["kind"][-1] != s.EV_EXIT_CODE or final["value"][-1] is None:
        return None
    return int(final["value"][-1])


# this many logged steps or more, all stamped within this many seconds and faster than this many steps a second (a
# small debug run's console can log 100 steps in a second or two; no training logs a thousand a second)
AT_ONCE_STEPS, AT_ONCE_S, AT_ONCE_RATE = 100, 2.0, 1000.0
HEARD_WITHIN_S = 2 * 3600.0  # ranks left waiting after a failure hang on until a watchdog (30 min by default)
_JOB_TIMES = ("created_at", "started_at", "finished_at", "updated_at")  # a job's own times, as a config names them


def _written_at_once(span: dict[str, Any], config: dict[str, Any]) -> str | None:
    """Why an attempt's wall-clock times are not the times it trained, when its steps' stamps say they were written
    all at once (``AT_ONCE_STEPS`` or more within ``AT_ONCE_S``, faster than ``AT_ONCE_RATE`` a second: an upload or
    sync of a finished job, such as ``openai wandb sync``), with the job's own times where its config names them;
    else None."""
    first, last, n = span.get("first_seen"), span.get("last_seen"), span.get("n_steps") or 0
    # (stamps all equal are a clock too coarse to say, a console's whole seconds: not known either way)
    if first is None or last is None or n < AT_ONCE_STEPS or not 0 < last - first <= min(AT_ONCE_S, n / AT_ONCE_RATE):
        return None
    own = [f"{key} {_when(config[key])}" for key in _JOB_TIMES if isinstance(config.get(key), int | float | str)
           and not isinstance(config.get(key), bool)]
    return (f"its {n} logged steps were all stamped within {last - first:.1f} s: written at once (an upload or a sync "
            "after the fact, or a generated log), not as it trained, so how long it ran is not known from them"
            + (f"; its config gives the job's own times: {', '.join(own)}" if own else ""))


def _when(value: int | float | str) -> str:
    """A config's time as written, a Unix time also as a UTC date."""
    if isinstance(value, int | float) and 1e9 <= value < 1e10:
        return f"{value:.0f} ({datetime.fromtimestamp(value, tz=UTC):%Y-%m-%d %H:%M:%S} UTC)"
    return str(value)


def _tested_at(metrics: pl.DataFrame) -> dict[int, int]:
    """Per attempt, the last step at which it logged a test-set metric (``test/…``, ``test_…``)."""
    names = metrics["metric"].unique().cast(pl.String)
    test = names.filter(names.str.contains(r"^(?:eval/)?test[/_.]"))
    hits = metrics.filter(pl.col("metric").cast(pl.String).is_in(test.to_list())) if test.len() else metrics.clear()
    return {int(a): int(t) for a, t in hits.group_by("attempt").agg(pl.col("step").max()).iter_rows()}


def _logged_interval(metrics: pl.DataFrame) -> dict[int, int]:
    logged = metrics.filter(pl.col("metric") == s.LOG_INTERVAL).group_by("attempt").agg(pl.col("value").median())
    return {int(a): max(1, round(v)) for a, v in logged.rows() if v is not None}


def _configured_interval(config: dict[str, Any]) -> int | None:
    """The logging interval the attempt's config sets (``log_interval``, ``logging_steps``), if a whole number."""
    for key in s.LOG_INTERVAL_KEYS:
        value = config.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 1 \
                and value == int(value):
            return int(value)
    return None


def build_attempts(
    metrics: pl.DataFrame, events: pl.DataFrame, cfg: dict[int, dict[str, Any]], anomalies: list[Anomaly],
    logged: pl.DataFrame | None = None, spacing: dict[int, int] | None = None, counted: frozenset[str] = frozenset(),
) -> list[Attempt]:
    """The attempts of a run, in order: rollbacks, config changes between consecutive ones, how each ended, and
    their wall-clock times (see :class:`forensics.findings.Attempt`). ``logged`` and ``spacing``: the run's logged
    steps and their usual interval (:mod:`forensics.gaps`), when already known; ``counted``: the sources whose steps
    count their printed lines (a console that prints no step)."""
    logged = logged_steps(metrics) if logged is None else logged
    spacing = usual_intervals(logged) if spacing is None else spacing
    numbers = sorted(
        set(metrics["attempt"].drop_nulls().unique().to_list())
        | set(cfg)
        | set(events.filter(pl.col("kind").is_in(list(s.START_KINDS)))["attempt"].drop_nulls().unique().to_list())
        | set(events.filter(pl.col("kind").is_in(list(s.ERROR_KINDS | s.ENDING_KINDS)))["attempt"].drop_nulls()
              .unique().to_list())
    ) or sorted(set(events["attempt"].drop_nulls().unique().to_list()))
    spans = _spans(metrics, logged, spacing)
    log_interval = _logged_interval(metrics)
    out: list[Attempt] = []
    furthest: int | None = None
    previous_cfg: dict[str, Any] | None = None
    # each attempt's events and anomalies split off once (per attempt, a filter of every event is quadratic in a log
    # whose steps restart at every line)
    by_attempt = events.partition_by("attempt", as_dict=True, maintain_order=True)
    flagged: dict[int, list[Anomaly]] = {}
    for a in anomalies:
        flagged.setdefault(a.attempt, []).append(a)
    tested = _tested_at(metrics) if (events["kind"] == s.EV_SWEEP_JOB).any() else {}
    for i, n in enumerate(numbers):
        span = spans.get(n, {})
        start, end = span.get("lo"), span.get("hi")
        # the logging interval: as logged, else as configured (Megatron's log_interval, the Trainer's logging_steps:
        # its evaluations interleave other steps), else the usual step between points (only an attempt with steps
        # uses it)
        configured = _configured_interval(cfg.get(n) or {})
        # (where the loss is, the training steps are: an evaluation logged before the first loss, at a cadence of its
        # own, is no sign that the attempt began mid-run)
        loss_every, first_loss = span.get("loss_interval"), span.get("first_loss")
        interval = log_interval.get(n) or configured or (int(loss_every) if loss_every else None) \
            or span.get("interval") or 1
        ev = by_attempt.get((n,), events.clear())
        # (an attempt that logged a metric at a step before the resume point its first loss implies did not resume
        # there: Lightning's per-epoch metrics from the first epoch's end, the loss logged only at the last step)
        from_loss = first_loss is not None and not (start is not None and start <= first_loss - max(interval, 1))
        resumed, inferred = _resume_point(ev, first_loss if from_loss else start, interval, span.get("after"))
        # a checkpoint loaded at iteration 0, or one whose iteration is not printed by an attempt that starts at the
        # start of training: a fine-tune, or a training begun from loaded weights, not from scratch
        unnamed_load = bool(ev.height and ev.filter((pl.col("kind") == s.EV_CHECKPOINT_LOAD) & (
            (pl.col("value") == 0) | pl.col("value").is_null() | (pl.col("value") >= (start or 0)))).height)
        loaded = resumed is None and unnamed_load
        first_epoch = (mid_run_epoch(metrics, n) if i == 0 and resumed is None
                       and not (start is not None and start <= (configured or 0)) else None)
        stepless = bool(span.get("sources")) and set(span["sources"]) <= counted
        warmup_before = (_mid_warmup(metrics, n) if i == 0 and resumed is None and first_epoch is None and stepless
                         else None)
        resume_at = resumed if resumed is not None else 0
        # a rollback resumes from a checkpoint behind the furthest step logged; a start from scratch is a new run
        # (an inferred resume point is only known to within a log interval: there, the attempt must log a step
        # again that was logged before)
        rollback = furthest is not None and resumed is not None and (
            start is not None and start <= furthest if inferred else resume_at < furthest)
        this_cfg = cfg.get(n)
        changes = config_changes(previous_cfg, this_cfg) if previous_cfg and this_cfg else {}
        train_iters = (this_cfg or {}).get("train_iters")
        configured = train_iters if isinstance(train_iters, int) and train_iters > 0 else None
        shows_start = bool(ev.height and ev.filter(pl.col("kind").is_in(list(s.START_KINDS))).height)
        ending = end_of(
            ev, flagged.get(n, []), end, shows_start=shows_start, is_last=i == len(numbers) - 1,
            next_index=numbers[i + 1] if i + 1 < len(numbers) else None,
            target=configured, last_loss_step=span.get("last_loss"), stepped=frozenset(span.get("sources") or []),
            tested=end is not None and tested.get(n, end - 1) >= end,
        )
        # (its count said only where past the steps logged; its total is the planned length where none is configured)
        past = max((step for step in (end, ending.step) if step is not None), default=None)
        bar = _last_bar(ev, ending, end, frozenset(span.get("sources") or []), past, configured)
        ahead = bar is not None and (past is None or bar[0] > past)
        if bar is not None and bar[0] == bar[1] and ending.reason in (EndReason.RUNNING, EndReason.UNKNOWN) and (
                bar[1] == configured or not (counted & set(span.get("sources") or []))):
            # its training bar reached its total and nothing ended it before: its loop ran to its last step
            said = "its training loop reached its last step; no end printed after it"
            ending = replace(ending, reason=EndReason.COMPLETED,  # (a deciding line's note, an elision, is kept)
                             detail=f"{said}; {ending.detail}" if ending.kind == s.EV_ELISION else said)
        # (a bar's total is a length of steps only where the steps are steps, not a count of printed lines)
        from_bar = bar is not None and not (counted & set(span.get("sources") or []))
        # (a log that restarts at every few lines has thousands of attempts, most with no events: no queries then)
        # (a scheduler notice comes between attempts; a sweep's launch of its next job is after this one, and a
        # W&B console stamps it on the program's local clock, not the run's)
        own = ev.filter(~pl.col("kind").is_in([s.EV_SCHEDULER, s.EV_SWEEP_JOB, s.EV_LAST_TIMED_LINE]))["wall_time"] \
            if ev.height else None
        printed = own.max() if own is not None else None
        times = [t for t in (span.get("first_seen"), own.min() if own is not None else None) if t is not None]
        first_seen = float(min(times)) if times else None  # type: ignore[type-var]
        # (a step that went back is a start the log shows, not one it times: the first row after it was logged when
        # the relaunch's first logged step was done)
        timed = shows_start and bool(ev.filter(pl.col("kind").is_in(list(s.START_KINDS - {s.EV_STEP_REGRESSION}))).height)
        started = first_seen if timed else None
        # the end by the clock: the last time its processes printed after the line that ended it (ranks left waiting
        # after another failed hang on until a watchdog ends them), else that line's, else its last logged step (a
        # start-up time is not an end)
        last_step_at = float(span["last_seen"]) if span.get("last_seen") is not None else None
        heard = ev.filter(pl.col("kind") == s.EV_LAST_TIMED_LINE)["wall_time"].max() if ev.height else None
        # (only after a failure or a stop, and within a watchdog's reach of it: a completed run's later lines, an upload
        # hours after, are not its training)
        hung_on = heard is not None and ending.kind is not None and ending.reason not in (
            EndReason.COMPLETED, EndReason.EXITED) and (ending.wall_time is None
                                                        or float(heard) - ending.wall_time <= HEARD_WITHIN_S)
        ended = max(float(heard), ending.wall_time or float(heard)) if hung_on else ending.wall_time  # type: ignore[arg-type]
        if ended is not None and last_step_at is not None and last_step_at - 1.0 < ended < last_step_at:
            # an end stamped in whole seconds (W&B's exit record: its start plus a runtime of 1563 s) falls up to a
            # second before the step it followed: it ended with that step (a step logged later than that is an
            # evaluation after the end, as Lightning's test pass after its fit)
            ended = last_step_at
        stop = ended or last_step_at
        # its last sign of life: that end, or for an attempt that logged no step its last timed line (scheduler
        # notices come between attempts); an untimed end after timed start-up lines is not known
        last_line = stop if stop is not None else (float(printed) if end is None and printed is not None  # type: ignore[arg-type]
                                                   else None)
        ran_for = stop - started if started is not None and stop is not None and stop > started else None
        if ran_for is None and ending.kind == s.EV_EXIT:  # "exiting program after 1190.04 minutes"
            minutes = ev.filter((pl.col("kind") == s.EV_EXIT) & pl.col("value").is_not_null())["value"]
            ran_for = float(minutes[0]) * 60 if minutes.len() else None
        if ran_for is None and ending.kind in s.DONE_KINDS:  # the Trainer's summary: "train_runtime 542.88 s"
            seconds = ev.filter(pl.col("kind").is_in(list(s.DONE_KINDS)) & pl.col("value").is_not_null())["value"]
            ran_for = float(seconds[-1]) if seconds.len() else None
        clock_note = _written_at_once(span, this_cfg or {})
        if clock_note is not None:
            ran_for = None
        out.append(
            Attempt(
                index=int(n), start_step=start, end_step=end, resumed_from_step=resumed,
                resumed_from_inferred=inferred, rollback=bool(rollback), config_changes=changes,
                end_reason=ending.reason, end_detail=ending.detail, end_kind=ending.kind, end_trouble=ending.trouble,
                steps_counted=stepless,
                failed_after_training=ending.failed_after, stopped_after_training=ending.stopped_after,
                stopped_after_how=ending.stopped_after_how,
                end_at_step=ending.step if ending.kind is not None else end,
                target_step=configured if configured is not None or not from_bar else bar[1],  # type: ignore[index]
                target_from_bar=configured is None and from_bar,
                bar_step=bar[0] if bar and ahead else None, bar_total=bar[1] if bar and ahead else None,
                points=int(span.get("points") or 0),
                sources=sorted(set(span.get("sources") or [])
                               | (set(ev["source"].drop_nulls().unique().to_list()) if ev.height else set())),
                started_at=started, first_seen_at=first_seen, last_step_at=last_step_at, last_line_at=last_line,
                ended_at=ended, exit_code=_exit_code(ev),
                ran_for_s=ran_for,
                # (a run that logged no metric before its end at a step it printed, or that completed at a step past its
                # last logged one, a Trainer whose logging interval is as long as the run, is not a short launch)
                short=span.get("n_steps", 0) <= SHORT_STEPS and n not in flagged
                and not (ending.step is not None and ending.reason == EndReason.COMPLETED
                         and (end is None or ending.step > end)),
                # (a setting read off the iteration lines is not a config the launch printed)
                config_compared=bool(previous_cfg and this_cfg and previous_cfg.keys() - INFERRED_KEYS
                                     and this_cfg.keys() - INFERRED_KEYS),
                begins_mid_run=i == 0 and ((inferred and resumed is not None) or first_epoch is not None),
                first_epoch=first_epoch, warmup_logs_before=warmup_before, loaded_weights=loaded,
                load_without_step=unnamed_load and inferred,
                clock_note=clock_note, log_interval=int(interval) if start is not None else None,
            )
        )
        if end is not None:
            furthest = end if furthest is None else max(furthest, end)
        if this_cfg:
            previous_cfg = this_cfg
    for before, after in pairwise(out):
        stop = before.last_line_at
        begin = after.started_at or after.first_seen_at
        # (a clock that cannot time an attempt, its points written at once, cannot time the wait after it or before it)
        if stop is not None and begin is not None and begin >= stop and before.clock_note is None \
                and after.clock_note is None:
            before.downtime_after_s = begin - stop
    return out


def replay_differences(metrics: pl.DataFrame, attempts: list[Attempt], metric: str = s.LOSS) -> list[ReplayDifference]:
    """Steps that a later attempt resumed from a checkpoint logged again with a different value: for each such
    attempt, the first step it shares with earlier attempts, with every attempt's value there (grouped by step). An
    attempt that started from scratch is a new run, whose values are expected to differ."""
    points = metric_rows(metrics, metric)
    if points["attempt"].n_unique() < 2:
        return []
    points = one_per_step(points, "first")
    # each attempt's first step that an earlier attempt logged too, in one pass
    earliest = points.group_by("step").agg(first=pl.col("attempt").min())
    again = points.join(earliest, on="step").filter(pl.col("attempt") > pl.col("first")).group_by("attempt").agg(
        first=pl.col("step").min(), last=pl.col("step").max(), count=pl.len())
    shared = dict(again.select("attempt", "first").rows())
    spans = {int(a): (int(last), int(count)) for a, last, count in again.select("attempt", "last", "count").rows()}
    firsts: dict[int, int] = {}
    for att in attempts:
        if att.index in shared and att.resumed_from_step is not None:
            firsts.setdefault(int(shared[att.index]), att.index)
    out = []
    for step in sorted(firsts):
        values = points.filter(pl.col("step") == step).sort("attempt")
        pairs = [(int(a), float(v)) for a, v in values.select("attempt", "value").rows()]
        if len({v for _, v in pairs}) > 1:
            last, count = spans[firsts[step]]
            out.append(ReplayDifference(step=step, metric=metric, values=pairs, last_step=last, replayed=count))
    return out
