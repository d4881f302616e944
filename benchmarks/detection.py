"""Detectors against labelled curves: precision and recall per scenario kind and log interval.

Run by hand: ``python benchmarks/detection.py [--seeds 30]``. Curves come from
:mod:`forensics.evaluation.datasets` (seeded); a detection counts when it lands within the margin of a true event
(5 steps or two log intervals; wider for block-level regime shifts). Targets (issue 5): loss-spike precision and
recall >= 0.95, every divergence found, zero anomalies on clean curves.
"""

from __future__ import annotations

import argparse
import statistics
import time

from forensics.detectors import DEFAULT_DETECTORS, EXPERIMENTAL_DETECTORS
from forensics.evaluation import KINDS, SCENARIOS, evaluate


def cell(found: int, truths: int) -> str:
    return f"{found}/{truths}" if truths else "-"


def ratio(x: float, n: int) -> str:
    return f"{x:.3f}" if n else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    args = parser.parse_args()
    start = time.perf_counter()
    rows = evaluate(SCENARIOS, seeds=range(args.seeds), intervals=(1, 10))
    took = time.perf_counter() - start
    print(f"{args.seeds} curves per row; detections within max(5 steps, 2 log intervals) of the truth")
    print("| scenario | k | loss spikes found | loss-spike P | loss-spike R | grad-norm spikes found | grad P "
          "| divergences | NaN | loss-scale collapses | regime shifts | anomalies on clean | lead error (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    totals = {kind: [0, 0, 0, 0] for kind in KINDS}
    for r in rows:
        sc = r.scores
        for kind in KINDS:
            t = totals[kind]
            t[0] += sc[kind].truths
            t[1] += sc[kind].found
            t[2] += sc[kind].detections
            t[3] += sc[kind].false
        lead = f"{statistics.median(r.lead_errors):.0f} steps (n={len(r.lead_errors)})" if r.lead_errors else "-"
        print(
            f"| {r.scenario} | {r.log_interval} | {cell(sc['loss_spike'].found, sc['loss_spike'].truths)} "
            f"| {ratio(sc['loss_spike'].precision, sc['loss_spike'].detections)} "
            f"| {ratio(sc['loss_spike'].recall, sc['loss_spike'].truths)} "
            f"| {cell(sc['grad_norm_spike'].found, sc['grad_norm_spike'].truths)} "
            f"| {ratio(sc['grad_norm_spike'].precision, sc['grad_norm_spike'].detections)} "
            f"| {cell(sc['divergence'].found, sc['divergence'].truths)} | {cell(sc['nan'].found, sc['nan'].truths)} "
            f"| {cell(sc['loss_scale_collapse'].found, sc['loss_scale_collapse'].truths)} "
            f"| {cell(sc['changepoint'].found, sc['changepoint'].truths)} "
            f"| {r.anomalies_on_clean if r.scenario == 'clean' else '-'} | {lead} |"
        )
    print()
    print("| all scenarios | truths | found | recall | detections | false | precision |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind, (truths, found, detections, false) in totals.items():
        recall = found / truths if truths else 1.0
        precision = (detections - false) / detections if detections else 1.0
        print(f"| {kind} | {truths} | {found} | {recall:.3f} | {detections} | {false} | {precision:.3f} |")
    print(f"\n{len(rows) * args.seeds} curves generated, analysed and scored in {took:.0f} s")
    print("\nexperimental, opt-in (not in the default detectors): LossPlateauDetector")
    print("| scenario | k | plateaus found | plateau detections that are wrong |")
    print("|---|---:|---:|---:|")
    plateau = (*DEFAULT_DETECTORS, *EXPERIMENTAL_DETECTORS)
    for r in evaluate(("plateau", *SCENARIOS), seeds=range(args.seeds), intervals=(1, 10), detectors=plateau):
        got = r.scores["loss_plateau"]
        print(f"| {r.scenario} | {r.log_interval} | {cell(got.found, got.truths)} | {got.false} |")


if __name__ == "__main__":
    main()
