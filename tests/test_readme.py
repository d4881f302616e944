"""The README's Python example runs as a script (``python example.py``), worker processes included."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_python_example_runs_as_a_script(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    example = next(b for b in blocks if b.startswith("# example.py"))
    (tmp_path / "example.py").write_text(example, encoding="utf-8")
    (tmp_path / "sample_logs").symlink_to(ROOT / "sample_logs")
    env = {**os.environ, "FORENSICS_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Incident chronicle")
    assert done.stdout.rstrip().splitlines()[-1] == (
        "[('tr8-104B-sample', 'diverged'), ('clean-1.3B', 'completed')]")
    assert (tmp_path / "out" / "compare.md").read_text(encoding="utf-8").startswith("# ")


def test_the_readme_fleet_questions_run_on_an_index_of_the_samples(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    questions = next(b for b in blocks if b.startswith("# fleet.py"))
    (tmp_path / "fleet.py").write_text(questions, encoding="utf-8")
    from forensics.fleet import index

    index(ROOT / "sample_logs", tmp_path / "fleet", jobs=1, cache=False)
    done = subprocess.run([sys.executable, "fleet.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    tables = done.stdout.split("shape: ")
    assert tables[1].startswith("(0, 3)")  # tr8 diverged at 4960, before its LR peak at 6500
    assert tables[2].startswith("(1, 2)") and "│ 1.3    ┆ 0.0002 │" in tables[2]  # clean-1.3B completed at 2e-4
    assert tables[3].startswith("(1, 4)") and "│ tr8-104B-sample ┆ 2       ┆ 6930 ┆ 6500   │" in tables[3]
