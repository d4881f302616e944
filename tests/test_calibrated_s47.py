"""Detection on sparse logs (issue 15): what a log every 100 steps shows of a blow-up, a regime shift and a spike.

Each case is a generated curve (``forensics.evaluation.generate``) that the detectors missed before this change, pinned
at the step the generator put its event.
"""

from __future__ import annotations

import re

import polars as pl

from forensics.analysis import detect
from forensics.detectors import RunFrames
from forensics.evaluation import generate
from forensics.findings import Kind


def _found(curve, kind: Kind) -> list:
    return [a for a in detect(RunFrames(curve.metrics, curve.events)) if a.kind == kind]


def test_a_loss_that_goes_nan_as_the_grad_norm_blows_up_has_diverged():
    # a log every 100 steps: the loss at its level at 23400 (3.1479) and NaN from 23500, while the grad norm went
    # 1.98 -> 106.5 -> 699.8 -> 4350.3; no finite loss shows the climb, the grad norm shows the blow-up
    curve = generate("divergence_nan", 1, 100, noise="t6")
    [div] = _found(curve, Kind.DIVERGENCE)
    assert (div.step, div.end_step) == (23500, 23700)
    # (generated floats: their last digits may differ between NumPy versions)
    assert re.fullmatch(r"the grad norm blew up at step 23500 \(106\.51\d+, 244\.4x its level 0\.4357\d+, rising from "
                        r"step 23300\) and the loss was NaN from step 23500 to the end of the attempt; its last finite "
                        r"loss 3\.1479\d+ at step 23400", div.detail), div.detail


def test_a_loss_that_goes_nan_without_a_grad_norm_blow_up_is_a_nan_not_a_divergence():
    curve = generate("divergence_nan", 1, 100, noise="t6")
    calm = curve.metrics.with_columns(value=pl.when((pl.col("metric") == "grad_norm") & (pl.col("step") >= 23300))
                                      .then(0.5).otherwise("value"))
    found = detect(RunFrames(calm, curve.events))
    assert [a.step for a in found if a.kind == Kind.NAN] == [23500]
    assert not [a for a in found if a.kind == Kind.DIVERGENCE]


def test_a_loss_finite_again_after_its_nan_has_not_diverged():
    curve = generate("divergence_nan", 1, 100, noise="t6")
    back = pl.concat([curve.metrics, curve.metrics.filter((pl.col("metric") == "loss") & (pl.col("step") == 23400))
                      .with_columns(step=pl.lit(23800, dtype=pl.Int64))])
    assert not _found(curve.__class__(curve.name, curve.scenario, 100, back, curve.events), Kind.DIVERGENCE)
