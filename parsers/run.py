"""Find the logs a run left behind, parse each, and join them into canonical frames, one set per run.

Every file is recognised by its content: Megatron text logs, TensorBoard event files, and W&B exports (the
``.wandb`` log of a local run directory, API history dumps, chart and runs-table CSVs). A directory is one run,
except that W&B files name their runs: when they name several (a chart export of three runs, a sweep's
``wandb/`` folder), each named run is its own run, and except that consoles of two or more formats (a nanoGPT log
beside a torchtitan one) are as many runs, one per format. Within a run, full-resolution sources are preferred: TensorBoard
and W&B history replace the text log's values at the same (metric, step), and a sampled W&B export contributes
only metrics that no full-resolution source holds.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl

from parsers import lightning, registry, remote
from parsers import schema as s
from parsers.config_names import canonical_configs
from parsers.console.engine import BARRED_NOTE, COUNTED_NOTE, SAVED_NOTE
from parsers.errors import named, shown_path
from parsers.metric_names import VALIDATION_FOLDERS
from parsers.reader import NotThisFormat, Piece, ReadContext, display_path, head_of
from parsers.schema import ParsedLog
from parsers.textfile import InputError
from parsers.wandb_csv import CHART, HISTORY, RUNS_TABLE

WANDB_LOG = "wandb"
_TEXT_SUFFIXES = {".log", ".out", ".err", ".txt"}


@dataclass
class Source:
    """One input file, the format it was read as, whether it holds only a sample of the points, and whether its
    steps count its printed lines (a console that prints no step)."""

    path: str
    format: str
    sampled: bool = False
    counted: bool = False


@dataclass
class Run:
    """The canonical frames of one training run, plus what was read, skipped and found damaged."""

    name: str
    path: str
    metrics: pl.DataFrame
    events: pl.DataFrame
    configs: pl.DataFrame
    sources: list[Source] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    tags: list[dict[str, str]] = field(default_factory=list)  # {source, tag, metric}: names as the sources wrote them

    @property
    def attempts(self) -> list[int]:
        """Attempt numbers present in any frame, in order."""
        found: set[int] = set()
        for frame in (self.metrics, self.events, self.configs):
            found.update(frame["attempt"].drop_nulls().unique().to_list())
        return sorted(found)


def _natural_key(path: Path) -> list[object]:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", str(path))]


def _candidate_files(root: Path, warnings: list[str]) -> list[Path]:
    """Every file under ``root`` (hidden ones left out), in natural order; a directory that cannot be listed is
    said in ``warnings``."""
    if root.is_file():
        return [root]
    if root.exists() and not root.is_dir():  # read twice (its head, then the whole): a device or a pipe cannot be
        warnings.append(f"{root}: not a file or a directory (a device, a pipe or a socket): not read; save it to a "
                        "file first")
        return []
    files: list[Path] = []

    def unreadable(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else root
        warnings.append(f"{display_path(where, root)}: directory not read ({exc.strerror or exc})")

    for folder, dirs, names in os.walk(root, onerror=unreadable):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        files += [Path(folder) / n for n in names if not n.startswith(".") and (Path(folder) / n).is_file()]
    return sorted(files, key=_natural_key)


def load_runs(path: str | Path, name: str | None = None) -> list[Run]:
    """Read a run directory (every log in it, recognised by content) or a single file into one run per training
    run it holds (see the module docstring for when that is more than one). ``path`` may be a URL
    (``s3://bucket/runs/tr8/``, ``gs://``, ``hf://``, ``memory://``, ``file://``): it is read through fsspec, only
    the files a reader takes are downloaded, and every name shown is the URL's (see :mod:`parsers.remote`).

    Raises :class:`InputError` with a one-line message when the path is missing or nothing in it can be read.

    >>> [run.name for run in load_runs("tests/fixtures/real/wandb/kingb12__text_aug_experiments/wandb_export.csv")]
    ['bert_substitute_02', 'bert_substitute_10', 'bert_substitute_08', 'bert_substitute_04', 'bert_substitute_06']
    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> fs.put("sample_logs/tr8-104B-sample", "/doc/tr8", recursive=True)
    >>> [run] = load_runs("memory://doc/tr8/")
    >>> run.name, run.path, [src.path for src in run.sources]
    ('tr8', 'memory://doc/tr8', ['main_log.txt'])
    >>> fs.rm("/doc", recursive=True)
    """
    named(path)
    if remote.is_url(path):
        return _load_url(str(path), name)
    return _load_local(Path(path), name)


def _load_url(url: str, name: str | None) -> list[Run]:
    """:func:`load_runs` of a URL: a ``file://`` URL read in place, any other staged (:func:`remote.staged`); the
    names that show the local copy are then the URL's."""
    local = remote.local_path(url)
    if local is not None:
        return _relabeled_runs(lambda: _load_local(local, name), shown_path(local), remote.shown(url))
    with remote.staged(url) as stage:
        return _relabeled_runs(lambda: _load_local(stage.root, name, stage.warnings), shown_path(stage.root), stage.url)


def _relabeled(text: str, local: str, url: str) -> str:
    """``text`` with the local path ``local`` it starts with (alone, or before ``/`` or ``:``) shown as ``url``.

    >>> _relabeled("/tmp/x/tr8/train.log: empty file", "/tmp/x/tr8", "s3://b/tr8")
    's3://b/tr8/train.log: empty file'
    >>> _relabeled("/tmp/x/tr80", "/tmp/x/tr8", "s3://b/tr8")
    '/tmp/x/tr80'
    """
    if text == local or text.startswith((local + "/", local + ":")):
        return url + text[len(local):]
    return text


def _relabeled_within(text: str, local: str, url: str) -> str:
    """``text`` with every name under the local path ``local`` shown as ``url`` (an error that lists the reasons
    of each file it could not read names them inside it), each at the start, after a space, ``(`` or ``;``.

    >>> _relabeled_within("/tmp/x/tr8: no logs (/tmp/x/tr8/a.log: empty; /tmp/x/tr80/b: gone)", "/tmp/x/tr8", "s3://b")
    's3://b: no logs (s3://b/a.log: empty; /tmp/x/tr80/b: gone)'
    """
    return re.sub(rf"(?<![^\s(;]){re.escape(local)}(?=[/:);]|$)", lambda _: url, text)


def _relabeled_runs(load: Callable[[], list[Run]], local: str, url: str) -> list[Run]:
    """The runs ``load`` reads from the local copy ``local`` of ``url``, every name they show (path, sources,
    warnings, skipped, tags, the frames' ``source`` column, an error) the URL's."""
    try:
        runs = load()
    except InputError as exc:
        raise InputError(_relabeled_within(str(exc), local, url)) from None
    for run in runs:
        run.path = _relabeled(run.path, local, url)
        run.sources = [replace(src, path=_relabeled(src.path, local, url)) for src in run.sources]
        run.warnings = [_relabeled(w, local, url) for w in run.warnings]
        run.skipped = [_relabeled(w, local, url) for w in run.skipped]
        run.tags = [{**tag, "source": _relabeled(tag["source"], local, url)} for tag in run.tags]
        run.metrics, run.events, run.configs = (_relabeled_sources(f, local, url)
                                                for f in (run.metrics, run.events, run.configs))
    return runs


def _relabeled_sources(frame: pl.DataFrame, local: str, url: str) -> pl.DataFrame:
    """``frame`` with its ``source`` column relabeled (see :func:`_relabeled`), its dtype kept."""
    names = frame["source"].unique().drop_nulls().cast(pl.String).to_list()
    mapping = {n: new for n in names if (new := _relabeled(n, local, url)) != n}
    if not mapping:
        return frame
    dtype = frame.schema["source"]
    return frame.with_columns(pl.col("source").cast(pl.String).replace(mapping).cast(dtype))


def _load_local(root: Path, name: str | None, early: list[str] | None = None) -> list[Run]:
    """:func:`load_runs` of a local path; ``early``: warnings said before any file is read (a URL's staging)."""
    shown = shown_path(root)
    try:
        if not root.exists():
            raise InputError(f"{shown}: no such file or directory")
        is_dir, is_file = root.is_dir(), root.is_file()
        dir_name = name or shown_path(root.resolve().name if is_dir else root.stem)
    except OSError as exc:  # a path too long, a loop of links
        raise InputError(f"{shown}: cannot read ({exc.strerror or exc})") from None
    context = ReadContext(shown=shown, run=dir_name, single=is_file, root=root, warnings=list(early or []))
    files = _candidate_files(root, context.warnings)
    pieces = _read_all(files, context)
    warnings, skipped = context.warnings, context.skipped
    if not any(not p.config_only or p.fmt == RUNS_TABLE for p in pieces):
        if (settings := _settings_only(files, pieces, warnings, root)) is not None:
            raise InputError(f"{shown}: not a recognised training log: {settings}" if is_file
                             else f"{shown}: no training log, {settings}")
        if is_file:
            reason = (warnings + skipped)[0].split(": ", 1)[-1] if warnings + skipped else "unreadable"
            raise InputError(f"{shown}: not a recognised training log: {reason}")
        reasons = "; ".join(warnings + skipped) or "no files"
        raise InputError(f"{shown}: no readable training logs ({reasons})")
    _split_launch_folders(pieces, root)
    _split_programs(pieces, root)
    named = list(dict.fromkeys(p.run for p in pieces if p.run is not None))
    unnamed = [p for p in pieces if p.run is None]
    if len(named) == 1 and not unnamed and name is None:
        groups = {named[0]: pieces}
    elif len(named) <= 1:
        groups = {dir_name: pieces}
    else:
        groups = {run: [p for p in pieces if p.run == run] for run in named}
        if unnamed:
            groups = {dir_name: unnamed} | groups
    runs = [_assemble(run, root, group) for run, group in groups.items()]
    for run in runs:
        run.configs, disagreements = canonical_configs(run.configs)
        run.warnings.extend(disagreements)
        _counted_by_interval(run)
    runs[0].warnings[:0] = warnings
    runs[0].skipped.extend(skipped)
    return runs




SETTINGS_SUFFIXES = frozenset({".yaml", ".yml", ".json", ".toml", ".ini", ".cfg", ".conf"})
# names of settings files (config.yaml, hparams.yaml, args.json, training_args.json, params.toml, run_options.yml)
_SETTINGS_NAME = re.compile(r"(?i)(?:^|[_.\- ])(?:config\w*|h?params?|hyper\w*|args|arguments?|settings?|options?"
                            r"|opts|cfg|conf)(?:$|[_.\- ])")  # whole parts of the name: not confusion_matrix


def _settings_file(path: Path) -> bool:
    return path.suffix.lower() in SETTINGS_SUFFIXES and _SETTINGS_NAME.search(path.stem) is not None


def _settings_only(files: list[Path], pieces: list[Piece], warnings: list[str], root: Path) -> str | None:
    """What to say of an input that holds only settings (``config.yaml``, ``hparams.yaml``, ``args.json``: read as
    settings, or named as settings and taken by no reader) and summary files (``all_results.json``), no training log:
    None where anything else is in it, or a file was damaged (said as it is)."""
    read = {p.file: p for p in pieces}
    if not files or warnings or not all(f in read or _settings_file(f) for f in files):
        return None
    summary = any(p.log.configs["key"].str.starts_with(s.SUMMARY_PREFIX).any() for p in pieces)
    names = [display_path(f, root) if f != root else f.name for f in files]
    listed = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    kind = "settings and summary" if summary else "settings"
    if len(files) == 1:
        return f"a {kind} file ({listed}), not a log of training steps"
    return f"only {kind} files ({listed}): nothing here logs a training step"


def _counted_by_interval(run: Run) -> None:
    """A console that prints no step has its lines counted (1, 2, 3, ...); where the run's config sets one logging
    interval (the Trainer's ``logging_steps`` in a W&B run's ``config.yaml``), its k-th line is step k x interval,
    said in place of the counting note. Events of that console are put on the same steps."""
    counted = [src.path for src in run.sources if src.counted]
    if not counted or not run.configs.height:
        return
    values = run.configs.filter(pl.col("key").is_in(s.LOG_INTERVAL_KEYS))["value"].unique().to_list()
    interval = int(float(values[0])) if len(values) == 1 and _whole(values[0]) else 0
    # (a log each epoch, or one at the first step too, is not every interval-th step)
    other = run.configs.filter(((pl.col("key") == "logging_strategy") & ~pl.col("value").str.contains("(?i)steps"))
                               | ((pl.col("key") == "logging_first_step") & pl.col("value").str.contains("(?i)true")))
    if interval <= 1 or other.height:
        return
    mine = pl.col("source").cast(pl.String).is_in(counted)
    run.metrics = run.metrics.with_columns(step=pl.when(mine).then(pl.col("step") * interval).otherwise("step"))
    mine = mine & (pl.col("kind") != s.EV_PROGRESS)  # (a progress bar's count is its own)
    run.events = run.events.with_columns(step=pl.when(mine).then(pl.col("step") * interval).otherwise("step"))
    note = (f"it prints no step: steps here are its printed metrics lines times the logging interval its run's config "
            f"sets ({interval})")
    run.warnings = [w.replace(COUNTED_NOTE, note) if any(w.startswith(f"{c}: ") for c in counted) else w
                    for w in run.warnings]


def _whole(text: str | None) -> bool:
    try:
        return float(text or "") > 0 and float(text or "").is_integer()
    except ValueError:
        return False


def _split_launch_folders(pieces: list[Piece], root: Path) -> None:
    """Name the run of each piece in a ``lightning_logs/`` folder that holds several training runs (see
    :func:`parsers.lightning.runs_of_versions`); one run's versions stay the directory's run."""
    runs = lightning.runs_of_versions([p for p in pieces if p.run is None], root)
    if len(set(runs.values())) > 1:
        for piece in pieces:
            if id(piece) in runs:
                piece.run = display_path(runs[id(piece)], root)


def _split_programs(pieces: list[Piece], root: Path) -> None:
    """Name the run of each console log when the directory holds consoles of two or more formats (a nanoGPT log
    beside an llm.c one and a torchtitan one): one program prints one format, so these are as many runs, not one
    run's sources overlaid step on step. A format's logs are one run (its launches), named by the file when it is
    one, else by the format; the other files stay the directory's run."""
    consoles = registry.console_formats()
    mine = [p for p in pieces if p.run is None and p.fmt in consoles]
    by_format: dict[str, list[Piece]] = {}
    for piece in mine:
        by_format.setdefault(piece.fmt, []).append(piece)
    if len(by_format) > 1:
        for fmt, group in by_format.items():
            files = {p.file for p in group}
            for piece in group:
                piece.run = display_path(piece.file, root) if len(files) == 1 else fmt


def load_run(path: str | Path, name: str | None = None) -> Run:
    """Read a run directory (every log in it, recognised by content) or a single log file as one run.

    Raises :class:`InputError` when nothing can be read, or when the input holds several runs (use
    :func:`load_runs` for those).

    >>> run = load_run("sample_logs/tr8-104B-sample")
    >>> run.metrics.filter(metric="loss").select("step", "value").tail(1).rows()
    [(5400, 5.653018)]
    """
    runs = load_runs(path, name)
    if len(runs) > 1:
        listed = ", ".join(r.name for r in runs[:5]) + (", ..." if len(runs) > 5 else "")
        raise InputError(f"{shown_path(path)}: holds {len(runs)} runs ({listed}); read them with load_runs()")
    return runs[0]


def _read_all(files: list[Path], context: ReadContext) -> list[Piece]:
    """Every file read by the first reader that takes it (see :mod:`parsers.registry`): each head is read once;
    readers marked ``FIRST`` read before the others (they claim sidecar files and name their directory's run)."""
    chosen = []
    for file in files:
        head = head_of(file)
        # a reader is shown the path inside the input (a Lightning hparams.yaml is known by its version_N folder)
        chosen.append((file, head, registry.reader_for(head, context.display(file))))
    pieces: list[Piece] = []
    for first in (True, False):
        by_reader: dict[int, list[Piece]] = {}
        kinds = {id(reader): reader for _, _, reader in chosen}
        for file, head, reader in chosen:
            if bool(getattr(reader, "FIRST", False)) != first or file in context.consumed:
                continue
            if not first and any(getattr(r, "ignores", None) and r.ignores(file, context.owners)
                                 for r in registry.readers()):
                continue
            found = _read_one(file, head, reader, context)
            for piece in found:
                piece.run = piece.run or next((context.owners[d] for d in file.parents if d in context.owners), None)
            by_reader.setdefault(id(reader), []).extend(found)
        for key, group in by_reader.items():
            if combine := getattr(kinds[key], "combine", None):
                by_reader[key] = combine(group, context)
        for group in by_reader.values():
            pieces.extend(group)
    return pieces


def _read_one(file: Path, head: bytes, reader: object, context: ReadContext) -> list[Piece]:
    """The pieces one file contributes (none when it is not a training log: then ``context.skipped`` says why,
    or a warning where damage or an empty log is worth one)."""
    shown = context.display(file)
    if reader is None:
        context.skipped.append(f"{shown}: {registry.looks_like(head, file.name)}")
        return []
    here = replace(context, shown=shown, head=head)  # (the same lists and sets: what it reports is kept)
    try:
        return reader.read(file, here)  # type: ignore[attr-defined]
    except NotThisFormat as exc:
        if exc.empty:
            (context.warnings if context.single or file.suffix in _TEXT_SUFFIXES else context.skipped).append(str(exc))
        elif reader is registry.BUILTIN[-1]:  # the last resort found nothing: say what the file looks like
            said = registry.looks_like(head, file.name)
            context.skipped.append(str(exc) if said.startswith(("text without", "binary")) else f"{shown}: {said}")
        else:
            context.skipped.append(str(exc))
        return []
    except InputError as exc:
        if context.single:
            raise
        context.warnings.append(str(exc))
        return []


def _assemble(name: str, root: Path, pieces: list[Piece]) -> Run:
    """One run from its pieces: text logs first, then full-resolution scalars over them, then what only a sampled
    export holds; config-only pieces (runs table, lone config/summary files) join the last attempt."""
    full = _placed([p for p in pieces if not p.sampled and not p.config_only], root)
    # text logs (Megatron, consoles) are the base; full-resolution scalars overlay them
    overlays = (WANDB_LOG, HISTORY, "tensorboard", CHART)
    order = (*dict.fromkeys(p.fmt for p in full if p.fmt not in overlays), *overlays)
    layers = [
        _join(name, root, group, parallel=fmt == CHART)
        for fmt in order
        if (group := [p for p in full if p.fmt == fmt])
    ]
    run = layers[0] if layers else _join(name, root, [p for p in pieces if p.sampled], parallel=True)
    for layer in layers[1:]:
        run = _overlay(run, layer)
    sampled = [p for p in pieces if p.sampled]
    if layers and sampled:
        thin = _join(name, root, sampled, parallel=True)
        have = set(run.metrics["metric"].unique().cast(pl.String).to_list())
        dropped = sorted(set(thin.metrics["metric"].unique().cast(pl.String).to_list()) & have)
        if dropped:
            thin.warnings.append(
                f"{name}: sampled W&B values of {', '.join(dropped)} not used; a full-resolution source has them"
            )
        thin.metrics = thin.metrics.filter(~pl.col("metric").cast(pl.String).is_in(dropped))
        run = _overlay(run, thin)
    folders = _attempt_of_folder(run) if any(p.config_only for p in pieces) else {}
    for piece in (p for p in pieces if p.config_only):
        configs = piece.log.configs.with_columns(run=pl.lit(name))
        if piece.fmt != RUNS_TABLE or run.metrics.height:  # a runs-table row numbers its own attempt
            # a config beside a log, or above or below it (Lightning's version_N/hparams.yaml, a W&B run's
            # files/config.yaml) is that log's launch; one in a folder of its own beside others' logs is a launch
            # that logged nothing, and joins none
            folder = display_path(piece.file, root).rpartition("/")[0]
            near = [a for f, a in folders.items() if not folder or not f or f == folder
                    or folder.startswith(f + "/") or f.startswith(folder + "/")]
            if folders and not near:
                run.warnings.append(f"{display_path(piece.file, root)}: settings of a launch that logged no metrics "
                                    "(no log beside them): not joined to any attempt")
                run.sources.append(Source(path=display_path(piece.file, root), format=piece.fmt))
                continue
            attempt = max(near) if near else max(run.attempts, default=1)
            configs = configs.with_columns(attempt=pl.lit(attempt, dtype=pl.Int32))
        run.configs = pl.concat([run.configs, configs])
        run.sources.append(Source(path=display_path(piece.file, root), format=piece.fmt))
    run.sources = list({(src.path, src.format): src for src in run.sources}.values())
    return _plausible_steps(run)


def _placed(pieces: list[Piece], root: Path) -> list[Piece]:
    """The pieces, a console that prints no step (its points numbered 1, 2, ... by line) left without its points
    when another piece of the run logs the same metrics at their steps (a Trainer's ``trainer_state.json`` beside
    its console): numbered lines cannot be put on those steps, and put before them they would read as more of the
    run. Its events stay, with no step. A console whose steps are its progress bar's counts yields to that file too
    (the same points, read twice)."""
    stepless = [p.log.counted_steps or p.log.bar_steps for p in pieces]
    stepped = {m for p, no in zip(pieces, stepless, strict=True) if not no
               for m in p.log.metrics["metric"].unique().to_list()}
    out = []
    for piece, no in zip(pieces, stepless, strict=True):
        mine = set(piece.log.metrics["metric"].unique().to_list()) if no else set()
        if not mine & stepped:
            out.append(piece)
            continue
        log = piece.log
        names = ", ".join(sorted(m.replace("_", " ") for m in mine))
        warning = (f"{display_path(piece.file, root)}: it prints no step, and another file of the run logs its "
                   f"metrics at their steps: its {log.metrics.height} points ({names}) were not used")
        # (its numbering is not used either: counted lines, a bar's counts, an interval from its saves)
        kept = [w for w in log.warnings if not w.endswith(BARRED_NOTE) and COUNTED_NOTE not in w and SAVED_NOTE not in w]
        out.append(replace(piece, log=replace(
            log, metrics=log.metrics.clear(),  # (a progress bar's count is its own)
            events=log.events.with_columns(step=pl.when(pl.col("kind") == s.EV_PROGRESS).then("step")),
            warnings=[*kept, warning])))
    return out


def _attempt_of_folder(run: Run) -> dict[str, int]:
    """Per folder (relative to the run) that holds a file with metrics or events (an event file that logged no
    metric: a launch that stopped before its first step), the last attempt those files logged."""
    pairs = pl.concat([frame.select(pl.col("source").cast(pl.String), "attempt").unique()
                       for frame in (run.metrics, run.events)]).unique().drop_nulls()
    out: dict[str, int] = {}
    for source, attempt in pairs.iter_rows():
        folder = source.rpartition("/")[0]
        out[folder] = max(out.get(folder, attempt), attempt)
    return out


MAX_STEP = 2**53  # no training takes this many steps; a step beyond it is damage (and step arithmetic would overflow)


def _plausible_steps(run: Run) -> Run:
    """``run`` without the points whose step is beyond :data:`MAX_STEP` either way (said in one warning); events
    at such a step keep no step."""
    far = (pl.col("step") >= MAX_STEP) | (pl.col("step") <= -MAX_STEP)
    lost = run.metrics.select(far.sum()).item()
    if lost:
        run.warnings.append(f"{run.name}: {lost} point{'s' if lost > 1 else ''} at a step beyond 2**53 (damage, "
                            "not a step any training reaches) left out")
        run.metrics = run.metrics.filter(~far)
    if run.events.height and run.events.select(far.any()).item():
        run.events = run.events.with_columns(step=pl.when(far).then(None).otherwise(pl.col("step")))
    return run


def _overlay(base: Run, top: Run) -> Run:
    """One run from a base (text log) and a full-resolution layer of the same training (TensorBoard, W&B): the base
    gives the attempts; the top layer's points replace the base's at the same (metric, step).

    The top layer's attempts map one to one onto the base's when both saw the same number of (re)starts, and are
    kept when the top saw more; otherwise each row joins the last base attempt that began at or before its step.
    """
    if base.metrics.height == 0 and base.events.height == 0:
        return Run(name=base.name, path=base.path, metrics=top.metrics, events=top.events,
                   configs=pl.concat([base.configs, top.configs]), sources=base.sources + top.sources,
                   warnings=base.warnings + top.warnings, skipped=base.skipped + top.skipped,
                   tags=base.tags + top.tags)
    spans = base.metrics.group_by("attempt").agg(lo=pl.col("step").min(), hi=pl.col("step").max()).sort("attempt")
    top_attempts = sorted(set(top.metrics["attempt"].unique().to_list()) | set(top.events["attempt"].unique().to_list()))
    top_attempts = [a for a in top_attempts if a is not None]

    def remap(frame: pl.DataFrame) -> pl.DataFrame:
        if len(top_attempts) == spans.height:
            mapping = dict(zip(top_attempts, spans["attempt"].to_list(), strict=True))
            return frame.with_columns(pl.col("attempt").replace_strict(mapping, default=None, return_dtype=pl.Int32))
        if len(top_attempts) > spans.height or "step" not in frame.columns:
            return frame
        starts = spans.sort("lo").select(pl.col("lo").alias("step"), pl.col("attempt").alias("_base"))
        return (
            frame.with_row_index("_row").sort("step", nulls_last=True)
            .join_asof(starts, on="step", strategy="backward", check_sortedness=False)
            .sort("_row")
            .with_columns(attempt=pl.col("_base").fill_null(pl.col("attempt")).cast(pl.Int32))
            .drop("_row", "_base")
        )

    metrics = remap(top.metrics)
    events = remap(top.events)
    warnings = list(top.warnings)
    if len(top_attempts) > spans.height:  # the top layer's attempts are kept: the base's go to the one it logged
        base = _onto_matching_attempts(base, metrics)
    shift = _clock_offset(base.metrics, metrics)
    if shift:  # the same steps, another clock: the top layer's times are put on the text log's
        metrics = metrics.with_columns(pl.col("wall_time") + shift)
        events = events.with_columns(pl.col("wall_time") + shift)
        hours = f"{abs(shift) / 3600:g} h"
        warnings.append(f"{', '.join(src.path for src in top.sources)}: its times are {hours} "
                        f"{'behind' if shift > 0 else 'ahead of'} those the text log prints at the same steps (a time "
                        "zone: one clock is UTC, the other local time); shown on the text log's clock")
    covered = metrics.select("metric", "step").unique()
    kept = base.metrics.join(covered, on=["metric", "step"], how="anti", maintain_order="left")
    return Run(
        name=base.name, path=base.path,
        metrics=pl.concat([kept, metrics.select(kept.columns)]),
        events=pl.concat([base.events, events.select(base.events.columns)]),
        configs=pl.concat([base.configs, top.configs.select(base.configs.columns)]),
        sources=base.sources + top.sources, warnings=base.warnings + warnings,
        skipped=base.skipped + top.skipped, tags=base.tags + top.tags,
    )


def _onto_matching_attempts(base: Run, top: pl.DataFrame) -> Run:
    """``base`` with each of its attempts renumbered as the attempt of ``top`` (metrics) that logged the most of its
    points (the same metric at the same step with the same value, to the 4 decimals a Trainer rounds to): a
    checkpoint's ``trainer_state.json`` beside a folder of TensorBoard runs is the history of one of them, not of the
    first. An attempt that shares no point with ``top`` keeps its number."""
    mine = base.metrics.select("attempt", pl.col("metric").cast(pl.String), "step", "value").drop_nulls()
    theirs = top.select(pl.col("attempt").alias("top"), pl.col("metric").cast(pl.String), "step",
                        pl.col("value").alias("top_value")).drop_nulls()
    same = mine.join(theirs, on=["metric", "step"]).filter(
        (pl.col("value") - pl.col("top_value")).abs() <= 5e-5 + 1e-6 * pl.col("value").abs())
    if not same.height:
        return base
    best = (same.group_by("attempt", "top").len().sort(["attempt", "len", "top"], descending=[False, True, True])
            .group_by("attempt", maintain_order=True).first())
    mapping = dict(zip(best["attempt"].to_list(), best["top"].to_list(), strict=True))

    def renumber(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(pl.col("attempt").replace(mapping).cast(pl.Int32)) if frame.height else frame

    return replace(base, metrics=renumber(base.metrics), events=renumber(base.events), configs=renumber(base.configs))


def _clock_offset(base: pl.DataFrame, top: pl.DataFrame) -> float | None:
    """Seconds to add to ``top``'s times to put them on ``base``'s clock, when the two logged the same steps a whole
    number of quarter hours apart (a time zone: TensorBoard and W&B stamp UTC, a console its machine's local time),
    within a minute of it at every shared point; else None.

    >>> base = pl.DataFrame({"metric": ["loss"] * 3, "step": [1, 2, 3], "wall_time": [3601.0, 3700.5, 3801.0]})
    >>> top = base.with_columns(pl.col("wall_time") - 3600.2)
    >>> _clock_offset(base, top), _clock_offset(base, base)
    (3600.0, None)
    """
    both = base.drop_nulls("wall_time").join(top.drop_nulls("wall_time"), on=["metric", "step"], suffix="_top")
    if both.height < 2:
        return None
    apart = (both["wall_time"] - both["wall_time_top"]).to_numpy()
    offset = round(float(np.median(apart)) / 900.0) * 900.0
    if offset == 0 or abs(offset) > 14 * 3600 or np.abs(apart - offset).max() > 60:
        return None
    return offset


def _named(frame: pl.DataFrame, run_name: str) -> bool:
    """Whether every row already carries the run's name (so no column needs rewriting)."""
    return frame.height == 0 or frame["run"].unique().cast(pl.String).to_list() == [run_name]


def _first_time(log: ParsedLog) -> float | None:
    times = [t for t in (log.metrics["wall_time"].min(), log.events["wall_time"].min()) if t is not None]
    return float(min(times)) if times else None  # type: ignore[arg-type]


def _last_time(log: ParsedLog) -> float | None:
    times = [t for t in (log.metrics["wall_time"].max(), log.events["wall_time"].max()) if t is not None]
    return float(max(times)) if times else None  # type: ignore[arg-type]


def _is_events_only(log: ParsedLog) -> bool:
    return log.metrics.height == 0 and log.configs.height == 0


def _silent_launch(piece: Piece, files_by_process: Counter[tuple[str, ...]]) -> bool:
    """An event file holding nothing but its header, written by a process (host, pid) that wrote no other file
    (``files_by_process``: the event files each process wrote): a launch that died before it logged anything, an
    attempt of its own (not folded into the next launch's start)."""
    writer = _writer(piece.file)
    if writer is None or not (piece.log.events["kind"] == s.EV_FILE_START).all():
        return False
    return files_by_process[writer[1:]] == 1


_WRITER = re.compile(r"^events\.out\.tfevents\.\d+\.(.+)\.(\d+)\.\d+(?:\.v2)?$")
_FILE_TIME = re.compile(r"^events\.out\.tfevents\.(\d+)\.")


def _writer(path: Path) -> tuple[str, ...] | None:
    """The process that wrote an event file, from its name (``events.out.tfevents.<time>.<host>.<pid>.<n>``): its
    folder, host and pid; None for any other file.

    >>> _writer(Path("runs/a/events.out.tfevents.1742884204.DESKTOP-41L2EO3.107869.1"))
    ('runs/a', 'DESKTOP-41L2EO3', '107869')
    """
    found = _WRITER.match(path.name)
    return (path.parent.as_posix(), found[1], found[2]) if found else None


_PIDLESS = re.compile(r"^events\.out\.tfevents\.\d+\.(.+?)(?:\.v2)?$")


def _pidless_host(path: Path) -> str | None:
    """The host in an event file's name that carries no pid (``events.out.tfevents.<time>.<host>``, tensorboardX's and
    older torch's), None for any other name (one with a pid is :func:`_writer`'s).

    >>> _pidless_host(Path("runs/a/events.out.tfevents.1682480667.dsrc-server"))
    'dsrc-server'
    >>> _pidless_host(Path("runs/a/events.out.tfevents.1742884204.DESKTOP-41L2EO3.107869.1")) is None
    True
    """
    found = None if _WRITER.match(path.name) else _PIDLESS.match(path.name)
    return found[1] if found else None


_SPLITS = VALIDATION_FOLDERS | {"train", "training"}


_HPARAMS_FOLDER = re.compile(r"^\d{9,10}\.\d+$")  # SummaryWriter.add_hparams's folder: str(time.time())


def torchrun_launch(path: Path) -> tuple[str, int] | None:
    """The launch a file written by torchrun's log redirection belongs to: ``<log dir>/<run id>/attempt_<N>/<local
    rank>/{stdout,stderr}.log`` (each node's torchrun names its own run id; ``attempt_N`` counts its restarts): (the
    log dir, N), else None. Ranks' files of one launch are one attempt.

    >>> torchrun_launch(Path("job/none_z4q12ava/attempt_0/3/stdout.log"))
    ('job', 0)
    >>> torchrun_launch(Path("job/none_z4q12ava/attempt_0/stdout.log")) is None
    True
    """
    parts = path.parts
    if len(parts) < 4 or path.name not in ("stdout.log", "stderr.log") or not parts[-2].isdigit():
        return None
    attempt = re.fullmatch(r"attempt_(\d+)", parts[-3])
    return (Path(*parts[:-4]).as_posix() if len(parts) > 4 else ".", int(attempt.group(1))) if attempt else None


def _hparams_writer(a: Path, b: Path) -> bool:
    """Whether one of two event files of one process is the other's ``add_hparams`` file: torch writes it in a
    sub-folder of the writer's folder named for the time it was called, within a minute of the writer's creation
    (the time in the writer's file name); a writer created later in the same process is another launch.

    >>> main = Path("logs/events.out.tfevents.1614879850.DESKTOP-H8MFNAV.8444.0")
    >>> _hparams_writer(main, Path("logs/1614879850.0397182/events.out.tfevents.1614879850.DESKTOP-H8MFNAV.8444.1"))
    True
    >>> _hparams_writer(main, Path("logs/1614880713.4147766/events.out.tfevents.1614880713.DESKTOP-H8MFNAV.8444.3"))
    False
    """
    for parent, child in ((a, b), (b, a)):
        created = _FILE_TIME.match(parent.name)
        if child.parent.parent == parent.parent and _HPARAMS_FOLDER.match(child.parent.name) and created and \
                0 <= float(child.parent.name) - float(created[1]) <= 60:
            return True
    return False


def _split_writers(a: str, b: str) -> bool:
    """Whether two folders of one process's event files are its training and evaluation writers (Keras's ``train/``
    and ``validation/``): siblings named for a split. Two trainings in one notebook write to folders of their own
    names, and stay two attempts.

    >>> _split_writers("logs/exp/train", "logs/exp/validation"), _split_writers("runs/exp1", "runs/exp2")
    (True, False)
    """
    (pa, _, na), (pb, _, nb) = a.rpartition("/"), b.rpartition("/")
    return a != b and pa == pb and na.lower() in _SPLITS and nb.lower() in _SPLITS


def _join(run_name: str, root: Path, pieces: list[Piece], parallel: bool = False) -> Run:
    """One run from pieces of one kind: in time order, each file's attempts after the previous file's (a restart
    writes a new log), or side by side with ``parallel`` (chart exports: one file per metric of the same run).
    A file with only events (a slurm ``.err`` beside its ``.out``) joins the attempt of the log it belongs to."""
    times = [_first_time(p.log) for p in pieces]
    if not parallel and all(t is not None for t in times):
        pieces = [p for _, p in sorted(zip(times, pieces, strict=True), key=lambda x: x[0])]  # type: ignore[misc]
    metrics, events, configs, sources, warnings = [], [], [], [], []
    tags: list[dict[str, str]] = []
    offset = 0
    last_attempt_of_stem: dict[str, int] = {}
    last_attempt_of_writer: dict[tuple[str, ...], int] = {}  # (host, pid) -> the last attempt its files made
    deferred: list[Piece] = []
    process: tuple[str, ...] | None = None  # the last event file's writer (folder, host, pid) and its last step
    previous: Path | None = None  # the last event file
    last_step: int | None = None
    trained: tuple[str, ...] | None = None  # the writer of the last file that logged training (not an evaluation pass)
    trained_until: float | None = None  # its last time, and whether it printed the end of training
    finished = False
    launched: tuple[str, int] | None = None  # the last file's torchrun launch, and the last time it printed
    launched_until: float | None = None
    # (counted once: a folder of thousands of header-only event files is not compared pair by pair)
    files_by_process = Counter(writer[1:] for piece in pieces if (writer := _writer(piece.file)) is not None)
    for piece in pieces:
        log = piece.log
        sources.append(Source(path=display_path(piece.file, root), format=piece.fmt, sampled=piece.sampled,
                              counted=log.counted_steps and log.metrics.height > 0))
        warnings.extend(log.warnings)
        tags += [{"source": sources[-1].path, "tag": tag, "metric": metric} for tag, metric in log.tags.items()]
        if _is_events_only(log) and not _silent_launch(piece, files_by_process):
            deferred.append(piece)
            continue
        frames = (log.metrics, log.events, log.configs)
        # another event file of the same writer process that carries on from the last step (the Trainer's final
        # evaluation, written by a new SummaryWriter after training), or that the process wrote beside it at the same
        # time (Keras's train/ and validation/ writers): the same attempt, not a relaunch
        writer, first = _writer(piece.file), log.metrics["step"].min() if log.metrics.height else None
        same = not parallel and writer is not None and process is not None and writer[1:] == process[1:] and (
            (writer[0] == process[0] and last_step is not None and first is not None and first >= last_step)
            or _split_writers(process[0], writer[0]) or (previous is not None and _hparams_writer(previous, piece.file)))
        # tensorboardX and older torch name a file without the pid ("events.out.tfevents.<time>.<host>"): its
        # add_hparams file is still its writer's (the same host, a sub-folder named for the time), not a launch
        same = same or (not parallel and writer is None and process is None and previous is not None
                        and _pidless_host(previous) == _pidless_host(piece.file) is not None
                        and _hparams_writer(previous, piece.file))
        # another rank's file of the same torchrun launch (rank 0 prints the arguments, the last pipeline stage the
        # iterations): the same attempt
        # (a resubmission into the same log dir writes attempt_0 again, after the first launch's last line)
        launch, begins = torchrun_launch(piece.file), _first_time(log)
        same = same or (not parallel and offset > 0 and launch is not None and launch == launched and (
            begins is None or launched_until is None or begins <= launched_until))
        launched_until = max(launched_until or 0.0, _last_time(log) or 0.0) if same else _last_time(log)
        launched = launch
        # an evaluation pass (a file of evaluation scalars only: Lightning's validate() / test(), a Trainer's
        # evaluate()) after a file that logged training evaluates that attempt, whoever wrote it: no launch of its own
        passes = log.events.filter(pl.col("kind") == s.EV_EVALUATION_PASS)
        if passes.height and trained is not None and not parallel:
            if not finished and writer is not None and writer[1:] == trained[1:] \
                    and first is not None and last_step is not None and first >= last_step:
                # the process that trained went on to evaluate where its training ended: its training had returned
                frames = (log.metrics, pl.concat([log.events, passes.head(1).with_columns(
                    kind=pl.lit(s.EV_TRAINING_ENDED), wall_time=pl.lit(trained_until, dtype=pl.Float64),
                    text=pl.lit(f"training finished: the same process (pid {writer[2]}) then ran an evaluation pass "
                                f"({piece.file.name}: evaluation scalars only, at step {first})"))]), log.configs)
                finished = True
            same = True
        elif log.metrics.height:
            trained, trained_until = writer, _last_time(log)
            finished = bool(log.events["kind"].is_in(list(s.DONE_KINDS)).any())
        shift = offset - 1 if same else offset
        process, previous = writer, piece.file
        top = log.metrics["step"].max() if log.metrics.height else None  # (None too when no point has a step)
        last_step = int(top) if top is not None else last_step  # type: ignore[arg-type]
        if shift and not parallel:
            frames = tuple(f.with_columns(attempt=pl.col("attempt") + shift) for f in frames)
        frames = tuple(f if _named(f, run_name) else f.with_columns(run=pl.lit(run_name)) for f in frames)
        for stacked, frame in zip((metrics, events, configs), frames, strict=True):
            stacked.append(frame)
        offset = max(offset, log.n_attempts) if parallel else shift + log.n_attempts
        last_attempt_of_stem[piece.file.with_suffix("").as_posix()] = offset
        if writer is not None:
            last_attempt_of_writer[writer[1:]] = offset
    for piece in deferred:  # e.g. a slurm .err beside its .out: same process, so the same attempt
        # (an event file of nothing the reader reads, PR curves or images, goes to the attempt of the process that
        # wrote it, not to the last one: a later launch's)
        writer = _writer(piece.file)
        stem = piece.file.with_suffix("").as_posix()
        if offset == 0 and piece.log.n_attempts > 1:  # nothing else to join: its own launches are the run's
            events.append(piece.log.events.with_columns(run=pl.lit(run_name)))
            offset = last_attempt_of_stem[stem] = piece.log.n_attempts
            continue
        target = last_attempt_of_stem.get(stem) \
            or (last_attempt_of_writer.get(writer[1:]) if writer is not None else None) or max(offset, 1)
        events.append(piece.log.events.with_columns(attempt=pl.lit(target, dtype=pl.Int32), run=pl.lit(run_name)))
        offset = max(offset, 1)

    def stack(frames: list[pl.DataFrame], schema: dict[str, pl.DataType]) -> pl.DataFrame:
        frames = [s.conform(f, schema) for f in frames if f.height]
        return pl.concat(frames) if frames else s.empty(schema)

    return Run(
        name=run_name,
        path=str(root),
        metrics=stack(metrics, s.METRICS_SCHEMA),
        events=stack(events, s.EVENTS_SCHEMA),
        configs=stack(configs, s.CONFIGS_SCHEMA),
        sources=sources,
        warnings=warnings,
        skipped=[],
        tags=tags,
    )

