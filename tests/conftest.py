from __future__ import annotations

import os
from pathlib import Path

# one Polars thread per test worker: pytest-xdist already runs a worker per core, and a pool of a thread per core
# in each worker only makes them contend (about a sixth of the suite's CPU time). Set before any frame is computed;
# subprocesses of the tests inherit it.
os.environ.setdefault("POLARS_MAX_THREADS", "1")
# and one OpenBLAS thread, as the command line has (forensics/cli.py): the noise fits' tiny L-BFGS-B problems spent
# most of their time starting and waking a pool of BLAS threads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real" / "megatron"
SAMPLES = ROOT / "sample_logs"


def real(name_part: str) -> Path:
    """The one real log whose file name contains ``name_part``."""
    found = [p for p in REAL.iterdir() if name_part in p.name]
    assert len(found) == 1, (name_part, found)
    return found[0]


@pytest.fixture
def tr8_snippets() -> Path:
    return real("tr8-104B-wide_chronicles")


@pytest.fixture(autouse=True)
def _inline_unless_jobs_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the tests, a compare or index not told ``--jobs`` runs its runs inline: spawning a process per CPU costs
    more than the small runs (the process pool is tested where ``jobs=2`` is passed, and by every CLI test that runs
    the real command in a subprocess)."""
    import forensics.engines

    monkeypatch.setattr(forensics.engines, "default_jobs", lambda: 1)
