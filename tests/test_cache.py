"""The run cache heals itself and is never stale: a damaged frames or compare entry is made again from the run
(never served, never an unreadable run), and a file whose bytes changed under the same size and mtime gives
another key."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLES

import forensics.cache as cache_module
from forensics.cache import SEAL, cached_load_runs, input_signature, intact
from forensics.compare import compare_runs
from parsers import InputError, load_runs, read_frames, write_frames
from parsers.frames import FORMAT_VERSION


def short_copy(name: str, root: Path, lines: int = 400) -> Path:
    """The first ``lines`` lines of a sample run's log (its arguments, start-up and first iterations): the damage
    matrices need runs with metrics, events and configs, not long ones."""
    run = root / name
    run.mkdir()
    [log] = (SAMPLES / name).iterdir()
    text = log.read_text(encoding="utf-8").splitlines(keepends=True)
    (run / log.name).write_text("".join(text[:lines]), encoding="utf-8")
    return run


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return short_copy("tr8-104B-sample", tmp_path)


def the_entry(cache: Path, kind: str) -> Path:
    [entry] = [p for p in (cache / kind).iterdir() if not p.name.startswith(".")]
    return entry


def same_runs(got, want) -> bool:
    return len(got) == len(want) and all(
        (a.name, a.path, a.sources, a.warnings, a.skipped, a.tags) == (b.name, b.path, b.sources, b.warnings,
                                                                        b.skipped, b.tags)
        and all(getattr(a, f).equals(getattr(b, f)) and getattr(a, f).schema == getattr(b, f).schema
                for f in ("metrics", "events", "configs"))
        for a, b in zip(got, want, strict=True))


def rewrite_parquet(path: Path, change: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
    change(pl.read_parquet(path)).write_parquet(path)


def rewrite_index(entry: Path, change: Callable[[dict], object]) -> None:
    index = entry / "runs.json"
    index.write_text(json.dumps(change(json.loads(index.read_text()))))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


# each damage done to a frames entry, and whether Polars, JSON or read_frames alone would notice it (the others
# decode into something: only the entry's seal, or the schema check, stops them from being served)
FRAMES_DAMAGE: dict[str, Callable[[Path], object]] = {
    "runs.json not JSON": lambda e: (e / "runs.json").write_text("{not json"),
    "runs.json not UTF-8": lambda e: (e / "runs.json").write_bytes(b"\xff\xfe{}"),
    "runs.json a list": lambda e: rewrite_index(e, lambda meta: meta["runs"]),
    "runs.json without runs": lambda e: rewrite_index(e, lambda meta: {**meta, "runs": []}),
    "runs.json runs not a list": lambda e: rewrite_index(e, lambda meta: {**meta, "runs": "0"}),
    "runs.json a run without sources": lambda e: rewrite_index(
        e, lambda meta: {**meta, "runs": [{k: v for k, v in meta["runs"][0].items() if k != "sources"}]}),
    "runs.json another format version": lambda e: rewrite_index(
        e, lambda meta: {**meta, "format_version": FORMAT_VERSION - 1}),
    "runs.json missing": lambda e: (e / "runs.json").unlink(),
    "parquet missing": lambda e: (e / "0.events.parquet").unlink(),
    "parquet truncated": lambda e: truncate(e / "0.metrics.parquet"),
    "parquet garbage": lambda e: (e / "0.configs.parquet").write_bytes(b"PAR1" + b"\x00garbage" * 50 + b"PAR1"),
    "parquet empty": lambda e: (e / "0.metrics.parquet").write_bytes(b""),
    "parquet a directory": lambda e: ((e / "0.events.parquet").unlink(), (e / "0.events.parquet").mkdir()),
    "parquet with a wrong dtype": lambda e: rewrite_parquet(
        e / "0.metrics.parquet", lambda f: f.with_columns(pl.col("value").cast(pl.Float32))),
    "parquet without a column": lambda e: rewrite_parquet(e / "0.metrics.parquet", lambda f: f.drop("wall_time")),
    "parquet with another column": lambda e: rewrite_parquet(
        e / "0.events.parquet", lambda f: f.with_columns(extra=pl.lit(1))),
    "parquet with other values": lambda e: rewrite_parquet(
        e / "0.metrics.parquet", lambda f: f.with_columns(pl.col("value") + 1)),
    "seal missing": lambda e: (e / SEAL).unlink(),
    "seal not JSON": lambda e: (e / SEAL).write_text("]"),
    "a file too many": lambda e: (e / "1.metrics.parquet").write_bytes((e / "0.metrics.parquet").read_bytes()),
}
SEAL_ALONE_CATCHES = {"parquet with other values", "seal missing", "seal not JSON", "a file too many"}


@pytest.fixture(scope="module")
def primed_frames(tmp_path_factory):
    """A sample run (read only), its runs read without a cache, and a cache that holds its frames."""
    root = tmp_path_factory.mktemp("frames")
    run_dir = short_copy("tr8-104B-sample", root)
    fresh = load_runs(run_dir)
    assert same_runs(cached_load_runs(run_dir, root / "cache"), fresh)
    return run_dir, fresh, root / "cache"


@pytest.mark.parametrize("reseal", [False, True], ids=["damaged", "damaged-and-resealed"])
@pytest.mark.parametrize("damage", list(FRAMES_DAMAGE))
def test_a_damaged_frames_entry_is_parsed_again_and_replaced(primed_frames, tmp_path, damage, reseal):
    if reseal and damage in SEAL_ALONE_CATCHES | {"parquet a directory"}:
        pytest.skip("only the seal tells this entry from a sound one (or none can be made)")
    run_dir, fresh, primed = primed_frames
    cache = Path(shutil.copytree(primed, tmp_path / "cache"))
    entry = the_entry(cache, "frames")
    FRAMES_DAMAGE[damage](entry)
    if reseal:  # the seal made again over the damage: the checks of what is read must catch it on their own
        (entry / SEAL).unlink(missing_ok=True)
        cache_module._seal(entry)
    parsed = []
    real_load_runs = cache_module.load_runs

    def counted(path, **kwargs):
        parsed.append(path)
        return real_load_runs(path, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cache_module, "load_runs", counted)
        healed = cached_load_runs(run_dir, cache)
        assert same_runs(healed, fresh) and parsed == [run_dir]             # parsed again, not served
        assert the_entry(cache, "frames") == entry and intact(entry)       # and the entry made again
        assert same_runs(read_frames(entry), fresh)
        assert same_runs(cached_load_runs(run_dir, cache), fresh) and parsed == [run_dir]  # then served


def test_a_frames_entry_that_is_a_file_is_replaced(run_dir, tmp_path):
    cache = tmp_path / "cache"
    cached_load_runs(run_dir, cache)
    entry = the_entry(cache, "frames")
    shutil.rmtree(entry)
    entry.write_text("not an entry")
    assert same_runs(cached_load_runs(run_dir, cache), load_runs(run_dir))
    assert entry.is_dir() and intact(entry)


def test_a_damaged_frames_entry_is_not_an_unreadable_run_in_compare(run_dir, tmp_path):
    """What the issue saw: an entry whose runs.json lists no runs made compare say "no readable runs"."""
    cache = tmp_path / "cache"
    uncached, uncached_overlay = compare_runs([run_dir], cache=False, jobs=1)
    compare_runs([run_dir], cache=cache, jobs=1)
    shutil.rmtree(cache / "compare")                       # so that compare reads the frames entry
    rewrite_index(the_entry(cache, "frames"), lambda meta: {**meta, "runs": []})
    cache_module._seal(the_entry(cache, "frames"))
    comparison, overlay = compare_runs([run_dir], cache=cache, jobs=1)
    assert comparison.to_dict() == uncached.to_dict() and overlay.equals(uncached_overlay)
    assert comparison.rows[0].error is None and comparison.rows[0].outcome != "unreadable"


def damage_row(entry: Path) -> None:
    (entry / "row.json").write_text("[1, 2]")


COMPARE_DAMAGE: dict[str, Callable[[Path], object]] = {
    "row.json not an object": damage_row,
    "row.json not JSON": lambda e: (e / "row.json").write_text('{"name": '),
    "row.json with another field": lambda e: (e / "row.json").write_text(
        json.dumps({**json.loads((e / "row.json").read_text()), "extra": 1})),
    "row.json with an unknown outcome": lambda e: (e / "row.json").write_text(
        json.dumps({**json.loads((e / "row.json").read_text()), "outcome": "exploded"})),
    "row.json missing": lambda e: (e / "row.json").unlink(),
    "curves renamed columns": lambda e: rewrite_parquet(e / "curves.parquet", lambda f: f.rename({"mid": "middle"})),
    "curves with a wrong dtype": lambda e: rewrite_parquet(
        e / "curves.parquet", lambda f: f.with_columns(pl.col("step").cast(pl.Float64))),
    "curves garbage": lambda e: (e / "curves.parquet").write_bytes(b"garbage"),
    "curves truncated": lambda e: truncate(e / "curves.parquet"),
    "curves with other values": lambda e: rewrite_parquet(e / "curves.parquet", lambda f: f.with_columns(mid=0.0)),
    "final loss changed": lambda e: (e / "row.json").write_text(
        json.dumps({**json.loads((e / "row.json").read_text()), "final_loss": 123.0})),
}
RESULT_SEAL_ALONE_CATCHES = {"curves with other values", "final loss changed"}


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """Two sample runs (read only), their uncached comparison, and a cache that holds their results."""
    root = tmp_path_factory.mktemp("compared")
    runs = [short_copy(name, root) for name in ("tr8-104B-sample", "clean-1.3B")]
    uncached = compare_runs(runs, cache=False, jobs=1)
    compare_runs(runs, cache=root / "cache", jobs=1)
    return runs, uncached, root / "cache"


@pytest.mark.parametrize("reseal", [False, True], ids=["damaged", "damaged-and-resealed"])
@pytest.mark.parametrize("damage", list(COMPARE_DAMAGE))
def test_a_damaged_compare_entry_is_computed_again(tmp_path, compared, damage, reseal):
    if reseal and damage in RESULT_SEAL_ALONE_CATCHES:
        pytest.skip("only the seal tells this entry from a sound one")
    runs, (uncached, uncached_overlay), primed = compared
    cache = Path(shutil.copytree(primed, tmp_path / "cache"))
    entry = cache_module.result_entry(cache, runs[0])
    COMPARE_DAMAGE[damage](entry)
    if reseal:
        (entry / SEAL).unlink()
        cache_module._seal(entry)
    comparison, overlay = compare_runs(runs, cache=cache, jobs=1)
    assert comparison.to_dict() == uncached.to_dict() and overlay.equals(uncached_overlay)
    assert intact(entry) and cache_module.read_result(entry) is not None   # made again
    again, again_overlay = compare_runs(runs, cache=cache, jobs=1)
    assert again.to_dict() == uncached.to_dict() and again_overlay.equals(uncached_overlay)


def same_size_other_loss(log: Path) -> float:
    """Change the first logged loss in ``log`` to another value of the same length, the file's size and mtime
    kept; returns the new value."""
    text = log.read_text()
    stamp = log.stat()
    first = re.search(r"lm loss: (\d)\.(\d{6}E[+-]\d\d)", text)
    digit = "9" if first[1] != "9" else "8"
    log.write_text(text[: first.start(1)] + digit + text[first.end(1):])
    os.utime(log, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    after = log.stat()
    assert (after.st_size, after.st_mtime_ns) == (stamp.st_size, stamp.st_mtime_ns)
    return float(f"{digit}.{first[2]}")


def test_a_file_changed_under_the_same_size_and_mtime_is_not_served_from_the_frames_cache(run_dir, tmp_path):
    cache = tmp_path / "cache"
    [before] = cached_load_runs(run_dir, cache)
    key = input_signature(run_dir)
    new_loss = same_size_other_loss(run_dir / "main_log.txt")
    assert input_signature(run_dir) != key
    [after] = cached_load_runs(run_dir, cache)
    loss = after.metrics.filter(metric="loss").sort("attempt", "step")["value"]
    assert loss[0] == new_loss != before.metrics.filter(metric="loss").sort("attempt", "step")["value"][0]
    assert same_runs([after], load_runs(run_dir))


def test_a_file_changed_under_the_same_size_and_mtime_is_not_served_from_the_compare_cache(run_dir, tmp_path):
    cache = tmp_path / "cache"
    [before] = compare_runs([run_dir], cache=cache, jobs=1).comparison.rows
    new_loss = same_size_other_loss(run_dir / "main_log.txt")
    [after] = compare_runs([run_dir], cache=cache, jobs=1).comparison.rows
    assert after.initial_loss == new_loss != before.initial_loss
    assert after == compare_runs([run_dir], cache=False, jobs=1).comparison.rows[0]


def test_a_binary_file_beside_the_logs_is_keyed_on_its_head_only(run_dir, tmp_path):
    """A checkpoint beside the logs is not read through (no reader takes it: its first 64 KiB say so), yet
    a change there within its head still gives another key."""
    blob = run_dir / "model.pt"
    data = bytearray(random.Random(0).randbytes(200_000))
    data[10] = 0  # a NUL early on: binary
    blob.write_bytes(bytes(data))
    stamp = blob.stat()
    key = input_signature(run_dir)
    assert cache_module.content_digest(blob).startswith("head:")

    def rewrite(offset: int) -> None:
        data[offset] ^= 0xFF
        blob.write_bytes(bytes(data))
        os.utime(blob, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))

    rewrite(150_000)  # past the head: the readers never see it
    assert input_signature(run_dir) == key
    rewrite(100)  # within the head
    assert input_signature(run_dir) != key


def test_a_text_file_is_keyed_on_all_its_bytes(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("x" * 300_000)
    digest = cache_module.content_digest(log)
    log.write_text("x" * 299_999 + "y")
    assert cache_module.content_digest(log) != digest and not digest.startswith("head:")


@pytest.fixture(scope="module")
def tr8_frames(tmp_path_factory) -> Path:
    """The sample's frames, written once (read only: each test damages a copy of its own)."""
    out = tmp_path_factory.mktemp("tr8-frames") / "frames"
    write_frames(load_runs(SAMPLES / "tr8-104B-sample"), out)
    return out


