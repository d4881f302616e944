"""The Hugging Face Trainer's ``trainer_state.json``: ``log_history`` (one entry per logging step: ``loss``,
``grad_norm``, ``learning_rate``, ``epoch``, ``step``; evaluation entries with ``eval_*``; a last summary entry
with ``train_runtime`` and ``train_loss``) and the run's settings (``max_steps``, ``logging_steps``, ...).

An output directory holds one in each ``checkpoint-N/`` folder too: each is the history up to its step. They are one
run: the most complete history is read, and a checkpoint whose history disagrees with it (the run went back to an
earlier checkpoint and trained again from there) is said so. The Trainer writes ``NaN`` for a NaN loss (not JSON);
it is read as NaN.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/hf_trainer_state/subro608_Deep_learning_Bert_project2/checkpoint-500/"
...             "trainer_state.json")
>>> log = read(path, ReadContext("trainer_state.json", "r"))[0].log
>>> log.metrics.filter(metric="loss").select("step", "value").row(0)
(100, 1.3676)
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import polars as pl

from parsers import schema as s
from parsers.reader import NotThisFormat, Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import InputError, json_array_items, json_value, read_all
from parsers.wandb_history import config_frame

FORMAT = "hf-trainer-state"
_NAMES = {"loss": s.LOSS, "grad_norm": s.GRAD_NORM, "learning_rate": s.LR, "eval_loss": s.VAL_LOSS}
_SUMMARY = ("train_runtime", "train_loss", "train_samples_per_second", "train_steps_per_second", "total_flos")
# Python's json writes NaN and Infinity, which are not JSON: read them through stand-ins no real value takes
_NONFINITE = re.compile(rb"(?<=[:\[,] )(NaN|-Infinity|Infinity)(?=[,\]}\s])")
_STAND_IN = {b"NaN": -1.7976931348623155e308, b"Infinity": 1.7976931348623155e308,
             b"-Infinity": -1.7976931348623153e308}


def sniff(head: bytes, name: str) -> bool:
    return Path(name).name == "trainer_state.json" or (
        Path(name).suffix == ".json" and b'"log_history"' in head and b'"global_step"' in head)


def read(path: Path, context: ReadContext) -> list[Piece]:
    raw = read_all(path)
    if not raw.strip():
        raise NotThisFormat(f"{context.shown}: empty file", empty=True)
    state, history, stood_in = _load(raw, context.shown, context.warnings)
    if history.height == 0 or "step" not in history.columns:
        raise NotThisFormat(f"{context.shown}: a trainer_state.json with an empty log_history")
    step = pl.col("step").cast(pl.Float64, strict=False)
    sound = (step.abs() < 2.0**63).fill_null(False)  # (NaN compares false)
    history = history.with_columns(step=pl.when(sound).then(step).cast(pl.Int64, strict=False))
    if lost := history["step"].null_count():
        context.warnings.append(f"{context.shown}: {lost} log_history entr{'y' if lost == 1 else 'ies'} with a step "
                                "that is not a step number (beyond 64 bits, or not a number) left out")
        history = history.filter(pl.col("step").is_not_null())
        if history.height == 0:
            raise NotThisFormat(f"{context.shown}: a trainer_state.json with no log_history entry at a readable step")
    summed = pl.any_horizontal(pl.col(c).is_not_null() for c in _SUMMARY if c in history.columns) \
        if any(c in history.columns for c in _SUMMARY) else pl.lit(False)
    summary = history.filter(summed)
    rows = history.filter(~summed)  # (the loss and eval entries at the summary's step are the last step's own)
    if rows.height == 0 and summary.height:  # nothing logged per step: say why, where the file tells it
        every, steps = state.get("logging_steps"), summary["step"][-1]
        why = (f": its logging_steps {every} is more than its {steps} steps" if isinstance(every, int | float)
               and not isinstance(every, bool) and every > steps else "")
        context.warnings.append(f"{context.shown}: its log_history holds no entry per logging step, only the "
                                f"Trainer's closing summary at step {steps}{why}; no metric was logged during "
                                "training, so nothing in it could be checked")
    values = [c for c in rows.columns if c not in ("step", *_SUMMARY) and rows.schema[c].is_numeric()]
    # one file holds every launch's history; the epoch counter going back marks a resume (--ignore_data_skip
    # starts the epoch again; one continuous run never counts it down)
    launch = pl.lit(1, dtype=pl.Int32)
    if "epoch" in rows.columns and rows.schema["epoch"].is_numeric():
        epoch = pl.col("epoch").cast(pl.Float64).forward_fill()
        launch = (1 + (epoch < epoch.shift(1)).fill_null(False).cast(pl.Int32).cum_sum()).cast(pl.Int32)
    rows = rows.with_columns(attempt=launch)
    long = (rows.with_row_index("row").unpivot(index=["row", "step", "attempt"], on=values, variable_name="key",
                                               value_name="value")
            .filter(pl.col("value").is_not_null())
            .with_columns(value=pl.col("value").cast(pl.Float64), step=pl.col("step").cast(pl.Int64))
            .with_columns(value=_finite(pl.col("value")) if stood_in else pl.col("value")))
    names = {k: _NAMES.get(k, k) for k in values}
    metrics = long.with_columns(metric=pl.col("key").replace_strict(names, return_dtype=pl.String)).sort("row")
    frame = s.conform(metrics.with_columns(run=pl.lit(context.run), source=pl.lit(context.shown)), s.METRICS_SCHEMA)
    launches = int(rows["attempt"].max() or 1)  # type: ignore[arg-type]
    if launches > 1:
        context.warnings.append(f"{context.shown}: its epoch counter goes back {launches - 1} time(s) while the steps "
                                "go on: each is read as a resume (one file holds every launch's history)")
    settings = {k: v for k, v in state.items() if k != "log_history" and not isinstance(v, dict | list)}
    # the Trainer's train_batch_size is the batch of one process (per device, times the GPUs of a DataParallel), not
    # DeepSpeed's global train_batch_size
    if "train_batch_size" in settings:
        settings["per_device_train_batch_size"] = settings.pop("train_batch_size")
    if "logging_steps" not in settings and (interval := _first_logging_step(rows)) is not None:
        settings["logging_steps"] = interval  # (an older Trainer does not write it: its history tells it)
    configs = config_frame(settings, run=context.run, source=context.shown)
    if summary.height:
        last = {k: v for k, v in summary.row(-1, named=True).items() if v is not None and k != "step"}
        configs = pl.concat([configs, config_frame(last, run=context.run, source=context.shown,
                                                   prefix=s.SUMMARY_PREFIX)])
    events = _early_stop(state, launches, context)
    if summary.height:  # the Trainer writes its summary entry when train() returns
        done = summary.row(-1, named=True)
        events = pl.concat([events, s.conform(pl.DataFrame({
            "kind": [s.EV_TRAINING_ENDED], "step": [int(done["step"])], "attempt": [launches], "run": [context.run],
            "source": [context.shown], "value": [_seconds(done.get("train_runtime"))],
            "text": ["training finished: the Trainer's summary (" + ", ".join(
                f"{key} {done[key]}{' s' if key == 'train_runtime' else ''}" for key in ("train_runtime", "train_loss")
                if done.get(key) is not None) + ")"]}), s.EVENTS_SCHEMA)])
    else:
        events = pl.concat([events, _at_its_last_step(state, int(history["step"].max()), launches, context)])
    logged = set(long["key"].unique())  # (once: in the comprehension's condition it was computed for every key)
    log = ParsedLog(frame, events, configs, n_attempts=launches, tags={k: v for k, v in names.items() if k in logged})
    return [Piece(path, FORMAT, log)]


def _first_logging_step(rows: pl.DataFrame) -> int | None:
    """The logging interval of a trainer_state.json that does not write its ``logging_steps`` (older Trainers): the
    Trainer logs at every multiple of it and its log_history keeps every log from the start of training (a resume
    restores it from the checkpoint), so its first training entry is at that step (the second, when
    ``logging_first_step`` logged step 1 first). None without a training entry."""
    if "loss" not in rows.columns:
        return None
    steps = rows.filter(pl.col("loss").is_not_null())["step"].head(2).to_list()
    if not steps:
        return None
    first = steps[1] if steps[0] == 1 and len(steps) > 1 else steps[0]
    return int(first) if first >= 1 else None


def _seconds(value: object) -> float | None:
    """The summary's train_runtime as seconds (a number, or the text of one), else None."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 and seconds == seconds and seconds != float("inf") else None


