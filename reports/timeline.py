"""The chronicle's sections on what was read and checked, and on the run's timeline: launches with their wall-clock
times and ends, holes in the data, settings that changed where the log cannot show how, short launches and
replays, and the errors, stops and notices the logs printed. Text from logs is escaped."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from forensics.attempts import SHORT_STEPS
from forensics.coverage import NEEDED
from forensics.detectors.hang import duration
from forensics.findings import Attempt, EndReason, Gap, RunFindings, shown, times
from forensics.infra import NO_STEP_READ
from forensics.precursors import named_like_logit
from parsers import schema as s
from reports.escape import md

ENDINGS: dict[EndReason, str] = {
    EndReason.COMPLETED: "completed",
    EndReason.EXITED: "exited as planned",
    EndReason.STOPPED: "stopped by the scheduler or a person",
    EndReason.INTERRUPTED: "interrupted by hand",
    EndReason.KILLED: "killed by a signal",
    EndReason.CRASHED: "crashed",
    EndReason.FAILED_STARTUP: "failed before its first logged step",  # (at start-up, or in steps before the first log)
    EndReason.NAN: "ended in NaN/Inf",
    EndReason.DIVERGED: "diverged",
    EndReason.HUNG: "hung",
    EndReason.UNKNOWN: "no end in the log",
    EndReason.RUNNING: "the log ends with no end printed",
    EndReason.SILENT_EXIT: "exited (no reason printed)",
    EndReason.NO_TRAINING: "no training step, error or stop in the logs",
}
_SETTING_NAMES = {"lr": "lr", "batch_size": "global batch size", "loss_scale": "loss scale"}


def clock(t: float | None) -> str:
    """A wall-clock time as the logs print it (they carry no time zone: shown as read).

    >>> clock(1628384451.0)
    '2021-08-08 01:00:51'
    >>> clock(float("nan")), clock(1e300)
    ('nan (not a date)', '1e+300 (not a date)')
    """
    if t is None:
        return "–"
    try:
        return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):  # a damaged log's NaN, or a time beyond the calendar
        return f"{t:g} (not a date)"


def steps(a: Attempt) -> str:
    if a.start_step is None:
        return "none logged"
    return f"{a.start_step}" if a.start_step == a.end_step else f"{a.start_step}–{a.end_step}"


def bar_said(a: Attempt) -> str:
    """Where the attempt's progress bar was, when one was read: " (its progress bar at 70 of 4967)", and which
    steps are which when the attempt's own are its counted metrics lines."""
    if a.bar_step is None:
        return ""
    return f" (its progress bar at {a.bar_step} of {a.bar_total}" + (
        ", in training steps; its steps here count its printed metrics lines)" if a.steps_counted else ")")


def ending(a: Attempt) -> str:
    """How an attempt ended, with the line that decided it (escaped)."""
    # the line that decided it, as printed (else the detail says what the log shows)
    quoted = a.end_kind is not None and a.end_kind != s.EV_ELISION
    if not quoted or a.end_reason == EndReason.FAILED_STARTUP:
        where = ""
    elif a.end_step is None and a.end_at_step is not None:  # (it printed its step; no metric was logged before)
        where = f" at step {a.end_at_step}, with no metric logged before it"
    elif a.nothing_left_to_train():  # (the end of training came at once)
        where = (f" without training a step: it resumed at step {a.resumed_from_step}, its last planned iteration, so "
                 "nothing was left to train")
    elif a.end_step is None:
        where = f" {NO_STEP_READ}"
    elif a.end_at_step is None:  # a console line with no step: it came after the last logged step
        where = f" in its console, after its last logged step ({a.end_step})"
    elif a.end_at_step > a.end_step:  # the console printed steps its logger never received
        where = f" after step {a.end_at_step} (as its log printed; its metrics end at step {a.end_step})"
    else:
        where = f" after step {a.end_at_step}"
    if a.bar_step is not None:  # (a progress bar printed past its last logged step, or where none was read)
        where += bar_said(a)
    # (in quotation marks only what a log printed: a reader's own words about a structured log are not quoted)
    marks = quoted and a.end_kind not in s.COMPOSED_KINDS
    detail = (f": “{md(a.end_detail)}”" if marks else f": {md(a.end_detail)}") if a.end_detail else ""
    detail += f" (after {a.end_trouble})" if detail and a.end_trouble else ""
    if detail and not quoted and a.end_reason == EndReason.COMPLETED and a.target_step is not None \
            and a.end_step is not None and a.end_step >= a.target_step \
            and f"{a.end_step} of {a.target_step}" not in a.end_detail:  # its planned last step: which it was
        detail += f" (step {a.end_step} of {a.target_step})"
    after = (f"; then the program failed after its training: “{md(a.failed_after_training)}”"
             if a.failed_after_training else "")
    if a.stopped_after_training and a.stopped_after_how is not None:
        after += (f"; then the program was {ENDINGS[a.stopped_after_how]} after its training: "
                  f"“{md(a.stopped_after_training)}”")
    code = f"; exit code {a.exit_code}, the last status its log printed" if a.exit_code is not None else ""
    return f"{ENDINGS.get(a.end_reason, a.end_reason.value)}{where}{detail}{after}{code}"


