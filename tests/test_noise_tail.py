"""The fixed t(3) rule's quantiles come from a precomputed table (issue 17, start-up): the same floats as scipy's, and
a short log analysed without importing scipy."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

from forensics.detectors import noise_tail, t3_table


def test_the_t3_table_is_scipys_quantiles_bit_for_bit() -> None:
    """forensics/detectors/t3_table.py is what noise_tail.t3_table_source() computes with scipy now (every float's
    repr, so every bit), for the ALPHA and RUNS noise_tail uses; beyond the table the thresholds are scipy's."""
    path = ROOT / "forensics" / "detectors" / "t3_table.py"
    assert path.read_text(encoding="utf-8") == noise_tail.t3_table_source()
    assert (t3_table.ALPHA, t3_table.RUNS) == (noise_tail.ALPHA, noise_tail.RUNS)
    assert all(len(t3_table.T3_ISF[k]) == t3_table.N for k in noise_tail.RUNS)
    # inside the table and beyond it, one rule: (alpha / (len(RUNS) n)) ** (1 / k), t(3)
    for k, n in ((1, 1), (8, 400), (3, 401), (2, 10_000)):
        exact = noise_tail._t_isf((noise_tail.ALPHA / (len(noise_tail.RUNS) * n)) ** (1.0 / k), 3.0)
        assert noise_tail._t3_isf(k, n, noise_tail.ALPHA) == exact
    assert noise_tail._t3_isf(1, 10, 0.05) == noise_tail._t_isf(0.05 / 50, 3.0)  # another alpha: not the table's


def test_a_short_log_is_analysed_without_scipy() -> None:
    """LLaVA #918's excerpt (six Trainer dicts, the loss 4.2653 at the third) is judged by the fixed t(3) rule; its
    loss spike is found at step 3 with no scipy module loaded (scipy.special alone took 0.3-1 s to import)."""
    code = ("import sys\nfrom forensics.analysis import analyze_path\n"
            "a = analyze_path(sys.argv[1])\n"
            "print([(str(x.kind), x.step, x.value) for x in a.findings.runs[0].anomalies])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))\n")
    log = ROOT / "tests" / "fixtures" / "real" / "hf_trainer" / "llava_issue918_loss_spike_excerpt.txt"
    done = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.splitlines() == ["[('loss_spike', 3, 4.2653)]", "[]"]