def combine(pieces: list[Piece], context: ReadContext) -> list[Piece]:
    """One history per output directory: the most complete; a checkpoint's history that disagrees with it is said."""
    groups: dict[Path, list[Piece]] = {}
    for piece in pieces:
        folder = piece.file.parent
        groups.setdefault(folder.parent if _checkpoint(folder) else folder, []).append(piece)
    out = []
    for group in groups.values():
        def reach(p: Piece) -> tuple[int, bool]:
            return int(p.log.metrics["step"].max() or 0), not _checkpoint(p.file.parent)
        best = max(group, key=reach)
        final = best.log.metrics.filter(metric=s.LOSS).select("step", "value")
        for other in group:
            if other is best:
                continue
            mine = other.log.metrics.filter(metric=s.LOSS).select("step", "value")
            differ = mine.join(final, on="step", suffix="_final").filter(
                (pl.col("value") != pl.col("value_final")) & ~(pl.col("value").is_nan() & pl.col("value_final").is_nan()))
            if differ.height:
                context.warnings.append(
                    f"{context.display(other.file)}: its loss history differs from "
                    f"{context.display(best.file)}'s from step {differ['step'].min()}: training went back to an "
                    "earlier checkpoint and ran again from there")
        out.append(best)
    return out


def _early_stop(state: dict[str, Any], attempt: int, context: ReadContext) -> pl.DataFrame:
    """A planned exit when the Trainer's EarlyStoppingCallback stopped training before ``max_steps``: its patience
    counter reached its patience and the control says training should stop (the state the Trainer saved last)."""
    callbacks = state.get("stateful_callbacks")
    early = callbacks.get("EarlyStoppingCallback") if isinstance(callbacks, dict) else None
    control = callbacks.get("TrainerControl") if isinstance(callbacks, dict) else None
    if not isinstance(early, dict) or not isinstance(control, dict):
        return s.empty(s.EVENTS_SCHEMA)
    def part(d: dict, key: str) -> dict:
        return d[key] if isinstance(d.get(key), dict) else {}

    patience = part(early, "args").get("early_stopping_patience")
    counter = part(early, "attributes").get("early_stopping_patience_counter")
    stop = part(control, "args").get("should_training_stop") is True
    step, last = state.get("global_step"), state.get("max_steps")
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in (patience, counter, step, last))
    if not (stop and numbers and counter >= patience > 0 and step < last):
        return s.empty(s.EVENTS_SCHEMA)
    best = f"; its best: step {state['best_global_step']}" if isinstance(state.get("best_global_step"), int) else ""
    return s.conform(pl.DataFrame({
        "kind": [s.EV_EXIT], "step": [step], "attempt": [attempt], "run": [context.run], "source": [context.shown],
        "text": [f"stopped early by its EarlyStoppingCallback at step {step} of max_steps {last}: {counter} "
                 f"evaluations in a row without improvement (patience {patience}){best}"]}), s.EVENTS_SCHEMA)