def _logits_line(logits: dict[str, Any]) -> str:
    """The coverage line of the logit series the logit-growth detector judged."""
    said = [m.replace("_", " ").replace("z loss", "z-loss") for m in logits.get("metrics", [])]
    if per := logits.get("per_layer"):
        tags = per.get("tags") or per["series"]
        listed = ", ".join(md(t) for t in tags[:6]) + (f" and {len(tags) - 6} more" if len(tags) > 6 else "")
        said.append(f"{len(per['series'])} per-layer attention-logit series ({listed}; layers "
                    f"{', '.join(map(str, per['layers']))}; {per['points']:,} points)"
                    + ("" if s.MAX_ATTENTION_LOGIT in logits.get("metrics", []) else
                       ", their largest at each step read as the max attention logit"))
    return (f"- **Logits:** {'; '.join(said)}: checked for NaN/Inf, for log-linear growth and, for the max attention "
            "logit, for the 1e4 level past which every run in Wortsman et al. 2023 diverged.")


def coverage_section(run: RunFindings) -> list[str]:
    """What was read and checked: per source the metrics recognised, the roles given by name, what was missing."""
    cov = run.coverage
    if not cov:
        return []
    out = ["## What was read and checked", ""]
    fmt = {src["path"]: src["format"] for src in run.sources}
    for source in cov.get("evaluation_passes", []):  # (a file of evaluation scalars only is said to be one)
        fmt[source] = f"{fmt.get(source, '?')}, an evaluation pass: evaluation scalars only, no training step"
    for source, metrics in cov.get("by_source", {}).items():
        if not metrics and cov.get("overlaid", {}).get(source):
            names = ", ".join(m.replace("_", " ") for m in cov["overlaid"][source])
            out.append(f"- {md(source)} ({md(fmt.get(source, '?'))}): {md(names)} read but not used: a source "
                       "below logs them at their steps, and its values were used.")
            continue
        if not metrics:
            what = "no metric logged" if source in cov.get("silent", ()) else "no training metric recognised"
            out.append(f"- {md(source)} ({md(fmt.get(source, '?'))}): {what}.")
            continue
        parts = [_metric_entry(name, m) for name, m in sorted(metrics.items()) if name != "log_interval"]
        out.append(f"- {md(source)} ({md(fmt.get(source, '?'))}): " + "; ".join(parts) + ".")
    for source, key in cov.get("step_axis", {}).items():
        out.append(f"- **Steps** of {md(source)} are its own {md(key)}, as the run logged them (the logger's own "
                   "counter of log calls is not the training step).")
    for metric, per in cov.get("spike_checks", {}).items():
        name = metric.replace("_", " ")
        for a, c in per.items():
            if c.get("negative"):
                out.append(f"- **Not judged for {name} spikes{' or divergence' if metric == s.LOSS else ''}:** "
                           f"attempt {a}: its {name} goes below 0 ({shown(c['negative']['value'])} at step "
                           f"{c['negative']['step']}): not a cross-entropy (a policy, preference or adversarial objective), "
                           "whose rises are not ratios.")
        blind = [a for a, c in per.items() if not c["statistical"] and c["absolute_only"]]
        unjudged = [a for a, c in per.items() if not c["statistical"] and not c["absolute_only"]
                    and not c.get("negative")]
        if blind:
            out.append(f"- **{name.capitalize()} spikes, absolute checks only:** attempt(s) {', '.join(blind)}: too few "
                       "points to know the noise (fewer than 10 before each in its stretch of the log); checked for "
                       + ("a loss 2x the lowest of the 8 points before it (1.5x for means over 10 or more iterations) "
                          "and three times their step-to-step moves, Megatron's 10x rule, a rise that lasts 3 points, "
                          "and, when the vocabulary is known, a loss above ln(vocabulary) + 1 nat."
                          if metric == s.LOSS else
                          "a grad norm 10x the point before it or climbing over several points to 10x the lowest and "
                          "twice the highest of the 8 before it, and a rise that lasts 3 points."))
        mid_run = {str(a.index) for a in run.attempts if a.begins_mid_run}
        if unjudged:  # (a log that begins mid-run has no burn-in)
            out.append(f"- **Not judged for {name} spikes:** attempt(s) {', '.join(unjudged)}: "
                       + ("no point has a point before it in its stretch of the log." if set(unjudged) <= mid_run else
                          "every point is in the burn-in at the start of training (its first 10 points) or has no "
                          "point before it in its stretch of the log."))
        limits = [f"attempt {a}: {c['lone_point_sigma']:.1f} / {c['two_in_a_row_sigma']:.1f} ("
                  + (f"fitted on {c['statistical']:,} points" if c["tail"] == "fitted" else
                     f"{c['statistical']:,} point{'s' if c['statistical'] != 1 else ''}, too few for a tail fit: "
                     f"Student-{c['tail']} noise, the heaviest "
                     "their body allows")
                  + (f"; each point a mean over {c['mean_of']} iterations, a lone point read by such a mean's tail"
                     if c.get("mean_of", 1) > 1 else "") + _largest_rise(c.get("largest_rise"))
                  + (f"; {c['absolute_only']:,} more with too little history before them (the first of the attempt "
                     "or after a gap), the absolute checks only" if c["absolute_only"] else "")
                  + (f"; {c['not_judged']:,} with no point before {'them' if c['not_judged'] > 1 else 'it'} in "
                     "its stretch of the log, not judged" if c.get("not_judged") else "") + ")"
                  for a, c in per.items() if c["statistical"]]
        if limits:
            shown_limits = limits if len(limits) <= 4 else [*limits[:3], f"... ({len(limits) - 3} more attempts)"]
            out.append(f"- **{name.capitalize()} spike thresholds** (robust sigmas a lone point / two points in a row "
                       "must reach: what the attempt's own noise reaches with 2% chance over the whole attempt): "
                       + "; ".join(shown_limits) + ".")
    for role, tag in cov.get("roles", {}).items():
        out.append(f"- **Taken by its name:** the {role.replace('_', ' ')} is the scalar {md(tag)} (no recognised "
                   f"{role.replace('_', ' ')} metric).")
    if logits := cov.get("logits"):
        out.append(_logits_line(logits))
    others = cov.get("other_scalars", [])
    # (scalars named like a logit, an attention-logit mean say, are also checked for a 2x rise before the first
    # instability: forensics.precursors)
    named = [o for o in others if named_like_logit(o)]
    rest = [o for o in others if o not in named]
    if rest:
        listed = ", ".join(md(o) for o in rest[:12]) + (f" and {len(rest) - 12} more" if len(rest) > 12 else "")
        out.append(f"- **Other scalars read** (checked for NaN/Inf only): {listed}.")
    if named:
        listed = ", ".join(md(o) for o in named[:12]) + (f" and {len(named) - 12} more" if len(named) > 12 else "")
        out.append(f"- **Other scalars named like a logit:** {listed}: checked for NaN/Inf, and for a 2x rise before "
                   "the first divergence, NaN or spike where there is one (log-linear growth is judged only for the "
                   "max attention logit and the z-loss).")
    for name in cov.get("missing", []):
        if name == s.LOSS_SCALE and (over := cov.get("overflow_scales")):
            out.append(f"- **Loss scale:** no series of it, but {over['lines']} fp16 overflow line"
                       f"{'s' if over['lines'] != 1 else ''} print the scale they reduced it to ("
                       + (f"{shown(over['first'])}, at last {shown(over['last'])}" if over["lines"] > 1
                          else shown(over["first"])) + "); where it rose again between them is not in the log, so "
                       "a collapse of the scale over the run could not be checked.")
            continue
        if name == s.LOSS_SCALE and (stop := cov.get("overflow_stop")):
            out.append(f"- **Loss scale:** no series of it; the program's own line says it stopped on fp16 overflows "
                       f"(“{md(stop[:160])}”), which is the collapse's evidence here, not a curve of the scale.")
            continue
        alike = [o for o in others if name in _LOOKALIKES and _LOOKALIKES[name].search(o)]
        seen = (f" (named like one, not taken as it: {', '.join(md(o) for o in alike[:6])}"
                f"{f' and {len(alike) - 6} more' if len(alike) > 6 else ''})" if alike else "")
        out.append(f"- **Not found:** {name.replace('_', ' ')}{seen}, so {NEEDED[name]} could not be checked.")
    if "loss" in cov.get("missing", []) and not cov.get("metrics") and not others:
        out.append("- **No metric logged** by any source: nothing could be checked, NaN/Inf included.")
    elif "loss" in cov.get("missing", []) and (unprinted := cov.get("loss_unprinted")):
        n, skipped = unprinted["lines"], unprinted["all_skipped"]
        steps = (f"step {unprinted['first_step']}" if unprinted["first_step"] == unprinted["last_step"]
                 else f"steps {unprinted['first_step']}–{unprinted['last_step']}")
        why = (("every one of them counts" if n > 1 else "it counts") + " all the iterations of its interval as "
               "skipped (fp16 overflow), and Megatron prints no loss for such an interval" if skipped == n else
               f"{skipped} of them count all the iterations of their interval as skipped (fp16 overflow); Megatron "
               "prints no loss for such an interval, nor for one whose loss is NaN/Inf" if skipped else
               "Megatron leaves out a loss that is NaN/Inf")
        out.append(f"- **No loss printed:** {'none of its' if n > 1 else 'its'} {n} iteration line"
                   f"{'s' if n > 1 else ''} ({steps}) print{' a' if n > 1 else 's no'} loss: {why}. Still checked: "
                   "NaN/Inf in every scalar" + (", grad-norm spikes" if "grad_norm" not in cov["missing"] else "") + ".")
    elif "loss" in cov.get("missing", []):
        tags = sorted({t for m in cov.get("metrics", {}).values() for t in m.get("source_tags", [])} | set(others))
        listed = ", ".join(md(t) for t in tags[:15]) or "none"
        out.append(f"- **No loss metric recognised;** scalar tags present: {listed}. Still checked: NaN/Inf in "
                   "every scalar" + (", grad-norm spikes" if "grad_norm" not in cov["missing"] else "") + ".")
    return [*out, ""]


