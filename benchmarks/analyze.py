"""Benchmark: the analysis and the chronicle on a 300,000-iteration Megatron log, stage by stage.

Uses the logs ``parse_megatron.py`` writes under benchmarks/_data/ (made here if missing): one clean, one in which
every fifth stretch of 1,000 iterations went NaN. Each log is timed in a fresh process: ``parsers.load_run``,
``forensics.analysis`` (attempts, timeline, gaps, coverage, detectors, causes), and the markdown and JSON renderers;
best of ``--repeat`` runs of each stage, peak RSS of the process. ``--tree DIR`` times another checkout (for a
before/after table).

    python benchmarks/analyze.py [--repeat 3] [--tree /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from parse_megatron import generate  # noqa: E402

STAGES = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import forensics, parsers, reports
repeat = int(sys.argv[3])
def best(call):
    times = []
    for _ in range(repeat):
        t = time.perf_counter(); out = call(); times.append(time.perf_counter() - t)
    return min(times), out
parse_s, run = best(lambda: parsers.load_run(sys.argv[2]))
analyze_s, findings = best(lambda: forensics.analyze(run))
markdown_s, _ = best(lambda: reports.render(findings, "markdown"))
json_s, _ = best(lambda: reports.render(findings, "json"))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps([parse_s, analyze_s, markdown_s, json_s, rss, run.metrics.height]))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", type=Path, default=HERE.parent, help="the checkout to time (default: this one)")
    args = parser.parse_args()
    data_dir = HERE / "_data"
    data_dir.mkdir(exist_ok=True)
    logs = {"clean": data_dir / f"megatron_{args.iterations}.log",
            "NaN stretches": data_dir / f"megatron_{args.iterations}_nan.log"}
    for kind, path in logs.items():
        if not path.exists():
            generate(path, args.iterations, nan_stretches=kind != "clean")
    print(f"{args.tree.resolve()}: {args.iterations:,} iteration lines per log; best of {args.repeat}")
    print("| log | points | parse s | analyze s | markdown s | json s | analyze+markdown s | peak RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind, path in logs.items():
        out = subprocess.run([sys.executable, "-c", STAGES, str(args.tree.resolve()), str(path), str(args.repeat)],
                             capture_output=True, text=True, check=True, cwd=args.tree).stdout
        parse_s, analyze_s, markdown_s, json_s, rss, points = json.loads(out.splitlines()[-1])
        print(f"| {kind} ({path.stat().st_size / 1e6:.0f} MB) | {points:,} | {parse_s:.2f} | {analyze_s:.2f} | "
              f"{markdown_s:.2f} | {json_s:.2f} | {analyze_s + markdown_s:.2f} | {rss / 1e6:.0f} MB |")


if __name__ == "__main__":
    main()
