"""Megatron-LM / Megatron-DeepSpeed text logs -> canonical frames, vectorised with Polars string expressions.

Two streaming Polars queries over the file's lines (memory stays bounded however large the file) yield the lines
that matter (iteration lines with step, total and flags; arguments, lifecycle, error and validation lines with
their text) and the iteration lines' fields in long form (one row per printed value). Attempts are then numbered
from the iteration counter and the arguments blocks, and everything else is joined by line number. Python only
loops over the few damaged (wrapped or cut) iteration lines and over the arguments blocks' few hundred values.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable

import numpy as np
import polars as pl

from parsers import megatron_patterns as p
from parsers import schema as s
from parsers.schema import ParsedLog
from parsers.textfile import TextFile, scan_blocks

DETECT = re.compile(rb"iteration\s+\d+\s*/\s*\d+\s*\||-{8,} arguments -{8,}")
PDSH_CMD = re.compile(p.PDSH_CMD)
_COUNTERS = "number of skipped iterations"
_ANY_EVENT = "|".join(f"(?:{rx})" for _, rx in p.EVENT_PATTERNS)
_LINES_SCHEMA = {"line": pl.UInt32, "text": pl.String}
_SECONDS = "iteration_time_s"  # the key printed in seconds, until it is scaled to ms
_KEY_PATTERNS = [f"| {key}:" for key in p.FIELD_NAMES]
# canonical keys come out of the replacement without spaces, so the millions of keys need no strip
_KEY_NAMES = [f"|{_SECONDS if key in p.SECONDS_KEYS else name}:" for key, name in p.FIELD_NAMES.items()]


def parse_megatron(text: TextFile, run: str, source: str) -> ParsedLog:
    """Parse a Megatron-family training log that :func:`parsers.textfile.inspect_text` has looked at.

    >>> from pathlib import Path
    >>> from parsers.textfile import inspect_text
    >>> log = inspect_text(Path("sample_logs/clean-1.3B/train.log"), "train.log", head_patterns={"pdsh": PDSH_CMD})
    >>> parsed = parse_megatron(log, run="clean", source="train.log")
    >>> parsed.metrics.filter(metric="loss").select("step", "value").row(0)
    (1, 10.91159)
    """
    warnings = list(text.warnings)
    prefix = _prefix_pattern(text.matches.get("pdsh"))
    rows, fields = _by_block(text, prefix, lambda lines: [_line_rows(lines), _iteration_fields(lines)])
    iters, others = _split_rows(rows)
    iters, fields, others, cut = _repair_wrapped(iters, fields, others, text, prefix, warnings)
    bounds = _attempt_bounds(iters, others)
    iters, others = (_with_attempt(f, bounds) for f in (iters, others))
    fields = _line_columns(fields, iters)

    fields = _iteration_metrics(fields, text, prefix)
    extra = pl.concat([_log_interval(iters), _validation_metrics(others, iters)], how="diagonal_relaxed")
    metrics = pl.concat(  # same dtypes, so the millions of field rows are not cast or copied
        [fields.drop("line"), s.conform(extra, s.METRICS_SCHEMA).select(fields.drop("line").columns)]
    )
    events = pl.concat(
        [_line_events(others, iters), _iteration_events(iters, fields, cut, text, prefix), _process_starts(others)],
        how="diagonal_relaxed",
    )
    configs = _configs(others, iters)

    def finish(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        labels = {name: pl.lit(value, dtype=schema["run"]) for name, value in (("run", run), ("source", source))}
        return s.conform(frame.with_columns(**labels), schema)

    return ParsedLog(
        metrics=finish(metrics, s.METRICS_SCHEMA),  # each metric's rows in (attempt, step) order
        events=finish(events, s.EVENTS_SCHEMA).sort("line", maintain_order=True),
        configs=finish(configs, s.CONFIGS_SCHEMA),
        warnings=warnings,
        n_attempts=max(int(bounds["attempt"].max() or 0), 1),  # type: ignore[arg-type]
    )


# --- one pass over the lines --------------------------------------------------------------------------------------
def _prefix_pattern(pdsh_cmd: re.Match[bytes] | None) -> str:
    hosts = [h for h in pdsh_cmd.group(1).decode(errors="replace").split(",") if h] if pdsh_cmd else []
    alternatives = p.SRUN_OR_TORCHRUN + "|" + p.HOST_LIKE + "".join(f"|{re.escape(h)}: +" for h in hosts)
    return f"^(?:{alternatives})*"


def _by_block(
    text: TextFile, prefix: str, queries: Callable[[pl.LazyFrame], list[pl.LazyFrame]]
) -> list[pl.DataFrame]:
    """Run ``queries`` on each block of classified lines; the results of each query, concatenated in line order."""
    parts: list[list[pl.DataFrame]] = []
    for block in scan_blocks(text):
        # one query at a time: run together, each would hold its own buffers of the file
        parts.append([q.collect(engine="streaming") for q in queries(_classify(block, prefix))])
    if not parts:  # an empty file
        parts.append([q.collect() for q in queries(_classify(pl.LazyFrame(schema=_LINES_SCHEMA), prefix))])
    return [pl.concat(frames, how="vertical_relaxed") for frames in zip(*parts, strict=True)]


def _lines_at(text: TextFile, prefix: str, wanted: list[int]) -> pl.DataFrame:
    """The classified lines with these numbers (a second pass over the file, for the few lines that need it)."""
    return _by_block(text, prefix, lambda lines: [lines.filter(pl.col("line").is_in(wanted))])[0]


def _classify(scan: pl.LazyFrame, prefix: str) -> pl.LazyFrame:
    """Launcher prefixes stripped into ``body``; flags for iteration lines and the arguments block."""
    body = pl.col("text").fill_null("").str.replace(prefix, "")
    return scan.with_columns(body=body).with_columns(
        is_iter=pl.col("body").str.contains(p.ITERATION_LINE),
        is_args_start=pl.col("body").str.contains(p.ARGS_START),
        is_args_end=pl.col("body").str.contains(p.ARGS_END),
    )


def _wall_time() -> pl.Expr:
    ts = pl.col("body").str.extract(p.TIMESTAMP).str.replace(",", ".").str.replace("T", " ")
    return ts.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us").dt.epoch("us") / 1e6


def _line_rows(lines: pl.LazyFrame) -> pl.LazyFrame:
    """The lines that matter, one row each: iteration lines (step, total, flags) and the other lines worth keeping
    (arguments and lines that may be, events, validation) with their text.

    Whether a line lies inside an arguments block is decided after the pass, on the kept lines (a running count
    over the whole file would make the streaming engine hold every line).
    """
    groups = pl.col("body").str.extract_groups(p.ITERATION)
    iteration = pl.col("is_iter")
    rest = pl.when(~iteration).then(pl.col("body"))  # null on iteration lines: the regexes below skip them
    other = (
        pl.col("is_args_start") | pl.col("is_args_end") | rest.str.contains(p.ARGS_CANDIDATE)
        | rest.str.contains(_ANY_EVENT) | rest.str.contains(" loss at ", literal=True)
    ).fill_null(False)
    # "+ ''" copies the few kept strings out of the file-sized buffers their views would otherwise pin
    return lines.filter(iteration | other).select(
        "line", "is_iter", "is_args_start", "is_args_end",
        step=pl.when(iteration).then(groups.struct.field("1").cast(pl.Int64, strict=False)),
        total=pl.when(iteration).then(groups.struct.field("2").cast(pl.Int64, strict=False)),
        ends_pipe=pl.col("body").str.strip_chars_end().str.ends_with("|") & iteration,
        has_counters=pl.col("body").str.contains(_COUNTERS, literal=True) & iteration,
        text=pl.when(~iteration).then(pl.col("text") + ""),
        body=pl.when(~iteration).then(pl.col("body") + ""),
        wall_time=_wall_time(),
    )


def _split_rows(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Iteration rows and other rows of :func:`_line_rows`."""
    iters = rows.filter("is_iter").select("line", "step", "total", "wall_time", "ends_pipe", "has_counters")
    others = rows.filter(~pl.col("is_iter")).select(
        "line", "is_args_start", "is_args_end", "text", "body", "wall_time", in_args=_inside_arguments()
    )
    return iters, others