# scalars whose names suggest a metric that was not recognised (several groups' LRs, a scale factor): named, not used
_LOOKALIKES = {"lr": re.compile(r"(?i)(?:^|[/_. -])(?:lr|learning.?rate)(?:$|[/_. -])"),
               "grad_norm": re.compile(r"(?i)grad.?norm|norm.?grad")}


def _metric_entry(name: str, m: dict[str, Any]) -> str:
    span = ("at no step the log names" if m["first_step"] is None
            else f"step {m['first_step']}" if m["first_step"] == m["last_step"]
            else f"steps {m['first_step']}–{m['last_step']}")
    tags = [t for t in m.get("source_tags", []) if t != name]
    origin = f" from {', '.join(md(t) for t in tags[:3])}" if tags else ""
    return f"{name.replace('_', ' ')} {m['points']:,} points ({span}){origin}"


def _time_zone(run: RunFindings) -> str | None:
    """Which clock the times are on, where the timeline shows any: UTC for sources that record Unix times
    (TensorBoard, W&B, MLflow), the log's own clock as printed for the others (a text log prints no zone)."""
    timed = any(t is not None for a in run.attempts for t in (a.started_at, a.first_seen_at, a.ended_at,
                                                               a.last_step_at))
    if not timed:
        return None
    timed = set(run.coverage.get("timed_sources", []))
    formats = sorted({src["format"] for src in run.sources if src["path"] in timed})
    unix = [f for f in formats if f in s.UNIX_TIME_FORMATS]
    printed = list(dict.fromkeys(f.removesuffix(" (errors only)") for f in formats if f not in s.UNIX_TIME_FORMATS))
    said = []
    if unix:
        said.append(f"UTC where they come from {' and '.join(unix)} (Unix times"
                    + (", or a table's stamps converted to UTC, one with no zone read as UTC" if "step-table" in unix
                       else "") + ")")
    if printed:
        said.append(f"as the {' and '.join(printed)} log{'s' if len(printed) > 1 else ''} printed them (the stamps' "
                    "digits; a time zone printed with them is neither shown nor applied)")
    if not said:
        return None
    return "**Times:** " + "; ".join(said) + "."


