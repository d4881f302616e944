"""W&B history in any shape -> canonical frames: metric names, attempts, config rows and a sampling verdict.

Every W&B reader (the ``.wandb`` log, API dumps, chart CSVs) produces a long frame ``step, key, value,
wall_time`` and hands it here. ``value`` keeps NaN and +-Inf; a key that was not logged at a step has no row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from parsers import schema as s
from parsers.config_names import normal_name
from parsers.metric_names import canonical, in_units
from parsers.textfile import InputError, json_array_items, json_value

HISTORY_META = ("_step", "_runtime", "_timestamp")
# keys runs log as their own training step, most specific first (W&B's _step counts log calls instead)
STEP_KEYS = ("trainer/global_step", "train/global_step", "global_step", "train/update_step", "update_step", "iter",
             "iteration", "train/step")
# sample sizes W&B uses when it thins a series: run.history() 500, UI charts 1,000 / 1,500, old UI 5,000
_SAMPLE_SIZES = frozenset({500, 1000, 1500, 5000, 10000})
_FEWEST_SAMPLED = 200  # below this many points an export is not a sample (the smallest sample W&B takes is 500)


# columns a dump of several runs' histories names each row's run by (``df["run_id"] = run.id`` before concatenating
# them), ids first: a name may repeat across runs, an id does not
RUN_ID_COLUMNS = ("run_id", "wandb_run_id", "runid", "run_path")
RUN_NAME_COLUMNS = ("run_name", "run", "wandb_run_name", "display_name")


def runs_of(wide: pl.DataFrame) -> tuple[str, dict[str, pl.DataFrame]] | None:
    """A history dump that holds several runs (a column naming each row's run, :data:`RUN_ID_COLUMNS` then
    :data:`RUN_NAME_COLUMNS`, with 2 or more values, each on 2 or more rows on average): the column, and each run's rows
    (in file order, without the naming columns) by its label: its name when a name column gives each id one name
    of its own, else its id. None for a dump of one run.

    >>> wide = pl.DataFrame({"_step": ["0", "1", "0", "1"], "loss": ["3", "2", "4", "3"], "run_id": ["a", "a", "b", "b"],
    ...                      "run_name": ["x", "x", "y", "y"]})
    >>> column, parts = runs_of(wide)
    >>> column, {k: v["loss"].to_list() for k, v in parts.items()}
    ('run_id', {'x': ['3', '2'], 'y': ['4', '3']})
    >>> runs_of(wide.filter(pl.col("run_id") == "a")) is None
    True
    """
    normal = {normal_name(c): c for c in wide.columns}
    naming = [normal[k] for k in (*RUN_ID_COLUMNS, *RUN_NAME_COLUMNS) if k in normal]
    column = next((c for c in naming if 2 <= wide[c].drop_nulls().n_unique() <= wide.height / 2), None)
    if column is None:
        return None
    ids = wide[column].cast(pl.String).fill_null(f"(no {column})")
    labels = ids
    for other in (c for c in naming if c != column and normal_name(c) in RUN_NAME_COLUMNS):
        names = wide[other].cast(pl.String)
        pairs = pl.DataFrame({"id": ids, "name": names}).drop_nulls().unique()
        if pairs["id"].is_unique().all() and pairs["name"].is_unique().all() and pairs.height == ids.n_unique():
            labels = ids.replace_strict(pairs["id"], pairs["name"], default=ids)
            break
    rest = wide.drop(naming).with_columns(_run=labels)
    return column, {str(k[0]): part for k, part in rest.partition_by("_run", maintain_order=True, include_key=False,
                                                                      as_dict=True).items()}


def metric_names(keys: list[str]) -> dict[str, str]:
    """Key -> canonical metric name; when two keys map to one name the first keeps it, the others their own."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for key in keys:
        name = canonical(key)[0]
        if name == key and (unit := in_units(key)) and canonical(unit[0])[0] == s.LR:
            name = s.LR  # (verl's "train/lr(1e-3)": the LR, its values scaled, see unit_factors; a loss per
            # setting, "train/loss(1e-05)", names a setting, not a unit)
        if name in taken or (name != key and name in keys):
            name = key
        out[key] = name
        taken.add(name)
    return out


def unit_factors(keys: list[str], names: dict[str, str]) -> dict[str, float]:
    """The keys read under a canonical name whose values are in a unit they name (:func:`in_units`), and the factor
    that turns their values into the metric's."""
    return {key: unit[1] for key in keys if (unit := in_units(key)) and names.get(key) != key}


def flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts joined with ``.`` (as the W&B UI and the 0.31 client name them); media dicts kept whole."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and "_type" not in value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def config_frame(values: dict[str, Any], run: str, source: str, attempt: int = 1, prefix: str = "") -> pl.DataFrame:
    """Config rows (CONFIGS_SCHEMA) for a dict of settings; ``prefix`` marks summary values (``summary/``)."""
    flat = flatten(values)
    rows = {
        "key": [prefix + k for k in flat],
        "value": [v if isinstance(v, str) else json.dumps(v) for v in flat.values()],
        "typed": [json.dumps(v, default=str) for v in flat.values()],
    }
    frame = pl.DataFrame(rows, schema={"key": pl.String, "value": pl.String, "typed": pl.String})
    return s.conform(frame.with_columns(run=pl.lit(run), source=pl.lit(source), attempt=pl.lit(attempt)),
                     s.CONFIGS_SCHEMA)


_MOST_KEYS_CHECKED = 100  # keys of a history above which its empty cells are not checked (each key is read against
                          # the others in every row pattern)


def empty_cells_note(wide: pl.DataFrame, shown: str, writes_nan: bool = False) -> str | None:
    """A warning where a CSV history's empty cells may be NaNs: pandas writes NaN as an empty cell, so a key logged
    at most rows of its span, empty in a row that logged only keys usually logged with it (the same log call, its
    value missing), may have been NaN there. Not said of a file that writes NaN as a word, of rows that are other log
    calls (an evaluation's row holds other keys), of keys logged at few rows (an evaluation's), nor of a history of
    more than 100 keys (not checked).

    >>> wide = pl.DataFrame({"_step": ["0", "1", "2", "3"], "loss": ["2.5", None, "2.4", None],
    ...                      "lr": ["1e-4", "1e-4", "1e-4", None], "val": [None, None, None, "2.9"]})
    >>> print(empty_cells_note(wide, "h.csv"))  # step 1 logged lr without its loss; step 3 is an evaluation
    h.csv: loss is empty in 1 row that logged only keys logged with it (first at step 1); pandas writes NaN as an \
empty cell, so those may be NaNs, read as 'not logged'
    >>> empty_cells_note(wide, "h.csv", writes_nan=True) is None
    True
    """
    keys = [c for c in wide.columns if c not in HISTORY_META and not _is_index(c)]
    if writes_nan or not keys or wide.height == 0 or len(keys) > _MOST_KEYS_CHECKED:
        return None  # (a file that writes NaN as a word, ``writes_nan``: its empty cells are not NaNs)
    held = {c: pl.col(c).is_not_null() for c in keys}
    index = pl.int_range(pl.len())
    spans = wide.select(*[pl.struct(first=index.filter(held[c]).min(), last=index.filter(held[c]).max(),
                                    n=held[c].sum()).alias(c) for c in keys]).row(0, named=True)
    # the keys logged at most rows of their span (an evaluation's key, logged at a few, has empty rows by design)
    dense = [c for c, v in spans.items() if v["n"] and v["n"] > (v["last"] - v["first"] + 1) / 2]
    if not dense:
        return None
    # which keys each row holds, as its pattern; the rows of a history fall into a few patterns, read once
    # (packed 62 keys to an integer: hashing a struct of 100 flags cost 2 s a million rows)
    words = [pl.sum_horizontal([held[c].cast(pl.Int64) * (1 << j) for j, c in enumerate(keys[at:at + 62])])
             .alias(f"w{at}") for at in range(0, len(keys), 62)]
    rows = wide.select(*words)
    patterns = pl.concat([rows, wide.select(**{c: held[c] for c in keys})], how="horizontal").group_by(
        rows.columns).agg(pl.len().alias("_n"), *[pl.col(c).first() for c in keys]).with_row_index("_p")
    pattern: pl.Series | None = None  # each row's pattern, once a key needs it
    m, w = patterns.select(keys).to_numpy().astype(bool), patterns["_n"].to_numpy().astype(np.float64)
    # the keys a key is usually logged with: held in most of the rows that hold it
    col = {c: j for j, c in enumerate(keys)}
    counts: dict[str, dict[str, int]] = {}
    for c in dense:
        mine = m[:, col[c]]
        usual = (w[mine] @ m[mine]) > 0.5 * w[mine].sum()
        usual[col[c]] = False
        if not usual.any():
            continue
        # a row of the same log call, its value missing: none of the keys it is not logged with, some of those it is
        others = ~usual
        others[col[c]] = False
        suspect = ~mine & ~m[:, others].any(axis=1) & m[:, usual].any(axis=1)
        if suspect.any():  # (inside its span only)
            if pattern is None:
                pattern = rows.join(patterns.select(*rows.columns, "_p"), on=rows.columns, how="left",
                                    maintain_order="left")["_p"]
            hit = pattern.is_in(np.flatnonzero(suspect).tolist()) & pl.int_range(wide.height, eager=True).is_between(
                spans[c]["first"], spans[c]["last"])
            if hit.any():
                counts[c] = {"n": int(hit.sum()), "at": int(hit.arg_max() or 0)}
    said = [(c, v["n"], v["at"]) for c, v in counts.items() if v["n"]]
    if not said:
        return None
    steps = wide["_step"].cast(pl.Float64, strict=False) if "_step" in wide.columns else None
    parts = []
    for c, n, at in said[:3]:
        step = steps[at] if steps is not None else None
        where = f" (first at step {step:.0f})" if step is not None and step == step else ""
        parts.append(f"{c} is empty in {n} row{'s' if n != 1 else ''} that logged only keys logged with it{where}")
    more = f" and {len(said) - 3} more keys" if len(said) > 3 else ""
    return (f"{shown}: {'; '.join(parts)}{more}; pandas writes NaN as an empty cell, so those may be NaNs, read as "
            "'not logged'")


