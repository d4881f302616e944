"""Detectors: each takes a run's frames and returns anomalies (see :mod:`forensics.detectors.base`)."""

from forensics.detectors.base import Detector, RunFrames
from forensics.detectors.divergence import DivergenceDetector
from forensics.detectors.frozen_loss import FrozenLossDetector
from forensics.detectors.hang import HangDetector
from forensics.detectors.layer_grads import LayerGradDetector
from forensics.detectors.logits import LogitGrowthDetector
from forensics.detectors.loss_scale import LossScaleCollapseDetector
from forensics.detectors.nan import NanDetector
from forensics.detectors.plateau import LossPlateauDetector
from forensics.detectors.regimes import RegimeShiftDetector
from forensics.detectors.skipped import SkippedIterationsDetector
from forensics.detectors.spikes import SpikeDetector
from forensics.detectors.zero_grad_norm import ZeroGradNormDetector
from forensics.detectors.zero_loss import ZeroLossDetector
from parsers.schema import MAX_SUFFIX

DEFAULT_DETECTORS: tuple[Detector, ...] = (
    NanDetector(),
    ZeroLossDetector(),
    ZeroGradNormDetector(),
    FrozenLossDetector(),
    SpikeDetector(metric="loss"),
    SpikeDetector(metric="grad_norm"),
    SpikeDetector(metric="loss", series="loss" + MAX_SUFFIX),
    SpikeDetector(metric="grad_norm", series="grad_norm" + MAX_SUFFIX),
    DivergenceDetector(),
    LossScaleCollapseDetector(),
    SkippedIterationsDetector(),
    HangDetector(),
    RegimeShiftDetector(metric="grad_norm"),
    RegimeShiftDetector(metric="iteration_time_ms"),
    RegimeShiftDetector(metric="loss_scale"),
    LayerGradDetector(),
    LogitGrowthDetector(),
)
# opt-in: on labelled curves it finds ~83% of plateaus but flags ~1% of other curves (see benchmarks/detection.py)
EXPERIMENTAL_DETECTORS: tuple[Detector, ...] = (LossPlateauDetector(),)

__all__ = [
    "DEFAULT_DETECTORS",
    "EXPERIMENTAL_DETECTORS",
    "Detector",
    "DivergenceDetector",
    "FrozenLossDetector",
    "HangDetector",
    "LayerGradDetector",
    "LogitGrowthDetector",
    "LossPlateauDetector",
    "LossScaleCollapseDetector",
    "NanDetector",
    "RegimeShiftDetector",
    "RunFrames",
    "SkippedIterationsDetector",
    "SpikeDetector",
    "ZeroGradNormDetector",
    "ZeroLossDetector",
]