def timeline_section(run: RunFindings) -> list[str]:
    """Every launch with its times and end, then holes, discontinuities, short launches and replays, and the
    errors, stops and notices, as facts."""
    out = ["## Timeline", "", "| attempt | steps | started | ended | ran for | until the next began | how it ended |",
           "|---|---|---|---|---|---|---|"]
    for a, after in pairwise([*run.attempts, None]):  # (each with the next; a run with no attempt has no row)
        started = clock(a.started_at) if a.started_at is not None else (
            f"first step or event {clock(a.first_seen_at)}" if a.first_seen_at is not None else "–")
        ended = clock(a.ended_at) if a.ended_at is not None else (
            f"last step {clock(a.last_step_at)}" if a.last_step_at is not None else "–")
        ran = duration(a.ran_for_s) if a.ran_for_s is not None else ("not known" if a.clock_note else "–")
        if a.ran_for_s is not None and a.started_at is None:
            ran += " (its summary's count)" if a.end_kind in s.DONE_KINDS else " (its exit line)"
        down = ("not known" if after is not None and (a.clock_note or after.clock_note)
                else duration(a.downtime_after_s) if a.downtime_after_s is not None else "–")
        out.append(f"| {a.index} | {steps(a)} | {started} | {ended} | {ran} | {down} | {ending(a)} |")
    out.append("")
    if zone := _time_zone(run):
        out += [zone, ""]
    out += [f"**Clock of attempt {a.index}:** {md(a.clock_note)}." for a in run.attempts if a.clock_note]
    out += [""] if any(a.clock_note for a in run.attempts) else []
    out += _gaps(run) + _discontinuities(run) + _short(run) + _entries(run)
    return out


