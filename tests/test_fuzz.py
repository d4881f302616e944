"""Property-based fuzzing of every reader and the command line (issue 18): random bytes, mutated real fixtures and
structure-aware mutants (TFRecord and ``.wandb`` records re-framed with valid CRCs, numbers made extreme, steps
reordered; see ``tests/mutants.py``).

The properties:

* the library (``forensics.analyze_path`` then both renderers) returns or raises :class:`parsers.InputError`,
  never another exception (the CLI's exit 2, never its "internal error");
* the CLI (its real entry point, ``forensics.cli.main``) exits 0 with nothing on stderr, or 2 with exactly one
  stderr line ``forensics: error: ...``; never a traceback, an internal error or a Rust panic; and it never
  creates or changes a file in the input folder;
* a clean prefix is kept: whatever a log's whole lines (or an event file's, a ``.wandb`` log's whole records)
  before a cut yield, the cut file yields too.

Examples are derandomized and bounded so the file runs in about half a minute; ``benchmarks/fuzz.py`` is the
long campaign (thousands of mutants, each in its own process with time and memory limits).
"""

from __future__ import annotations

import contextlib
import io
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import mutants
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics.cli
import reports
from forensics.analysis import analyze_path
from parsers import InputError, load_runs
from parsers.wandb_wire import MAGIC

FUZZ = settings(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def analyzed(path: Path) -> None:
    """The library's whole ``analyze`` path: read, analyze, render both formats; InputError is the only way out."""
    try:
        analysis = analyze_path(path)
    except InputError as exc:
        assert "\n" not in str(exc).strip(), f"a refusal is one line: {exc!r}"
        return
    for fmt in ("markdown", "json"):
        assert reports.render(analysis.findings, fmt)


def points(path: Path) -> set[tuple[str, int, str]]:
    """Every metric point read from ``path`` as (metric, step, value) (empty when nothing could be read)."""
    try:
        runs = load_runs(path)
    except InputError:
        return set()
    return {(str(m), int(s), repr(float(v))) for run in runs
            for m, s, v in run.metrics.select("metric", "step", "value").iter_rows()}


def tree(path: Path) -> dict[str, tuple[int, int]]:
    files = [path] if path.is_file() else sorted(path.rglob("*"))
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in files}


def mutant_input(seed: mutants.Seed, data: bytes, alone: bool = False) -> tuple[Path, tempfile.TemporaryDirectory]:
    holder = tempfile.TemporaryDirectory(prefix="fuzz-")
    return mutants.materialize(seed, data, Path(holder.name) / "in", alone=alone), holder


# ------------------------------------------------------------------------------------------ random bytes -------

# a file name that sends the bytes to each reader, and the bytes that get them past its sniff
ROUTES: dict[str, tuple[str, bytes]] = {
    "tensorboard": ("events.out.tfevents.1700000000.host.1.0", b""),
    "wandb": ("run-abc123.wandb", MAGIC),
    "hf-trainer-state": ("trainer_state.json", b'{"global_step": 10, "log_history": ['),
    "lightning": ("lightning_logs/version_0/metrics.csv", b"step,train_loss_step,epoch\n"),
    "mlflow": ("mlruns/1/0123abcd/meta.yaml", b"run_id: 0123abcd\nexperiment_id: '1'\n"),
    "wandb-history": ("history.jsonl", b'{"_step": 1, "loss": 2.5}\n'),
    "wandb-summary": ("files/wandb-summary.json", b'{"_step": 3, '),
    "wandb-csv": ("wandb_export.csv", b'"Step","run - loss","run - loss__MIN","run - loss__MAX"\n'),
    "megatron": ("train.log", b" iteration       10/    1000 | consumed samples: 80 | lm loss: 9.1E+00 |"),
    "nanogpt": ("out.log", b"iter 100: loss 4.1172, time 118.20ms, mfu 37.9%\n"),
    "llm.c": ("main.log", b"s:100 trl:3.2\n"),
    "fairseq": ("train.log", b'{"epoch": 1, "update": 10, "loss": "7.2"}\n'),
}


@settings(FUZZ, max_examples=15)
@given(route=st.sampled_from(sorted(ROUTES)), body=st.binary(max_size=3000), prefixed=st.booleans())
def test_random_bytes_reach_every_reader(route, body, prefixed):
    name, prefix = ROUTES[route]
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        path = Path(tmp) / "in" / name
        path.parent.mkdir(parents=True)
        path.write_bytes((prefix if prefixed else b"") + body)
        analyzed(Path(tmp) / "in")
        analyzed(path)


# ------------------------------------------------------------------------------------------ mutated fixtures ---


@settings(FUZZ, max_examples=10)
@given(seed=st.sampled_from(mutants.SEEDS), rng_seed=st.integers(0, 2**32 - 1), alone=st.booleans())
def test_mutated_fixtures(seed, rng_seed, alone):
    data, _ = mutants.mutate(mutants.seed_bytes(seed), seed.kind, random.Random(rng_seed))
    path, holder = mutant_input(seed, data, alone)
    with holder:
        analyzed(path)


REFRAMED = {"tfrecord": mutants.tfrecord_mutant, "wandb": mutants.wandb_mutant}


@settings(FUZZ, max_examples=10)
@given(seed=st.sampled_from([s for s in mutants.SEEDS if s.kind in REFRAMED]), rng_seed=st.integers(0, 2**32 - 1))
def test_records_reframed_with_valid_crcs(seed, rng_seed):
    """TFRecord and ``.wandb`` records edited (fields made extreme, records reordered) and framed again with valid
    CRCs, so the readers decode them instead of stopping at the framing."""
    data = REFRAMED[seed.kind](mutants.seed_bytes(seed), random.Random(rng_seed))
    path, holder = mutant_input(seed, data)
    with holder:
        analyzed(path)