def sampling_note(steps: pl.Series, shown: str, chart: bool = False) -> str | None:
    """A warning when a history looks thinned by W&B: irregular step gaps, or exactly a default sample size.

    A full history has one point per logging step at a regular spacing; W&B's sampling keeps 500 (API) or
    1,000-1,500 (UI) points chosen over the whole range, so the gaps vary.
    """
    unique = steps.drop_nulls().unique().sort()
    n = unique.len()
    if n < 3:
        return None
    gaps = unique.diff().drop_nulls()
    span = int(unique[-1] - unique[0])
    if gaps.n_unique() == 1 and (n not in _SAMPLE_SIZES or int(gaps[0]) == 1):
        # (a history of exactly a sample's size is whole when no step between its first and last is missing: W&B
        # thins a longer history over its whole range, which leaves holes)
        return None
    # W&B thins a history only when it has more points than its sample size: a short one that is regular but for
    # a hole or two (steps that were not logged, each a whole number of log intervals) is whole
    usual = int(gaps.mode().min())
    odd = gaps.filter(gaps != usual)
    if n < _FEWEST_SAMPLED and odd.len() <= 2 and usual > 0 and (odd % usual == 0).all():
        return None
    kind = "chart export" if chart else "history dump"
    return (f"{shown}: sampled {kind}: {n:,} points over {span:,} steps; single-step spikes may be missing "
            "(prefer a full-resolution source: the run's .wandb file or scan_history())")


def step_key(keys: list[str], defined: dict[str, str] | None = None) -> str | None:
    """The run's own step axis among its history keys: the step metric its ``define_metric`` calls name most (the
    metric they give it to), else the first of ``STEP_KEYS`` it logs; None when it logs none (then W&B's ``_step``,
    which counts ``log`` calls, is the axis).

    >>> step_key(["iter", "train/loss"]), step_key(["loss"]), step_key(["a", "s"], {"a": "s"})
    ('iter', None, 's')
    """
    present = set(keys)
    named = [v for k, v in (defined or {}).items() if v in present and k != v]
    if named:
        return max(set(named), key=lambda k: (named.count(k), k))
    return next((k for k in STEP_KEYS if k in present), None)


def on_own_steps(long: pl.DataFrame, key: str) -> pl.DataFrame:
    """The history with each row's step taken from the run's own step key (its value logged with the same ``_step``,
    else the last one logged before it, else the first one logged); the key's own rows are dropped."""
    own = long.filter(pl.col("key") == key).group_by("step").agg(own=pl.col("value").last())
    rest = long.filter(pl.col("key") != key).join(own, on="step", how="left", maintain_order="left")
    filled = pl.col("own").forward_fill().backward_fill().cast(pl.Int64, strict=False)
    return rest.with_columns(step=filled).drop("own").filter(pl.col("step").is_not_null())