def _gaps(run: RunFindings) -> list[str]:
    if not run.gaps:
        return []
    out = ["**Holes in the data** (nothing is inferred across them):", ""]
    for g in run.gaps:
        where = f"attempt {g.attempt}" if g.attempt is not None else (
            f"between attempts {g.attempts[0]} and {g.attempts[1]}" if g.attempts else "between attempts")
        out.append(f"- {where}: no data between steps {g.after_step} and {g.before_step}")
    return [*out, ""]


def _discontinuities(run: RunFindings) -> list[str]:
    if not run.discontinuities:
        return []
    groups: dict[tuple[int, int, int, int, str], list[str]] = {}
    for d in run.discontinuities:
        key = (d.attempt_before, d.step_before, d.attempt_after, d.step_after, d.across)
        groups.setdefault(key, []).append(f"{_SETTING_NAMES.get(d.metric, d.metric)} {shown(d.before)} → "
                                          f"{shown(d.after)}")
    out = ["**Discontinuities** (settings whose values differ across a hole or a relaunch, or jump between two points: "
           "a change, or a schedule the log does not show, such as a step decay):", ""]
    for (a0, s0, a1, s1, across), changes in groups.items():
        if across == "gap":
            where = f"across the gap between steps {s0} and {s1}" + (
                f" (attempt {a0})" if a0 == a1 else f" (attempts {a0} and {a1})")
        elif across == "relaunch":
            where = f"across the relaunch between attempt {a0} (step {s0}) and attempt {a1} (step {s1})"
        else:
            where = f"in one jump between consecutive points at steps {s0} and {s1} (attempt {a0})"
        out.append(f"- {where}: " + "; ".join(changes))
    return [*out, ""]


def _stretches(first: int, last: int, holes: list[Gap]) -> list[tuple[int, int]]:
    """The stretches of steps from ``first`` to ``last`` that are logged: the holes inside left out.

    >>> _stretches(0, 550, [Gap(50, 500, 1)])
    [(0, 50), (500, 550)]
    """
    out, at = [], first
    for g in sorted(holes, key=lambda g: g.after_step):
        out.append((at, g.after_step))
        at = g.before_step
    return [*out, (at, last)]


