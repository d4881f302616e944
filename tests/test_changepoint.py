"""Exact PELT: the same breakpoints as ruptures' Pelt (jump=1, min_size=2) on labelled signals."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import ruptures as rpt

from forensics.changepoint import bic_penalty, pelt


def piecewise(lengths: list[int], means: list[float], sds: list[float], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(m, s, n) for n, m, s in zip(lengths, means, sds, strict=True)])


CASES = [   # small: ruptures' PELT is pure Python and O(n^2) on a signal with no change (larger sizes in benchmarks/)
    ([100, 100, 100], [0.0, 2.0, 1.0], [1.0, 1.0, 1.0]),
    ([25, 150, 10, 65], [5.0, 5.5, 9.0, 5.0], [0.2, 0.2, 0.2, 0.2]),
    ([150, 150], [0.0, 0.0], [0.5, 3.0]),             # a variance change only
    ([200], [3.0], [1.0]),                             # no change
    ([15, 15, 15, 15, 15, 15], [0.0, 4.0, 0.0, 4.0, 0.0, 4.0], [1.0] * 6),
]


@pytest.mark.parametrize("cost", ["l2", "normal"])
@pytest.mark.parametrize(("lengths", "means", "sds"), CASES)
@pytest.mark.parametrize("seed", [1])  # (seed 1 gives the most breakpoints of the two tried)
def test_same_breakpoints_as_ruptures(cost: str, lengths: list[int], means: list[float], sds: list[float],
                                      seed: int) -> None:
    x = piecewise(lengths, means, sds, seed)
    theirs = None
    for pen in sorted(dict.fromkeys((bic_penalty(x, cost), 3.0 * np.log(x.size), 25.0))):  # (BIC is 3 log n for "normal")
        if theirs != [x.size]:  # no change at a lower penalty is none at a higher one: ruptures is not asked again
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = rpt.Pelt(model=cost, jump=1, min_size=2).fit(x).predict(pen=pen)
        assert pelt(x, pen, cost=cost) == theirs


def test_finds_the_true_changes() -> None:
    x = piecewise([200, 200, 200], [0.0, 2.0, 1.0], [0.5, 0.5, 0.5], seed=3)
    assert pelt(x, bic_penalty(x)) == [200, 400, 600]
    y = piecewise([400, 400], [0.0, 0.0], [0.5, 3.0], seed=3)
    assert pelt(y, bic_penalty(y, "normal"), cost="normal") == [400, 800]


def test_integer_signal_ties_break_as_in_ruptures() -> None:
    scale = np.repeat([65536.0, 32768.0, 65536.0, 1024.0, 2048.0], [40, 3, 60, 2, 50])  # a loss-scale series
    log2 = np.log2(scale)
    theirs = rpt.Pelt(model="l2", jump=1, min_size=2).fit(log2).predict(pen=0.5)
    assert pelt(log2, 0.5) == theirs == [40, 43, 103, 105, 155]


def test_short_and_bad_signals() -> None:
    assert pelt(np.array([1.0, 2.0, 3.0]), 1.0) == [3]
    assert pelt(np.array([]), 1.0) == []
    with pytest.raises(ValueError, match="NaN or Inf"):
        pelt(np.array([1.0, np.nan, 2.0, 3.0, 4.0]), 1.0)
    for penalty in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="penalty must be a number at least 0"):
            pelt(np.arange(10.0), penalty)
    with pytest.raises(ValueError, match="cost must be one of"):
        pelt(np.zeros(10), 1.0, cost="rbf")


@pytest.mark.parametrize("cost", ["l2", "normal"])
def test_numpy_and_numba_loops_agree(cost: str) -> None:
    """Short signals take the NumPy loop, long ones the numba loop: the same search either way."""
    from forensics.changepoint import NUMPY_MAX, _pelt_numpy
    from forensics.pelt_kernel import pelt_loop

    rng = np.random.default_rng(7)
    signals = [piecewise(*case, seed=2) for case in CASES]
    signals += [np.repeat([3.0, 3.0, 5.0, 4.0], [1500, 1500, 1500, NUMPY_MAX]) + rng.standard_t(3, 4500 + NUMPY_MAX)]
    for x in signals:
        x = x - x.mean()
        s1, s2 = np.r_[0.0, np.cumsum(x)], np.r_[0.0, np.cumsum(x * x)]
        pen = bic_penalty(x, cost)
        assert _pelt_numpy(s1, s2, pen, 2, cost == "normal") == [int(b) for b in pelt_loop(s1, s2, pen, 2, cost == "normal")]
    assert len(pelt(signals[-1], bic_penalty(signals[-1], cost), cost=cost)) >= 3  # the numba path, past NUMPY_MAX