def history_log(long: pl.DataFrame, run: str, source: str, *, sort: bool = False,
                defined: dict[str, str] | None = None, names: dict[str, str] | None = None) -> s.ParsedLog:
    """Canonical frames from a long history (``step, key, value, wall_time``; row order = logging order).

    With ``sort`` (API dumps, whose rows come in no particular order) rows are ordered by step first; otherwise
    a step lower than the one before starts a new attempt, annotated by a ``step_regression`` event. When the run
    logs its own step (see :func:`step_key`; ``defined``: its ``define_metric`` step metrics), that is the step.
    An optional ``row`` column (the history row, counted from 0, or the file's line) becomes the ``line`` of each
    restart's event; an optional boolean ``restart`` column starts a new attempt where it is true even where the step
    does not go back (a relaunch that logged that step again). ``names``: keys read under a name of the caller's
    choosing (a value head's ``val_loss`` as ``value_loss``)."""
    long = long.filter(pl.col("value").is_not_null() & pl.col("step").is_not_null())
    if sort and not long["step"].is_sorted():
        long = long.sort("step", maintain_order=True)
    axis = step_key(long["key"].unique(maintain_order=True).to_list(), defined)
    if axis is not None:
        long = on_own_steps(long, axis)
    keys = long["key"].unique(maintain_order=True).to_list()
    names = metric_names(keys) | (names or {})
    if factors := unit_factors(keys, names):
        long = long.with_columns(value=pl.col("value") * pl.col("key").replace_strict(factors, default=1.0))
    back = (pl.col("step") < pl.col("step").shift(1)).fill_null(False)
    if "restart" in long.columns:
        back = back | pl.col("restart").fill_null(False)
    long = long.with_columns(
        attempt=back.cum_sum().cast(pl.Int32) + 1,
        metric=pl.col("key").replace_strict(names, return_dtype=pl.Categorical),  # (as kept: 2.4x cheaper than text)
        run=pl.lit(run), source=pl.lit(source),
    )
    metrics = s.conform(long, s.METRICS_SCHEMA)
    regress = (  # each attempt's first step, and the last step of the one before it
        long.group_by("attempt", maintain_order=True)
        .agg(step=pl.col("step").first(), wall_time=pl.col("wall_time").first(), last=pl.col("step").last(),
             line=pl.col("row").first() if "row" in long.columns else pl.lit(None, dtype=pl.Int64))
        .with_columns(last=pl.col("last").shift(1))
        .filter(pl.col("attempt") > 1)
    )
    texts = [f"step went back from {last} to {step}: the run was restarted" if step < last  # one row per restart
             else f"step {step} logged again: the run was restarted" if step == last
             else f"the log began again at step {step} (after {last}): the run was restarted"
             for last, step in regress.select("last", "step").iter_rows()]
    events = s.conform(
        regress.with_columns(
            kind=pl.lit(s.EV_STEP_REGRESSION), value=pl.col("step").cast(pl.Float64), run=pl.lit(run),
            source=pl.lit(source), text=pl.Series(texts, dtype=pl.String),
        ),
        s.EVENTS_SCHEMA,
    )
    n_attempts = int(long["attempt"].max() or 1) if long.height else 1
    tags = names | ({axis: s.STEP_AXIS} if axis is not None else {})
    return s.ParsedLog(metrics=metrics, events=events, configs=s.empty(s.CONFIGS_SCHEMA), n_attempts=n_attempts,
                       tags=tags)