def _segments(lines: pl.LazyFrame, *per_line: pl.Expr) -> pl.LazyFrame:
    """The iteration lines' ``key: value`` segments, one row each, with the segment's ``colon`` position."""
    segments = (
        pl.col("body").str.replace(p.LEADING, "").str.replace(p.ITERATION_CORE, "|")
        .str.replace_many(_KEY_PATTERNS, _KEY_NAMES)  # canonical names in one pass, before the rows multiply
        .str.split("|")
    )
    return (
        lines.filter("is_iter")
        .select("line", *per_line, segment=segments)
        .explode("segment")
        .with_columns(colon=pl.col("segment").str.find(":", literal=True))
        .filter(pl.col("colon").is_not_null())
    )


def _segment_key() -> pl.Expr:
    return pl.col("segment").str.head(pl.col("colon"))


def _segment_raw() -> pl.Expr:
    return pl.col("segment").str.slice(pl.col("colon") + 1).str.strip_chars()


def _iteration_fields(lines: pl.LazyFrame) -> pl.LazyFrame:
    """One row per (iteration line, printed field): ``key`` (categorical) and value, in long form.

    Only what each row needs of its own: the line's step, attempt and time are gathered from the iteration rows
    afterwards (:func:`_line_columns`), which keeps this, the largest frame of the pass, small.

    Keys never hold ':' or '|', so a split at '|' and then at the first ':' does what a regex would, several times
    faster. (``str.find`` counts bytes and ``str.head`` characters: a key with non-ASCII text before its ':' is
    garbage from a damaged line either way.) Values that are not plain numbers are null here and read again by
    :func:`_unparsed_values`. Keys are named by :func:`_iteration_metrics` once, on the few distinct keys.
    """
    key = _segment_key()  # keys replace_many did not name keep their spaces until named
    value = _segment_raw().cast(pl.Float64, strict=False)
    seconds = pl.col("key") == _SECONDS
    return (
        _segments(lines)
        .select("line", key=key, value=value)
        .select(
            "line",
            key=pl.when(seconds).then(pl.lit(s.ITERATION_TIME_MS)).otherwise("key").cast(pl.Categorical),
            value=pl.when(seconds).then(pl.col("value") * 1000.0).otherwise("value"),
        )
    )


