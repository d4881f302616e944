"""Console logs whose metrics lines are one regex away: nanoGPT, llm.c, torchtitan, nanotron, MLX LM, the Hugging
Face Trainer's printed dicts, fairseq. Each format is a :class:`LineFormat`: rules that pick its metrics lines and
read the step and each field from them; everything else (errors, tracebacks, kills, start-up lines, launches and
restarts) is read as in a Megatron log (:mod:`parsers.megatron`), so every console tells its story the same way.

The lines are read a block at a time as Polars frames (:mod:`parsers.textfile`); each rule is one vectorised
``extract`` per field, so a log of millions of lines never passes through Python line by line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from parsers import megatron_patterns as p
from parsers import schema as s
from parsers.megatron import (
    INNER_BAR,
    attempt_bounds,
    kept_bar,
    line_events,
    progress_events,
    with_attempt,
    with_event_kinds,
)
from parsers.reader import NotThisFormat, Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import TextFile, inspect_text, scan_blocks, search

_ANY_EVENT = "|".join(f"(?:{rx})" for _, rx in p.EVENT_PATTERNS)
_ANSI = p.ANSI
_GLUED_STOP = p.SLURM_STOP
_NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|NAN|-?inf|-?Inf)"
_SUFFIXED = _NUMBER + r"[KMGT]?"  # nanotron's 16.4K, 1.02K, 25.2G
_STAMP = r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)"
_US_STAMP = r"(\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2})"  # nanotron's 01/27/2025 15:50:16
# why a metrics line is printed again as it was, where the format knows no better (its own LineFormat.repeats)
REPEATED_LINE = "the same line printed again as it was (by several ranks, or a console redraw kept in a paste)"
_LONG_LINE = 300  # characters: a longer event line is quoted from where the event begins
_MULTIPLIERS = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


@dataclass(frozen=True)
class Rule:
    """Lines matching ``line`` are metrics lines; group 1 of ``line`` is the step (``None``: the step of the last
    metrics line of another rule printed before, e.g. llm.c's ``val loss 3.91`` after its step line).
    ``fields``: metric -> regex whose group 1 is the value, searched anywhere in the line; ``scale``: metric ->
    factor (seconds -> ms). A restart shows as the step of the ``per_step`` lines going back."""

    line: str
    fields: dict[str, str]
    step: bool = True
    scale: dict[str, float] = field(default_factory=dict)
    per_step: bool = True  # the training step's own line (False: an evaluation line, which repeats a step)
    step_at: tuple[str, ...] = ()  # regexes whose group 1 is the step (the last match on the line), instead of ``line``
    ordinal: bool = False  # with no step anywhere, number these lines 1, 2, ... (and say so)
    layout: str | None = None  # the usual line in one regex, groups named ``step`` and after metrics (a fast path)
    step_of: Callable[[pl.Expr], pl.Expr] | None = None  # the step from the line's text, when one group cannot say it
    step_after: bool = False  # with ``step=False``: the step of the next metrics line instead (build-nanogpt prints
    # "validation loss: 3.2" at the top of the step whose line follows)
    where: Callable[[pl.Expr], pl.Expr] | None = None  # of the lines ``line`` matches, only those this is true of
    # (from the line's text: what one regex cannot say, e.g. Keras 3's "2/2 ━━━━" has its two counts equal)
    before_first: bool = False  # with ``step=False``: printed before any step line, the step before the next one
    # (llm.c evaluates at the top of its loop: "val loss nan" before "step 1/19560" is the model at step 0)
    events_too: bool = False  # its lines are read for events as well (DeepSpeed's "step=N, skipped=M, lr=[...]":
    # a step's LR, and the running count of the steps it skipped)


_SAMPLED = 3_000  # lines of a block above which names printed on them are read off a sample


def _sample(lines: pl.DataFrame) -> pl.DataFrame:
    """The first 1,000 of ``lines`` and 2,000 spread over the rest, where there are more than 3,000."""
    if lines.height <= _SAMPLED:
        return lines
    return pl.concat([lines.head(1_000), lines.slice(1_000).gather_every((lines.height - 1_000) // 2_000 + 1)])


def _families(names: list[str], most: int = 16) -> list[str]:
    """``names`` (sorted), those of a family of more than ``most`` that differ only after their last "/" (Composer's
    per-parameter norms, "l2_norm/grad/model.embedding.weight", ...) said as one where its first is: "l2_norm/grad/*
    (30 names: model.embedding.weight ... model.transformer.layers.1.ffn_pre.weight)".

    >>> _families(["a/x", "b"] + [f"l2/g/p{i:02}" for i in range(20)] + ["l2/h"])
    ['a/x', 'b', 'l2/g/* (20 names: p00 ... p19)', 'l2/h']
    """
    def family(name: str) -> str:
        return name.rsplit("/", 1)[0] + "/" if "/" in name else name

    members: dict[str, list[str]] = {}
    for name in names:
        members.setdefault(family(name), []).append(name)
    said = []
    for name in names:
        group = members[family(name)]
        if len(group) <= most:
            said.append(name)
        elif name == group[0]:
            ends = [m[len(family(name)):] for m in group]
            said.append(f"{family(name)}* ({len(group)} names: {ends[0]} ... {ends[-1]})")
    return said


def _named(names: list[str], most: int = 8) -> str:
    """`` (a, b, ...)``: the names of what was not read, the first ``most`` of them (empty when none is known)."""
    if not names:
        return ""
    return f" ({', '.join(names[:most])}{', ...' if len(names) > most else ''})"


@dataclass(frozen=True)
class LineFormat:
    """A console format: ``FORMAT`` name, ``detect`` (bytes regex found in the file's head: :meth:`sniff`),
    ``rules``, and ``events``: (event kind, regex) of the format's own lifecycle lines (nanoGPT's "saving
    checkpoint to out"), looked at after the Megatron patterns."""

    FORMAT: str
    detect: re.Pattern[bytes]
    rules: tuple[Rule, ...]
    events: tuple[tuple[str, str], ...] = ()
    note: str | None = None  # said (as a reading warning) of a log of this format whose metrics were read
    # per metric, a value the format prints where it has none (and why): dropped, with a reading warning
    placeholders: tuple[tuple[str, float, str], ...] = ()
    # per metric, the smallest value the format prints with enough digits to rest on (and why): a value under it is
    # dropped, with a reading warning (Composer's four decimals leave an LR of 6e-05 one digit, "0.0001")
    coarse: tuple[tuple[str, float, str], ...] = ()
    # (metric, note): said (as a reading warning) of a log of this format where that metric was read
    read_notes: tuple[tuple[str, str], ...] = ()
    # (regex, what such a line is): lines that look like metrics lines but cannot be read, counted in a warning
    unread: tuple[tuple[str, str], ...] = ()
    # what a metrics line printed again as it was is
    repeats: str = REPEATED_LINE
    # (regex, names): group 1 of each match on a metrics line is the name of a field it prints (modded-nanogpt's
    # "train_time:41ms"); a printed name not in ``names`` (the fields the rules read, or deliberately leave) is
    # listed in a reading warning: the chronicle says which printed values it did not check
    printed: tuple[str, frozenset[str]] | None = None
    # (regex of the line that begins it, regex of the line that ends it): a YAML mapping of the run's settings the
    # program prints between them (Composer's "Config:" ... "*****"), read as the config of the attempt it is in
    config_block: tuple[str, str] | None = None
    # the settings a printed config implies in Megatron's names, where its own keys do not say them (llm-foundry's
    # MPT: its expansion_ratio is the FFN's width, its learned positions span max_seq_len): added to it
    config_implies: Callable[[dict], dict] | None = None
    # the settings of a printed config's text (its lines after the one that begins it, or that one line when it ends
    # on it: the Hugging Face Trainer's one-line "TrainingArguments(output_dir=..., logging_steps=10, ...)"), where
    # it is not YAML; its "logging_steps" numbers the metrics lines of a log that prints no step
    config_reader: Callable[[str], dict] | None = None
    # a metrics line that ends so is whole even with no newline after it (the Trainer's dict ends with its "}"): the
    # end of the file cut nothing of it
    whole_line: str | None = None

    def sniff(self, head: bytes, name: str) -> bool:
        return b"\x00" not in head[:8192] and search(self.detect, head) is not None

    def read(self, path: Path, context: ReadContext) -> list[Piece]:
        text = inspect_text(path, context.shown)
        if text.binary or text.blank:
            raise NotThisFormat(f"{context.shown}: {'binary' if text.binary else 'empty'} file", empty=text.blank)
        log = self.parse(text, run=context.run, source=context.shown)
        # (a size or a planned length printed at start-up says nothing of a training on its own)
        if log.metrics.height == 0 and log.events.filter(~pl.col("kind").is_in(list(s.SETUP_KINDS))).height == 0:
            raise NotThisFormat(f"{context.shown}: {self.FORMAT} log without metrics lines, errors or stops")
        return [Piece(path, self.FORMAT, log)]

    def parse(self, text: TextFile, run: str, source: str) -> ParsedLog:
        """The log's metrics, events and attempts."""
        rows, others, last = [], [], pl.DataFrame()
        unread = [0] * len(self.unread)
        printed: set[str] = set()
        unread_names: list[dict[str, None]] = [{} for _ in self.unread]
        inside, settings = False, []
        for block in scan_blocks(text):
            last, other, missed, names, config_lines, inside = self._block(block, inside)
            if config_lines.height:
                settings.append(config_lines)
            printed |= names
            rows.append(self._numeric(last))  # numbers per block: the text of the lines is not kept
            others.append(other)
            unread = [a + n for a, (n, _) in zip(unread, missed, strict=True)]
            for seen, (_, found) in zip(unread_names, missed, strict=True):
                seen.update(dict.fromkeys(found))
        warnings = text.damage()
        lines = pl.concat(rows, how="diagonal_relaxed") if rows else self._numeric(pl.DataFrame())
        other = pl.concat(others, how="diagonal_relaxed") if others else pl.DataFrame()
        if not text.ends_with_newline and lines.height and int(lines["line"].max() or 0) == text.lines and not (
                self.whole_line and re.search(self.whole_line, _last_line(text.path))):
            # the last line is a metrics line cut by the end of the file: a number it cut is not a value
            lines, cut = _without_cut_values(lines, last, text.lines, _last_line(text.path))
            warnings.append(f"{source}: the last line is cut short (line {text.lines}); "
                            + (f"what the end of the file cut ({cut!r}) was not used" if cut
                               else "its values were not used"))
        notes: list[str] = []
        others_frame = self._others(other)
        said = _read_config_blocks(pl.concat(settings), self.config_reader) if settings else []
        metrics, iters, counted = self._metrics(lines, notes, others_frame, self._logging_interval(said))
        for metric, value, why in self.placeholders:
            placeholder = (pl.col("metric") == metric) & (pl.col("value") == value)
            if (n := metrics.filter(placeholder).height):
                metrics = metrics.filter(~placeholder)
                notes.append(f"{metric.replace('_', ' ')} printed as {value:g} on {n} line(s): {why}; not read as a "
                             f"{metric.replace('_', ' ')}")
        for metric, least, why in self.coarse:
            small = (pl.col("metric") == metric) & (pl.col("value").abs() < least)
            if (n := metrics.filter(small).height):
                metrics = metrics.filter(~small)
                notes.append(f"{metric.replace('_', ' ')} printed under {least:g} on {n} line(s): {why}; not read")
        read = set(metrics["metric"].unique().to_list()) if self.read_notes else set()
        notes += [said for metric, said in self.read_notes if metric in read]
        if self.note and metrics.height:
            notes.append(self.note)
        notes += [f"{n} line{'s' if n != 1 else ''} {why}: not read" + _named(list(names))
                  for n, names, (_, why) in zip(unread, unread_names, self.unread, strict=True) if n]
        if self.printed and (left := sorted(printed - self.printed[1])) and metrics.height:
            notes.append(f"its metrics lines also print {', '.join(_families(left))}: {UNREAD_FIELDS_NOTE}")
        warnings += [f"{source}: {note}" for note in notes]
        bounds = attempt_bounds(iters, others_frame)
        iters = with_attempt(iters, bounds)
        metrics = with_attempt(metrics, bounds)
        planned = metrics.clear()  # "step:20344/20344": the run's planned length, where a rule reads it
        if any(PLANNED_STEPS in rule.fields for rule in self.rules):
            planned = metrics.filter(pl.col("metric") == PLANNED_STEPS)
            metrics = metrics.filter(pl.col("metric") != PLANNED_STEPS)
        configs = planned.group_by("attempt", maintain_order=True).agg(pl.col("value").last()).select(
            "attempt", key=pl.lit("train_iters"), value=pl.col("value").cast(pl.Int64, strict=False).cast(pl.String),
            typed=pl.col("value").cast(pl.Int64, strict=False).cast(pl.String)).drop_nulls("value")
        others_frame = with_attempt(others_frame, bounds)
        # (not where the steps count printed lines: a plan in steps is on another axis)
        if not counted and "kind" in others_frame.columns and (others_frame["kind"] == s.EV_PLANNED_STEPS).any():
            configs = _with_planned(configs, others_frame)
        if said:
            printed_configs, config_notes = _config_blocks(said, iters, others_frame, self.config_implies)
            configs = pl.concat([printed_configs.join(configs.select("attempt", "key"), on=["attempt", "key"],
                                                      how="anti"), configs], how="vertical_relaxed")
            warnings += [f"{source}: {note}" for note in config_notes]
        # every metrics line's step, one row a line, where an event may need it (a million-line console has few)
        wanted = others_frame.height and "kind" in others_frame.columns and others_frame["kind"].is_not_null().any()
        # (a line's metrics rows have its iteration row's step: only the lines that are not iteration lines are added)
        placed = pl.concat([iters.select("line", "attempt", "step"), metrics.filter(
            ~pl.col("line").is_in(iters["line"].implode())).select("line", "attempt", "step").unique("line")],
            how="vertical_relaxed") if wanted else None
        barred = any(note == BARRED_NOTE or note.startswith(GLUED_NOTE) for note in notes)
        events = pl.concat([line_events(others_frame, iters, own_steps=not counted, placed=placed,
                                        bar_counts=barred),
                            progress_events(others_frame)], how="diagonal_relaxed")

        def finish(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
            labels = {name: pl.lit(value, dtype=schema["run"]) for name, value in (("run", run), ("source", source))}
            return s.conform(frame.with_columns(**labels), schema)

        return ParsedLog(
            metrics=finish(metrics, s.METRICS_SCHEMA).sort("attempt", "metric", "step", maintain_order=True),
            events=finish(events, s.EVENTS_SCHEMA).sort("line", maintain_order=True)
            if events.height else s.empty(s.EVENTS_SCHEMA),
            configs=finish(configs, s.CONFIGS_SCHEMA),
            warnings=warnings,
            n_attempts=max(int(bounds["attempt"].max() or 0), 1),  # type: ignore[arg-type]
            tags={name: name for name in metrics["metric"].unique().to_list()},
            counted_steps=counted,
            bar_steps=BARRED_NOTE in notes or any(n.startswith((SAVED_NOTE, ARGUMENTS_NOTE, GLUED_NOTE, PLANNED_NOTE))
                                                  for n in notes),
        )

    # --- per block --------------------------------------------------------------------------------------------------
    def _block(self, block: pl.LazyFrame, inside: bool = False
               ) -> tuple[pl.DataFrame, pl.DataFrame, list[tuple[int, list[str]]], set[str], pl.DataFrame, bool]:
        """The block's metrics lines (which rule, its step and fields as text: ``s:<rule>``, ``f:<rule>:<metric>``),
        its other lines that may be events (with their text), how many lines match each of ``unread`` (with the
        names its group ``name`` captures, where it has one), the names of the fields its metrics lines print
        (:attr:`LineFormat.printed`), the lines of its :attr:`LineFormat.config_block` (``inside``: the block begins
        inside one) and whether it ends inside one. Only the
        lines a regex can concern are searched with it: ANSI codes where an escape byte is, event patterns on lines
        that are not metrics lines."""
        lines = block.with_columns(clean=pl.col("text").fill_null("")).collect()
        if lines.select(pl.col("clean").str.contains("\x1b", literal=True).any()).item():  # coloured output
            lines = lines.with_columns(clean=pl.col("clean").str.replace_all(_ANSI, ""))
        config_lines, inside = self._config_lines(lines, inside)
        stamped = _has_stamps(lines)
        fitted, lines = self._first_layout(lines)
        which: pl.Expr = pl.lit(None, dtype=pl.Int32)
        for n, rule in reversed(list(enumerate(self.rules))):
            matches = pl.col("clean").str.contains(rule.line)
            if rule.where:
                matches = matches & rule.where(pl.col("clean")).fill_null(False)
            which = pl.when(matches).then(pl.lit(n, dtype=pl.Int32)).otherwise(which)
        lines = lines.with_columns(rule=which)
        missed = []
        for rx, _ in self.unread:
            hit = lines.filter(pl.col("rule").is_null() & pl.col("clean").str.contains(rx))
            group = re.compile(rx).groupindex.get("name")
            # (their names off a sample, as the printed fields': the note shows the first few)
            named = _sample(hit)
            names = (named.select(pl.col("clean").str.extract(rx, group)).to_series().drop_nulls()
                     .unique(maintain_order=True).to_list() if group and hit.height else [])
            missed.append((hit.height, names))
        mine = lines.filter(pl.col("rule").is_not_null())
        names = self._printed(pl.concat([fitted.select("clean"), mine.select("clean")]))
        # (a rule that reads nothing, Composer's "every other metric line", only names what its lines print: they
        # are not kept)
        parts = [fitted, *(self._fields(mine.filter(pl.col("rule") == n), n, rule) for n, rule in enumerate(self.rules)
                           if rule.fields or rule.step or rule.step_at or rule.step_of)]
        mine = pl.concat([part for part in parts if part.height] or [mine.clear()], how="diagonal_relaxed")
        columns = [c for n, r in enumerate(self.rules)
                   for c in ([f"s:{n}"] if r.step or r.step_at else []) + [f"f:{n}:{m}" for m in r.fields]]
        mine = mine.with_columns(**{c: pl.lit(None, dtype=pl.String) for c in columns if c not in mine.columns})
        mine = mine.with_columns(wall_time=_stamp(stamped)).drop("clean", "text")
        extra = "|".join(f"(?:{rx})" for _, rx in self.events)
        rest = lines.with_columns(bar=kept_bar(pl.when(pl.col("rule").is_null()).then(pl.col("clean"))))
        both = [n for n, rule in enumerate(self.rules) if rule.events_too]
        unruled = pl.col("rule").is_null() | pl.col("rule").is_in(both) if both else pl.col("rule").is_null()
        # (a scheduler's stop glued onto a metrics line, "step 16256/19560 | loss nan | norm nan (slurmstepd: error:
        # *** JOB ... CANCELLED AT ...": the line is read for its metrics, and for the stop too)
        glued = pl.col("rule").is_not_null() & pl.col("clean").str.contains(_GLUED_STOP)
        rest = rest.filter((unruled & (
            pl.col("clean").str.contains(_ANY_EVENT + (f"|{extra}" if extra else "")) | pl.col("bar"))) | glued
        ).drop("bar")
        # a long line is mostly progress output glued in front of what it says ("evaluating HellaSwag: 10/1256...
        # slurmstepd: error: *** JOB ... CANCELLED"): it is kept from where the event begins
        said = pl.col("text").str.extract(f"((?:{_ANY_EVENT}{'|' + extra if extra else ''}).*)$", 1)
        # (a bar glued in front is read before the line is cut: parsers.megatron.progress_events)
        bar = pl.col("clean").str.extract_all(p.PROGRESS_BAR + r"[^\]]*\]?").list.last()
        stop = pl.when(pl.col("rule").is_not_null()).then(pl.col("text").str.extract(f"({_GLUED_STOP}.*)$", 1))
        rest = rest.with_columns(wall_time=_stamp(stamped), bar=bar, text=pl.coalesce(stop, pl.when(
            pl.col("text").str.len_chars() > _LONG_LINE).then(pl.coalesce(said, pl.col("text")))
            .otherwise(pl.col("text"))) + "").drop("clean")
        return mine, rest, missed, names, config_lines, inside

    def _logging_interval(self, printed: list[PrintedConfig]) -> int | None:
        """The logging interval (over 1) that every config the log printed with a :attr:`config_reader` gives as
        its "logging_steps", where none logs its first step too; else None."""
        if not self.config_reader:
            return None
        said = set()
        for _, values, _ in printed:
            if values is None:
                continue
            every, strategy = values.get("logging_steps"), values.get("logging_strategy")
            if (values.get("logging_first_step") is True or not isinstance(every, int | float)
                    or not math.isfinite(every) or every != int(every)
                    or (strategy is not None and not str(strategy).lower().endswith("steps"))):
                return None  # (logging by epoch, or not at all, prints the default logging_steps=500 all the same)
            said.add(int(every))
        return said.pop() if len(said) == 1 and min(said) > 1 else None

    def _config_lines(self, lines: pl.DataFrame, inside: bool) -> tuple[pl.DataFrame, bool]:
        """The lines of the block's printed configs (``line``, ``text``, ``first``: the line that begins one), and
        whether the block ends inside one."""
        if not self.config_block:
            return pl.DataFrame(), False
        begins, ends = (pl.col("clean").str.contains(rx) for rx in self.config_block)
        # (a line that begins one and ends it is the whole config: inside, and the lines after it are not)
        state = pl.when(begins & ~ends).then(pl.lit(True)).when(ends).then(pl.lit(False)).otherwise(None)
        marked = lines.select(pl.col("line").cast(pl.Int64), text=pl.col("clean"), first=begins,
                              inside=begins | (state.forward_fill().shift(1).fill_null(inside) & ~ends),
                              after=state.forward_fill().fill_null(inside))
        return (marked.filter("inside").drop("inside", "after"),
                bool(marked["after"][-1]) if marked.height else inside)

    def _first_layout(self, lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The lines that start with the first rule's usual layout, read in one anchored pass, and the other lines
        (each classified by the rules' ``line`` regexes and read field by field)."""
        rule = self.rules[0]
        if not rule.layout:
            return lines.clear().with_columns(rule=pl.lit(None, dtype=pl.Int32)), lines
        anchored = "^" + rule.layout.removeprefix(r"\b")
        names = {"step": "s:0", **{metric: f"f:0:{metric}" for metric in rule.fields}}
        got = lines.with_columns(_g=pl.col("clean").str.extract_groups(anchored)).unnest("_g").rename(
            {k: v for k, v in names.items() if k in re.compile(anchored).groupindex})
        fitted = got.filter(pl.col("s:0").is_not_null()).with_columns(rule=pl.lit(0, dtype=pl.Int32))
        return fitted, got.filter(pl.col("s:0").is_null()).select(lines.columns)

    @staticmethod
    def _fields(own: pl.DataFrame, n: int, rule: Rule) -> pl.DataFrame:
        """One rule's lines with their step (``s:<n>``) and fields (``f:<n>:<metric>``) as text, each field on its
        own."""
        if own.height == 0:
            return own
        values = {}
        text = pl.col("clean")
        if rule.step_of:
            values[f"s:{n}"] = rule.step_of(text).cast(pl.String)
        elif rule.step_at:
            values[f"s:{n}"] = pl.coalesce(*[text.str.extract_all(rx).list.last().str.extract(rx, 1)
                                             for rx in rule.step_at])
        elif rule.step:
            values[f"s:{n}"] = text.str.extract(rule.line, 1)
        values |= {f"f:{n}:{metric}": text.str.extract(rx, 1) for metric, rx in rule.fields.items()}
        return own.with_columns(**values)

    def _printed(self, mine: pl.DataFrame) -> set[str]:
        """The names of the fields the block's metrics lines print (:attr:`LineFormat.printed`), read off its first
        1,000 metrics lines and 2,000 spread over the rest (the lines of a format print the same fields: a full
        regex pass over a million lines cost a second; a field printed on fewer than one line in a few hundred of a
        block, after its first thousand, can go unnamed)."""
        if not self.printed or mine.height == 0:
            return set()
        names = _sample(mine).select(pl.col("clean").str.extract_all(self.printed[0]).explode()
                            .str.extract(self.printed[0], 1).unique())
        return set(names.to_series().drop_nulls().to_list())

    def _numeric(self, mine: pl.DataFrame) -> pl.DataFrame:
        """The metrics lines as numbers, in line order: ``line``, ``rule``, ``step`` (null where the line prints
        none), ``wall_time`` (seconds) and ``v:<rule>:<metric>`` for each field."""
        schema = {"line": pl.Int64, "rule": pl.Int32, "step": pl.Int64, "wall_time": pl.Float64,
                  **{f"v:{n}:{m}": pl.Float64 for n, r in enumerate(self.rules) for m in r.fields}}
        if mine.height == 0:
            return pl.DataFrame(schema=schema)
        present = set(mine["rule"].unique().to_list())  # the columns of rules with no line here are left out
        stepped = [n for n, r in enumerate(self.rules) if (r.step or r.step_at) and n in present]
        step = (pl.coalesce(*[pl.when(pl.col("rule") == n).then(pl.col(f"s:{n}")) for n in stepped])
                if stepped else pl.lit(None, dtype=pl.String))
        out = mine.select(pl.col("line").cast(pl.Int64), "rule", step=step, wall_time=_epoch(pl.col("wall_time")))
        plain = out["step"].cast(pl.Int64, strict=False)
        if (plain.is_null() & out["step"].is_not_null()).any():  # thousands separators: 12,000
            plain = plain.fill_null(out["step"].str.replace_all(",", "").cast(pl.Int64, strict=False))
        values = {f"v:{n}:{m}": _values(mine[f"f:{n}:{m}"]) * r.scale.get(m, 1.0)
                  for n, r in enumerate(self.rules) if n in present for m in r.fields}
        return out.with_columns(step=plain, **values).sort("line")

    def _metrics(self, lines: pl.DataFrame, notes: list[str], others: pl.DataFrame | None = None,
                 interval: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame, bool]:
        """Long metrics rows (line, step, metric, value, wall_time), one row per step line (line, step), and whether
        the steps count printed lines (the log prints none). Lines that print no step take the count of the progress
        bar printed after each, before the next metrics line (the Trainer redraws its bar, at the step it logged,
        after each dict), where every one has such a bar (``others``: the other kept lines); else they are
        counted."""
        counted = [n for n, r in enumerate(self.rules) if r.ordinal]
        numbered = False
        mine = pl.col("rule").is_in(counted) & self._per_step()
        epochs = [f"v:{n}:{s.EPOCH}" for n in counted if s.EPOCH in self.rules[n].fields]
        if counted and lines.filter(mine & pl.col("step").is_not_null()).height \
                and lines.filter(mine & pl.col("step").is_null()).height:
            # some of them print a step (the Trainer's dict glued after the progress bar it redrew at that step), the
            # others are placed from those
            placed = _between_steps(lines, mine, epochs, notes)
            # (where they cannot all be placed so, the steps some print are not used: the lines are counted)
            lines = placed if placed is not None else lines.with_columns(
                step=pl.when(pl.col("rule").is_in(counted)).then(None).otherwise("step"))
        if counted and lines.filter(pl.col("rule").is_in(counted) & pl.col("step").is_not_null()).height == 0:
            # a line that repeats every value of the counted line before it is another rank's print of it: same number
            fields = [c for c in lines.columns if c.startswith("v:")]
            counted_lines = lines.filter(mine).select("line", "rule", *fields)
            copy = pl.col("rule") == pl.col("rule").shift(1)
            for c in fields:
                copy = copy & pl.col(c).eq_missing(pl.col(c).shift(1))
            # a training that ended (its summary printed) and another that began after it: the new one counts from 1
            # again (a second trainer.train() starts from scratch; a resume prints a checkpoint line, its own story)
            done = (others.filter(pl.col("kind") == s.EV_TRAINING_DONE)["line"].sort()
                    if others is not None and "kind" in others.columns else pl.Series([], dtype=pl.Int64))
            segment = pl.lit(done).search_sorted(pl.col("line")) if done.len() else pl.lit(0)
            flags = counted_lines.select("line", _copy=copy.fill_null(False), _seg=segment)
            bar_events = progress_events(others) if others is not None and others.height else pl.DataFrame()
            # (the lines' count against the training's own bar: an evaluation's drawn under it counts its samples)
            inner = others.filter(pl.col("text").str.contains(INNER_BAR))["line"] if bar_events.height else None
            outer_bars = bar_events.filter(~pl.col("line").is_in(inner.implode())) if inner is not None else bar_events
            against = _bars_against(flags, outer_bars)
            if against is not None and against["_raw_ok"].all() and (against["_ahead"] > 1).any():
                # the progress bar counted every such line as a step (the same values printed at two steps: a loss,
                # grad norm and LR all 0.0 while every step overflowed, the epoch rounded alike): not a copy
                flags = flags.with_columns(_copy=pl.lit(False))
                against = _bars_against(flags, outer_bars)
            count = (~pl.col("_copy")).cast(pl.Int64).cum_sum()
            new = flags.select("line", _n=count.over("_seg"))
            lines = lines.join(new, on="line", how="left", maintain_order="left").with_columns(
                step=pl.when(mine).then(pl.col("_n")).otherwise("step")).drop("_n")
            barred = _bar_steps(lines, mine, bar_events)
            saved = _saved_interval(lines, mine, others) if barred is None else None
            planned = (_planned_interval(lines, mine, others, epochs)
                       if barred is None and saved is None and interval is None else None)
            if barred is None and saved is None and interval is not None and lines.filter(mine).height:
                lines = lines.with_columns(step=pl.when(mine).then(pl.col("step") * interval).otherwise("step"))
                notes.append(f"{ARGUMENTS_NOTE}: {interval}")
            elif planned is not None:
                lines = lines.with_columns(step=pl.when(mine).then(pl.col("step") * planned[0]).otherwise("step"))
                notes.append(f"{PLANNED_NOTE}: {planned[0]} ({planned[1]} lines over the {planned[2]} steps it "
                             "planned and completed, their epochs in step)")
            elif barred is not None:
                lines = lines.with_columns(step=pl.when(mine).then(barred).otherwise("step"))
                notes.append(BARRED_NOTE)
            elif saved is not None:
                interval, first, count = saved
                lines = lines.with_columns(step=pl.when(mine).then(pl.col("step") * interval).otherwise("step"))
                notes.append(f"{SAVED_NOTE}: {interval} (checkpoint-{first} saved after its metrics line {count})")
            elif lines.filter(mine).height:
                numbered = True
                behind = _lines_lost(against) if against is not None else None
                notes.append(COUNTED_NOTE if behind is None else f"{COUNTED_NOTE}; {behind}")
        keys = [f"v:{n}:{m}" for n, rule in enumerate(self.rules) for m in rule.fields if m in (s.LOSS, s.GRAD_NORM)]
        lines = _one_print_per_step(lines, self._per_step(), keys, notes, self.repeats, others)
        stepped_lines = lines.filter(pl.col("step").is_not_null()).select("line", "step")
        # the per-step lines number the steps: a restart is their step going back (an evaluation line shares the
        # step of the iteration line after it)
        primary = [n for n, r in enumerate(self.rules) if r.per_step]
        first = lines.filter(pl.col("step").is_not_null() & pl.col("rule").is_in(primary)).select("line", "step")
        iters = first if first.height else stepped_lines
        after = [n for n, r in enumerate(self.rules) if r.step_after]
        if after and lines.filter(pl.col("rule").is_in(after) & pl.col("step").is_null()).height:
            # a line printed at the top of its step takes the step of the next line that prints one
            lines = lines.join_asof(stepped_lines.rename({"step": "_after"}), on="line", strategy="forward")
            lines = lines.with_columns(step=pl.when(pl.col("rule").is_in(after)).then(pl.coalesce("step", "_after"))
                                       .otherwise("step")).drop("_after")
        early = [n for n, r in enumerate(self.rules) if r.before_first]
        if early and stepped_lines.height:
            head = pl.col("step").is_null() & pl.col("rule").is_in(early) & (pl.col("line") < stepped_lines["line"].min())
            lines = lines.with_columns(step=pl.when(head).then(pl.lit(stepped_lines.sort("line")["step"][0] - 1))
                                       .otherwise("step"))
        if lines["step"].null_count():  # a line without a step takes the last step printed before it, and its time
            # when it prints none (OLMo's "[step=1/15000]" header is stamped, its indented metric lines are not)
            timed = lines.filter(pl.col("step").is_not_null()).select("line", _before="step", _at="wall_time")
            _note_headless(lines, timed, notes)
            lines = lines.join_asof(timed, on="line", strategy="backward")
            before = pl.coalesce("step", "_before")  # (not for a line printed at the top of a step never printed)
            inherits = pl.col("step").is_null() & ~pl.col("rule").is_in(after)
            lines = lines.with_columns(step=pl.when(pl.col("rule").is_in(after)).then("step").otherwise(before),
                                       wall_time=pl.when(inherits).then(pl.coalesce("wall_time", "_at"))
                                       .otherwise("wall_time")).drop("_before", "_at")
        parts = [lines.filter((pl.col("rule") == n) & pl.col(f"v:{n}:{metric}").is_not_null()).select(
                     "line", "step", metric=pl.lit(metric), wall_time="wall_time", value=f"v:{n}:{metric}")
                 for n, rule in enumerate(self.rules) for metric in rule.fields if f"v:{n}:{metric}" in lines.columns]
        metrics = pl.concat(parts) if parts else pl.DataFrame(schema={
            "line": pl.Int64, "step": pl.Int64, "metric": pl.String, "wall_time": pl.Float64, "value": pl.Float64})
        return metrics.filter(pl.col("step").is_not_null()), iters, numbered

    def _per_step(self) -> pl.Expr:
        return pl.col("rule").is_in([n for n, r in enumerate(self.rules) if r.per_step])

    def _others(self, other: pl.DataFrame) -> pl.DataFrame:
        """The other kept lines with their event kinds: the Megatron patterns first, then the format's own."""
        frame = (other if other.height else pl.DataFrame(schema={"line": pl.UInt32, "text": pl.String,
                                                                "wall_time": pl.String}))
        frame = frame.select(
            pl.col("line").cast(pl.Int64), "text", body=pl.col("text").fill_null("").str.replace_all(_ANSI, ""),
            bar=pl.col("bar") if "bar" in frame.columns else pl.lit(None, dtype=pl.String),
            wall_time=_epoch(pl.col("wall_time")), in_args=pl.lit(False), is_args_start=pl.lit(False),
            is_args_end=pl.lit(False),
        )
        frame = with_event_kinds(frame)
        for kind, rx in self.events:
            frame = frame.with_columns(
                kind=pl.when(pl.col("kind").is_null() & pl.col("body").str.contains(rx)).then(pl.lit(kind))
                .otherwise("kind"),
                raw=pl.when(pl.col("kind").is_null() & pl.col("body").str.contains(rx))
                .then(pl.col("body").str.extract(rx, 1).str.replace_all(",", "")  # "124,475,904 parameters"
                      if re.compile(rx).groups else pl.lit(None, dtype=pl.String))
                .otherwise("raw"),
            )
        return frame


_MOST_CONFIG_LINES = 5_000  # lines of a printed config beyond which it is taken to have no end line (not read)


PrintedConfig = tuple[int, "dict | None", "str | None"]  # a printed config's first line, its settings, a note


def _read_config_blocks(lines: pl.DataFrame, reader: Callable[[str], dict] | None = None) -> list[PrintedConfig]:
    """Each config printed between the lines of a :attr:`LineFormat.config_block`, read once: its first line, its
    settings (a YAML mapping, or what ``reader`` makes of the block), and None with a note where it could not be
    read. (A few printed configs, of a few hundred lines each: read in Python.)"""
    import yaml

    from parsers.textfile import safe_yaml

    out: list[PrintedConfig] = []
    blocks = lines.with_columns(block=pl.col("first").cum_sum()).filter(pl.col("block") > 0)
    for (_,), block in blocks.group_by("block", maintain_order=True):
        start = int(block["line"][0])
        if block.height > _MOST_CONFIG_LINES:
            out.append((start, None, f"the config printed at line {start} has no end line within "
                                     f"{_MOST_CONFIG_LINES:,} lines: not read"))
            continue
        try:
            # a reader finds its own opening; YAML begins after the line that opens the block (a config that ends on
            # the line that begins it is that line)
            text = "\n".join(block["text"].slice(0 if reader or block.height == 1 else 1).to_list())
            values = reader(text) if reader else safe_yaml(text)
        except (yaml.YAMLError, RecursionError, ValueError) as exc:  # a config cut, or not YAML: said, not read
            out.append((start, None, f"the config printed at line {start} could not be read as YAML "
                                     f"({(str(exc).splitlines() or [type(exc).__name__])[0]}): not read"))
            continue
        out.append((start, values if isinstance(values, dict) else {}, None))
    return out


def _config_blocks(printed: list[PrintedConfig], iters: pl.DataFrame, others: pl.DataFrame,
                   implies: Callable[[dict], dict] | None = None) -> tuple[pl.DataFrame, list[str]]:
    """Config rows (attempt, key, value, typed) of the configs a log printed (:func:`_read_config_blocks`), each the
    config of the attempt it was printed in (a launch prints it as it starts: before its first step, so it is the
    attempt of the next line that has one), and the note of each that could not be read."""
    from parsers.wandb_history import config_frame

    placed = pl.concat([frame.select(pl.col("line").cast(pl.Int64), pl.col("attempt").cast(pl.Int64))
                        for frame in (iters, others) if "attempt" in frame.columns and frame.height]
                       or [pl.DataFrame(schema={"line": pl.Int64, "attempt": pl.Int64})]).sort("line")
    frames, notes = [], [note for _, _, note in printed if note]
    for start, values, _ in printed:
        if not values:
            continue
        if implies:
            values = {**values, **implies(values)}
        after = placed.filter(pl.col("line") > start).head(1)
        before = placed.filter(pl.col("line") < start).tail(1)
        attempt = int((after if after.height else before)["attempt"][0]) if (after.height or before.height) else 1
        frames.append(config_frame(values, run="", source="", attempt=attempt).select("attempt", "key", "value",
                                                                                        "typed"))
    if not frames:
        return pl.DataFrame(schema={"attempt": pl.Int32, "key": pl.String, "value": pl.String, "typed": pl.String}), notes
    # (a launch that printed its config twice keeps the first)
    return pl.concat(frames).unique(["attempt", "key"], keep="first", maintain_order=True), notes


UNREAD_FIELDS_NOTE = "not read, so nothing here checks them or rests on them"

# a rule's field whose value is the run's planned number of steps ("step:1/20000"): read as its train_iters setting
PLANNED_STEPS = "train_iters"

COUNTED_NOTE = ("it prints no step: steps here count its printed metrics lines (times the logging interval, they are "
                "the training steps)")
BARRED_NOTE = ("it prints no step: each metrics line's step is the count of the progress bar printed after it "
               "(its N of N/M)")
ARGUMENTS_NOTE = ("it prints no step: steps here are its printed metrics lines times the logging interval its printed "
                  "arguments give (logging_steps)")
PLANNED_NOTE = ("it prints no step: steps here are its printed metrics lines times the logging interval that their "
                "count over its planned steps gives")
GLUED_NOTE = ("it prints no step: a metrics line printed after its progress bar has the bar's count as its step (its N "
              "of N/M); the others are placed from those")
SAVED_NOTE = ("it prints no step: steps here are its printed metrics lines times the logging interval its step-named "
              "checkpoint saves show")


_FEW_SAVES = 5


def _with_planned(configs: pl.DataFrame, others: pl.DataFrame) -> pl.DataFrame:
    """``configs`` with each attempt's planned length from its header (:data:`parsers.schema.EV_PLANNED_STEPS`) as
    ``train_iters``, where its lines did not give one."""
    said = others.filter(pl.col("kind") == s.EV_PLANNED_STEPS).select(
        "attempt", steps=pl.col("raw").cast(pl.Int64, strict=False)).drop_nulls().unique("attempt", keep="last")
    said = said.join(configs.filter(pl.col("key") == "train_iters").select("attempt"), on="attempt", how="anti")
    rows = said.select("attempt", key=pl.lit("train_iters"), value=pl.col("steps").cast(pl.String),
                       typed=pl.col("steps").cast(pl.String))
    return pl.concat([configs, rows], how="vertical_relaxed") if rows.height else configs


def _between_steps(lines: pl.DataFrame, own: pl.Expr, epochs: list[str], notes: list[str]) -> pl.DataFrame | None:
    """The steps of the ``own`` lines that print none, where others do (the Trainer's dicts glued after its progress
    bar have its count; those printed under a bar it had already moved past have none): the step their epoch gives,
    at the steps an epoch that the lines with a step show, where every such line's epoch gives its step to half a
    step (the older Trainer prints the epoch in full); else the step of the line before that has one plus the usual
    step between those lines, per line between (the step of the line after, less as much, before the first), where
    that step is the same between every two of them. None where the lines cannot be placed so (steps that do not
    rise from 1 up)."""
    mine = lines.filter(own).select("line", "step", epoch=pl.coalesce(epochs) if epochs else pl.lit(None,
                                                                                                  pl.Float64))
    mine = mine.with_columns(n=pl.int_range(pl.len()))
    known = mine.filter(pl.col("step").is_not_null())
    per_epoch = known.filter(pl.col("epoch") > 0).select((pl.col("step") / pl.col("epoch")).median()).item()
    sure = per_epoch is not None and known.filter(pl.col("epoch") > 0).height >= 2 and known.select(
        ((pl.col("epoch") * per_epoch - pl.col("step")).abs() <= 0.5).all()).item()
    if sure:
        filled = mine.select("line", _s=pl.coalesce("step", (pl.col("epoch") * per_epoch).round().cast(pl.Int64)))
        said = f"the step their epoch gives, at the {per_epoch:.0f} steps an epoch those show"
    else:
        everies = known.select(pl.col("step").diff() / pl.col("n").diff()).to_series().drop_nulls()
        if not everies.len() or everies.n_unique() > 1 or everies[0] < 1 or everies[0] != int(everies[0]):
            return None
        every = int(everies[0])
        said = f"{every} steps after the line before, the usual step between those"
        marks = known.select("n", _b="step", _bn="n")
        filled = mine.sort("n").join_asof(marks, on="n", strategy="backward").join_asof(
            marks.rename({"_b": "_a", "_bn": "_an"}), on="n", strategy="forward").select(
            "line", _s=pl.coalesce("step", pl.col("_b") + (pl.col("n") - pl.col("_bn")) * every,
                                   pl.col("_a") - (pl.col("_an") - pl.col("n")) * every))
    steps = filled["_s"]
    if steps.null_count() or steps.min() < 1 or (steps.diff().drop_nulls() <= 0).any():
        return None
    notes.append(f"{GLUED_NOTE} ({said})")
    return lines.join(filled, on="line", how="left", maintain_order="left").with_columns(
        step=pl.coalesce("step", "_s")).drop("_s")


def _planned_interval(lines: pl.DataFrame, mine: pl.Expr, others: pl.DataFrame | None, epochs: list[str]
                      ) -> tuple[int, int, int] | None:
    """The logging interval of a log printing no step that planned one length (the Trainer's "Total optimization steps
    = 170") and said it completed: the one interval k at which a Trainer logging every k steps prints as many lines
    as it did (floor(170 / k) = 17: 10), where every line's epoch is its count's share of the last line's to the
    epoch's printed digits (a run stopped early, or a first step logged too, fails it). Returns it with the count of
    lines and the planned steps; else None."""
    if others is None or "kind" not in others.columns or not epochs:
        return None
    plans = others.filter(pl.col("kind") == s.EV_PLANNED_STEPS)["raw"].cast(pl.Int64, strict=False).drop_nulls()
    if plans.n_unique() != 1 or plans.len() != 1 or not (others["kind"] == s.EV_TRAINING_DONE).any():
        return None
    own = lines.filter(mine).select("step", epoch=pl.coalesce(epochs)).drop_nulls()
    total, count = int(plans[0]), lines.filter(mine).height
    fits = [k for k in range(max(total // (count + 1), 1), total // max(count, 1) + 1) if total // k == count]
    if len(fits) != 1 or fits[0] < 2 or own.height != count or not count:
        return None
    last = float(own["epoch"][-1])
    if last <= 0 or not own.select(((pl.col("epoch") - pl.col("step") * last / count).abs() <= 0.011).all()).item():
        return None
    return fits[0], count, total


def _saved_interval(lines: pl.DataFrame, mine: pl.Expr, others: pl.DataFrame | None
                    ) -> tuple[int, int, int] | None:
    """The logging interval that the step-named checkpoint saves of a log printing no step show ("Saving model
    checkpoint to out/checkpoint-100" after its 20th metrics line: 5), where every save (five or more, each two or
    more lines after the one before) names the same whole multiple (over 1) of the count of the metrics lines before
    it; else None (a save off the logging steps, a first-step log, a replay after a resume: the count is then no
    step). Returns it with the first save's step and the count of the metrics lines before it."""
    if others is None or "kind" not in others.columns or "raw" not in others.columns:
        return None
    saves = others.filter(pl.col("kind") == s.EV_CHECKPOINT_SAVING).select(
        pl.col("line").cast(pl.Int64), saved=pl.col("raw").cast(pl.Int64, strict=False)).drop_nulls().sort("line")
    if saves.height < _FEW_SAVES:
        return None
    counts = lines.filter(mine).select(pl.col("line").cast(pl.Int64), count="step").sort("line")
    placed = saves.join_asof(counts, on="line", strategy="backward").drop_nulls("count")
    # (saves fewer than two lines apart, or fewer than five, fit a wrong interval too: logging every 500 steps and
    # saving every 600, checkpoint-600 ... -2400 follow lines 1-4, "every 600"; the fifth, 3000, follows line 6)
    if placed.height < saves.height or (placed["count"] <= 0).any() or (placed["count"].diff().drop_nulls() < 2).any():
        return None
    ratios = (placed["saved"] // placed["count"]).unique()
    if ratios.len() != 1 or int(ratios[0]) <= 1 or (placed["saved"] % placed["count"] != 0).any():
        return None
    return int(ratios[0]), int(placed["saved"][0]), int(placed["count"][0])


def _bar_steps(lines: pl.DataFrame, mine: pl.Expr, bars: pl.DataFrame) -> pl.Series | None:
    """Each metrics line's step where ``mine`` holds: the count of the first progress bar after it and before the
    next metrics line (``bars``: :func:`parsers.megatron.progress_events` of the other lines); None unless every such
    line has one."""
    if not bars.height or not lines.filter(mine).height:
        return None
    bars = bars.select(pl.col("line").cast(pl.Int64), bar_step="step").sort("line")
    placed = lines.select(pl.col("line").cast(pl.Int64), mine=mine, next=pl.col("line").shift(-1).cast(pl.Int64)) \
        .join_asof(bars.with_columns(bar_line="line"), on="line", strategy="forward")
    placed = placed.with_columns(bar_step=pl.when(pl.col("next").is_null() | (pl.col("bar_line") < pl.col("next")))
                                 .then("bar_step"))
    if placed.filter(pl.col("mine") & pl.col("bar_step").is_null()).height:
        return None
    return placed["bar_step"]


def _bars_against(flags: pl.DataFrame, bars: pl.DataFrame) -> pl.DataFrame | None:
    """Each progress bar (line, count, total) against the counted metrics lines of its training (``flags``: line,
    ``_copy``: a line counted as a copy of the one before, ``_seg``: its training): ``_ahead``, the bar's count less
    the lines counted as steps before it; ``_raw_ok``, whether the count is within one of every line printed before it
    (a bar and its dicts go to two streams, printed in either order); ``_beyond``, the count less every line the
    training counts as a step, before or after the bar. None without bars."""
    if not bars.height or not flags.height:
        return None
    seen = flags.sort("line").with_columns(_raw=pl.int_range(1, pl.len() + 1).over("_seg"),
                                           _kept=(~pl.col("_copy")).cast(pl.Int64).cum_sum().over("_seg"))
    seen = seen.with_columns(_all=pl.col("_kept").max().over("_seg"), _last=pl.col("line").max().over("_seg"))
    bars = bars.filter(pl.col("step") > 0).select(pl.col("line").cast(pl.Int64), count="step", total="value").sort("line")
    placed = bars.join_asof(seen, on="line", strategy="backward").drop_nulls("_raw")
    # the training's bar is drawn among its metrics lines; a bar of another total drawn only after them is another
    # loop's (an evaluation's 60/60 after 50 training steps)
    among = placed.filter(pl.col("line") < pl.col("_last"))["total"].unique().implode()
    placed = placed.filter(pl.col("total").is_in(among))
    if not placed.height:
        return None
    return placed.select("line", "count", "total", "_kept", _ahead=pl.col("count") - pl.col("_kept"),
                         _raw_ok=(pl.col("count") - pl.col("_raw")).abs() <= 1,
                         _beyond=pl.col("count") - pl.col("_all"))


def _lines_lost(against: pl.DataFrame) -> str | None:
    """Says that a progress bar counted more steps than its training printed metrics lines in all, by two or more
    (one: the step it was in when it stopped), where it ran ahead of the lines before it by less than half of them
    (more is a logging interval, which the counted note already names): at least that many lines are missing from
    the log, so the counted steps fall behind the training's."""
    over = against.filter((pl.col("_beyond") >= 2) & (pl.col("count") < 1.5 * pl.col("_kept")))
    if not over.height:
        return None
    worst = over.sort("_beyond", "line").row(-1, named=True)
    printed = worst["count"] - worst["_beyond"]
    return (f"but its progress bar reached {worst['count']}/{worst['total']:.0f} (line {worst['line']}) where its "
            f"training printed {printed} metrics lines in all: at least {worst['_beyond']} are missing (a capture "
            "that lost lines), so its counted steps fall behind the training's")


# the kinds of the other lines that begin a launch: a step repeated across one of them is a replay, not a copy
_LAUNCH_KINDS = frozenset({s.EV_STARTUP, s.EV_PROCESS_START, s.EV_CHECKPOINT_LOAD})


def _note_headless(lines: pl.DataFrame, stepped: pl.DataFrame, notes: list[str]) -> None:
    """Says how many metrics lines with a value read were printed before the first line that gives a step (a log
    that begins inside a block: Composer's or OLMo's metric lines under a header cut off): they have no step, and are
    not read. ``stepped``: the lines that give one."""
    values = [c for c in lines.columns if c.startswith("v:")]
    if not values:
        return
    first = stepped["line"].min() if stepped.height else None
    before = pl.col("step").is_null() & pl.any_horizontal([pl.col(c).is_not_null() for c in values])
    if first is not None:
        before = before & (pl.col("line") < first)
    headless = lines.filter(before)
    if headless.height:
        names = list(dict.fromkeys(c.split(":", 2)[2].replace("_", " ") for c in values
                                   if headless[c].is_not_null().any()))
        notes.append(f"{headless.height} line{'s' if headless.height != 1 else ''} of values it reads"
                     f"{_named(names)} printed before the first line that gives a step "
                     f"({'none does' if first is None else f'line {first}'}): no step, not read")


def _one_print_per_step(lines: pl.DataFrame, per_step: pl.Expr, keys: list[str], notes: list[str],
                        repeats: str = REPEATED_LINE, others: pl.DataFrame | None = None
                        ) -> pl.DataFrame:
    """The metrics lines without the copies several ranks print of one step's line: a per-step line with the step
    and ``keys`` (the loss and grad-norm columns) of the per-step line just before it (same rule; the same time stamp
    where both have one). A relaunch that repeats a step is not such a copy: its time differs, or (where the lines
    have no time) a start-up or checkpoint-load line of ``others`` (the other kept lines) stands between them."""
    steps = lines.filter(per_step & pl.col("step").is_not_null())
    keys = [c for c in keys if c in steps.columns]
    if others is not None and "kind" in others.columns and steps.height:
        starts = others.filter(pl.col("kind").is_in(list(_LAUNCH_KINDS))).select(pl.col("line").cast(pl.Int64))
        if starts.height:
            launches = starts.sort("line").with_columns(_launch=pl.int_range(1, starts.height + 1, dtype=pl.Int64))
            steps = steps.sort("line").join_asof(launches, on="line", strategy="backward").with_columns(
                pl.col("_launch").fill_null(0))
            keys = [*keys, "_launch"]
    same = pl.lit(True)
    for c in ("rule", "step", *keys):
        same = same & pl.col(c).eq_missing(pl.col(c).shift(1))
    stamp = pl.col("wall_time")
    same = same & (stamp.is_null() | stamp.shift(1).is_null() | (stamp == stamp.shift(1)))
    copies = steps.filter(same.fill_null(False))
    if not copies.height:
        return lines
    first = steps.filter(pl.col("line") < copies["line"][0]).tail(1)
    at = f" (first: step {first['step'][0]}, line {first['line'][0]})" if first.height else ""
    notes.append(f"{copies.height} metrics line{'s' if copies.height != 1 else ''} repeat the step, loss and time of "
                 f"the line before{at}: {repeats}, each step read once")
    return lines.filter(~pl.col("line").is_in(copies["line"].implode()))


def _epoch(stamp: pl.Expr) -> pl.Expr:
    ts = stamp.str.replace(",", ".").str.replace("T", " ")
    return ts.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us").dt.epoch("us") / 1e6


NUMBER = _NUMBER

SUFFIXED = _SUFFIXED


def _last_line(path: Path) -> str:
    """The file's last line (it has no newline after it), as text."""
    with path.open("rb") as handle:
        handle.seek(max(0, handle.seek(0, 2) - 65536))
        return handle.read().rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace").replace("\x00", "")


def _without_cut_values(lines: pl.DataFrame, said: pl.DataFrame, last: int, end: str
                        ) -> tuple[pl.DataFrame, str | None]:
    """The metrics lines without what the end of the file cut: on the last line, the field whose value runs to the
    end (its digits may be cut); the whole line when that is its step; nothing when the cut fell in a field not
    read. ``said``: the last block's metrics lines as text. Returns the cut text too."""
    row = said.filter(pl.col("line") == last)
    end = end.rstrip()
    cut = [c for c in row.columns if c.startswith(("s:", "f:")) and row[c][0] is not None and end.endswith(row[c][0])]
    if not cut:  # the cut fell in a field not read: every value read is whole
        return lines, end.rsplit(" ", 1)[-1][-40:] or None
    if any(c.startswith("s:") for c in cut):
        return lines.filter(pl.col("line") != last), end[-40:] or None
    at_end = pl.col("line") == last
    return (lines.with_columns(**{"v" + c[1:]: pl.when(~at_end).then(pl.col("v" + c[1:])) for c in cut}),
            end.rsplit(" ", 1)[-1][-40:])


def _values(text: pl.Series) -> pl.Series:
    """Printed numbers as floats: a plain cast where it works (nearly always), :func:`_value` for the rest."""
    fast = text.cast(pl.Float64, strict=False)
    odd = fast.is_null() & text.is_not_null()
    if not odd.any():
        return fast
    return pl.select(pl.when(odd).then(_value(pl.lit(text))).otherwise(fast)).to_series()


def _has_stamps(lines: pl.DataFrame) -> bool:
    """Whether the lines carry time stamps (looked for on the block's first lines only)."""
    return bool(lines.height) and lines.head(64).select(
        (pl.col("clean").str.contains(_STAMP) | pl.col("clean").str.contains(_US_STAMP)).any()).item()


def _stamp(stamped: bool) -> pl.Expr:
    """Each line's time stamp as text (``YYYY-MM-DD HH:MM:SS``) where the lines carry them."""
    if not stamped:
        return pl.lit(None, dtype=pl.String)
    return pl.coalesce(
        pl.col("clean").str.extract(_STAMP, 1),
        pl.col("clean").str.extract(_US_STAMP, 1).str.strptime(pl.Datetime("us"), "%m/%d/%Y %H:%M:%S", strict=False)
        .dt.to_string("%Y-%m-%d %H:%M:%S"))


def _value(text: pl.Expr) -> pl.Expr:
    """A printed number as a float: thousands separators dropped, a K/M/G/T suffix applied, "nan" and "inf" kept."""
    plain = text.str.replace_all(",", "").str.strip_chars()
    suffix = plain.str.extract(r"([KMGT])$", 1)
    factor = suffix.replace_strict(_MULTIPLIERS, default=1.0, return_dtype=pl.Float64).fill_null(1.0)
    return plain.str.strip_chars_end("KMGT").cast(pl.Float64, strict=False) * factor