def wide_to_long(wide: pl.DataFrame, shown: str, *, with_row: bool = False) -> tuple[pl.DataFrame, pl.Series]:
    """A wide history (``_step``, ``_timestamp``, one column per key) -> long ``step, key, value, wall_time`` of
    the cells that hold a value, and the step of every row (empty when no column holds a metric), which says
    whether the history was sampled (:func:`sampling_note`). ``with_row``: also the ``row`` of each cell (from 0).

    Numbers, ``NaN``/``Infinity`` tokens and booleans become values; text, media and dict cells are not metrics.
    Rows come in logging order: the history's row order, then its column order.

    >>> wide = pl.DataFrame({"_step": ["1", "2"], "loss": ["2.5", None], "lr": ["1e-4", "Infinity"], "img": ["a", "b"]})
    >>> long, steps = wide_to_long(wide, "h.csv")
    >>> long.rows(), steps.to_list()
    ([(1, 'loss', 2.5, None), (1, 'lr', 0.0001, None), (2, 'lr', inf, None)], [1, 2])
    """
    if "_step" not in wide.columns:
        raise InputError(f"{shown}: no _step column; not a W&B history")
    keys = [c for c in wide.columns if c not in HISTORY_META and not _is_index(c)]
    # the index columns under names no key has (a run may log a key called "step")
    step = pl.col("_step").cast(pl.Float64, strict=False).cast(pl.Int64, strict=False).alias("_step")
    wall = (pl.col("_timestamp").cast(pl.Float64, strict=False) if "_timestamp" in wide.columns
            else pl.lit(None, dtype=pl.Float64)).alias("_timestamp")
    numeric = [_as_float(wide, c).alias(c) for c in keys]
    frame = wide.select(step, wall, *numeric)
    frame = frame.select("_step", "_timestamp", *[c for c in keys if frame[c].null_count() < frame.height])
    kept = frame.columns[2:]
    k, n = len(kept), frame.height
    # logging order is row order, then the file's column order: the cells that hold a value, row by row (a
    # history with many keys is mostly empty cells); a row's step and wall time repeated for each of its cells
    held = np.column_stack([frame[c].is_not_null().to_numpy() for c in kept]) if k else np.zeros((n, 0), dtype=bool)
    index = np.uint32 if n * k < 2**32 else np.uint64
    counts = held.sum(axis=1)
    rows = np.repeat(np.arange(n, dtype=index), counts)
    values = (frame.select(kept).to_numpy()[held] if k  # (a null is NaN there: not taken)
              else np.zeros(0))
    long = pl.DataFrame({
        "step": _repeated(frame["_step"], counts, rows),
        "key": pl.Series(kept, dtype=pl.String).gather(np.broadcast_to(np.arange(k, dtype=index), (n, k))[held]),
        "value": pl.Series("value", values, dtype=pl.Float64),
        "wall_time": _repeated(frame["_timestamp"], counts, rows),
    })
    if with_row:
        long = long.with_columns(row=pl.Series(rows, dtype=pl.Int64))
    return long, frame["_step"] if k else frame["_step"].clear()


def _repeated(column: pl.Series, counts: np.ndarray, rows: np.ndarray) -> pl.Series:
    """Each of ``column``'s values ``counts`` times (``rows``: each repeat's row), by NumPy where it holds no null.

    >>> _repeated(pl.Series("s", [3, None, 5]), np.array([2, 1, 0]), np.array([0, 0, 1])).to_list()
    [3, 3, None]
    """
    if column.null_count() or not column.dtype.is_numeric():
        return column.gather(rows)
    return pl.Series(column.name, np.repeat(column.to_numpy(), counts), dtype=column.dtype)


def _is_index(column: str) -> bool:
    return column == "" or column.startswith("Unnamed: ") or column == "index"


def number(column: str) -> pl.Expr:
    """A column's cells as floats, read as text: numbers and the ``NaN`` / ``Infinity`` / ``inf`` tokens; anything else
    is null."""
    return pl.col(column).cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)


def _as_float(wide: pl.DataFrame, column: str) -> pl.Expr:
    dtype = wide.schema[column]
    if dtype == pl.Boolean or dtype.is_numeric():
        return pl.col(column).cast(pl.Float64)
    if dtype == pl.String:
        # a column whose every cell is a number as it stands (the usual history) needs no strip: polars reads no
        # number with white space around it, so a cell it read had none to strip
        cells = wide[column]
        plain = cells.cast(pl.Float64, strict=False)
        return pl.lit(plain) if plain.null_count() == cells.null_count() else number(column)
    return pl.lit(None, dtype=pl.Float64)