def frames_dir(tmp_path: Path, written: Path) -> Path:
    return Path(shutil.copytree(written, tmp_path / "frames"))


@pytest.mark.parametrize("damage", [d for d in FRAMES_DAMAGE if d not in SEAL_ALONE_CATCHES])
def test_read_frames_says_what_is_wrong_in_one_line_naming_the_file(tmp_path, tr8_frames, damage):
    out = frames_dir(tmp_path, tr8_frames)
    FRAMES_DAMAGE[damage](out)
    with pytest.raises(InputError) as raised:
        read_frames(out)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(str(out)), message
    if damage.startswith("parquet"):
        assert re.match(rf"{re.escape(str(out))}/0\.\w+\.parquet: ", message), message
    elif damage != "runs.json missing":
        assert message.startswith(f"{out / 'runs.json'}: "), message


def test_read_frames_messages(tmp_path, tr8_frames):
    out = frames_dir(tmp_path, tr8_frames)
    rewrite_parquet(out / "0.metrics.parquet", lambda f: f.with_columns(pl.col("value").cast(pl.Float32)).drop("run"))
    with pytest.raises(InputError, match=r"0\.metrics\.parquet: not a metrics frame of forensics \(no column run, "
                                         r"column value is Float32, not Float64\)$"):
        read_frames(out)
    rewrite_index(out, lambda meta: {**meta, "format_version": 1})
    with pytest.raises(InputError, match=r"runs\.json: frames format version 1; this version of forensics reads "
                                         rf"version {FORMAT_VERSION} \(export the run again\)$"):
        read_frames(out)
    with pytest.raises(InputError, match=r"missing: not a frames directory \(no runs\.json\)$"):
        read_frames(tmp_path / "missing")


