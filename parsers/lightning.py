"""PyTorch Lightning's ``CSVLogger``: ``lightning_logs/version_N/metrics.csv`` (one row per ``log`` call, sparse
columns such as ``train_loss_step``, ``train_loss_epoch``, ``val_loss``, with ``epoch`` and ``step``) and
``hparams.yaml`` beside it (the config). Each ``version_N`` is one launch; which launches are one run's attempts
(in version order) and which are other runs: :func:`runs_of_versions`.

A ``*_step`` column is the per-step value of a metric logged with ``on_step`` (``train_loss_step`` is the loss); a
``*_epoch`` column its epoch mean, kept under its own name.

>>> from pathlib import Path
>>> from parsers.reader import ReadContext
>>> path = Path("tests/fixtures/real/lightning/0Xero7_slm_training/lightning_logs/version_5/metrics.csv")
>>> log = read(path, ReadContext("version_5/metrics.csv", "slm"))[0].log
>>> log.metrics.filter(metric="loss").select("step", "value").row(0)
(140749, 3.708270311355591)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.lightning_checkpoint import CHECKPOINT_NAME
from parsers.metric_names import canonical
from parsers.reader import NotThisFormat, Piece, ReadContext
from parsers.schema import ParsedLog
from parsers.textfile import read_yaml_mapping
from parsers.wandb_history import config_frame, read_csv_text

FORMAT = "lightning"
_AXES = ("step", "epoch")


def sniff(head: bytes, name: str) -> bool:
    """``metrics.csv`` whose header has a ``step`` column (in a ``version_N`` folder or not), or an ``hparams.yaml``
    (:func:`read` takes the one of a ``version_N`` folder, or one beside a ``metrics.csv``)."""
    base = Path(name).name
    if base == "hparams.yaml":  # (beside a metrics.csv, wherever it lies, which only read can see)
        return True
    header = head.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip().split(",")
    return base == "metrics.csv" and "step" in header


def _takes_metrics(csv: Path) -> bool:
    """Whether ``csv`` is a metrics.csv this reader takes (its header has a step column): the hparams.yaml beside it
    is then read with it."""
    if not csv.is_file():
        return False
    with csv.open("rb") as handle:
        return sniff(handle.read(4096), str(csv))


def read(path: Path, context: ReadContext) -> list[Piece]:
    if path.name == "hparams.yaml" and _takes_metrics(path.parent / "metrics.csv"):
        return []  # read with its metrics.csv, as that version's config
    if path.name == "hparams.yaml" and not path.parent.name.startswith("version_"):
        raise NotThisFormat(f"{context.shown}: an hparams.yaml with no Lightning metrics.csv beside it (one with a step "
                            "column), not in a version_N folder")
    hparams = path.parent / "hparams.yaml"
    configs = s.empty(s.CONFIGS_SCHEMA)
    if hparams.is_file():
        context.consumed.add(hparams)
        configs = config_frame(read_yaml_mapping(hparams, context.display(hparams), "hparams"), run=context.run,
                               source=context.display(hparams))
    if path.name == "hparams.yaml":  # a version that logged no metrics (it stopped before its first log call)
        return [Piece(path, FORMAT, ParsedLog(s.empty(s.METRICS_SCHEMA), s.empty(s.EVENTS_SCHEMA), configs,
                                              n_attempts=1), config_only=True)]
    # every column as text (values are read below); damage (bytes that are not UTF-8, a ragged or unquoted line)
    # costs only itself, with a warning
    wide = read_csv_text(path, context.shown, context.warnings)
    if "step" not in wide.columns:
        raise NotThisFormat(f"{context.shown}: a metrics.csv without a step column")
    values = [c for c in wide.columns if c not in _AXES]
    long = (
        wide.with_row_index("row")
        .unpivot(index=["row", "step"], on=values, variable_name="name", value_name="text")
        .filter(pl.col("text").is_not_null() & (pl.col("text") != ""))
        .with_columns(step=pl.col("step").cast(pl.Int64, strict=False),
                      value=pl.col("text").cast(pl.Float64, strict=False))
        .filter(pl.col("step").is_not_null())
    )
    names = {n: _metric(n) for n in values}
    metrics = long.with_columns(metric=pl.col("name").replace_strict(names, return_dtype=pl.String)).sort("row")
    frame = s.conform(metrics.with_columns(run=pl.lit(context.run), source=pl.lit(context.shown), attempt=pl.lit(1),
                                           wall_time=pl.lit(None, dtype=pl.Float64)), s.METRICS_SCHEMA)
    saves = _checkpoints(path, wide, context)
    events = pl.concat([_tested(long, context), saves, _planned_epochs_done(wide, configs, saves, context)])
    log = ParsedLog(frame, events, configs, n_attempts=1,
                    tags={n: m for n, m in names.items() if n in set(long["name"].unique())})
    return [Piece(path, FORMAT, log)]


def _checkpoints(path: Path, wide: pl.DataFrame, context: ReadContext) -> pl.DataFrame:
    """The saves of the version's ``checkpoints/epoch=E-step=S.ckpt`` files (read with its metrics.csv, as
    :mod:`parsers.lightning_checkpoint` says), each at its step ``S`` where that is a step this metrics.csv logs in
    epoch ``E`` (from the epoch's first step to the next epoch's), else at the last step it logs of epoch ``E`` (of the
    file, without that epoch), the name's step said: Lightning's ``global_step`` counts the steps of every optimizer
    (a GAN's two), which the logger's ``step`` does not."""
    saved = sorted((int(m.group(1)), int(m.group(2)), f) for f in (path.parent / "checkpoints").glob("epoch=*.ckpt")
                   if (m := CHECKPOINT_NAME.match(f.name)) is not None)
    if not saved:
        return s.empty(s.EVENTS_SCHEMA)
    steps = wide.select(step=pl.col("step").cast(pl.Int64, strict=False),
                        epoch=pl.col("epoch").cast(pl.Int64, strict=False) if "epoch" in wide.columns
                        else pl.lit(None, dtype=pl.Int64)).drop_nulls("step")
    spans = {e: (lo, hi) for e, lo, hi in steps.drop_nulls("epoch").group_by("epoch").agg(
        lo=pl.col("step").min(), hi=pl.col("step").max()).iter_rows()}
    last = steps["step"].max()
    gaps = steps["step"].unique().sort().diff().drop_nulls()
    every = max(int(gaps.median()), 1) if gaps.len() else 1  # (the save ends an epoch after its last logged step)
    rows = []
    for epoch, step, file in saved:
        context.consumed.add(file)
        if epoch in spans:
            lo, hi = spans[epoch]
            until = spans[epoch + 1][0] if epoch + 1 in spans else hi + every
            placed, where = (step, None) if lo <= step <= until else (hi, f"the last step this metrics.csv logs of "
                                                                        f"epoch {epoch} ({lo}–{hi})")
        else:
            placed, where = (step, None) if last is None or step <= last + every else (
                last, f"the last step this metrics.csv logs ({last}), which has no epoch {epoch}")
        text = f"checkpoint saved at step {step} (epoch {epoch}): {context.display(file)}"
        if where is not None:
            text = (f"checkpoint saved in epoch {epoch}: {context.display(file)}; its name's step={step} is past the "
                    f"steps this log shows of it (as when Lightning's global_step counts the steps of every "
                    f"optimizer): placed at {where}")
        rows.append({"step": placed, "value": float(placed), "text": text})
    return s.conform(pl.DataFrame(rows).with_columns(
        kind=pl.lit(s.EV_CHECKPOINT_SAVE), attempt=pl.lit(1, dtype=pl.Int32), run=pl.lit(context.run),
        source=pl.lit(context.shown)), s.EVENTS_SCHEMA)




# the settings that give the number of epochs a Lightning run is to train (the Trainer's max_epochs, a script's own)
_EPOCH_PLANS = {"max_epochs", "num_epochs", "epochs", "n_epochs", "num_train_epochs", "nb_epochs"}


def _planned_epochs_done(wide: pl.DataFrame, configs: pl.DataFrame, saves: pl.DataFrame,
                         context: ReadContext) -> pl.DataFrame:
    """The end of training, where the version's hparams plan E epochs (``max_epochs``, ``num_epochs``, ...; one value
    among them) and its metrics.csv shows epoch E - 1 ended: its last epoch is E - 1, and an epoch-end value (a
    ``*_epoch`` column) or a checkpoint of that epoch is there. A CSV logger writes no end of its own; a run that
    stopped inside its last epoch, or earlier, has no such row."""
    if "epoch" not in wide.columns or not configs.height:
        return s.empty(s.EVENTS_SCHEMA)
    # (a top-level key, or the trainer's or the script's own config's: "warmup.epochs" plans something else)
    key = pl.col("key").str.to_lowercase()
    plans = configs.filter(key.str.extract(r"([^./]+)$", 1).is_in(list(_EPOCH_PLANS))
                           & (~key.str.contains(r"[./]") | key.str.contains(r"^(?:trainer|config|hparams|args|training)"
                                                                             r"[./][^./]+$")))
    planned = {int(v) for v in plans["value"].cast(pl.Float64, strict=False).drop_nulls().to_list() if v == int(v)}
    if len(planned) != 1 or (epochs := planned.pop()) < 1:
        return s.empty(s.EVENTS_SCHEMA)
    rows = wide.with_row_index("row").with_columns(epoch=pl.col("epoch").cast(pl.Int64, strict=False),
                                                    step=pl.col("step").cast(pl.Int64, strict=False))
    if rows["epoch"].max() != epochs - 1:
        return s.empty(s.EVENTS_SCHEMA)
    last = rows.filter(pl.col("epoch") == epochs - 1)
    final = int(last["step"].max())  # type: ignore[arg-type]
    # the proof that the epoch ended: a training epoch-end value on its last logged step (a validation's, logged
    # mid-epoch by val_check_interval, is none), or its checkpoint saved at or after that step (not a mid-epoch save)
    ends = [c for c in wide.columns if c.endswith("_epoch") and c.lower().startswith("train")]
    ended = last.filter((pl.col("step") == final) & pl.any_horizontal(
        [pl.col(c).is_not_null() & (pl.col(c) != "") for c in ends])) if ends else last.clear()
    saved = saves.filter(pl.col("text").str.contains(f"\\(epoch {epochs - 1}\\)|in epoch {epochs - 1}:")
                         & (pl.col("step") >= final))
    if not ended.height and not saved.height:
        return s.empty(s.EVENTS_SCHEMA)
    name = plans["key"][0]
    step, row = final, int(last["row"].max())  # type: ignore[arg-type]
    proof = "its epoch-end metrics logged" if ended.height else "its checkpoint saved"
    return s.conform(pl.DataFrame({
        "run": [context.run], "source": [context.shown], "attempt": [1], "step": [step], "kind": [s.EV_TRAINING_ENDED],
        "line": [row + 2], "value": [None], "wall_time": [None],
        "text": [f"epoch {epochs - 1} ended, the last of the {epochs} its hparams plan ({name} {epochs}): {proof}"]},
        schema_overrides={"value": pl.Float64, "wall_time": pl.Float64}), s.EVENTS_SCHEMA)


def _tested(long: pl.DataFrame, context: ReadContext) -> pl.DataFrame:
    """``trainer.test()`` after ``fit()`` returned: ``test_*`` values logged at or after the last training step (the
    end of training, as the log shows it), as one event."""
    tests = long.filter(pl.col("name").str.contains(r"^test[_/]"))  # test_loss, test/reward (rl4co)
    trained = long.filter(~pl.col("name").str.contains(r"^(?:(?:test|val)[_/]|epoch)"))
    if not tests.height or not trained.height or tests["step"].min() < trained["step"].max():  # type: ignore[operator]
        return s.empty(s.EVENTS_SCHEMA)
    said = ", ".join(f"{n}={v}" for n, v in tests.select("name", "text").unique("name", keep="last",
                                                                               maintain_order=True).iter_rows())
    return s.conform(pl.DataFrame({
        "run": [context.run], "source": [context.shown], "attempt": [1], "step": [int(tests["step"].max())],
        "kind": [s.EV_TRAINING_ENDED], "line": [int(tests["row"].max()) + 2], "value": [None], "wall_time": [None],
        "text": [f"test metrics logged after training (trainer.test() after fit() returned): {said}"]},
        schema_overrides={"value": pl.Float64, "wall_time": pl.Float64}), s.EVENTS_SCHEMA)


def _metric(column: str) -> str:
    """``train_loss_step`` -> ``loss``; ``val_loss`` -> ``val_loss``; an epoch mean keeps its own name."""
    if column.endswith("_epoch"):
        return column
    if column.startswith("lr-"):  # LearningRateMonitor: lr-<optimizer>[/pg<group>]
        return s.LR if "/pg" not in column or column.endswith("/pg1") else column
    base = column.removesuffix("_step")
    name, _ = canonical(base.replace("_", "/", 1) if base.startswith(("train_", "val_")) else base)
    return name if name != base.replace("_", "/", 1) else column


_VERSION = re.compile(r"^version_(\d+)")  # Lightning's launch folder (people rename them: version_92_ru_large_pt2)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # a repr's memory address: new in every process


@dataclass
class _Version:
    folder: Path
    number: int
    pieces: list[Piece]
    start: int | None = None  # first and last step logged, and the usual step between two logs
    end: int | None = None
    interval: int | None = None
    settings: frozenset[tuple[str, str]] = frozenset()


def _version_folder(file: Path, root: Path) -> Path | None:
    for folder in file.parents:
        if folder == root.parent or not folder.is_relative_to(root):
            return None
        if _VERSION.match(folder.name):
            return folder
    return None


def _versions(pieces: list[Piece], root: Path) -> list[_Version]:
    found: dict[Path, _Version] = {}
    for piece in pieces:
        if (folder := _version_folder(piece.file, root)) is not None:
            number = int(_VERSION.match(folder.name).group(1))  # type: ignore[union-attr]
            found.setdefault(folder, _Version(folder, number, [])).pieces.append(piece)
    for version in found.values():
        steps = pl.concat([p.log.metrics.select("step") for p in version.pieces]).drop_nulls()["step"]
        if steps.len():
            version.start, version.end = int(steps.min()), int(steps.max())  # type: ignore[arg-type]
            gaps = steps.unique().sort().diff().drop_nulls()
            version.interval = int(gaps.median()) if gaps.len() else None  # type: ignore[arg-type]
        configs = pl.concat([p.log.configs.select("key", "value") for p in version.pieces])
        version.settings = frozenset((k, _ADDRESS.sub("", v or "")) for k, v in configs.iter_rows())
    return sorted(found.values(), key=lambda v: (v.number, v.folder.as_posix()))


def runs_of_versions(pieces: list[Piece], root: Path) -> dict[int, Path]:
    """Which pieces of a ``lightning_logs/`` folder belong to one training run, by ``id(piece)``, each named by the
    first ``version_N`` folder of its run; empty when the pieces are not in two or more version folders.

    Lightning makes a ``version_N`` folder for every launch, the unrelated experiments of one project and the
    resumes of one run alike. A version that starts logging where another's steps were (a resume from its
    checkpoint) continues that version's run (the latest such, one with the same settings first); one that starts
    at the beginning continues the latest run whose settings (``hparams.yaml``) it repeats exactly (a relaunch from
    scratch), and is otherwise a run of its own: unrelated experiments read as one run's attempts made rollbacks,
    replays and causes out of runs that share nothing but step numbers. A version that logged nothing joins the run
    before it (its settings are said there).
    """
    versions = _versions(pieces, root)
    if len(versions) < 2:
        return {}
    logged = [v for v in versions if v.start is not None]
    intervals = sorted(v.interval for v in logged if v.interval)
    usual = intervals[len(intervals) // 2] if intervals else 1
    lowest = min((v.start for v in logged), default=0)  # type: ignore[type-var]
    run_of: dict[Path, Path | None] = {}
    done: list[_Version] = []
    for version in versions:
        if version.start is None:
            run_of[version.folder] = run_of[done[-1].folder] if done else None  # (none before it: see below)
            continue
        slack = 2 * (version.interval or usual)
        # (a version logging once an epoch has its first row an epoch in, one logging every N steps its first row up
        # to about N in, its first validation maybe later than its median interval: twice its interval says where it
        # began)
        resumed = version.start > lowest + 2 * max(usual, version.interval or 0)  # type: ignore[operator]
        before = [v for v in reversed(done)
                  if resumed and v.start < version.start <= v.end + slack]  # type: ignore[operator]
        before.sort(key=lambda v: v.settings != version.settings)  # (stable: the latest first within each)
        if not before and version.settings:
            before = [v for v in reversed(done) if v.settings == version.settings]
        run_of[version.folder] = run_of[before[0].folder] if before else version.folder
        done.append(version)
    # a version that logged nothing before any that did joins the first that did (versions that all logged nothing,
    # a notebook's launches that each stopped before their first step, are one run's launches)
    first = (run_of[logged[0].folder] if logged else None) or versions[0].folder
    return {id(p): run_of[v.folder] or first for v in versions for p in v.pieces}