def _decoded(data: bytes, shown: str, warnings: list[str] | None) -> tuple[str, bool]:
    """A file's text and whether its bytes are not all UTF-8 (then said in a warning, and replaced in the text)."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError as exc:
        if warnings is not None:
            warnings.append(f"{shown}: bytes that are not UTF-8 (first at byte {exc.start}) were replaced")
        return data.decode("utf-8", errors="replace"), True


def read_csv_text(path: Path, shown: str, warnings: list[str] | None = None, separator: str = ",",
                  numbers: bool = False) -> pl.DataFrame:
    """A W&B CSV, every cell as text (empty = null). Bytes that are not UTF-8 are replaced, and lines with an
    unterminated quote are left out (a quote left open swallows the rest of the file), each with a warning, so the
    rest of a damaged file is still read. ``separator``: ``"\\t"`` for a TSV. ``numbers``: a file whose every cell
    is a number (or empty) is read as floats instead, the values its text cast to floats would give (a history of
    millions of rows: reading the text and then casting it costs half as much again as reading the numbers); any
    other file as text."""
    try:
        data = path.read_bytes()
        try:  # polars checks every cell is UTF-8 (not the header: that is checked here), without a copy as str
            line_end = data.find(b"\n")
            (data if line_end < 0 else data[:line_end]).decode("utf-8")
            if numbers and (read := _all_numbers(data, separator)) is not None:
                return read
            return pl.read_csv(data, infer_schema=False, null_values=[""], truncate_ragged_lines=True,
                               separator=separator, encoding="utf8")
        except (UnicodeDecodeError, pl.exceptions.ComputeError):
            pass
        _, lossy = _decoded(data, shown, warnings)  # (the file is not read again)
        encoding = "utf8-lossy" if lossy else "utf8"
        try:
            return pl.read_csv(data, infer_schema=False, null_values=[""], truncate_ragged_lines=True, separator=separator,
                               encoding=encoding)
        except pl.exceptions.ComputeError:
            if data.count(b'"') % 2 == 0:
                raise
        kept, dropped = _without_open_quotes(data)
        if warnings is not None:
            warnings.append(f"{shown}: {len(dropped)} line{'s' if len(dropped) > 1 else ''} with an unterminated "
                            f"quote left out (first: line {dropped[0]})")
        return pl.read_csv(kept, infer_schema=False, null_values=[""], truncate_ragged_lines=True, separator=separator,
                           encoding=encoding)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"{shown}: cannot read CSV ({str(exc).splitlines()[0]})") from None


def _all_numbers(data: bytes, separator: str) -> pl.DataFrame | None:
    """``data`` read with every column as floats, or None when some cell is not a number (its first 64 KiB are
    tried first, so a file with text in its first rows is not read twice)."""
    def floats(text: bytes, columns: list[str]) -> pl.DataFrame:
        return pl.read_csv(text, infer_schema=False, schema_overrides=dict.fromkeys(columns, pl.Float64),
                           null_values=[""], truncate_ragged_lines=True, separator=separator, encoding="utf8")
    try:
        head = data[:data.rfind(b"\n", 0, 1 << 16) + 1] if len(data) > 1 << 16 else data
        columns = pl.read_csv(head, infer_schema=False, n_rows=0, separator=separator, encoding="utf8").columns
        if not columns or len(set(columns)) < len(columns) or any(
                normal_name(c) in (*RUN_ID_COLUMNS, *RUN_NAME_COLUMNS) for c in columns):
            return None  # (a run id of digits is a label, not the float 101.0)
        probe = floats(head, columns)
        return probe if head is data else floats(data, columns)
    except pl.exceptions.PolarsError:
        return None


def _without_open_quotes(data: bytes) -> tuple[bytes, list[int]]:
    """``data`` without its lines that hold an odd number of quotes, and those lines' numbers (W&B exports hold no
    quoted line breaks, so such a line is damaged).

    >>> _without_open_quotes(b'"Step","loss"\\n1,2.5\\n2,"2.4\\n3,2.3\\n')
    (b'"Step","loss"\\n1,2.5\\n3,2.3\\n', [3])
    """
    import numpy as np

    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw == 10)
    quotes = np.flatnonzero(raw == 34)
    per_line = np.diff(np.searchsorted(quotes, np.concatenate(([0], ends + 1, [len(data)]))))
    odd = np.flatnonzero(per_line % 2)
    starts = np.concatenate(([0], ends + 1))
    stops = np.concatenate((ends + 1, [len(data)]))
    pieces, pos = [], 0
    for n in odd.tolist():
        pieces.append(data[pos:starts[n]])
        pos = int(stops[n])
    return b"".join([*pieces, data[pos:]]), [n + 1 for n in odd.tolist()]


def read_history_file(path: Path, shown: str, warnings: list[str] | None = None, *, json_lines: bool | None = None,
                      separator: str = ",", numbers: bool = False) -> pl.DataFrame:
    """An API history dump as a wide frame: CSV (pandas ``to_csv``), JSON (records), JSON lines or Parquet.
    ``json_lines``: JSON lines (True) or a CSV with ``separator`` (False) whatever the file's name (None: by it).
    ``numbers``: a CSV of numbers only comes as floats (see :func:`read_csv_text`)."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet" and json_lines is None:
            wide = pl.read_parquet(path)
            structs = [c for c, t in wide.schema.items() if isinstance(t, pl.Struct)]
            return wide.unnest(*structs, separator=".") if structs else wide
        if json_lines or (json_lines is None and (suffix in {".jsonl", ".ndjson"} or path.name == "wandb-history.jsonl")):
            if (fast := _flat_json_lines(path)) is not None:
                return fast
            rows = _json_lines(path, shown, warnings)
        elif suffix == ".json" and json_lines is None:
            rows = _json_records(path, shown, warnings)
        else:
            return read_csv_text(path, shown, warnings, separator, numbers=numbers)
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"{shown}: cannot read W&B history ({str(exc).splitlines()[0]})") from None
    rows = [flatten(r) for r in rows if isinstance(r, dict)]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    columns = {k: [_cell(r.get(k)) for r in rows] for k in keys}
    return pl.DataFrame(columns, schema=dict.fromkeys(keys, pl.String))


