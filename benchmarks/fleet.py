"""Benchmark: ``forensics index`` over a fleet of generated runs in mixed formats, cold and warm, on the local and
the Ray engine, with the driver's peak memory.

Writes the fleet once under benchmarks/_data/fleet-<runs>x<steps>/<project>/<run>/: a quarter each of Megatron text
logs (one line per 10 steps; every fifth diverges), W&B history CSVs, nanoGPT stdout and Hugging Face
``trainer_state.json`` (one entry per 10 steps). Then, each in a fresh process with a fresh cache and index:
``index`` cold (everything analysed) and warm (nothing changed: every run's files are hashed, none is read), on the
local engine (``--jobs`` processes) and on a local Ray instance with as many CPUs; cold runs on a quarter and on all
of the fleet, to show whether the driver's memory grows with the number of runs. Targets: warm at least 20x faster
than cold; Ray within 1.3x of local; driver memory flat in the number of runs.

    python benchmarks/fleet.py [--runs 1000] [--steps 20000] [--jobs 2] [--engines local,ray]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FORMATS = ("megatron", "wandb", "nanogpt", "trainer")

CODE = r"""
import json, sys, time
root, out, cache, engine, jobs = sys.argv[1:6]
from forensics.fleet import index
if engine == "ray":
    import ray
    ray.init(num_cpus=int(jobs), include_dashboard=False, logging_level="ERROR", log_to_driver=False)
t = time.perf_counter()
done = index(root, out, engine=engine, jobs=int(jobs), cache=cache)
elapsed = time.perf_counter() - t
# the driver's own peak (VmHWM): ru_maxrss keeps the benchmark's across the exec (313 MB after it held 300 MB)
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) * 1024
print(json.dumps([elapsed, peak, done.summary()]))
"""


def generate(root: Path, runs: int, steps: int) -> None:
    sys.path[:0] = [str(ROOT), str(HERE)]
    from analyze_wandb import history_csv
    from read_formats import nanogpt, trainer_state

    from forensics.evaluation.experiments import BASE_ARGS, Trajectory, write_run

    for i in range(runs):
        kind = FORMATS[i % len(FORMATS)]
        run = root / f"project-{i // 100:02d}" / f"{kind}-{i:04d}"
        run.mkdir(parents=True, exist_ok=True)
        if kind == "megatron":
            path = Trajectory(lr=1e-4 * (1 + i % 5), break_step=int(steps * 0.7) if i % 5 == 4 else None)
            write_run(run, {**BASE_ARGS, "seed": 1000 + i}, path, steps, seed=i, log_interval=10)
        elif kind == "wandb":
            history_csv(run / "history.csv", steps, seed=i)
        elif kind == "nanogpt":
            nanogpt(run / "train.log", steps)
        else:
            trainer_state(run / "trainer_state.json", steps // 10)


def timed(root: Path, out: Path, cache: Path, engine: str, jobs: int) -> tuple[float, int, str]:
    done = subprocess.run([sys.executable, "-c", CODE, str(root), str(out), str(cache), engine, str(jobs)],
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    elapsed, rss, summary = json.loads(done.stdout.strip().splitlines()[-1])
    return elapsed, rss, summary


def subset(data: Path, runs: int, into: Path) -> Path:
    """A fleet of the first ``runs`` runs, as symbolic links to their directories."""
    for run in sorted(data.glob("*/*"))[:runs]:
        (into / run.parent.name).mkdir(parents=True, exist_ok=True)
        (into / run.parent.name / run.name).symlink_to(run, target_is_directory=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--jobs", type=int, default=2, help="local worker processes and Ray CPUs")
    parser.add_argument("--engines", default="local,ray")
    args = parser.parse_args()
    data = HERE / "_data" / f"fleet-{args.runs}x{args.steps}"
    if not (data / ".done").exists():
        shutil.rmtree(data, ignore_errors=True)
        generate(data, args.runs, args.steps)
        (data / ".done").touch()
    size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    print(f"{args.runs} runs x {args.steps:,} steps ({', '.join(FORMATS)}): {size / 1e9:.2f} GB")
    print("| engine | runs | pass | seconds | ms per run | warm faster by | driver peak RSS | summary |")
    print("|--------|-----:|------|--------:|-----------:|---------------:|----------------:|---------|")
    sizes = sorted({max(1, args.runs // 4), args.runs})
    for engine in args.engines.split(","):
        for n in sizes:
            work = Path(tempfile.mkdtemp(prefix="forensics-bench-fleet-"))
            try:
                root = data if n == args.runs else subset(data, n, work / "fleet")
                cold = timed(root, work / "index", work / "cache", engine, args.jobs)
                warm = timed(root, work / "index", work / "cache", engine, args.jobs)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            for name, (seconds, rss, summary) in (("cold", cold), ("warm", warm)):
                faster = f"{cold[0] / warm[0]:.1f}x" if name == "warm" else ""
                print(f"| {engine} | {n} | {name} | {seconds:.2f} | {seconds / n * 1000:.1f} | {faster} "
                      f"| {rss / 1e6:.0f} MB | {summary} |", flush=True)


if __name__ == "__main__":
    main()
