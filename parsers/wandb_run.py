"""A local or offline W&B run directory (``wandb/run-*/``, ``wandb/offline-run-*/``) as canonical frames.

The ``run-<id>.wandb`` log holds the full history, config and summary; ``files/config.yaml`` and
``files/wandb-summary.json`` (online runs) add to them. A resumed run writes a new directory with another
``run-<id>.wandb`` for the same id: each file is one attempt of the run. A copy of a run folder (``latest-run/``
committed or copied as a folder) holds the same launch's log: it is read once (:func:`_without_copies`).
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from parsers import schema as s
from parsers.megatron import DETECT, PDSH_CMD, parse_megatron
from parsers.reader import Piece, ReadContext
from parsers.textfile import InputError, TextFile, inspect_text, json_value, safe_yaml, scan_blocks
from parsers.wandb_history import config_frame, flatten, history_log
from parsers.wandb_log import config_values, is_wandb_log, read_wandb_log

_SUMMARY_META = ("_step", "_runtime", "_timestamp", "_wandb")


@dataclass
class WandbRun:
    """One ``.wandb`` file read into canonical frames (one attempt, more if its steps go back)."""

    file: Path
    log: s.ParsedLog
    run_id: str
    name: str
    start_time: float | None
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    earlier_configs: dict[int, dict[str, Any]] = field(default_factory=dict)  # attempt -> its config, all but the last
    console: list[str] = field(default_factory=list)  # what the program printed, as the .wandb file recorded it


def _expand_objects(history: pl.DataFrame) -> pl.DataFrame:
    """Dict values logged whole by the Python-backend client (0.16) -> one row per leaf, as 0.31 writes them."""
    objects = history.filter(pl.col("value_json").str.starts_with("{"))
    if not objects.height:
        return history
    rows: dict[str, list[Any]] = {"step": [], "key": [], "value_json": [], "wall_time": [], "row": []}
    for step, key, text, wall, row in objects.select(*rows).iter_rows():
        try:
            value = json_value(text)
        except ValueError:
            continue
        for leaf, v in flatten({key: value}).items():
            rows["step"].append(step)
            rows["key"].append(leaf)
            rows["value_json"].append(json.dumps(v))
            rows["wall_time"].append(wall)
            rows["row"].append(row)
    leaves = pl.DataFrame(rows, schema=history.schema)
    return pl.concat([history.filter(~pl.col("value_json").str.starts_with("{")), leaves]).sort(
        "row", maintain_order=True
    )


def read_wandb_run(path: Path, shown: str, sidecars: dict[str, Path] | None = None) -> WandbRun:
    """Read a ``run-<id>.wandb`` file (plus its ``config.yaml`` / ``wandb-summary.json`` when given).

    >>> run = read_wandb_run(Path("tests/fixtures/real/wandb/jackokeefe11__nanoGPT/wandb/"
    ...                           "run-20240215_023758-f656tyfr/run-f656tyfr.wandb"), "run-f656tyfr.wandb")
    >>> run.log.metrics.filter(metric="loss").height
    1
    """
    log = read_wandb_log(path, shown)
    history = _expand_objects(log.history).with_columns(
        value=pl.col("value_json").cast(pl.Float64, strict=False)
    )
    name = log.display_name or log.run_id or path.stem
    parsed = history_log(history.select("step", "key", "value", "wall_time", "row"), run=name, source=shown,
                         defined=log.step_metrics)
    parsed.warnings.extend(log.warnings)
    config = config_values(log.config)
    summary = dict(log.summary)
    for kind, side in (sidecars or {}).items():
        try:
            loaded = read_config_yaml(side, str(side)) if kind == "config" else read_summary_json(side, str(side))
        except InputError as exc:  # a bad sidecar costs its own values, not the history
            parsed.warnings.append(f"{exc}; the run's history was read without it")
            continue
        (config if kind == "config" else summary).update(loaded)
    # the summary's _step counts W&B's log calls: compared with the history's own; a run whose steps are another key
    # (the Trainer's train/global_step) reached the summary's value of that key
    axis = next((tag for tag, name in parsed.tags.items() if name == s.STEP_AXIS), None)
    reached, logged = summary.get("_step"), history["step"].max()
    cut_short: dict[str, Any] | None = None
    cut = _beyond(reached, logged)
    if cut and axis is not None:  # (on the run's own step axis: where its history ends, and the summary's value of it)
        reached, logged = summary.get(axis), parsed.metrics["step"].max()
        cut = _beyond(reached, logged)
    # (a file said to be cut says where, not how much of the run it lost: this does)
    if cut:
        parsed.warnings.append(f"{shown}: its history ends at step {logged}, but the run's summary says it reached "
                               f"step {int(reached)}: the rest of its history is not in the file (cut, or copied "
                               "while the run was writing it)")
        runtime = summary.get("_runtime")
        lasted = float(runtime) if isinstance(runtime, int | float) and math.isfinite(runtime) else None
        # the attempt's log leaves out what followed its last step, as a pasted "..." does: its end is not in the file
        cut_short = {"kind": [s.EV_ELISION], "step": [int(logged)], "value": [float(reached)],  # type: ignore[arg-type]
                     "wall_time": [log.start_time + lasted if log.start_time is not None and lasted else None],
                     "text": [f"its history stops at step {logged}; the run's summary says it reached step "
                              f"{int(reached)}" + (f" after {lasted / 60:.0f} min" if lasted else "")],
                     "attempt": [parsed.n_attempts]}
    summary = summary_values(summary)
    first = history.head(1)
    first_step = parsed.metrics["step"].min()
    step = int(first_step) if first_step is not None else log.starting_step  # type: ignore[arg-type]
    wall = log.start_time if log.start_time is not None else (first["wall_time"][0] if first.height else None)
    how = "resumed" if log.resumed else "started"
    start = {
        "kind": [s.EV_WANDB_RUN_START], "step": [step], "value": [float(log.starting_step)], "wall_time": [wall],
        "text": [f"W&B run {log.run_id} ({log.display_name or 'no name'}) {how}"],
    }
    events = [pl.DataFrame(start), parsed.events]
    if cut_short is not None:
        events.append(pl.DataFrame(cut_short, schema_overrides={"step": pl.Int64, "value": pl.Float64,
                                                                "wall_time": pl.Float64, "attempt": pl.Int32}))
    done = next((summary[k] for k in sorted(s.TRAINER_DONE_KEYS) if k in summary), None)
    last = parsed.metrics.filter(pl.col("attempt") == parsed.n_attempts)["step"].max()
    # the Trainer's end of train(): its W&B callback puts train_runtime in the summary only; a trainer of a notebook
    # run's earlier attempt wrote it when the summary's global step is not the last attempt's
    at = summary.get("train/global_step")
    if done is not None and (not isinstance(at, int | float) or last is None or at == last):
        events.append(pl.DataFrame({
            "kind": [s.EV_TRAINING_ENDED], "step": [last], "value": [None], "wall_time": [None],
            "text": [f"training finished: the Trainer's summary in the run's summary (train_runtime {done} s)"],
            "attempt": [parsed.n_attempts],
        }, schema_overrides={"step": pl.Int64, "value": pl.Float64, "wall_time": pl.Float64, "attempt": pl.Int32}))
    if log.exit_code is not None:  # the client recorded how the process ended: evidence only when nothing printed is
        failed = log.exit_code != 0
        last = parsed.metrics.filter(pl.col("attempt") == parsed.n_attempts)["step"].max()  # the attempt that exited
        # when: the run's start plus the runtime its exit record gives (its last history row may be minutes earlier)
        ended = log.start_time + log.runtime if log.start_time is not None and log.runtime else None
        events.append(pl.DataFrame({
            "kind": [s.EV_EXIT_CODE], "step": [last], "value": [float(log.exit_code)], "wall_time": [ended],
            "text": [f"W&B run exited with code {log.exit_code}" if failed else "W&B run finished (exit code 0)"],
            "attempt": [parsed.n_attempts],  # the process that exited ran the file's last attempt
        }, schema_overrides={"step": pl.Int64, "wall_time": pl.Float64, "attempt": pl.Int32}))
    parsed.events = pl.concat(
        [s.conform(e.with_columns(run=pl.lit(name), source=pl.lit(shown)).with_columns(
            attempt=pl.col("attempt") if "attempt" in e.columns else pl.lit(1)), s.EVENTS_SCHEMA)
         if "run" not in e.columns else e for e in events]
    )
    # successive trainers in one run (a notebook) each push their config before they log: attempt k has the config
    # as it stood at its first history row
    starts = [0, *parsed.events.filter(pl.col("kind") == s.EV_STEP_REGRESSION)["line"].drop_nulls().to_list()]
    earlier = ({k: config_values(log.config_before(row)) for k, row in enumerate(starts[:-1], start=1)}
               if len(log.config_updates) > 1 else {})
    return WandbRun(file=path, log=parsed, run_id=log.run_id, name=name, start_time=wall, config=config,
                    summary=summary, earlier_configs=earlier, console=log.console)


def _beyond(reached: object, logged: object) -> bool:
    """Whether a summary's step (a finite number) lies beyond the history's last step."""
    return (isinstance(reached, int | float) and not isinstance(reached, bool) and math.isfinite(reached)
            and isinstance(logged, int | float) and reached > logged)


def attach_configs(runs: list[WandbRun]) -> None:
    """Per-attempt config rows for the ``.wandb`` files of one run, in start order: a resume updates the config
    it was given on top of the one before (as W&B merges them), so only real changes show between attempts; within
    a file, attempts before the last get the config as it stood when they began."""
    merged: dict[str, Any] = {}
    for run in runs:
        source = str(run.log.metrics["source"][0] if run.log.metrics.height else run.name)
        frames = []
        for attempt, config in sorted(run.earlier_configs.items()):
            merged = merged | config
            frames.append(config_frame(merged, run=run.name, source=source, attempt=attempt))
        merged = merged | run.config
        last = run.log.n_attempts
        run.log.configs = pl.concat([
            *frames,
            config_frame(merged, run=run.name, source=source, attempt=last),
            config_frame(run.summary, run=run.name, source=source, attempt=last, prefix=s.SUMMARY_PREFIX),
        ])


def read_config_yaml(path: Path, shown: str) -> dict[str, Any]:
    """``config.yaml`` of a W&B run (safe YAML), values unwrapped from ``{value: ..., desc: ...}``."""
    import yaml  # (loaded by the readers of YAML files, not on every start)

    try:
        data = safe_yaml(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, yaml.YAMLError, RecursionError) as exc:
        raise InputError(f"{shown}: cannot read W&B config ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise InputError(f"{shown}: W&B config is not a mapping")
    return config_values(data)


def summary_values(summary: dict[str, Any]) -> dict[str, Any]:
    """A W&B summary without its bookkeeping (``_step``, ``_runtime``, ``_timestamp``, ``_wandb``)."""
    return {k: v for k, v in summary.items() if not k.startswith(_SUMMARY_META)}


def read_summary_json(path: Path, shown: str) -> dict[str, Any]:
    """``wandb-summary.json``: the run's final summary as written (NaN and Infinity allowed)."""
    try:
        data = json_value(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{shown}: cannot read W&B summary ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise InputError(f"{shown}: W&B summary is not a JSON object")
    return data


def is_wandb_config(path: Path) -> bool:
    """A ``config.yaml`` written by W&B (it starts with ``wandb_version`` or holds ``_wandb``)."""
    try:
        head = path.read_bytes()[:4096]
    except OSError:
        return False
    return head.startswith(b"wandb_version") or b"\n_wandb:" in head or head.startswith(b"_wandb:")


# --- the reader of a W&B run directory (parsers.reader interface) ---------------------------------------------------
FORMAT = "wandb"
FIRST = True  # a run directory's .wandb log claims its sidecars and console, and names the run of its directory
_SIDECARS = {"config.yaml": "config", "wandb-summary.json": "summary"}


def sniff(head: bytes, name: str) -> bool:
    """A ``.wandb`` file (a wrong header is reported when it is read), or any file with the W&B log header."""
    return name.endswith(".wandb") or is_wandb_log(head)


def read(path: Path, context: ReadContext) -> list[Piece]:
    """The ``.wandb`` log with its run directory's ``files/config.yaml``, ``files/wandb-summary.json`` and, for its
    errors and stops, ``files/output.log`` (the console; without it, the console lines the ``.wandb`` file recorded)."""
    sidecars = {kind: path.parent / "files" / fname for fname, kind in _SIDECARS.items()}
    sidecars = {k: p for k, p in sidecars.items() if p.is_file()}
    context.consumed.update(sidecars.values())
    run = read_wandb_run(path, context.shown, sidecars)
    console = path.parent / "files" / "output.log"
    if console.is_file():
        if _console_events(run, console, context.display(console), context.warnings):
            context.consumed.add(console)
    elif run.console:  # no output.log beside it: the console the .wandb file recorded says the same
        with tempfile.TemporaryDirectory() as scratch:
            copy = Path(scratch) / "output.log"
            copy.write_text("".join(run.console), encoding="utf-8", errors="replace")
            _console_events(run, copy, f"{context.shown} (its console records)", context.warnings)
    return [Piece(path, FORMAT, run.log, run.name, meta=run)]


def combine(pieces: list[Piece], context: ReadContext) -> list[Piece]:
    """The runs of every ``.wandb`` file read: told apart by id, in start order, configs merged across resumes;
    each run directory's other files belong to its run."""
    runs: list[WandbRun] = [p.meta for p in pieces]  # type: ignore[misc]
    runs, copies = _without_copies(runs, context)
    _distinct_names(runs)
    context.owners.update({r.file.parent: r.name for r in runs})
    context.owners.update({copy.file.parent: kept.name for copy, kept in copies})  # (its W&B files are its run's)
    _copied_consoles(runs, context)
    runs.sort(key=lambda r: (r.start_time is None, r.start_time or 0.0))
    for run_name in dict.fromkeys(r.name for r in runs):
        attach_configs([r for r in runs if r.name == run_name])
    return [Piece(r.file, FORMAT, r.log, r.name) for r in runs]


LATEST = "latest-run"  # W&B's link to the newest run folder; committed or copied, it is a folder of the same files


def _without_copies(runs: list[WandbRun], context: ReadContext) -> tuple[list[WandbRun],
                                                                          list[tuple[WandbRun, WandbRun]]]:
    """The runs, each launch's ``.wandb`` log once: two logs of one run id that began at the same time are one
    launch's log read twice (``wandb/latest-run/`` copied as a folder beside the ``run-*`` folder it links to; a
    resume begins later). The one with more history is kept (a copy made while the run wrote may be cut), else the
    one outside ``latest-run``; the other is said in ``context.skipped``. Also returned: (copy, the run kept)."""
    kept: dict[tuple[str, float], WandbRun] = {}
    copies: list[tuple[WandbRun, WandbRun]] = []
    for run in runs:
        if not run.run_id or run.start_time is None:
            kept[(str(id(run)), 0.0)] = run
            continue
        key = (run.run_id, run.start_time)
        other = kept.get(key)
        if other is None:
            kept[key] = run
            continue
        rank = [(r.log.metrics.height, r.file.parent.name != LATEST) for r in (other, run)]
        keep, copy = (run, other) if rank[1] > rank[0] else (other, run)
        kept[key] = keep
        copies.append((copy, keep))
        n, m = copy.log.metrics.height, keep.log.metrics.height
        history = "the same history" if n == m else f"{n} of its {m} history points"
        where = f"W&B's {LATEST} folder" if LATEST in (copy.file.parent.name, keep.file.parent.name) else "a copy"
        started = datetime.fromtimestamp(run.start_time, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
        context.skipped.append(
            f"{context.display(copy.file)}: the same launch's log as {context.display(keep.file)} (run {run.run_id}, "
            f"started {started} UTC, {history}): a copy ({where}), not read")
    return list(kept.values()), [(copy, kept[(copy.run_id, copy.start_time or 0.0)]) for copy, _ in copies]


def _copied_consoles(runs: list[WandbRun], context: ReadContext) -> None:
    """A ``latest-run/`` folder without a ``.wandb`` log (its ``files/`` committed) beside a run folder whose
    ``files/output.log`` it holds byte for byte is that run's copy: its files belong to that run and its console is
    not read again (the same errors would be said twice); said in ``context.skipped``."""
    folders = {r.file.parent.parent for r in runs}
    for parent in folders:
        latest = parent / LATEST
        console = latest / "files" / "output.log"
        if latest in context.owners or not console.is_file() or any(latest.glob("*.wandb")):
            continue
        text = console.read_bytes()
        same = next((r for r in runs if r.file.parent.parent == parent
                     and (own := r.file.parent / "files" / "output.log").is_file() and own.read_bytes() == text), None)
        if same is None:
            continue
        context.owners[latest] = same.name
        context.consumed.add(console)
        context.skipped.append(f"{context.display(latest)}/: W&B's {LATEST} folder without its .wandb log, its "
                               f"files/output.log the same as {context.display(same.file.parent)}'s: a copy, not read")


def ignores(path: Path, owners: dict[Path, str]) -> bool:
    """W&B's own files beside the logs (debug logs, requirements.txt, metadata): not evidence of the training.
    ``files/output.log`` (the console) is kept, since it may hold the Megatron log."""
    if any(d in owners for d in path.parents):
        return path.name != "output.log" and path.suffix != ".wandb"
    return path.name.startswith("debug") and path.suffix == ".log" and any(d.parent == path.parent for d in owners)


def _distinct_names(runs: list[WandbRun]) -> None:
    """Runs are told apart by their W&B id (a resume keeps it): runs that share a display name but not an id get
    the id beside the name."""
    ids: dict[str, set[str]] = {}
    for r in runs:
        ids.setdefault(r.name, set()).add(r.run_id)
    for r in runs:
        if len(ids[r.name]) > 1:
            r.name = f"{r.name} ({r.run_id})"
            r.log.metrics = r.log.metrics.with_columns(run=pl.lit(r.name, dtype=s.METRICS_SCHEMA["run"]))
            r.log.events = r.log.events.with_columns(run=pl.lit(r.name))
            r.log.configs = r.log.configs.with_columns(run=pl.lit(r.name))


def _console_events(run: WandbRun, console: Path, shown: str, warnings: list[str]) -> bool:
    """A W&B run's ``files/output.log`` (what the program printed) read for its errors, stops and tracebacks, which
    join the run's last attempt, so its end is told by what the program said, not by its exit code alone. A console
    that holds a Megatron log is left to the text reader (it is a full source). Returns whether it was read here."""
    try:
        text = inspect_text(console, shown, {"megatron": DETECT}, head_patterns={"pdsh": PDSH_CMD})
    except InputError as exc:
        warnings.append(str(exc))
        return False
    if text.binary or text.matches.get("megatron") is not None:
        return False
    if text.blank:
        return True
    printed = parse_megatron(text, run=run.name, source=shown)
    warnings.extend(printed.warnings)
    # (its stamps are the program's local clock, not the run's: its last one says nothing of the run's end)
    printed.events = printed.events.filter(pl.col("kind") != s.EV_LAST_TIMED_LINE)
    dropped = pl.concat([block.select(pl.col("text").str.extract(_DROPPED, 1).cast(pl.Int64, strict=False).alias("s"))
                         .drop_nulls().collect() for block in scan_blocks(text)])
    if dropped.height:  # W&B's own words: those points are not in the history (a restart inside the run, mostly)
        warnings.append(f"{shown}: W&B dropped {dropped.height} log call{'s' if dropped.height != 1 else ''} to "
                        f"steps {dropped['s'].min()}-{dropped['s'].max()}, below its step counter ('Tried to log to "
                        "step N that is less than the current step'): those points are not in the run's history "
                        "(a training restarted inside the run logs steps it had passed)")
    if printed.events.height:
        # each line's step is the last one the program printed before it ("iter 1330: loss ..."), when the run
        # logged its own step to W&B (else its steps count log calls, and the console's are on another axis)
        own_axis = s.STEP_AXIS in run.log.tags.values()
        progress = console_steps(text) if own_axis else pl.DataFrame(schema={"line": pl.Int64, "printed_step": pl.Int64})
        events = printed.events.sort("line").join_asof(progress, on="line", strategy="backward").with_columns(
            step=pl.coalesce("step", "printed_step"), attempt=pl.lit(run.log.n_attempts, dtype=pl.Int32))
        run.log.events = pl.concat([run.log.events, events.select(run.log.events.columns)], how="vertical_relaxed")
    return True


CONSOLE_STEP = r"^\s*(?i:iter|iteration|step)\s+(\d+)\s*[:|,/]"  # "iter 1330: loss 1.8209", "step 40 | loss"
_DROPPED = r"Tried to log to step (\d+) that is less than the current step \d+"


def console_steps(text: TextFile) -> pl.DataFrame:
    """``line``, ``printed_step``: the lines of a console that say which step the training is at, in order."""
    found = [
        block.filter(pl.col("text").str.contains(CONSOLE_STEP))
        .select(pl.col("line").cast(pl.Int64),  # a step beyond 64 bits is none
                printed_step=pl.col("text").str.extract(CONSOLE_STEP, 1).cast(pl.Int64, strict=False))
        .collect()
        for block in scan_blocks(text)
    ]
    return pl.concat(found) if found else pl.DataFrame(schema={"line": pl.Int64, "printed_step": pl.Int64})