def _short(run: RunFindings) -> list[str]:
    short = [a for a in run.attempts if a.short]
    if not short and not run.replay_differences:
        return []
    out = [f"**Short attempts (at most {SHORT_STEPS} steps logged) and replays:**", ""]
    seen: list[tuple[int, int]] = []  # the stretches of steps the attempts before logged (their holes left out)
    for a in run.attempts:
        if a.short:
            # steps again that were logged before: overlapping a stretch an earlier attempt logged (150-170 after
            # 220-240 were never logged: nanoGPT #225's second run; nor 200-220 after 0-50 and, past a hole, 500-550)
            lo, hi = a.start_step, a.end_step if a.end_step is not None else a.start_step
            replay = lo is not None and hi is not None and any(lo <= b and hi >= f for f, b in seen)
            # (a start from scratch over steps logged before is a new training, not a replay of them: its values
            # are not compared, gpt-neox #947's fp16 relaunch)
            what = ("new steps" if not replay else "steps logged before, started over from the start of training"
                    if a.start_step is not None and a.resumed_from_step is None and a.start_step <= 1
                    else "a replay of steps logged before")
            logged = "no step read" if a.start_step is None else (
                f"{'step' if a.start_step == a.end_step else 'steps'} {steps(a)} ({what})")
            if a.resumed_from_step is not None and not a.resumed_from_inferred:
                logged += f", resumed from step {a.resumed_from_step}"
            elif a.begins_mid_run and (a.start_step or 0) > (a.log_interval or 1):
                # (an excerpt: what came before its first step is not in the log; a first point at the first logging
                # interval may be the run's first, its interval's loss unprinted)
                logged += (f"; the log begins mid-run, at step {a.start_step}"
                           + (f" of {a.target_step}" if a.target_step is not None and not a.target_from_bar else ""))
            out.append(f"- attempt {a.index}: " + (ending(a) if a.end_reason == EndReason.NO_TRAINING
                                                     else f"{logged}; {ending(a)}"))
        if a.start_step is not None and a.end_step is not None:
            seen += _stretches(a.start_step, a.end_step, [g for g in run.gaps if g.attempt == a.index])
    for r in run.replay_differences:
        values = ", ".join(f"{shown(v)} (attempt {a})" for a, v in r.values)
        again = (f" (the first of {r.replayed} logged steps, {r.step}–{r.last_step}, logged again)"
                 if r.replayed > 1 and r.last_step is not None else "")
        out.append(f"- **step {r.step} gave a different {r.metric.replace('_', ' ')} when logged again:** {values}"
                   + again)
    return [*out, ""]


def _entries(run: RunFindings) -> list[str]:
    if not run.log_entries:
        return []
    out = ["**Errors, stops and notices in the logs:**", ""]
    stepped = {src for src, metrics in run.coverage.get("by_source", {}).items() if metrics}
    logged = {a.index for a in run.attempts if a.start_step is not None}
    idle = {a.index: a.resumed_from_step for a in run.attempts if a.nothing_left_to_train()}
    for e in run.log_entries[:40]:
        where = f"attempt {e.attempt}" if e.attempt is not None else "no attempt"
        if e.step is not None:
            where += f", after step {e.step}"
        elif e.attempt in idle:
            where += f", with no step to train (it resumed at {idle[e.attempt]}, its last planned iteration)"
        elif e.source in stepped or e.attempt not in logged:
            where += f", {NO_STEP_READ}"
        else:
            where += f", printed to {md(e.source)}, where no step was read"  # (where among the steps: not known)
        when = f", {clock(e.wall_time)}" if e.wall_time is not None else ""
        times = f" (×{e.count})" if e.count > 1 else ""
        out.append(f"- {where}{when}: {e.kind.replace('_', ' ')}: {md(e.text)}{times}")
    if len(run.log_entries) > 40:
        out.append(f"- … and {len(run.log_entries) - 40} more (see the JSON report)")
    return [*out, ""]


def _largest_rise(rise: dict | None) -> str:
    """How far the attempt's most risen point stood over the median of the 8 before it (said, so that "no spike"
    is never read as "no rise": a run with wide noise can rise far within it)."""
    if not rise or rise["ratio"] < 1.5:
        return ""
    return (f"; its largest rise: {times(rise['ratio'])} the lower median of the 8 points before, to "
            f"{shown(rise['value'])} at step {rise['step']}")
