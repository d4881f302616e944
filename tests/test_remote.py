"""Runs at URLs (parsers.remote): read through fsspec's memory:// filesystem, they give the frames a local read gives,
show the URL in every name, download only what a reader takes, and key the cache without downloading."""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import fsspec
import polars as pl
import pytest
from conftest import SAMPLES
from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

from forensics.analysis import analyze_path
from forensics.cache import cached_load_runs, input_signature
from forensics.compare import compare_runs
from parsers import InputError, load_run, load_runs, remote
from parsers.reader import HEAD_BYTES
from parsers.run import Run

REAL = Path("tests/fixtures/real")
RUN_DIRS = [
    Path("sample_logs/tr8-104B-sample"),
    REAL / "tensorboard/fyh2001_megatron-sft-recipes_fsdp2",  # an event file larger than the head
    REAL / "wandb/jackokeefe11__nanoGPT",  # .wandb logs with their sidecars: several runs
    REAL / "mlflow/swahili_stt_keras",
    REAL / "lightning/0Xero7_slm_training",
    REAL / "hf_output_dir/zhl-2022_x-algorithm_qwen3_17b_text_effective",
]
SINGLE_FILES = [
    REAL / "wandb/kingb12__text_aug_experiments/wandb_export.csv",
    REAL / "nanogpt/karpathy_nanoGPT_issue215_excerpt.txt",
]


@pytest.fixture
def mem() -> Iterator[tuple[MemoryFileSystem, str]]:
    """The memory filesystem and a fresh folder in it (``/t-<random>``), removed after the test."""
    fs = fsspec.filesystem("memory")
    root = f"/t-{uuid.uuid4().hex[:8]}"
    yield fs, root
    if fs.exists(root):
        fs.rm(root, recursive=True)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Bytes read from each memory:// file from now on (every read of a memory file goes through these)."""
    counted: Counter[str] = Counter()
    read, readinto, cat_file = MemoryFile.read, MemoryFile.readinto, MemoryFileSystem.cat_file

    def counting_read(self: MemoryFile, *args: object) -> bytes:
        data = read(self, *args)
        counted[self.path] += len(data)
        return data

    def counting_readinto(self: MemoryFile, buffer: bytearray) -> int:
        size = readinto(self, buffer)
        counted[self.path] += size
        return size

    def counting_cat(self: MemoryFileSystem, path: str, *args: object, **kwargs: object) -> bytes:
        data = cat_file(self, path, *args, **kwargs)
        counted[self._strip_protocol(path)] += len(data)
        return data

    monkeypatch.setattr(MemoryFile, "read", counting_read)
    monkeypatch.setattr(MemoryFile, "readinto", counting_readinto)
    monkeypatch.setattr(MemoryFileSystem, "cat_file", counting_cat)
    return counted


def upload(fs: MemoryFileSystem, local: Path, target: str) -> str:
    """Copy a local file or directory to ``target`` in memory; its URL."""
    fs.put(str(local), target, recursive=local.is_dir())
    return f"memory:/{target}"


def shown_strings(run: Run) -> list[str]:
    """Every name a run shows: its path, sources, warnings, skipped files, tags and the frames' sources."""
    frames = (run.metrics, run.events, run.configs)
    return [run.path, *(s.path for s in run.sources), *run.warnings, *run.skipped, *(t["source"] for t in run.tags),
            *(v for f in frames for v in f["source"].unique().drop_nulls().cast(pl.String).to_list())]


def assert_no_staging(runs: list[Run]) -> None:
    staging = str(Path(tempfile.gettempdir()) / "forensics-")
    for run in runs:
        assert not [text for text in shown_strings(run) if staging in text]


@pytest.mark.parametrize("local", RUN_DIRS, ids=lambda p: p.name)
def test_url_run_reads_as_local(mem: tuple[MemoryFileSystem, str], local: Path) -> None:
    fs, root = mem
    url = upload(fs, local, f"{root}/{local.name}") + "/"
    expected, got = load_runs(local), load_runs(url)
    assert [r.name for r in got] == [r.name for r in expected]
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.path == url.rstrip("/")
        assert mine.metrics.equals(theirs.metrics) and mine.events.equals(theirs.events)
        assert mine.configs.equals(theirs.configs)
        assert mine.sources == theirs.sources
        # (sorted: the console readers list a file's tags in an order that varies from one local read to the next)
        assert sorted(map(str, mine.tags)) == sorted(map(str, theirs.tags))
        assert mine.warnings == theirs.warnings and mine.skipped == theirs.skipped
    assert_no_staging(got)