def _at_its_last_step(state: dict[str, Any], logged: int, attempt: int, context: ReadContext) -> pl.DataFrame:
    """The end of training where a state without the closing summary says it: the Trainer saves its state with each
    checkpoint, the last one when its loop has reached ``max_steps`` (``global_step`` = ``max_steps``, its control set
    to stop training); its summary entry is logged after that save, so this copy lacks it. Said where its history's
    last entry (``logged``, the last logging step) is before ``global_step``: a history that reaches ``max_steps``
    shows the end itself."""
    step, last = state.get("global_step"), state.get("max_steps")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (step, last)) or not step >= last > 0 \
            or logged >= step:
        return s.empty(s.EVENTS_SCHEMA)
    callbacks = state.get("stateful_callbacks")
    control = callbacks.get("TrainerControl") if isinstance(callbacks, dict) else None
    args = control.get("args") if isinstance(control, dict) else None
    if isinstance(args, dict) and args.get("should_training_stop") is False:
        return s.empty(s.EVENTS_SCHEMA)
    told = ", its control set to stop training" if isinstance(args, dict) else ""
    return s.conform(pl.DataFrame({
        "kind": [s.EV_TRAINING_ENDED], "step": [step], "attempt": [attempt], "run": [context.run],
        "source": [context.shown],
        "text": [f"its state saved at its last step: global_step {step} of max_steps {last}{told} (the Trainer's "
                 "closing summary, logged after that save, is not in this copy)"]}), s.EVENTS_SCHEMA)


