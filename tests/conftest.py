from __future__ import annotations

from pathlib import Path

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
