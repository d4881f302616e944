"""Megatron-LM / Megatron-DeepSpeed text logs -> canonical frames, vectorised with Polars string expressions.

Every line of the file is one row; prefixes are stripped, iteration lines are split into long-form metrics, the
arguments blocks become per-attempt configs, and lifecycle/anomaly lines become events. Python only loops over
the few damaged (wrapped or cut) iteration lines and over the arguments blocks' few hundred values.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

import polars as pl

from parsers import megatron_patterns as p
from parsers import schema as s
from parsers.textfile import TextLog

_DETECT = re.compile(rb"iteration\s+\d+\s*/\s*\d+\s*\||-{8,} arguments -{8,}")


@dataclass
class ParsedLog:
    """What one Megatron text log holds, with attempts numbered locally from 1."""

    metrics: pl.DataFrame
    events: pl.DataFrame
    configs: pl.DataFrame
    warnings: list[str] = field(default_factory=list)
    n_attempts: int = 0


def is_megatron_log(data: bytes) -> bool:
    """True if the bytes hold a Megatron iteration line or arguments block (content, not file name, decides)."""
    return _DETECT.search(data) is not None


def parse_megatron(log: TextLog, run: str, source: str) -> ParsedLog:
    """Parse a :class:`TextLog` of a Megatron-family training log.

    >>> from parsers.textfile import decode_lines
    >>> from pathlib import Path
    >>> line = b" iteration  10/ 100 | lm loss: 2.5E+00 | number of skipped iterations: 0 |\\n"
    >>> parsed = parse_megatron(decode_lines(Path("x.log"), line), run="r", source="x.log")
    >>> parsed.metrics.filter(pl.col("metric") == "loss")["value"].to_list()
    [2.5]
    """
    warnings = list(log.warnings)
    lines = _prepare_lines(log.lines)
    lines, repaired = _repair_wrapped_iterations(lines, log, warnings)
    lines = _assign_attempts(lines)

    iters = _iteration_rows(lines)
    fields = _iteration_fields(iters)
    metrics = _iteration_metrics(fields)
    metrics = pl.concat([metrics, _log_interval(iters), _validation_metrics(lines)], how="diagonal_relaxed")
    events = pl.concat(
        [_line_events(lines), _iteration_events(iters, fields, lines, repaired), _process_starts(lines)],
        how="diagonal_relaxed",
    )
    configs = _configs(lines, iters)
    n_attempts = int(lines["attempt"].max() or 0)

    def finish(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        return s.conform(frame.with_columns(run=pl.lit(run), source=pl.lit(source)), schema)

    return ParsedLog(
        metrics=finish(metrics, s.METRICS_SCHEMA).sort("attempt", "step", "metric", maintain_order=True),
        events=finish(events, s.EVENTS_SCHEMA).sort("line", maintain_order=True),
        configs=finish(configs, s.CONFIGS_SCHEMA),
        warnings=warnings,
        n_attempts=max(n_attempts, 1),
    )


# --- lines --------------------------------------------------------------------------------------------------------
def _prefix_pattern(lines: pl.DataFrame) -> str:
    hosts: list[str] = []
    cmd = lines.filter(pl.col("text").str.contains(p.PDSH_CMD)).head(1)
    if cmd.height:
        found = re.search(p.PDSH_CMD, cmd["text"][0])
        if found:
            hosts = [h for h in found.group(1).split(",") if h]
    alternatives = p.SRUN_OR_TORCHRUN + "".join(f"|{re.escape(h)}: " for h in hosts)
    return f"^(?:{alternatives})*"


def _prepare_lines(raw: pl.DataFrame) -> pl.DataFrame:
    """Text in ``text``, 1-based line number in ``line``."""
    return raw.rename({"line": "text"}).with_row_index("line", offset=1).with_columns(pl.col("line").cast(pl.Int64))


def _assign_attempts(lines: pl.DataFrame) -> pl.DataFrame:
    """Number attempts: a new one at each arguments block and wherever the iteration counter goes back."""
    prefix = _prefix_pattern(lines)
    lines = lines.with_columns(body=pl.col("text").fill_null("").str.replace(prefix, ""))
    lines = lines.with_columns(
        is_args_start=pl.col("body").str.contains(p.ARGS_START),
        is_args_end=pl.col("body").str.contains(p.ARGS_END),
        at=pl.col("body").str.contains(p.ITERATION_CORE),
    )
    head = pl.col("body").str.replace(p.ITERATION_REST, "")
    groups = pl.col("body").str.extract_groups(p.ITERATION)
    valid = pl.col("at") & head.str.contains(p.ITERATION_PREFIX)
    lines = lines.with_columns(
        step=pl.when(valid).then(groups.struct.field("1").cast(pl.Int64, strict=False)),
        total=pl.when(valid).then(groups.struct.field("2").cast(pl.Int64, strict=False)),
        fields=pl.when(valid).then(
            groups.struct.field("3") + "|" + head.str.replace(r"^\s*\[[^\]]*\]\s*", "")
        ),
    ).drop("at")
    lines = lines.with_columns(process=pl.col("is_args_start").cast(pl.Int32).cum_sum())
    prev_step = pl.col("step").drop_nulls()
    regress = (
        lines.filter(pl.col("step").is_not_null())
        .select("line", "process", "step")
        .with_columns(
            back=(pl.col("step") <= prev_step.shift(1).over("process")).fill_null(False).cast(pl.Int32)
        )
        .with_columns(segment=pl.col("back").cum_sum().over("process"))
        .select("line", "segment")
    )
    lines = lines.join(regress, on="line", how="left").with_columns(
        pl.col("segment").forward_fill().over("process").fill_null(0)
    )
    has_content = lines.group_by("process", "segment").agg(
        content=(pl.col("step").is_not_null() | pl.col("is_args_start")).any()
    )
    keys = has_content.filter("content").sort("process", "segment").with_row_index("attempt", offset=1)
    lines = lines.join(keys.select("process", "segment", "attempt"), on=["process", "segment"], how="left")
    # lines outside any attempt (before the first start, or a file of events only) belong to the next attempt
    lines = lines.with_columns(
        pl.col("attempt").cast(pl.Int32).backward_fill().forward_fill().fill_null(1)
    ).sort("line")
    ts = pl.col("body").str.extract(p.TIMESTAMP).str.replace(",", ".").str.replace("T", " ")
    return lines.with_columns(
        wall_time=ts.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us").dt.epoch("us")
        / 1e6
    )


def _repair_wrapped_iterations(
    lines: pl.DataFrame, log: TextLog, warnings: list[str]
) -> tuple[pl.DataFrame, set[int]]:
    """Join iteration lines hard-wrapped over a few lines; report lines that stay cut short.

    Returns the lines and the line numbers of iteration lines that are incomplete after repair.
    """
    body = pl.col("text").fill_null("")
    has_counters = lines.select(body.str.contains("number of skipped iterations").any()).item()
    is_iter = body.str.contains(p.ITERATION_CORE)
    ends = body.str.strip_chars_end().str.ends_with("|")
    complete = ends & body.str.contains("number of skipped iterations") if has_counters else ends
    broken = lines.filter(is_iter & ~complete)
    if broken.height == 0:
        return lines, set()
    texts = lines["text"].to_list()
    n = len(texts)
    unrepaired: set[int] = set()
    patches: dict[int, str] = {}
    swallowed: set[int] = set()
    for line_no in broken["line"].to_list():
        idx = line_no - 1
        joined = texts[idx] or ""
        for k in range(1, 4):
            if idx + k >= n or texts[idx + k] is None or re.search(p.ITERATION_CORE, texts[idx + k]):
                break
            joined = joined + texts[idx + k]
            if joined.rstrip().endswith("|") and (not has_counters or "number of skipped iterations" in joined):
                patches[idx] = joined
                swallowed.update(range(idx + 1, idx + k + 1))
                warnings.append(f"{log.path}: line {line_no}: iteration line wrapped over {k + 1} lines; joined")
                break
        if idx not in patches:
            unrepaired.add(line_no)
            where = "last line" if line_no == n and not log.ends_with_newline else f"line {line_no}"
            warnings.append(f"{log.path}: {where}: iteration line cut short; fields after the cut are missing")
    if patches:
        for idx, text in patches.items():
            texts[idx] = text
        for idx in swallowed:
            texts[idx] = ""
        lines = lines.with_columns(text=pl.Series(texts, dtype=pl.String))
    return lines, unrepaired


# --- iteration lines ----------------------------------------------------------------------------------------------
def _iteration_rows(lines: pl.DataFrame) -> pl.DataFrame:
    return lines.filter(pl.col("step").is_not_null()).select(
        "line", "attempt", "step", "total", "fields", "wall_time"
    )


def _iteration_fields(iters: pl.DataFrame) -> pl.DataFrame:
    """One row per (iteration line, field): key as printed, canonical metric, value.

    Keys never hold ':' or '|', so a split at the first ':' does what a regex would, several times faster.
    """
    kv = (
        iters.select("line", "attempt", "step", "wall_time", pl.col("fields").str.split("|"))
        .explode("fields")
        .with_columns(colon=pl.col("fields").str.find(":", literal=True))
        .filter(pl.col("colon").is_not_null())
        .select(
            "line", "attempt", "step", "wall_time",
            key=pl.col("fields").str.head(pl.col("colon")).str.strip_chars(),
            raw=pl.col("fields").str.slice(pl.col("colon") + 1).str.strip_chars(),
        )
        .filter(pl.col("key") != "")
    )
    names = {k: p.FIELD_NAMES.get(k) or _slug_text(k) for k in kv["key"].unique().to_list()}
    kv = kv.with_columns(
        metric=pl.col("key").replace_strict(names, return_dtype=pl.String),
        value=pl.col("raw").cast(pl.Float64, strict=False)
        * pl.when(pl.col("key").is_in(p.SECONDS_KEYS)).then(1000.0).otherwise(1.0),
    )
    unparsed = kv["value"].is_null() & (kv["raw"] != "")
    if unparsed.any():  # values with a unit glued on ("112.9TFLOPS"): keep the leading number
        leading = kv["raw"].str.extract(r"^([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)").cast(pl.Float64, strict=False)
        kv = kv.with_columns(value=pl.when(unparsed).then(leading).otherwise(pl.col("value")))
    return kv


def _slug_text(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def _iteration_metrics(fields: pl.DataFrame) -> pl.DataFrame:
    return fields.filter(pl.col("value").is_not_null() | pl.col("raw").str.contains(r"(?i)nan|inf")).select(
        "attempt", "step", "metric", "value", "wall_time"
    )


def _log_interval(iters: pl.DataFrame) -> pl.DataFrame:
    """The iteration delta between consecutive lines of an attempt (the printed loss is a mean over it)."""
    delta = pl.col("step") - pl.col("step").shift(1).over("attempt")
    out = iters.select("attempt", "step", "wall_time", value=delta.cast(pl.Float64))
    out = out.with_columns(pl.col("value").backward_fill().over("attempt"))
    return out.drop_nulls("value").with_columns(metric=pl.lit(s.LOG_INTERVAL))


def _validation_metrics(lines: pl.DataFrame) -> pl.DataFrame:
    val = lines.filter(pl.col("body").str.contains(" loss at ")).with_columns(
        g=pl.col("body").str.extract_groups(p.VALIDATION)
    )
    val = val.filter(pl.col("g").struct.field("3").is_not_null())
    if val.height == 0:
        return pl.DataFrame()
    last_step = pl.col("step").forward_fill()
    steps = lines.select("line", last=last_step.over("attempt"))
    val = val.drop("step").join(steps, on="line", how="left").with_columns(
        step=pl.col("g").struct.field("1").cast(pl.Int64, strict=False).fill_null(pl.col("last")),
        key=pl.col("g").struct.field("2"),
    )
    names = {
        k: "val_loss" if k in ("lm loss", "lm-loss", "lm_loss") else f"val_{_slug_text(k)}"
        for k in val["key"].unique().to_list()
    }
    loss_name = pl.col("key").replace_strict(names, return_dtype=pl.String)
    ppl_name = pl.when(loss_name == s.VAL_LOSS).then(pl.lit(s.VAL_PPL)).otherwise(loss_name + "_ppl")
    losses = val.select(
        "attempt", "step", "wall_time", metric=loss_name,
        value=pl.col("g").struct.field("3").cast(pl.Float64, strict=False),
    )
    ppls = val.select(
        "attempt", "step", "wall_time", metric=ppl_name,
        value=pl.col("g").struct.field("4").cast(pl.Float64, strict=False),
    ).drop_nulls("value")
    return pl.concat([losses, ppls])


def _iteration_events(
    iters: pl.DataFrame, fields: pl.DataFrame, lines: pl.DataFrame, cut: set[int]
) -> pl.DataFrame:
    """Loss missing (NaN or a fully skipped interval), stale grad norms, and cut-short lines."""
    wide = (
        fields.filter(pl.col("metric").is_in([s.LOSS, s.GRAD_NORM, s.LOSS_SCALE, s.SKIPPED_ITERATIONS]))
        .pivot(on="metric", index="line", values="value", aggregate_function="first")
    )
    for name in (s.LOSS, s.GRAD_NORM, s.LOSS_SCALE, s.SKIPPED_ITERATIONS):
        if name not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(name))
    wide = iters.select("line", "attempt", "step", "wall_time").join(wide, on="line", how="left")
    wide = wide.with_columns(has_loss=pl.col(s.LOSS).is_not_null())
    wide = wide.with_columns(cut=pl.col("line").is_in(list(cut)))
    # a cut line still shows a missing loss when it was cut after the place where the loss is printed
    past_loss = iters.select("line", past=pl.col("fields").str.contains(r"loss scale:|grad norm:|number of skipped"))
    wide = wide.join(past_loss, on="line", how="left")
    missing = wide.filter(~pl.col("has_loss") & (~pl.col("cut") | pl.col("past"))).select(
        "line", "attempt", "step", "wall_time",
        kind=pl.lit(s.EV_LOSS_MISSING),
        value=pl.col(s.SKIPPED_ITERATIONS),
    )
    prev = pl.col(s.GRAD_NORM).shift(1).over("attempt")
    skipping = (
        ~pl.col("has_loss")
        | (pl.col(s.LOSS_SCALE) < pl.col(s.LOSS_SCALE).shift(1).over("attempt"))
        | (pl.col(s.SKIPPED_ITERATIONS) > 0)
    ).fill_null(False)
    stale = wide.filter(
        (pl.col(s.GRAD_NORM) == prev) & (pl.col(s.GRAD_NORM) != 0) & skipping & ~pl.col("cut")
    ).select("line", "attempt", "step", "wall_time", kind=pl.lit(s.EV_STALE_GRAD_NORM), value=pl.col(s.GRAD_NORM))
    truncated = wide.filter("cut").select(
        "line", "attempt", "step", "wall_time", kind=pl.lit(s.EV_TRUNCATED), value=pl.lit(None, dtype=pl.Float64)
    )
    out = pl.concat([missing, stale, truncated])
    return out.join(lines.select("line", "text"), on="line", how="left")


# --- other lines --------------------------------------------------------------------------------------------------
def _line_events(lines: pl.DataFrame) -> pl.DataFrame:
    any_event = "|".join(f"(?:{rx})" for _, rx in p.EVENT_PATTERNS)
    candidates = lines.filter(pl.col("step").is_null() & pl.col("body").str.contains(any_event))
    if candidates.height == 0:
        return pl.DataFrame()
    kind: pl.Expr = pl.lit(None, dtype=pl.String)
    raw: pl.Expr = pl.lit(None, dtype=pl.String)
    for name, rx in reversed(p.EVENT_PATTERNS):  # built inside out, so the first pattern wins
        hit = pl.col("body").str.contains(rx)
        value = pl.col("body").str.extract(rx, 1) if re.compile(rx).groups else pl.lit(None, dtype=pl.String)
        kind = pl.when(hit).then(pl.lit(name)).otherwise(kind)
        raw = pl.when(hit).then(value).otherwise(raw)
    ev = candidates.with_columns(kind=kind, raw=raw).with_columns(
        value=pl.col("raw").cast(pl.Float64, strict=False)
        * pl.when((pl.col("kind") == s.EV_PARAMETER_COUNT) & pl.col("body").str.contains("|".join(p.BILLIONS)))
        .then(1e9)
        .otherwise(1.0)
    )
    # the step of an event: the iteration it names, else the last iteration printed before it in the attempt
    # (an overflow belongs to the iteration being computed: the next one printed)
    last = lines.select(
        "line",
        last=pl.col("step").forward_fill().over("attempt"),
        next=pl.col("step").backward_fill().over("attempt"),
    )
    ev = ev.join(last, on="line", how="left").with_columns(
        step=pl.when(pl.col("kind").is_in(list(p.STEP_VALUED)) & pl.col("value").is_not_null())
        .then(pl.col("value").cast(pl.Int64))
        .when(pl.col("kind") == s.EV_OVERFLOW)
        .then(pl.coalesce("next", pl.col("last") + 1))
        .otherwise(pl.col("last"))
    )
    return ev.select("line", "attempt", "step", "kind", "value", "wall_time", "text").pipe(_shard_totals)


def _shard_totals(ev: pl.DataFrame) -> pl.DataFrame:
    """Per-rank parameter counts become one summed count per attempt (one line per model-parallel rank)."""
    is_shard = (
        (pl.col("kind") == s.EV_PARAMETER_COUNT)
        & pl.col("text").str.contains("model parallel rank")
        & ~pl.col("text").str.contains("Billion")  # DeepSpeedExamples printed the whole model's size per rank
    )
    shards = ev.filter(is_shard)
    if shards.height == 0:
        return ev
    shards = shards.with_columns(rank=pl.col("text").str.extract(r"rank \(?([\d, ]+)\)?", 1))
    totals = (
        shards.unique(["attempt", "rank"], keep="first")
        .group_by("attempt")
        .agg(
            pl.col("line").min(), pl.col("step").first(), pl.col("wall_time").first(),
            pl.col("value").sum(), pl.len().alias("n"),
        )
        .with_columns(
            kind=pl.lit(s.EV_PARAMETER_COUNT),
            text=pl.format("sum of the parameter counts of {} model-parallel ranks", pl.col("n")),
        )
        .drop("n")
    )
    kept = ev.with_columns(kind=pl.when(is_shard).then(pl.lit("parameter_count_shard")).otherwise("kind"))
    return pl.concat([kept, totals.select(kept.columns)], how="vertical_relaxed")


def _process_starts(lines: pl.DataFrame) -> pl.DataFrame:
    return lines.filter("is_args_start").select(
        "line", "attempt", "wall_time", "text", kind=pl.lit(s.EV_PROCESS_START),
        step=pl.lit(None, dtype=pl.Int64), value=pl.lit(None, dtype=pl.Float64),
    )


# --- arguments ----------------------------------------------------------------------------------------------------
def typed_value(text: str) -> object:
    """The Python value of an argument as Megatron printed it (``str(value)``); unknown text stays a string."""
    if text in ("None", "True", "False") or text[:1] in "-+.0123456789[({'\"":
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
    return text


def _configs(lines: pl.DataFrame, iters: pl.DataFrame) -> pl.DataFrame:
    block = (pl.col("is_args_start").cast(pl.Int32).cum_sum() - pl.col("is_args_end").cast(pl.Int32).cum_sum()) > 0
    inside = lines.with_columns(inside=block & ~pl.col("is_args_start")).filter("inside")
    kv = inside.select("attempt", g=pl.col("body").str.extract_groups(p.ARGS_LINE)).select(
        "attempt", key=pl.col("g").struct.field("1"), value=pl.col("g").struct.field("2")
    ).drop_nulls("key")
    kv = kv.unique(["attempt", "key"], keep="first", maintain_order=True)
    # the iteration line states the target length; keep it when the arguments do not
    totals = iters.group_by("attempt").agg(pl.col("total").last()).select(
        "attempt", key=pl.lit("train_iters"), value=pl.col("total").cast(pl.String)
    )
    known = kv.filter((pl.col("key") == "train_iters") & (pl.col("value") != "None")).select("attempt")
    totals = totals.join(known, on="attempt", how="anti")
    kv = pl.concat([kv.filter(~((pl.col("key") == "train_iters") & (pl.col("value") == "None"))), totals])
    typed = [json.dumps(typed_value(v), default=str) for v in kv["value"].to_list()]
    return kv.with_columns(typed=pl.Series(typed, dtype=pl.String))