def _checkpoint(folder: Path) -> bool:
    """A checkpoint folder of an output directory: ``checkpoint-N/``, or ``last-checkpoint/`` (the Hub's copy of
    the latest one)."""
    return folder.name.startswith("checkpoint-") or folder.name == "last-checkpoint"


def _load(raw: bytes, shown: str, warnings: list[str]) -> tuple[dict[str, Any], pl.DataFrame, bool]:
    """The settings, the history as a frame (polars' JSON reader; Python's for what it refuses) and whether
    stand-ins for NaN and Infinity were put in (a byte search first: the regex pass costs more)."""
    # (a one-byte look first: memchr, where a search for b"NaN" goes through 22 MB in 10 ms)
    stood_in = (b"N" in raw and b"NaN" in raw) or (b"I" in raw and b"Infinity" in raw)
    text = _NONFINITE.sub(lambda m: repr(_STAND_IN[m.group(1)]).encode(), raw) if stood_in else raw
    try:
        frame = pl.read_json(io.BytesIO(text), infer_schema_length=None)
        if "log_history" in frame.columns and frame.height == 1:
            history = frame.select(pl.col("log_history").explode()).unnest("log_history")
            state = {c: frame[c][0] for c in frame.columns if c != "log_history" and not frame.schema[c].is_nested()}
            if "stateful_callbacks" in frame.columns:  # (nested: the callbacks' saved state, early stopping's among it)
                state["stateful_callbacks"] = frame["stateful_callbacks"].to_list()[0]
            return state, (history.filter(pl.col("step").is_not_null()) if "step" in history.columns
                           else history), stood_in
    except (pl.exceptions.PolarsError, TypeError, ValueError):
        pass
    try:
        state = json_value(raw)
    except ValueError as exc:
        state = _salvage(raw.decode("utf-8", errors="replace"), shown, warnings)
        if state is None:
            raise InputError(f"{shown}: not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise NotThisFormat(f"{shown}: JSON without a log_history list")
    entries = [e for e in state["log_history"] if isinstance(e, dict) and isinstance(e.get("step"), int)]
    flat = [{k: _float(v)
             for k, v in e.items()} | {"step": e["step"] if abs(e["step"]) < 2**63 else None} for e in entries]
    return state, pl.DataFrame(flat, infer_schema_length=None) if flat else pl.DataFrame(), False


_HISTORY = re.compile(r'"log_history"\s*:\s*\[')


def _salvage(text: str, shown: str, warnings: list[str]) -> dict[str, Any] | None:
    """What a damaged or cut-short ``trainer_state.json`` still holds: its sound ``log_history`` entries and the
    settings, when the damage spares them (None when there is no ``log_history`` to read)."""
    found = _HISTORY.search(text)
    if found is None:
        return None
    entries, bad, end = json_array_items(text, found.end() - 1)
    if not entries:
        return None
    settings: dict[str, Any] = {}
    for rest in ([text[end:]] if end >= 0 else []) + ["}"]:
        try:
            settings = json_value(text[:found.end() - 1] + "[]" + rest)
            break
        except ValueError:
            continue
    where = f"from character {bad[0]}" if bad else "outside log_history"
    warnings.append(f"{shown}: not valid JSON {where} (cut short or damaged); read the "
                    f"{len(entries)} sound log_history entries" + (", and no settings" if not settings else ""))
    return (settings if isinstance(settings, dict) else {}) | {"log_history": entries}


def _float(value: Any) -> float | None:
    """A logged number as a float (None for text, booleans and integers too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _finite(value: pl.Expr) -> pl.Expr:
    """The stand-ins back to NaN and +-Infinity."""
    out = value
    for token, stand_in in _STAND_IN.items():
        real = {b"NaN": float("nan"), b"Infinity": float("inf"), b"-Infinity": float("-inf")}[token]
        out = pl.when(value == stand_in).then(pl.lit(real)).otherwise(out)
    return out
