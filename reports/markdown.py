"""The markdown incident chronicle: summary, what was read and checked, timeline, one entry per attempt (short
launches in one line each), the layer-gradient findings with their heatmap (when the run logs per-layer grad norms),
suspected causes with evidence and counter-evidence, setup findings, inputs."""

from __future__ import annotations

import json
import math
from typing import Any

from forensics.configs import differing_keys
from forensics.findings import (
    BLOWUP_KINDS,
    FAILED_ENDINGS,
    INSTABILITY_KINDS,
    NOT_WHY_CAUSES,
    STOPPED_ENDINGS,
    Anomaly,
    Attempt,
    Blips,
    EndReason,
    Findings,
    Kind,
    ModelCheck,
    RunFindings,
    SizeBasis,
    first_anomaly,
    shown,
    step_count,
    times,
)
from forensics.progress import MIN_POINTS, NO_GAIN, Unjudged
from parsers import schema as s
from reports.escape import md
from reports.runs_table import runs_table_section, summary_only
from reports.timeline import ENDINGS, bar_said, clock, coverage_section, ending, steps, timeline_section


def _num(value: float | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    return f"{value:.6g}"


def _params(n: float | None) -> str:
    if n is None:
        return "n/a"
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def _value(v: Any) -> str:
    return md(json.dumps(v) if not isinstance(v, str) else v)


def _changes(attempt: Attempt) -> str:
    if not attempt.config_changes:
        return "-" if attempt.index == 1 else "nothing" if attempt.config_compared else "no config to compare"
    return ", ".join(f"{md(k)}: {_value(a)} → {_value(b)}" for k, (a, b) in attempt.config_changes.items())


LONE_SKIPS_SAID = 5  # groups of skipped iterations too few for a burst named in the summary


def _other_checks(run: RunFindings) -> str:
    """The checks beside the loss's that had something to read: NaN always; the loss scale and skipped iterations
    when logged; hangs when the steps carry times."""
    read = run.coverage.get("metrics", {})
    # (skipped iterations too few for a burst are something found: said on a line of their own)
    checks = ["NaN", *(["loss scale"] if s.LOSS_SCALE in read else []),
              *(["skipped iterations"] if s.SKIPPED_ITERATIONS in read and not run.coverage.get("lone_skips") else []),
              *(["hangs"] if any(a.last_step_at is not None for a in run.attempts) else [])]
    return ", ".join(checks)


def _start(attempt: Attempt) -> str:
    if attempt.begins_mid_run:
        at = (f"epoch {attempt.first_epoch:g} (its first logged point)" if attempt.first_epoch
              else f"step {attempt.start_step}")
        text = (f"the log begins mid-run, at {at}; what came before is not in it (an excerpt, or a resume whose "
                "checkpoint load was not logged)")
    elif attempt.warmup_logs_before:
        n = attempt.warmup_logs_before
        text = (f"not known: the LR at its first point is {n + 1} times the rise between its points, so a linear "
                f"warm-up from 0 logged {n} points before it (an excerpt); a warm-up that starts above 0 (torch's "
                "LinearLR starts at a third) may start here")
    elif attempt.resumed_from_step is None:
        text = ("from weights loaded from a checkpoint, its steps counted from the start (a fine-tune, or a training "
                "begun from loaded weights)" if attempt.loaded_weights else
                "from scratch" if not attempt.resumed_from_inferred else "from the start of training")
        if attempt.start_step is None:
            text = "no iteration logged"
    else:
        text = f"resumed from step {attempt.resumed_from_step}"
        if attempt.resumed_from_inferred:
            text += (f" (inferred: its checkpoint-load line names no step; its first logged step is "
                     f"{attempt.start_step})" if attempt.load_without_step else
                     f" (inferred: no checkpoint-load line; its first logged step is {attempt.start_step})")
    return text + (" **(rollback)**" if attempt.rollback else "")


def _anomaly_line(a: Anomaly) -> str:
    span = f"step {a.step}" if a.step == a.end_step else f"steps {a.step}–{a.end_step}"
    line = f"- {span}: **{a.kind.replace('_', ' ')}** ({md(a.metric)}): {md(a.detail)}"
    if a.averaged_over:
        line += f" *(each logged value is a mean over {a.averaged_over} iterations, so a short spike shows diluted)*"
    lines = [line, *(f"  - before it: {md(p)}" for p in a.precursors)]
    if a.warning:
        w = a.warning
        lines.append(f"  - **warning {step_count(w['lead_steps'])} ahead:** "
                     + "; ".join(md(x["detail"]) for x in w["signals"]))
    return "\n".join(lines)


def _failed(run: RunFindings) -> list[Attempt]:
    troubled = {a.attempt for a in run.anomalies if a.kind in BLOWUP_KINDS}
    return [a for a in run.attempts if a.end_reason in FAILED_ENDINGS or a.index in troubled
            or a.failed_after_training]


_WORDS = {2: "two", 3: "three"}
# the endings said as a state, not a verb, follow a colon: "attempt 1: the log ends with no end printed"
_STATE_ENDINGS = {EndReason.RUNNING: ": ", EndReason.UNKNOWN: ": ", EndReason.NO_TRAINING: ": "}


def _trouble(run: RunFindings, a: Attempt) -> str:
    """What went wrong in an attempt that did not end on it (it completed with its grad norm NaN): its first NaN or
    divergence."""
    if a.end_reason in FAILED_ENDINGS:
        return ""
    first = next((x for x in sorted(run.anomalies, key=lambda x: x.step) if x.attempt == a.index
                  and x.kind in BLOWUP_KINDS), None)
    if first is None:
        return ""
    what = first.trouble if first.kind == Kind.NAN else "divergence"
    metric = (first.metric or s.LOSS).replace("_", " ")
    if first.recovered_step is not None:  # NaN that the run got past
        where = f"at step {first.step}" if first.end_step == first.step else f"at steps {first.step}-{first.end_step}"
        return f"; {what} in the {metric} {where}, finite again from step {first.recovered_step}"
    return f"; {what} in the {metric} from step {first.step}"


def _skipping_at_the_end(run: RunFindings) -> list[str]:
    """Each attempt whose log ends with no end printed while it was skipping its iterations (a burst of skipped
    iterations that reaches its last logged step: an fp16 overflow storm), said with its burst and loss scale."""
    said = []
    for a in run.attempts:
        if a.end_reason not in (EndReason.RUNNING, EndReason.UNKNOWN) or a.end_step is None:
            continue
        mine = [x for x in run.anomalies if x.attempt == a.index and x.end_step == a.end_step]
        burst = next((x for x in mine if x.kind == Kind.SKIPPED_ITERATIONS), None)
        if burst is None:
            continue
        scale = next((x for x in mine if x.kind == Kind.LOSS_SCALE_COLLAPSE and x.value is not None), None)
        said.append(f"attempt {a.index} was still skipping its iterations where its log ends: {md(burst.detail)}"
                    + (f", its loss scale down to {shown(scale.value)}" if scale else ""))
    return said


MAX_UNKNOWN_ENDS = 3  # attempts with no end in their log named in the summary; the rest counted


def _unknown_end(run: RunFindings, a: Attempt) -> str:
    """'how attempt 1 ended is not in the log (attempt 2 started next, back at step 3000)': an attempt with no end in
    its log and the one that followed it."""
    nxt = next((b for b in run.attempts if b.index > a.index), None)
    # (an inferred resume point is no logged step: said so, as the rollbacks line says it)
    back = (f", back at step {nxt.resumed_from_step or 0}" + (" (inferred)" if nxt.resumed_from_inferred else "")
            if nxt is not None and nxt.rollback else "")
    after = "" if nxt is None else f" (attempt {nxt.index} started next{back})"
    return f"how attempt {a.index} ended is not in the log{after}"


def _summary(run: RunFindings) -> list[str]:
    lines: list[str] = []
    if run.model.size_mismatch:
        lines.append(f"- **Model (setup finding):** {md(run.model.size_headline)}.")
    no_loss = "loss" in run.coverage.get("missing", [])
    bad = _failed(run)
    if bad:
        went = "; ".join(f"attempt {a.index}{_STATE_ENDINGS.get(a.end_reason, ' ')}{ending(a)}" + _trouble(run, a)
                         for a in bad)
        lines.append(f"- **What went wrong:** {went}.")
    elif no_loss:
        nothing = not run.coverage.get("metrics") and not run.coverage.get("other_scalars")
        unprinted = run.coverage.get("loss_unprinted")
        said = ("no metric logged" if nothing else "no loss printed in its iteration lines" if unprinted
                else "no loss metric recognised")
        lines.append(f"- **What went wrong:** not checked: {said}"
                     " (see *What was read and checked*); "
                     + ("no attempt ended on an error." if run.attempts else "no attempt found."))
    elif skipping := _skipping_at_the_end(run):
        lines.append("- **What went wrong:** no attempt ended in NaN, divergence, a crash or a hang, but "
                     + "; ".join(skipping) + ".")
    elif unknown := [a for a in run.attempts if a.end_reason == EndReason.UNKNOWN]:
        # an attempt whose log shows no end before the next one began may have crashed: not an all-clear
        said = "; ".join(_unknown_end(run, a) for a in unknown[:MAX_UNKNOWN_ENDS])
        more = len(unknown) - MAX_UNKNOWN_ENDS
        lines.append("- **What went wrong:** no attempt's log ends in NaN, divergence, a crash or a hang, but " + said
                     + (f"; nor how {more} more attempt{'s' if more > 1 else ''} ended (see *Timeline*)" if more > 0
                        else "") + ".")
    else:
        lines.append("- **What went wrong:** no attempt ended in NaN, divergence, a crash or a hang.")
    # (an attempt that completed, then was stopped in what its program did next, says both)
    if untrained := [a for a in run.attempts if a.all_skipped]:
        lines.append("- **No step taken:** " + "; ".join(f"attempt {a.index}: {_no_step(a)}" for a in untrained)
                     + ".")
    stopped = [a for a in run.attempts if (a.end_reason in STOPPED_ENDINGS or a.stopped_after_how is not None)
               and a.index not in {b.index for b in bad}]
    if stopped:
        lines.append("- **Stopped on purpose or from outside:** " + "; ".join(
            f"attempt {a.index} {ENDINGS[a.end_reason]}" + (
                f"{' its training' if a.end_reason == EndReason.COMPLETED else ''}, then was "
                f"{ENDINGS[a.stopped_after_how]} in what the program did next: "
                f"“{md(a.stopped_after_training)}”" if a.stopped_after_how is not None else "") for a in stopped) + ".")
    # (an attempt whose log ends inside a divergence or a NaN, with no line that ended it, stopped short too)
    short_of = [a for a in run.attempts if (a.end_reason in (EndReason.RUNNING, EndReason.UNKNOWN) or (
                    a.end_reason in (EndReason.DIVERGED, EndReason.NAN) and a.end_kind is None))
                and a.end_kind != s.EV_ELISION and a.target_step is not None and a.end_step is not None
                and a.end_step < a.target_step]
    # a Trainer's trainer_state.json without its summary entry is a checkpoint's copy: it ends where that was saved
    formats = {src["path"]: src["format"] for src in run.sources}
    saved = [a for a in short_of if a.sources and all(formats.get(p) == "hf-trainer-state" for p in a.sources)]
    # (a log that stops within one logging interval of its length has logged all it would)
    short_of = [a for a in short_of if a not in saved and a.short_of_target()]
    if saved:
        lines.append("- **History ends at a checkpoint:** " + "; ".join(
            f"attempt {a.index}'s trainer_state.json ends at step {a.end_step} of {a.target_step}, written when that "
            "checkpoint was saved; steps after it, if any ran, are not in it" for a in saved) + ".")
    # an attempt another followed stopped short of its length; the last one's log ends there (whether the run stopped,
    # or the file was cut or copied early, the log does not show)
    last = run.attempts[-1] if run.attempts else None
    for said, mine in (("Stopped short, with no end in the log, before the next attempt", [a for a in short_of
                                                                                             if a is not last]),
                       ("The log ends before the planned length, with no end printed", [a for a in short_of
                                                                                          if a is last])):
        if mine:
            lines.append(f"- **{said}:** " + "; ".join(
                f"attempt {a.index} at step {a.end_step} of {a.target_step}"
                + (" (its progress bar's total)" if a.target_from_bar else "") for a in mine) + ".")
    # "training completed" long before the planned length: an early stop, a stop asked of the trainer, a time budget
    # (more than two logging intervals short, the interval measured over three points or more)
    early = [a for a in run.attempts if a.ended_early()]
    if early:
        lines.append("- **Completed before its planned length:** " + "; ".join(
            f"attempt {a.index} printed that its training completed at step {a.end_step} of the {a.target_step} "
            "planned" for a in early) + " (an early-stopping rule, a stop asked of the trainer or a time budget ends "
            "training that way).")
    past = [a for a in run.attempts if a.past_target()]
    if past:
        lines.append("- **Trained past its planned length:** " + "; ".join(
            f"attempt {a.index} completed at step {a.end_step}, {a.end_step - a.target_step} steps past the "
            f"{a.target_step} planned" for a in past) + ".")
    exited = [a for a in run.attempts if a.end_reason == EndReason.SILENT_EXIT]
    if exited:
        lines.append("- **Exited, with no reason printed:** " + "; ".join(
            f"attempt {a.index} after step {a.end_step}" + (f" of {a.target_step}" if a.target_step else "")
            + f": its processes shut down (“{md(a.end_detail)}”) with no error, stop or end of training printed"
            for a in exited) + ".")
    silent = [a for a in run.attempts if a.end_reason == EndReason.NO_TRAINING]
    if silent:
        lines.append("- **Launches with no training step, error or stop in the logs:** " + ", ".join(
            f"attempt {a.index}" + (f" ({clock(a.started_at)})" if a.started_at is not None else "") for a in silent)
            + ".")
    rollbacks = [a for a in run.attempts if a.rollback and not a.short]
    if rollbacks:
        lines.append(
            "- **Rollbacks:** "
            + ", ".join(f"attempt {a.index} went back to step {a.resumed_from_step or 0}"
                        + (" (inferred)" if a.resumed_from_inferred else "") for a in rollbacks)
            + "."
        )
    if run.gaps:
        lines.append(f"- **Holes in the data:** {len(run.gaps)} (see the timeline); nothing is inferred across them.")
    if (seen := run.learning) and seen["fell"] is False:
        val = (f"; the validation loss went from {shown(round(seen['val_start'], 6))} to "
               f"{shown(round(seen['val_end'], 6))}" if seen["val_start"] is not None else "")
        since = (f" of attempt {seen['from_attempt']} on (the last to count its steps from the start again)"
                 if seen.get("from_attempt") else "")
        lines.append(f"- **The loss did not fall** over steps {seen['steps'][0]}–{seen['steps'][1]}{since} "
                     f"(median {shown(round(seen['start'], 6))} over its first tenth of points, "
                     f"{shown(round(seen['end'], 6))} over its last){val}.")
    if (seen := run.learning) and seen.get("barely_fell"):
        fall = (seen["start"] - seen["end"]) / abs(seen["start"])
        lines.append(f"- **The loss barely fell:** {fall:.1%} over steps {seen['steps'][0]}–{seen['steps'][1]} "
                     f"(median {shown(round(seen['start'], 6))} over its first tenth of points, "
                     f"{shown(round(seen['end'], 6))} over its last): a fall beyond its noise, but under {NO_GAIN:.0%}.")
    if (seen := run.learning) and (why := seen.get("unjudged")):
        lines.append(f"- **Whether the loss fell, not judged:** {_unjudged(seen, why)}.")
    if (seen := run.learning) and (guess := seen.get("chance")):
        lines.append(f"- **The loss sat at {guess['level']} = {guess['nats']}:** median {shown(round(seen['start'], 6))} "
                     f"over its first tenth of points, {shown(round(seen['end'], 6))} over its last (steps "
                     f"{seen['steps'][0]}–{seen['steps'][1]}): the loss of "
                     + ("a 50/50 guess between two classes." if guess["level"] == "ln 2"
                        else "a uniform guess over its vocabulary."))
    if (seen := run.learning) and (up := seen.get("val_rising")):
        lines.append(f"- **Validation loss rising:** from its lowest, {shown(round(up['from'], 6))} at step "
                     f"{up['from_step']}, it rose "
                     + (f"at each of the {up['evaluations'] - 1} evaluations after" if up["rises"] == up["evaluations"] - 1
                        else f"over the {up['evaluations'] - 1} evaluations after (above the one before at "
                             f"{up['rises']} of them)") + ", to "
                     f"{shown(round(up['to'], 6))} at step {up['to_step']}, while the training loss fell over the "
                     f"same steps ({shown(round(up['train_from'], 6))} to {shown(round(up['train_to'], 6))}, "
                     + (f"the medians of the first and last {_WORDS[up['train_points']]} points"
                        if up["train_points"] > 1 else "its first and last points") + "): the usual sign of overfitting.")
    if holes := run.coverage.get("short_holes"):
        where = ", ".join(f"after step {after} (next: {before}" + (f", attempt {a})" if len(run.attempts) > 1 else ")")
                          for a, after, before in holes["examples"])
        more = f" and {holes['places'] - len(holes['examples'])} more" if holes["places"] > len(holes["examples"]) else ""
        n = holes["points_missing"]
        lines.append(f"- **Points not logged:** {n} point{'s' if n != 1 else ''} of the regular logging with no "
                     f"number read (not logged, or only non-numeric values there), {where}{more}; too few to be a "
                     f"hole, so the checks read across {'them' if n != 1 else 'it'}.")
    first = first_anomaly(run.anomalies)
    if first:
        lines.append(
            f"- **First anomaly:** {first.kind.replace('_', ' ')} at step {first.step} (attempt {first.attempt})."
        )
    if dead := sorted({a.attempt for a in run.anomalies if a.kind == Kind.ZERO_GRAD_NORM}):
        lines.append(f"- **Grad norm not measured:** attempt{'s' if len(dead) > 1 else ''} "
                     f"{', '.join(map(str, dead))} logged it as 0 at every point beside a loss above 0 (a placeholder, "
                     "or a model that got no gradient: see the attempt); the grad-norm checks rest on nothing there.")
    top = next((c for c in run.suspected_causes if c.kind not in NOT_WHY_CAUSES), None)
    if top:
        # (with nothing gone wrong, what the causes explain is the anomalies: a loss spike that recovered)
        said = "Most likely why" if bad else "Most likely cause of its anomalies"
        lines.append(f"- **{said} (suspected):** {md(top.cause)} (confidence {top.confidence:.2f}).")
        if top.check_next:
            lines.append(f"- **What to check next:** {md(top.check_next)}.")
    unjudged = run.coverage.get("unjudged_losses", [])
    checks = run.coverage.get("spike_checks", {}).get(s.LOSS, {})
    judged_somewhere = any(n for n in run.coverage.get("spikes_judged", {}).get("loss", {}).values())
    absolute = any(checks.get(str(u["attempt"]), {}).get("absolute_only") for u in unjudged)
    if not run.anomalies:
        lines.append("- **Anomalies:** none found in what could be checked (no loss metric)." if no_loss else
                     "- **Anomalies:** none found." if not unjudged else
                     "- **Anomalies:** none found where the loss could be judged." if judged_somewhere else
                     "- **Anomalies:** none found by the absolute checks (too few points to know the loss's noise); "
                     f"the other checks ({_other_checks(run)}) found nothing." if absolute else
                     "- **Anomalies:** no loss could be judged for spikes; the other checks "
                     f"({_other_checks(run)}) found nothing.")
    if lone := run.coverage.get("lone_skips"):
        rest = lone[LONE_SKIPS_SAID:]
        lines.append("- **Skipped iterations, too few for a burst:** " + "; ".join(
            f"attempt {g['attempt']}: {g['total']:.0f}, counted "
            + (f"at step {g['start']}" if g["start"] == g["end"] else f"at steps {g['start']}–{g['end']}")
            for g in lone[:LONE_SKIPS_SAID])
            + (f"; and {len(rest)} more such groups ({sum(g['total'] for g in rest):.0f} iterations)" if rest else "")
            + f" (not a burst: fewer than {run.coverage.get('skip_burst')} together).")
    for u in unjudged:
        (s0, v0), (s1, v1), (s2, v2) = u["first"], u["highest"], u["last"]
        path = (f"was {shown(v0)} at its first point (step {s0}), its highest" if s1 == s0 else
                f"went from {shown(v0)} (step {s0}) to {shown(v1)} at its highest (step {s1})")
        below = checks.get(str(u["attempt"]), {}).get("negative")
        if below:
            lines.append(f"- **Not judged:** attempt {u['attempt']}'s loss goes below 0 ({shown(below['value'])} at step "
                         f"{below['step']}): not a cross-entropy, so not judged for spikes or divergence; its loss "
                         f"{path}, and was {shown(v2)} at its last step ({s2}).")
        elif checks.get(str(u["attempt"]), {}).get("absolute_only"):
            lines.append(f"- **Absolute checks only:** attempt {u['attempt']}'s {u['points']} loss point(s) are too few "
                         f"to know the noise (fewer than 10 before each in its stretch of the log); its loss {path}, "
                         f"and was {shown(v2)} at its last step ({s2}).")
        else:
            mid_run = any(a.begins_mid_run for a in run.attempts if str(a.index) == str(u["attempt"]))
            lines.append(f"- **Not judged:** attempt {u['attempt']}'s {u['points']} loss point(s) are too few for the "
                         "spike detectors (" + ("each the first of its stretch of the log" if mid_run else
                                                "the start of training, or the first of a stretch")
                         + f"); its loss {path}, and was {shown(v2)} at its last step ({s2}).")
    scores = [f"{m.replace('_', ' ')} {v['run']:.2f}%" for m, v in run.spike_scores.items() if v.get("run") is not None]
    if scores:
        lines.append("- **Spike score** (OLMo 2: share of points 7 sd or more from the mean of the previous 1,000; "
                     "each stretch of the log scored from its 101st point): "
                     + ", ".join(scores) + ".")
    return lines


def _far(attempt: Attempt) -> str:
    bar = bar_said(attempt)
    if not bar and attempt.target_from_bar:
        bar = f" of {attempt.target_step} (its progress bar's total)"
    return _far_logged(attempt) + bar


def _far_logged(attempt: Attempt) -> str:
    if attempt.end_step is None:
        return "no step read" if attempt.end_at_step is None else f"step {attempt.end_at_step} as its log printed"
    if attempt.end_at_step is not None and attempt.end_at_step > attempt.end_step:
        return f"step {attempt.end_at_step} as its log printed ({attempt.end_step} in its metrics)"
    return f"step {attempt.end_step}"


def _unjudged(seen: dict[str, Any], why: str) -> str:
    """Why whether the loss fell was not judged (:class:`forensics.progress.Unjudged`), with its levels."""
    levels = (f"median {shown(round(seen['start'], 6))} over its first tenth of points, "
              f"{shown(round(seen['end'], 6))} over its last (steps {seen['steps'][0]}–{seen['steps'][1]})")
    if why == Unjudged.NOT_CROSS_ENTROPY:
        return ("the loss goes below 0, so it is no cross-entropy (a policy, preference or adversarial objective), "
                "and its fall is not measured")
    if why == Unjudged.FEW_POINTS:
        return f"{seen['points']} points, too few to say that it did not fall ({MIN_POINTS} needed); {levels}"
    if why == Unjudged.EARLY_FALL:
        return (f"{levels}; its first tenth reaches {shown(round(seen['first_top'], 6))}, so a fall inside it (or "
                "noise there) leaves the medians unable to say")
    change = (f"{(seen['end'] - seen['start']) / abs(seen['start']):+.1%}" if seen["start"] else
              f"{seen['end'] - seen['start']:+.4g}")  # (from a median of 0 a change is no share of it)
    return (f"{levels}, a change of {change} that its noise leaves open (standard error "
            f"{shown(round(seen['error'], 6))})")


def _no_step(a: Attempt) -> str:
    """'all 10 of its iterations (steps 1–10) were skipped (fp16 overflow), so none changed the weights'."""
    n, first, last = a.all_skipped["iterations"], a.all_skipped["first_step"], a.all_skipped["last_step"]  # type: ignore[index]
    span = f"step {last}" if first == last else f"steps {first}–{last}"
    which = (f"its one iteration ({span}) was skipped" if n == 1 else
             f"both of its iterations ({span}) were skipped" if n == 2 else
             f"all {n} of its iterations ({span}) were skipped")
    why = "fp16 overflow" if a.all_skipped["overflow"] else "no overflow line or loss scale says why"  # type: ignore[index]
    return f"{which} ({why}), so no step changed the weights"


def _attempt_entry(run: RunFindings, a: Attempt) -> list[str]:
    out = [f"## Attempt {a.index}: steps {steps(a)}", "", f"- **Start:** {_start(a)}."]
    if a.index > 1:
        out.append(f"- **What changed:** {_changes(a)}.")
    if a.behaviour:
        out.append("- **What followed the change:**")
        out += [f"  - {md(b)}" for b in a.behaviour]
    mine = [x for x in run.anomalies if x.attempt == a.index and x.kind not in LAYER_KINDS]
    if a.all_skipped:  # (no step taken is what happened, before any anomaly)
        out.append(f"- **What happened:** {_no_step(a)}" + ("; nothing else found." if not mine else "; and:"))
    if mine:
        if not a.all_skipped:
            out.append("- **What happened:**")
        out += ["\n".join("  " + part for part in _anomaly_line(x).split("\n")) for x in mine]
    elif a.start_step is not None and not a.all_skipped:
        layered = any(x.attempt == a.index and x.kind in LAYER_KINDS for x in run.anomalies)
        out.append("- **What happened:** no anomalies" + (" in the loss and the global grad norm (see *Layer "
                                                          "gradients and clipping*)." if layered else "."))
    line = blips_line([b for b in run.blips if b.attempt == a.index])
    if line:
        out.append(line)
    out += [f"- **How it ended:** {ending(a)}.", ""]
    return out


LAYER_KINDS = frozenset({Kind.GRAD_NORM_RATIO, Kind.CLIPPING})  # told in their own section, not per attempt


def layer_section(run: RunFindings, image: str | None = None) -> list[str]:
    """The layer-gradient findings (grad-norm ratios, clipping) in their own section, with the heatmap of grad norm by
    layer and step; nothing for a run that has neither.

    >>> layer_section(RunFindings("r", "r", [], [], [], None, []))  # type: ignore[arg-type]
    []
    """
    mine = [x for x in run.anomalies if x.kind in LAYER_KINDS]
    read = run.coverage.get("layer_grad_norms")
    if not mine and not image and not read:
        return []
    out = ["## Layer gradients and clipping", ""]
    if image:
        out += [f"![grad norm by layer and step]({image})", ""]
    if read:
        units = read["units"]
        shown_units = ", ".join(units[:12]) + (f" and {len(units) - 12} more" if len(units) > 12 else "")
        out += [f"Read {read['series']} per-layer grad-norm series ({read['points']:,} points) as {len(units)} layer "
                f"groups: {md(shown_units)}; checked for NaN/Inf, for a group whose share of the grad norm drifted, "
                "and for where each grad-norm spike started.", ""]
    if not mine:
        return [*out, "No layer group's share of the grad norm drifted, no spike started in one layer group, and "
                      "nothing was found about clipping.", ""]
    for x in mine:
        out.append(f"- attempt {x.attempt}, " + _anomaly_line(x)[2:])
    return [*out, ""]


def blips_line(blips: list[Blips]) -> str:
    """One line for an attempt's blips (lone points inside its noise tail), or "" without any.

    >>> print(blips_line([Blips(1, "loss", 31, 1.2, 14212, [])]))  # doctest: +NORMALIZE_WHITESPACE
    - **Blips:** 31 single-step loss blips, largest 1.2x at step 14212, within the run's noise tail, so not
    incidents.
    """
    if not blips:
        return ""
    parts = [f"{b.count} single-step {b.metric.replace('_', ' ')} blip{'s' if b.count != 1 else ''}, largest "
             f"{times(b.largest)} at step {b.largest_step}" for b in blips]
    return f"- **Blips:** {'; '.join(parts)}, within the run's noise tail, so not incidents."


def _causes(run: RunFindings) -> list[str]:
    # the heading says what is explained: a run that only stopped (by hand, by its scheduler) or crashed with its loss
    # in order did not blow up
    stopped = run.suspected_causes and all(c.kind in NOT_WHY_CAUSES for c in run.suspected_causes)
    blew_up = any(a.kind in INSTABILITY_KINDS for a in run.anomalies)
    # (a run that ended on none of its attempts' failures has no "why it ended": its anomalies, or nothing)
    failed = bool(_failed(run))
    heading = ("Why it stopped" if stopped else "Why it blew up" if blew_up and failed
               else "What may have caused its anomalies" if blew_up or (run.anomalies and not failed)
               else "Why it ended" if failed else "Suspected causes")
    out = [f"## {heading}" + (" (suspected causes)" if heading != "Suspected causes" else ""), ""]
    if not run.suspected_causes:
        after = [a for a in run.attempts if a.failed_after_training and a.end_reason not in FAILED_ENDINGS]
        if after and len(after) == len(_failed(run)):  # its training completed: only what came after it failed
            return [*out, "None found for the training: it completed. What failed came after it: "
                    + "; ".join(f"attempt {a.index}'s program printed “{md(a.failed_after_training)}”" for a in after[:3])
                    + " (its traceback says where).", ""]
        return [*out, "None: nothing in the logs points at a cause.", ""]
    for i, c in enumerate(run.suspected_causes, 1):
        out.append(f"{i}. **{md(c.cause)}** (suspected, confidence {c.confidence:.2f})")
        out += [f"   - {md(e)}" for e in c.evidence]
        out += [f"   - *against it:* {md(e)}" for e in c.counter_evidence]
        if c.check_next:
            out.append(f"   - *to confirm or refute:* {md(c.check_next)}")
    return [*out, ""]


def config_diff_table(diffs: dict[str, dict[str, Any]], label: str) -> list[str]:
    """A markdown table: one row per differing key, one column per attempt (or run)."""
    names = list(next(iter(diffs.values())).keys()) if diffs else []
    heads = [f"{label} {md(n)}".strip() for n in names]
    out = [f"| key | {' | '.join(heads)} |", f"|---|{'---|' * len(names)}"]
    for key, values in diffs.items():
        out.append(f"| {md(key)} | " + " | ".join("–" if values[n] is None else _value(values[n]) for n in names)
                   + " |")
    return out


def _setup_findings(run: RunFindings) -> list[str]:
    if not run.setup:
        return []
    return ["## Setup findings", "", "Not causes of a NaN by themselves; what is off in how the model was set up:",
            "", *[f"- {md(n)}." for n in run.setup], ""]


def _name_matches(m: ModelCheck) -> str:
    """Which count the size in the name is: the total, or the count without the embeddings (Gemma's "2B")."""
    if m.name_matches == SizeBasis.TOTAL:
        return " (its total count)"
    if m.name_matches != SizeBasis.NON_EMBEDDING or m.parameters_non_embedding is None:
        return ""
    vocab, h = m.shape["vocab_size"], m.shape["hidden_size"]
    what = (f"its {vocab:,} x {h:,} word embedding" if m.shape.get("tied_embeddings")
            else f"its {vocab:,} x {h:,} word embedding and output layer")
    if m.shape.get("max_position_embeddings"):
        what += " and learned positions"
    return (f" (its count without the embeddings, {_params(m.parameters_non_embedding)}: without the "
            f"{_params(m.shape['parameters_unique'] - m.parameters_non_embedding)} of {what})")


def _setup(run: RunFindings) -> list[str]:
    m, sched = run.model, run.schedule
    out = [
        "## Setup",
        "",
        f"- **Parameters** from its shape: {_params(m.parameters_from_shape)}"
        + (f" ({_params(m.shape['parameters_unique'])} distinct)" if m.shape.get("parameters_unique") not in
           (None, m.parameters_from_shape) else "")
        + f"; printed by the program: {_params(m.parameters_logged)}"
        + (f" ({md(m.parameters_logged_how)})" if m.parameters_logged_how else "")
        + f"; stated in its name: {_params(m.parameters_stated)}{_name_matches(m)}.",
    ]
    if m.shape:
        known = {k: v for k, v in m.shape.items() if v is not None and k not in ("parameters_unique", "assumed")}
        assumed = m.shape.get("assumed") or []
        out.append("- **Shape:** " + ", ".join(f"{md(k)}={md(v)}" for k, v in known.items() if k not in
                                               {a.split(" = ")[0] for a in assumed})
                   + (f"; assumed, not in the config: {md(', '.join(assumed))}" if assumed else "") + ".")
    out += [f"- {md(n)}." for n in m.caveats]
    since = f" (attempt {sched.from_attempt} on, the last start from scratch)" if sched.from_attempt else ""
    first = next((a for a in run.attempts if a.index == (sched.from_attempt or a.index)), None)
    if sched.lr_peak == 0:  # (a warm-up from 0 has a later point above it)
        out.append(f"- **Schedule{since}:** LR logged as 0 at every point: if that is the rate the optimizer used, no "
                   "step moved the weights (a schedule that never started, or every step skipped).")
    elif sched.lr_constant and not sched.warmup_end_configured:
        out.append(f"- **Schedule{since}:** LR {shown(sched.lr_peak)} at every logged point (from step "
                   f"{sched.lr_peak_step}): no warm-up or decay in the logs.")
    elif sched.lr_peak is not None:
        late_start = False  # (its highest point is its first, logged after step 1: a peak before it would not show)
        if sched.still_warming_up:
            warm = "still rising at the last logged point: the logs end during the warm-up"
        elif sched.peak_before_hole is not None:
            warm = (f"still rising at the last point before a hole in the log (next logged: step "
                    f"{sched.peak_before_hole}): the peak and the end of the warm-up may lie in the hole")
        elif sched.warmup_end_step is None and first is not None and first.begins_mid_run:
            warm = "the log begins mid-run, so a warm-up before it would not show"
        elif late_start := (sched.warmup_end_step is None and first is not None
                            and sched.lr_peak_step == first.start_step and (first.start_step or 0) > 1):
            warm = f"a warm-up before step {sched.lr_peak_step} would not show"
        elif sched.warmup_end_step is None:
            warm = "no warm-up seen"
        elif sched.warmup_end_after is not None:
            warm = f"warm-up ends between steps {sched.warmup_end_after} and {sched.warmup_end_step} (the logged points)"
        else:
            warm = f"warm-up ends at step {sched.warmup_end_step}"
        rising = sched.still_warming_up or sched.peak_before_hole is not None
        mid = (sched.warmup_end_step is None and first is not None and first.begins_mid_run
               and sched.lr_peak_step == first.start_step)  # highest at the first point: its peak came before
        said = "is highest at the log's first point," if mid or late_start else "reaches" if rising else "peaks at"
        out.append(f"- **Schedule{since}:** LR {said} {shown(sched.lr_peak)} (step {sched.lr_peak_step}); {warm}"
                   + (f" (configured: step {sched.warmup_end_configured})" if sched.warmup_end_configured else "")
                   + ".")
    if sched.batch_size_final is not None and sched.batch_size_logged is not None:
        first, largest = sched.batch_size_logged
        if not sched.batch_size_configured:
            out.append(f"- **Batch size{since}:** {shown(first)} at the first logged step, {shown(largest)} the largest "
                       "logged; the configured batch size is not in the logs.")
        else:
            if sched.batch_rampup_end_step is not None and sched.batch_rampup_end_after is not None:
                ramp = (f"ramped up from {shown(first)}, full between steps {sched.batch_rampup_end_after} and "
                        f"{sched.batch_rampup_end_step} (the logged points)")
            elif sched.batch_rampup_end_step is not None:
                ramp = f"ramped up from {shown(first)}, full from step {sched.batch_rampup_end_step}"
            elif first >= sched.batch_size_final:
                ramp = "full from the first logged step"
            else:
                ramp = f"still ramping up when the logs end ({shown(first)} to {shown(largest)} logged)"
            out.append(f"- **Batch size{since}:** {shown(sched.batch_size_final)}, {ramp}.")
    out += [f"- {md(n)}." for n in sched.notes]
    return [*out, ""]


def _run(run: RunFindings, images: dict[str, str] | None = None) -> list[str]:
    images = images or {}
    out = [f"# Incident chronicle: {md(run.name)}", ""]
    if "overview" in images:
        out += [f"![loss across attempts]({images['overview']})", ""]
    out += ["## Summary", "", *_summary(run), ""]
    if run.warnings:
        out += ["> **Warnings while reading:**"]
        out += [f"> - {md(w)}" for w in run.warnings[:20]]
        if len(run.warnings) > 20:
            out.append(f"> - … and {len(run.warnings) - 20} more")
        out.append("")
    out += coverage_section(run)
    out += timeline_section(run)
    full = [a for a in run.attempts if not a.short]
    if full:
        out += ["## Attempts", "", "| # | steps | start | what changed | how far it got | how it ended |",
                "|---|---|---|---|---|---|"]
        for a in full:
            out.append(f"| {a.index} | {steps(a)} | {_start(a)} | {_changes(a)} | {_far(a)} | "
                       f"{ENDINGS.get(a.end_reason, a.end_reason.value)} |")
        out.append("")
    if "attempts" in images:
        out += [f"![loss and grad norm per attempt]({images['attempts']})", ""]
    for a in full:
        out += _attempt_entry(run, a)
    out += layer_section(run, images.get("layer_grads"))
    out += _causes(run)
    out += _setup_findings(run)
    if run.config_diffs:
        out += ["## Config differences between attempts", "", *config_diff_table(run.config_diffs, "attempt"), ""]
    out += _setup(run)
    out += ["## Inputs", ""]
    out += [f"- {md(s['path'])} ({md(s['format'])}{', sampled' if s.get('sampled') else ''})" for s in run.sources]
    if run.skipped:
        out.append(f"- skipped {len(run.skipped)} file(s): " + "; ".join(md(s) for s in run.skipped[:10]))
    out.append("")
    return out


def render_markdown(findings: Findings, images: dict[str, dict[str, str]] | None = None) -> str:
    """The incident chronicle of every run, in markdown; ``images`` maps a run name to its plots (relative paths).
    Text that came from logs is escaped."""
    lines: list[str] = []
    tabled = [r for r in findings.runs if summary_only(r)]
    for run in findings.runs:
        if run not in tabled:
            lines += _run(run, (images or {}).get(run.name))
    if tabled:
        lines += runs_table_section(tabled)
    chronicled = [r for r in findings.runs if r not in tabled]
    if len(chronicled) > 1:
        diffs = differing_keys({r.name: r.config for r in chronicled if r.config})
        if diffs:
            lines += ["# Config differences between runs", "", *config_diff_table(diffs, ""), ""]
    return "\n".join(lines).rstrip() + "\n"