def test_read_frames_on_damaged_parquet_returns_or_raises_input_error(tmp_path, tr8_frames):
    """Bytes overwritten anywhere in a frame file: Polars either decodes something (the cache's seal is what stops
    that being served) or fails; the failure is an InputError, also where Polars panics (PanicException is a
    BaseException, which ``except Exception`` would let through)."""
    out = frames_dir(tmp_path, tr8_frames)
    rnd = random.Random(1)
    originals = {name: (out / name).read_bytes() for name in ("0.metrics.parquet", "0.events.parquet")}
    outcomes = set()
    for name, data in originals.items():
        for _ in range(150):
            damaged = bytearray(data)
            at = rnd.randrange(len(damaged) - 8)
            damaged[at:at + 8] = rnd.randbytes(8)
            (out / name).write_bytes(bytes(damaged))
            try:
                read_frames(out)
                outcomes.add("read")
            except InputError as exc:
                assert str(exc).startswith(f"{out / name}: ") and "\n" not in str(exc)
                outcomes.add("refused")
        (out / name).write_bytes(data)
    assert outcomes == {"read", "refused"}


def test_a_cold_compare_hashes_each_run_once_and_keys_it_before_reading(tmp_path, monkeypatch):
    """The compare key was taken three times per run (parent, frames, result), the last after the run was read:
    a log changed while it was read left its old result under its new content's key."""
    import forensics.compare as compare_module

    runs = [Path(shutil.copytree(SAMPLES / name, tmp_path / name)) for name in ("tr8-104B-sample", "clean-1.3B")]
    taken: list[Path] = []
    real_signature = cache_module.input_signature

    def counted(path):
        taken.append(Path(path))
        return real_signature(path)

    monkeypatch.setattr(cache_module, "input_signature", counted)
    monkeypatch.setattr(compare_module, "input_signature", counted)
    compare_runs(runs, cache=tmp_path / "cache", jobs=1)
    assert sorted(taken) == sorted(runs)