def _json_records(path: Path, shown: str, warnings: list[str] | None) -> list[Any]:
    """A JSON history: an array of records, or pandas' ``{key: {row: value}}``. An array cut short or damaged keeps
    its sound records, with a warning."""
    text, _ = _decoded(path.read_bytes(), shown, warnings)
    try:
        value = json_value(text)
        return value if isinstance(value, list) else _columns_to_rows(value)
    except ValueError:
        start = len(text) - len(text.lstrip())
        if not text.startswith("[", start):
            raise
        rows, bad, _ = json_array_items(text, start)
        if not rows:
            raise
        if warnings is not None:
            warnings.append(f"{shown}: not valid JSON from character {bad[0]} (cut short or damaged); "
                            f"read the {len(rows)} sound records" + (f", skipped {len(bad) - 1} more damaged stretches"
                                                                      if len(bad) > 1 else ""))
        return rows


def _flat_json_lines(path: Path) -> pl.DataFrame | None:
    """A JSON-lines file of flat records (numbers, booleans and text; no nested object, list or damaged line), read by
    Polars in one pass, each cell as text that parses back to the value :func:`_cell` writes (a float's digits may
    be written otherwise: ``1e-05`` as ``0.00001``); None for any other file, which :func:`_json_lines` reads
    line by line (a million lines: 1.3 s here against 17 s)."""
    try:
        frame = pl.read_ndjson(path, infer_schema_length=None)
    except Exception:  # (damaged lines, invalid UTF-8, NaN tokens, ...: the line-by-line reader says what it skipped)
        return None
    if frame.height == 0 or any(dtype.is_nested() or dtype == pl.Object for dtype in frame.schema.values()):
        return None
    cells = []
    for name, dtype in frame.schema.items():
        column = pl.col(name)
        if dtype == pl.Boolean:
            column = column.cast(pl.Int8)
        cells.append(column.cast(pl.String))
    return frame.select(cells)


def _json_lines(path: Path, shown: str, warnings: list[str] | None) -> list[Any]:
    """Every sound line of a JSON-lines file; the others (a cut last line, a damaged one) are counted in a warning."""
    rows, bad = [], []
    text, _ = _decoded(path.read_bytes(), shown, warnings)
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json_value(line))
            except ValueError:
                bad.append(n)
    if bad and warnings is not None:
        warnings.append(f"{shown}: {len(bad)} line(s) that are not JSON were skipped (first: line {bad[0]})")
    if bad and not rows:
        raise ValueError(f"no line is JSON (line {bad[0]} first)")
    return rows


def _columns_to_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """pandas ``to_json()`` default orient ('columns'): ``{key: {row: value}}`` -> rows."""
    index = list(dict.fromkeys(i for col in data.values() if isinstance(col, dict) for i in col))
    return [{k: col.get(i) for k, col in data.items() if isinstance(col, dict)} for i in index]


def _cell(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        return repr(value)  # 'nan', 'inf' and '-inf' parse back as floats
    if isinstance(value, (bool, int)):
        return str(int(value)) if isinstance(value, bool) else str(value)
    return value if isinstance(value, str) else None