def _unparsed_values(text: TextFile, prefix: str, at: list[int]) -> pl.DataFrame:
    """``line``, ``metric`` and ``raw`` text of the fields on lines ``at`` whose value did not parse as a number."""
    return (
        _segments(_lines_at(text, prefix, at).lazy())
        .select("line", key=_segment_key().str.strip_chars(), raw=_segment_raw())
        .filter(pl.col("raw").cast(pl.Float64, strict=False).is_null() & (pl.col("raw") != "") & (pl.col("key") != ""))
        .collect()
    )


def _inside_arguments() -> pl.Expr:
    """On the kept lines in file order: the line lies between an arguments header and its end."""
    depth = pl.col("is_args_start").cast(pl.Int32).cum_sum() - pl.col("is_args_end").cast(pl.Int32).cum_sum()
    return (depth > 0) & ~pl.col("is_args_start")


# --- damaged iteration lines --------------------------------------------------------------------------------------
def _repair_wrapped(
    iters: pl.DataFrame, fields: pl.DataFrame, others: pl.DataFrame, text: TextFile, prefix: str,
    warnings: list[str],
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Join iteration lines hard-wrapped over a few lines; report the lines that stay cut short.

    Returns the frames with the joined lines parsed again, and the cut lines (``line``, ``past``: whether the
    cut fell after the place where the loss is printed, so a missing loss is still evidence).
    """
    has_counters = bool(iters["has_counters"].any())
    complete = pl.col("ends_pipe") & (pl.col("has_counters") if has_counters else pl.lit(True))
    broken = iters.filter(~complete)["line"].to_list()
    no_cut = pl.DataFrame(schema={"line": pl.UInt32, "past": pl.Boolean})
    if not broken:
        return iters, fields, others, no_cut
    wanted = sorted({n + k for n in broken for k in range(4)})
    texts = dict(_lines_at(text, prefix, wanted).select("line", pl.col("text").fill_null("")).iter_rows())
    is_iter = re.compile(p.ITERATION_CORE)
    patches: dict[int, str] = {}
    swallowed: set[int] = set()
    cut: dict[int, bool] = {}
    for line_no in broken:
        joined = texts.get(line_no, "")
        for k in range(1, 4):
            following = texts.get(line_no + k)
            if following is None or is_iter.search(following) or line_no + k in patches:
                break
            joined += following
            if joined.rstrip().endswith("|") and (not has_counters or _COUNTERS in joined):
                patches[line_no] = joined
                swallowed.update(range(line_no + 1, line_no + k + 1))
                warnings.append(f"{text.shown}: line {line_no}: iteration line wrapped over {k + 1} lines; joined")
                break
        if line_no not in patches:
            cut[line_no] = bool(re.search(r"loss scale:|grad norm:|number of skipped", texts.get(line_no, "")))
            last = line_no == int(iters["line"].max()) and not text.ends_with_newline  # type: ignore[arg-type]
            where = "last line" if last else f"line {line_no}"
            warnings.append(f"{text.shown}: {where}: iteration line cut short; fields after the cut are missing")
    cut_frame = pl.DataFrame({"line": list(cut), "past": list(cut.values())}, schema=no_cut.schema)
    if not patches:
        return iters, fields, others, cut_frame
    fixed = _classify(
        pl.LazyFrame({"line": list(patches), "text": list(patches.values())}, schema=_LINES_SCHEMA),
        prefix,
    )
    new_rows, new_fields = pl.collect_all([_line_rows(fixed), _iteration_fields(fixed)])
    new_iters = _split_rows(new_rows)[0]
    drop = pl.col("line").is_in(list(patches) + sorted(swallowed))

    def merged(old: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
        return pl.concat([old.filter(~drop), new], how="vertical_relaxed").sort("line", maintain_order=True)

    return merged(iters, new_iters), merged(fields, new_fields), others.filter(~drop), cut_frame


# --- attempts -----------------------------------------------------------------------------------------------------
def _attempt_bounds(iters: pl.DataFrame, others: pl.DataFrame) -> pl.DataFrame:
    """Where each attempt begins (``start`` line): at each arguments block and wherever the counter goes back.

    Stretches with neither (lines before the first start, a file of events only) join the next attempt.
    """
    starts = others.filter("is_args_start")["line"].cast(pl.Int64).to_numpy()
    lines = iters["line"].cast(pl.Int64).to_numpy()
    process = np.searchsorted(starts, lines, side="right")
    segments = (
        pl.DataFrame({"line": lines, "process": process, "step": iters["step"]})
        .with_columns(back=(pl.col("step") <= pl.col("step").shift(1).over("process")).fill_null(False))
        .with_columns(segment=pl.col("back").cast(pl.Int32).cum_sum().over("process"))
    )
    firsts = segments.group_by("process", "segment").agg(start=pl.col("line").min(), content=pl.lit(True))
    process_starts = pl.DataFrame(
        {"process": np.arange(len(starts) + 1), "segment": 0, "start": np.concatenate([[1], starts])},
        schema={"process": pl.Int64, "segment": pl.Int32, "start": pl.Int64},
    ).with_columns(content=pl.col("process") > 0)
    bounds = (
        pl.concat([process_starts, firsts.cast({"process": pl.Int64})], how="vertical_relaxed")
        .group_by("process", "segment")
        .agg(pl.col("start").min(), pl.col("content").any())
        .sort("start", "process")  # a process that starts on line 1 comes after the stretch before it
    )
    numbered = pl.when("content").then(pl.col("content").cast(pl.Int32).cum_sum())
    return bounds.with_columns(
        attempt=numbered.backward_fill().forward_fill().fill_null(1).cast(pl.Int32)
    ).select("start", "attempt")


def _line_columns(fields: pl.DataFrame, iters: pl.DataFrame) -> pl.DataFrame:
    """The step, attempt and wall time of each field's iteration line (both frames are in line order)."""
    if fields.height == 0:
        return fields.with_columns(
            step=pl.lit(None, pl.Int64), attempt=pl.lit(1, pl.Int32), wall_time=pl.lit(None, pl.Float64)
        )
    runs = fields.select(first=pl.col("line").rle().struct.field("value"))["first"]  # fields come line by line
    at = iters["line"].search_sorted(runs, side="left").gather(fields["line"].rle_id())
    times = iters["wall_time"]
    return fields.with_columns(
        step=iters["step"].gather(at),
        attempt=iters["attempt"].gather(at) if iters["attempt"].n_unique() > 1 else pl.lit(iters["attempt"][0]),
        wall_time=times.gather(at) if times.null_count() < len(times) else pl.lit(None, dtype=pl.Float64),
    )


def _with_attempt(frame: pl.DataFrame, bounds: pl.DataFrame) -> pl.DataFrame:
    if bounds["attempt"].n_unique() == 1:
        return frame.with_columns(attempt=pl.lit(bounds["attempt"][0], dtype=pl.Int32))
    at = bounds["start"].cast(pl.UInt32).search_sorted(frame["line"].cast(pl.UInt32), side="right")
    return frame.with_columns(attempt=bounds["attempt"].gather((at.cast(pl.Int64) - 1).clip(0, None)))


# --- iteration lines ----------------------------------------------------------------------------------------------
def _metric_names(keys: list[str]) -> dict[str, str]:
    return {k: p.FIELD_NAMES.get(k) or _slug_text(k) for k in keys}


def _slug_text(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def _iteration_metrics(fields: pl.DataFrame, text: TextFile, prefix: str) -> pl.DataFrame:
    """Metric rows (``line`` kept) from the fields: keys named, seconds made ms, non-plain numbers read again."""
    keys = [k for k in fields["key"].unique().to_list() if k is not None]
    renames = {k: v for k, v in _metric_names(keys).items() if k != v}  # keys replace_many did not name
    if len(renames) > 4:
        mapping = {k: renames.get(k, k) for k in keys}
        fields = fields.with_columns(pl.col("key").replace_strict(mapping, return_dtype=pl.Categorical))
    else:  # a few comparisons of categorical codes are cheaper than a lookup per row
        for old, new in renames.items():
            is_old = pl.col("key") == old
            fields = fields.with_columns(key=pl.when(is_old).then(pl.lit(new, dtype=pl.Categorical)).otherwise("key"))
    fields = fields.rename({"key": "metric"})
    if "" in renames.values():  # a segment with nothing before its ':'
        fields = fields.filter(pl.col("metric") != "")
    if fields["value"].null_count():
        at = fields.filter(pl.col("value").is_null())["line"].unique().cast(pl.UInt32).to_list()
        raw = pl.col("raw")
        leading = raw.str.extract(r"^([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)").cast(pl.Float64, strict=False)
        reread = pl.when(raw.str.contains(r"(?i)nan")).then(float("nan")).when(raw.str.contains(r"(?i)inf")).then(
            pl.when(raw.str.starts_with("-")).then(float("-inf")).otherwise(float("inf"))
        ).otherwise(leading)
        unparsed = _unparsed_values(text, prefix, at)
        names = _metric_names(unparsed["key"].unique().to_list())
        fixes = unparsed.select(
            "line", reread=reread,
            metric=pl.col("key").replace_strict(names, return_dtype=pl.String).cast(pl.Categorical),
        ).unique(["line", "metric"], keep="first")
        fields = (
            fields.join(fixes, on=["line", "metric"], how="left")
            .with_columns(value=pl.coalesce("value", "reread"))
            .drop_nulls("value")
        )
    return fields.select("line", "attempt", "step", "wall_time", "metric", "value")


def _log_interval(iters: pl.DataFrame) -> pl.DataFrame:
    """The iteration delta between consecutive lines of an attempt (the printed loss is a mean over it)."""
    delta = pl.col("step") - pl.col("step").shift(1).over("attempt")
    out = iters.select("attempt", "step", "wall_time", value=delta.cast(pl.Float64))
    out = out.with_columns(pl.col("value").backward_fill().over("attempt"))
    return out.drop_nulls("value").with_columns(metric=pl.lit(s.LOG_INTERVAL))


def _last_step(frame: pl.DataFrame, iters: pl.DataFrame, strategy: str = "backward") -> pl.Series:
    """The step of the iteration line printed before (or after) each row of ``frame``, in the same attempt."""
    steps = iters.select("line", "attempt", found=pl.col("step")).sort("line")
    joined = frame.select("line", "attempt").with_row_index("_row").sort("line").join_asof(
        steps, on="line", by="attempt", strategy=strategy, check_sortedness=False  # type: ignore[arg-type]
    )
    return joined.sort("_row")["found"]


def _validation_metrics(others: pl.DataFrame, iters: pl.DataFrame) -> pl.DataFrame:
    val = others.filter(pl.col("body").str.contains(" loss at ", literal=True)).with_columns(
        g=pl.col("body").str.extract_groups(p.VALIDATION)
    )
    val = val.filter(pl.col("g").struct.field("3").is_not_null())
    if val.height == 0:
        return pl.DataFrame()
    val = val.with_columns(
        step=pl.col("g").struct.field("1").cast(pl.Int64, strict=False).fill_null(_last_step(val, iters)),
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
    iters: pl.DataFrame, fields: pl.DataFrame, cut: pl.DataFrame, text: TextFile, prefix: str
) -> pl.DataFrame:
    """Loss missing (NaN or a fully skipped interval), stale grad norms, and cut-short lines."""
    wide = iters.select("line", "attempt", "step", "wall_time")
    for metric in (s.LOSS, s.GRAD_NORM, s.LOSS_SCALE, s.SKIPPED_ITERATIONS):
        values = fields.filter(pl.col("metric") == metric).unique("line", keep="first", maintain_order=True)
        wide = wide.join(values.select("line", pl.col("value").alias(metric)), on="line", how="left", maintain_order="left")
    wide = wide.join(cut, on="line", how="left", maintain_order="left").with_columns(
        has_loss=pl.col(s.LOSS).is_not_null(), cut=pl.col("past").is_not_null()
    )
    # a cut line still shows a missing loss when it was cut after the place where the loss is printed
    missing = wide.filter(~pl.col("has_loss") & (~pl.col("cut") | pl.col("past"))).select(
        "line", "attempt", "step", "wall_time", kind=pl.lit(s.EV_LOSS_MISSING), value=pl.col(s.SKIPPED_ITERATIONS),
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
    if out.height == 0:
        return out
    texts = _lines_at(text, prefix, out["line"].unique().to_list())
    return out.join(texts.select("line", "text"), on="line", how="left")


# --- other lines --------------------------------------------------------------------------------------------------
def _line_events(others: pl.DataFrame, iters: pl.DataFrame) -> pl.DataFrame:
    candidates = others.filter(pl.col("body").str.contains(_ANY_EVENT))
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
    ev = ev.with_columns(last=_last_step(ev, iters), next=_last_step(ev, iters, "forward")).with_columns(
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


def _process_starts(others: pl.DataFrame) -> pl.DataFrame:
    return others.filter("is_args_start").select(
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


def _configs(others: pl.DataFrame, iters: pl.DataFrame) -> pl.DataFrame:
    kv = others.filter("in_args").select("attempt", g=pl.col("body").str.extract_groups(p.ARGS_LINE)).select(
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