def test_large_files_are_copied_in_blocks(mem: tuple[MemoryFileSystem, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fs, root = mem
    local = RUN_DIRS[1]
    url = upload(fs, local, f"{root}/{local.name}")
    monkeypatch.setattr(remote, "BLOCK", 1000)  # many blocks per file
    assert load_run(url).metrics.equals(load_run(local).metrics)


@pytest.mark.parametrize("local", SINGLE_FILES, ids=lambda p: p.name)
def test_single_file_url_shows_the_url(mem: tuple[MemoryFileSystem, str], local: Path) -> None:
    fs, root = mem
    url = upload(fs, local, f"{root}/logs/{local.name}")
    expected, got = load_runs(local), load_runs(url)
    assert [r.name for r in got] == [r.name for r in expected]
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.path == url and [s.path for s in mine.sources] == [url] * len(theirs.sources)
        sources = {f["source"].cast(pl.String).unique().to_list()[0] for f in (mine.metrics, mine.configs) if f.height}
        assert sources == {url}
        def same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
            return a.drop("source").equals(b.drop("source"))
        assert same(mine.metrics, theirs.metrics) and same(mine.configs, theirs.configs)
        assert same(mine.events, theirs.events)
    assert_no_staging(got)


WITH_SIDECARS = [
    REAL / "wandb/jackokeefe11__nanoGPT/wandb/run-20240214_191836-mw8ngzqq/run-mw8ngzqq.wandb",  # files/ beside it
    REAL / "lightning/0Xero7_slm_training/lightning_logs/version_0/metrics.csv",  # hparams.yaml beside it
    REAL / "mlflow/swahili_stt_keras/mlruns/1/ed05f9cd599442fe9a0c9222184710b8/meta.yaml",  # its run folder
]


@pytest.mark.parametrize("local", WITH_SIDECARS, ids=lambda p: p.parent.name)
def test_single_file_url_with_what_its_reader_reads_beside_it(mem: tuple[MemoryFileSystem, str], local: Path) -> None:
    fs, root = mem
    folder = upload(fs, local.parent, f"{root}/{local.parent.parent.name}/{local.parent.name}")
    url = f"{folder}/{local.name}"
    [expected], [got] = load_runs(local), load_runs(url)
    def as_url(text: str) -> str:
        return url + text[len(str(local)):] if text.startswith(str(local)) else text
    assert got.name == expected.name and got.path == url
    assert got.sources == [replace(s, path=as_url(s.path)) for s in expected.sources]
    assert got.warnings == [as_url(w) for w in expected.warnings] and got.skipped == [as_url(w) for w in expected.skipped]
    assert expected.configs.height and got.configs.drop("source").equals(expected.configs.drop("source"))
    assert got.metrics.drop("source").equals(expected.metrics.drop("source"))
    assert got.events.drop("source").equals(expected.events.drop("source"))
    assert_no_staging([got])


def test_a_file_no_reader_takes_is_not_downloaded(mem: tuple[MemoryFileSystem, str], reads: Counter[str],
                                                  tmp_path: Path) -> None:
    fs, root = mem
    local = tmp_path / "tr8"
    local.mkdir()
    (local / "main_log.txt").write_bytes((RUN_DIRS[0] / "main_log.txt").read_bytes())
    (local / "model.pt").write_bytes(b"\x00\x01" * (1 << 20))  # a 2 MiB checkpoint
    (local / ".hidden").mkdir()
    (local / ".hidden" / "notes.log").write_text("not read\n")
    url = upload(fs, local, f"{root}/tr8")
    reads.clear()
    run, expected = load_run(url), load_run(local)
    assert run.skipped == expected.skipped == ["model.pt: binary file, not a text log"]
    assert reads[f"{root}/tr8/model.pt"] <= HEAD_BYTES
    assert reads[f"{root}/tr8/main_log.txt"] == (local / "main_log.txt").stat().st_size
    assert f"{root}/tr8/.hidden/notes.log" not in reads
    assert [s.path for s in run.sources] == ["main_log.txt"]


def test_a_checkpoint_read_by_its_name_is_not_downloaded(mem: tuple[MemoryFileSystem, str], reads: Counter[str],
                                                         tmp_path: Path) -> None:
    """A Lightning checkpoint (epoch=E-step=S.ckpt) is a save at step S by its name: its gigabytes of weights were
    copied whole from the bucket because a reader takes the file."""
    fs, root = mem
    local = tmp_path / "tr8"
    local.mkdir()
    (local / "main_log.txt").write_bytes((RUN_DIRS[0] / "main_log.txt").read_bytes())
    (local / "epoch=0-step=10.ckpt").write_bytes(b"PK\x03\x04" + b"\x00" * (2 << 20))
    url = upload(fs, local, f"{root}/tr8")
    reads.clear()
    run = load_run(url)
    assert reads[f"{root}/tr8/epoch=0-step=10.ckpt"] <= HEAD_BYTES
    assert run.events.filter(kind="checkpoint_save", step=10).height == 1


def test_staging_directory_is_removed(mem: tuple[MemoryFileSystem, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fs, root = mem
    made: list[Path] = []
    mkdtemp = tempfile.mkdtemp

    def recorded(*args: object, **kwargs: object) -> str:
        made.append(Path(mkdtemp(*args, **kwargs)))  # type: ignore[arg-type]
        return str(made[-1])

    monkeypatch.setattr(tempfile, "mkdtemp", recorded)
    url = upload(fs, RUN_DIRS[0], f"{root}/tr8")
    load_run(url)
    fs.pipe(f"{root}/junk/blob.bin", b"\x00" * 10)
    with pytest.raises(InputError, match="no readable training logs"):
        load_runs(f"memory:/{root}/junk")
    assert len(made) == 2 and not any(p.exists() for p in made)


def test_missing_url_is_one_line_naming_it(mem: tuple[MemoryFileSystem, str]) -> None:
    _, root = mem
    url = f"memory:/{root}/no/such/run/"
    with pytest.raises(InputError) as caught:
        load_runs(url)
    assert str(caught.value) == f"memory:/{root}/no/such/run: no such file or directory"
    assert not remote.exists(url) and not remote.is_dir(url)


def test_empty_remote_directory(mem: tuple[MemoryFileSystem, str]) -> None:
    fs, root = mem
    fs.mkdir(f"{root}/empty")
    with pytest.raises(InputError) as caught:
        load_runs(f"memory:/{root}/empty")
    assert str(caught.value) == f"memory:/{root}/empty: no readable training logs (no files)"


def test_unknown_scheme_names_it() -> None:
    with pytest.raises(InputError) as caught:
        load_runs("nosuch://bucket/runs/tr8")
    assert str(caught.value) == "nosuch://bucket/runs/tr8: unknown URL scheme 'nosuch' (no fsspec filesystem for it)"


def test_missing_package_names_the_extra() -> None:
    pytest.importorskip("fsspec")
    try:
        import s3fs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("s3fs is installed: no missing package to report")
    with pytest.raises(InputError) as caught:
        load_runs("s3://bucket/runs/tr8/")
    assert str(caught.value) == "s3://bucket/runs/tr8/: needs s3fs (pip install 'forensics[s3]')"


class _Refusing(MemoryFileSystem):
    """A filesystem whose every call fails the way cloud storage does without credentials or permission."""

    protocol = ("refusing",)
    error: BaseException = OSError()

    def info(self, path: str, **kwargs: object) -> dict:
        raise self.error

    def ls(self, path: str, detail: bool = True, **kwargs: object) -> list:
        raise self.error


class _Bucketed(MemoryFileSystem):
    """Object storage in memory: the first part of a path is a bucket (as s3fs and gcsfs read it)."""

    protocol = ("buckets", "s3")  # read as s3 is read
    store: dict = {}  # noqa: RUF012 (fsspec's own class-level store, kept apart from memory://)
    pseudo_dirs = [""]  # noqa: RUF012

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        return super()._strip_protocol(path.replace("buckets://", "memory://", 1))


def test_a_missing_bucket_is_named_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    fsspec.register_implementation("buckets", _Bucketed, clobber=True)
    _Bucketed.store.clear()
    fs = fsspec.filesystem("buckets")
    fs.pipe("/there/runs/tr8/train.log", (SAMPLES / "clean-1.3B" / "train.log").read_bytes())
    for call in (load_runs, remote.subdirectories, lambda url: compare_runs([url], cache=False, jobs=1)):
        for url, said in (("buckets://nobucket/runs/tr8", "no such bucket 'nobucket'"),
                          ("buckets://nobucket", "no such bucket 'nobucket'"),
                          ("buckets://there/runs/nothing", "no such file or directory")):
            with pytest.raises(InputError) as caught:
                call(url)
            assert str(caught.value) == f"{url}: {said}", call
    assert load_runs("buckets://there/runs/tr8")[0].name == "tr8"


@pytest.mark.parametrize(("error", "said"), [
    (type("NoCredentialsError", (Exception,), {})("Unable to locate credentials"),
     "no credentials (Unable to locate credentials)"),
    (PermissionError("Access Denied"), "permission denied (Access Denied)"),
    (FileNotFoundError("The specified bucket does not exist"), "no such file or directory"),
])
def test_storage_errors_are_one_line(monkeypatch: pytest.MonkeyPatch, error: BaseException, said: str) -> None:
    fsspec.register_implementation("refusing", _Refusing, clobber=True)
    monkeypatch.setattr(_Refusing, "error", error)
    url = "refusing://bucket/runs"
    for call in (load_runs, remote.subdirectories):
        with pytest.raises(InputError) as caught:
            call(url)
        assert str(caught.value) == f"{url}: {said}"
    if said == "no such file or directory":
        assert not remote.exists(url)
    else:
        with pytest.raises(InputError, match=re.escape(f"{url}: {said}")):
            remote.exists(url)
    assert len(input_signature(url)) == 24  # a key, under which nothing is ever kept (the read fails)


def test_file_url_reads_in_place() -> None:
    local = RUN_DIRS[0].resolve()
    url = f"file://{local}"
    run, expected = load_run(url), load_run(local)
    assert run.path == url and run.name == expected.name and run.metrics.equals(expected.metrics)
    assert remote.local_path(url) == local
    with pytest.raises(InputError, match=f"^{url}/nope: no such file or directory$"):
        load_runs(f"{url}/nope")


def test_discovery_helpers(mem: tuple[MemoryFileSystem, str]) -> None:
    fs, root = mem
    for name in ("b-run", "a-run", ".hidden"):
        fs.pipe(f"{root}/runs/{name}/train.log", b"x\n")
    fs.pipe(f"{root}/runs/notes.txt", b"x\n")
    url = f"memory:/{root}/runs"
    assert remote.subdirectories(url) == [f"{url}/a-run", f"{url}/b-run"]
    assert remote.subdirectories(url + "/") == [f"{url}/a-run", f"{url}/b-run"]
    assert remote.is_dir(url) and not remote.is_dir(f"{url}/notes.txt") and remote.exists(f"{url}/notes.txt")
    assert remote.run_name(f"{url}/a-run/") == "a-run" and remote.run_name(f"{url}/notes.txt") == "notes"
    assert remote.parent_name(f"{url}/a-run") == "runs"
    assert [remote.is_url(p) for p in ("s3://b/x", "hf://datasets/x", "C:/x", "c://x", "runs", Path("s3://b"))] == [
        True, True, False, False, False, False]


def test_signature_follows_remote_changes_and_a_cached_read_downloads_nothing(
        mem: tuple[MemoryFileSystem, str], reads: Counter[str], tmp_path: Path) -> None:
    fs, root = mem
    url = upload(fs, RUN_DIRS[0], f"{root}/tr8")
    log = f"{root}/tr8/main_log.txt"
    first = input_signature(url)
    assert input_signature(url + "/") == first and input_signature(url) == first
    reads.clear()
    [parsed] = cached_load_runs(url, tmp_path)
    assert reads[log] > 0
    reads.clear()
    [cached] = cached_load_runs(url, tmp_path)
    assert sum(reads.values()) == 0  # listed, not read
    assert cached.path == parsed.path == url and cached.metrics.equals(parsed.metrics)
    text = fs.cat_file(log)
    fs.pipe(log, text.replace(b"lm loss: 6.", b"lm loss: 7.", 1))  # same size, other content
    assert fs.size(log) == len(text) and input_signature(url) != first
    reads.clear()
    [again] = cached_load_runs(url, tmp_path)
    assert reads[log] > 0 and not again.metrics.equals(parsed.metrics)
    fs.pipe(f"{root}/tr8/extra.bin", b"\x00")
    assert input_signature(url) not in (first, input_signature(f"memory:/{root}/other"))


def test_analyze_path_takes_a_url(mem: tuple[MemoryFileSystem, str]) -> None:
    fs, root = mem
    local = RUN_DIRS[0]
    url = upload(fs, local, f"{root}/{local.name}")
    analysis, expected = analyze_path(url), analyze_path(local)
    assert analysis.read is None and expected.read == local
    [run], [theirs] = analysis.findings.runs, expected.findings.runs
    assert run.path == url and run.name == theirs.name == local.name
    assert [(a.kind, a.step, a.detail) for a in run.anomalies] == [(a.kind, a.step, a.detail) for a in theirs.anomalies]
    assert len(run.attempts) == len(theirs.attempts)
    assert analysis.metrics[run.name].equals(expected.metrics[run.name])


def test_cache_at_a_url_is_staged_then_sealed(mem: tuple[MemoryFileSystem, str], monkeypatch: pytest.MonkeyPatch,
                                              reads: Counter[str]) -> None:
    fs, root = mem
    cache = f"memory:/{root}/cache"
    url = upload(fs, RUN_DIRS[0], f"{root}/{RUN_DIRS[0].name}")
    written: list[str] = []
    put_file, pipe_file = MemoryFileSystem.put_file, MemoryFileSystem.pipe_file

    def put(self: MemoryFileSystem, lpath: str, rpath: str, *args: object, **kwargs: object) -> None:
        written.append(rpath)
        put_file(self, lpath, rpath, *args, **kwargs)

    def pipe(self: MemoryFileSystem, path: str, *args: object, **kwargs: object) -> None:
        written.append(path)
        pipe_file(self, path, *args, **kwargs)

    monkeypatch.setattr(MemoryFileSystem, "put_file", put)
    monkeypatch.setattr(MemoryFileSystem, "pipe_file", pipe)
    [parsed] = cached_load_runs(url, cache)
    [entry] = fs.ls(f"{root}/cache/frames", detail=False)
    assert written[-1] == f"{entry}/digests.json" and len(written) == 5  # runs.json, 3 frames, then the seal
    assert all(p.startswith(f"{entry}/.tmp-") for p in written[:-1])
    monkeypatch.setattr("forensics.cache.load_runs", lambda *a, **k: pytest.fail("read again despite the cache"))
    reads.clear()
    [cached] = cached_load_runs(url, cache)
    assert not [p for p in reads if p.startswith(f"{root}/{RUN_DIRS[0].name}")]  # the run is not downloaded
    assert cached.path == url and cached.metrics.equals(parsed.metrics) and cached.events.equals(parsed.events)
    assert cached.configs.equals(parsed.configs) and cached.sources == parsed.sources


def test_cache_at_a_url_never_reads_an_unsealed_or_damaged_entry(mem: tuple[MemoryFileSystem, str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fs, root = mem
    cache = f"memory:/{root}/cache"
    local = RUN_DIRS[0]
    [parsed] = cached_load_runs(local, cache)
    [entry] = fs.ls(f"{root}/cache/frames", detail=False)
    [staged] = [p for p in fs.ls(entry, detail=False) if p.rsplit("/", 1)[-1].startswith(".tmp-")]
    parsed_again: list[object] = []
    load = load_runs

    def counted(*args: object, **kwargs: object) -> list[Run]:
        parsed_again.append(args)
        return load(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("forensics.cache.load_runs", counted)
    metrics = fs.cat_file(f"{staged}/0.metrics.parquet")
    fs.pipe(f"{staged}/0.metrics.parquet", metrics[:-9] + bytes(9))  # damaged: parsed again, and replaced
    [healed] = cached_load_runs(local, cache)
    assert len(parsed_again) == 1 and healed.metrics.equals(parsed.metrics)
    [cached] = cached_load_runs(local, cache)  # the replacement is whole
    assert len(parsed_again) == 1 and cached.metrics.equals(parsed.metrics)
    staged = f"{entry}/{json.loads(fs.cat_file(f'{entry}/digests.json'))['staged']}"  # the replacement's files
    index = fs.cat_file(f"{staged}/runs.json")
    fs.pipe(f"{staged}/runs.json", index.replace(b'"path": "sample_logs/', b'"path": "elsewhere/', 1))  # still valid
    [checked] = cached_load_runs(local, cache)
    assert len(parsed_again) == 2 and checked.path == parsed.path == str(local)
    fs.rm(f"{entry}/digests.json")  # no seal: never read, whatever the files
    [unsealed] = cached_load_runs(local, cache)
    assert len(parsed_again) == 3 and unsealed.metrics.equals(parsed.metrics)
    fsspec.register_implementation("refusing", _Refusing, clobber=True)
    [uncached] = cached_load_runs(local, "refusing://bucket/cache")  # a cache that cannot be used: read anyway
    assert len(parsed_again) == 4 and uncached.metrics.equals(parsed.metrics)


def test_a_compare_result_at_a_url_that_is_damaged_is_made_again(mem: tuple[MemoryFileSystem, str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.cache import read_result, result_entry
    from forensics.compare import ingest

    fs, root = mem
    cache, local = f"memory:/{root}/cache", RUN_DIRS[0]
    first = compare_runs([local], jobs=1, cache=cache).comparison.rows
    [entry] = fs.ls(f"{root}/cache/compare", detail=False)
    assert f"memory:/{entry}" == result_entry(cache, local)
    staged = f"{entry}/{json.loads(fs.cat_file(f'{entry}/digests.json'))['staged']}"
    fs.pipe(f"{staged}/row.json", fs.cat_file(f"{staged}/row.json").replace(b'"diverged"', b'"completed"'))
    assert read_result(f"memory:/{entry}") is None and not fs.exists(f"{entry}/digests.json")  # unsealed
    read: list[object] = []
    monkeypatch.setattr("forensics.compare.ingest", lambda *args: read.append(args) or ingest(*args))
    again = compare_runs([local], jobs=1, cache=cache).comparison.rows
    assert len(read) == 1 and again == first and read_result(f"memory:/{entry}") is not None  # made and sealed again


def test_a_name_that_is_both_file_and_folder(mem: tuple[MemoryFileSystem, str]) -> None:
    fs, root = mem
    log = (RUN_DIRS[0] / "main_log.txt").read_bytes()
    fs.pipe(f"{root}/run/main_log.txt", log)
    fs.pipe(f"{root}/run/logs", b"iteration 1/10 | lm loss: 2.5 |\n")  # a file `logs` and a file under `logs/`,
    fs.store[f"{root}/run/logs/x.log"] = MemoryFile(fs, f"{root}/run/logs/x.log", log)  # as S3 can hold
    run = load_run(f"memory:/{root}/run")
    assert run.warnings[0] == f"memory:/{root}/run/logs: cannot be copied to a local file (Is a directory)"
    assert [s.path for s in run.sources] == ["main_log.txt"]
    assert_no_staging([run])


def test_compare_and_the_cli_take_urls(mem: tuple[MemoryFileSystem, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from forensics.cli import app
    from forensics.compare import compare_runs
    from reports import render_compare_json

    fs, root = mem
    for run in ("tr8-104B-sample", "clean-1.3B"):
        fs.put(f"sample_logs/{run}", f"{root}/exp/{run}", recursive=True)
    remote_rows = json.loads(render_compare_json(compare_runs([f"memory://{root}/exp"], jobs=1, cache=False).comparison))
    local_rows = json.loads(render_compare_json(compare_runs(["sample_logs"], jobs=1, cache=False).comparison))
    runs = ("clean-1.3B", "tr8-104B-sample")
    assert [r["path"] for r in remote_rows["runs"]] == [f"memory://{root}/exp/{n}" for n in runs]
    for row in (*remote_rows["runs"], *local_rows["runs"]):
        row.pop("path")
    assert remote_rows == local_rows
    cache = f"memory://{root}/cache"  # a cache at a URL keeps frames and results; a second compare reads neither run
    first = compare_runs([f"memory://{root}/exp/clean-1.3B", f"memory://{root}/exp/tr8-104B-sample"], jobs=1, cache=cache)
    assert len(fs.glob(f"{root}/cache/frames/*/digests.json")) == 2  # two sealed entries of each kind
    assert len(fs.glob(f"{root}/cache/compare/*/digests.json")) == 2

    def never(*_: object, **__: object) -> None:
        raise AssertionError("a run was read")

    monkeypatch.setattr("forensics.cache.load_runs", never)
    monkeypatch.setattr("forensics.compare.ingest", never)
    again = compare_runs([f"memory://{root}/exp/clean-1.3B", f"memory://{root}/exp/tr8-104B-sample"], jobs=1, cache=cache)
    assert render_compare_json(again.comparison) == render_compare_json(first.comparison)
    done = CliRunner().invoke(app, ["analyze", f"memory://{root}/exp/clean-1.3B", "-f", "json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["runs"][0]["path"] == f"memory://{root}/exp/clean-1.3B"
    missing = CliRunner().invoke(app, ["compare", f"memory://{root}/nothing"])
    assert missing.exit_code != 0 and f"memory://{root}/nothing: no such file or directory" in str(missing.exception)