def test_reframing_is_byte_exact():
    """The structure-aware mutators frame records as the writers do: an unchanged file comes back byte for byte."""
    for seed in mutants.SEEDS:
        data = mutants.seed_bytes(seed)
        if seed.kind == "tfrecord":
            assert mutants.tfrecord_file(mutants.tfrecord_payloads(data))[0] == data, seed.name
        elif seed.kind == "wandb":
            assert mutants.wandb_file(mutants.wandb_payloads(data))[0] == data, seed.name


# ------------------------------------------------------------------------------------------ clean prefixes -----

LINE_SEEDS = [s for s in mutants.SEEDS if s.kind in ("text", "jsonl", "csv") and s.reader != "mlflow"]


def _prefix_kept(seed: mutants.Seed, data: bytes, clean_end: int, cut_at: int) -> None:
    clean_path, clean_holder = mutant_input(seed, data[:clean_end])
    cut_path, cut_holder = mutant_input(seed, data[:cut_at])
    with clean_holder, cut_holder:
        before = points(clean_path)
        after = points(cut_path)
        analyzed(cut_path)
    lost = sorted(before - after)
    assert not lost, f"{len(lost)} of {len(before)} points of the clean prefix lost after a cut at byte {cut_at}: {lost[:5]}"


@settings(FUZZ, max_examples=10)
@given(seed=st.sampled_from(LINE_SEEDS), where=st.floats(0.05, 1.0))
def test_a_cut_line_log_keeps_its_whole_lines(seed, where):
    """A text log (Megatron, the consoles, JSON lines, CSV) cut at any byte keeps every point its whole lines
    before the cut give."""
    data = mutants.seed_bytes(seed)
    cut_at = int(len(data) * where)
    _prefix_kept(seed, data, data.rfind(b"\n", 0, cut_at) + 1, cut_at)


@settings(FUZZ, max_examples=10)
@given(seed=st.sampled_from([s for s in mutants.SEEDS if s.kind == "tfrecord"]), where=st.floats(0.0, 1.0))
def test_a_cut_event_file_keeps_its_whole_records(seed, where):
    data = mutants.seed_bytes(seed)
    _, ends = mutants.tfrecord_file(mutants.tfrecord_payloads(data))
    cut_at = int(len(data) * where)
    _prefix_kept(seed, data, max([0, *(e for e in ends if e <= cut_at)]), cut_at)


@settings(FUZZ, max_examples=10)
@given(seed=st.sampled_from([s for s in mutants.SEEDS if s.kind == "wandb"]), where=st.floats(0.0, 1.0))
def test_a_cut_wandb_log_keeps_its_whole_records(seed, where):
    data = mutants.seed_bytes(seed)
    _, ends = mutants.wandb_file(mutants.wandb_payloads(data))
    cut_at = int(len(data) * where)
    _prefix_kept(seed, data, max([len(MAGIC), *(e for e in ends if e <= cut_at)]), cut_at)


# ------------------------------------------------------------------------------------------ the CLI ------------


def cli(*argv: str) -> tuple[int, str]:
    """``forensics.cli.main`` in-process (its own exception handling and exit codes): the exit code and stderr."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["forensics", *argv]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            forensics.cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = saved
    return code, err.getvalue()


def assert_cli_contract(code: int, stderr: str) -> None:
    lines = stderr.splitlines()
    assert "Traceback" not in stderr and "internal error" not in stderr and "panicked at" not in stderr, stderr
    assert code in (0, 2), (code, stderr)
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("forensics: error: "), stderr
    else:
        assert stderr == "", f"a successful run printed on stderr: {stderr!r}"


@settings(FUZZ, max_examples=8)
@given(seed=st.sampled_from(mutants.SEEDS), rng_seed=st.integers(0, 2**32 - 1), alone=st.booleans(),
       fmt=st.sampled_from(["markdown", "json"]))
def test_cli_contract_on_mutants(seed, rng_seed, alone, fmt):
    data, _ = mutants.mutate(mutants.seed_bytes(seed), seed.kind, random.Random(rng_seed))
    path, holder = mutant_input(seed, data, alone)
    with holder:
        watched = Path(holder.name) / "in"
        before = tree(watched)
        code, stderr = cli("analyze", str(path), "-o", str(Path(holder.name) / "out" / f"report.{fmt[:2]}"),
                           "--format", fmt, "--no-plots")
        assert_cli_contract(code, stderr)
        assert tree(watched) == before, "the input folder was written into"


@pytest.mark.parametrize(("name", "body", "code"), [
    ("events.out.tfevents.1.host", bytes(random.Random(7).randrange(256) for _ in range(3000)), 2),
    ("train.log", mutants.seed_bytes(mutants.SEEDS[0])[:9000], 0),
])
def test_cli_subprocess(tmp_path, name, body, code):
    """The installed entry point as a process: exit code and one stderr line, no traceback."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / name).write_bytes(body)
    before = tree(tmp_path / "in")
    done = subprocess.run([sys.executable, "-m", "forensics.cli", "analyze", str(tmp_path / "in"), "-o",
                           str(tmp_path / "out" / "r.md")], capture_output=True, text=True, check=False)
    assert done.returncode == code, done.stderr
    assert_cli_contract(done.returncode, done.stderr)
    assert tree(tmp_path / "in") == before
