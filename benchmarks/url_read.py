"""Benchmark: reading one large Megatron log (about 40 MB) from a local disk and from a real S3 API, where it is
staged (copied in 4 MiB blocks into a private temp dir, :func:`parsers.remote.staged`) and then parsed.

The S3 API is moto's server (``moto[server]``, the test extra) in a process of its own on a free port, reached
through s3fs at ``$AWS_ENDPOINT_URL`` with dummy credentials, so the numbers are the client's alone: each read runs
``parsers.load_runs`` in a fresh process and reports its wall time and peak RSS (and the staging alone, its
imports included). Local HTTP has no network latency
and far more bandwidth than a cloud bucket: the S3 column is the staging's own cost, a floor.

    python benchmarks/url_read.py [--steps 140000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

READ = """
import sys, time
from parsers import load_runs, remote
t = time.perf_counter()
if sys.argv[2] == "stage":  # the copy alone (its imports, listing, head read and 4 MiB blocks), not parsed
    with remote.staged(sys.argv[1]) as stage:
        rows = sum(1 for _ in stage.root.iterdir())
else:
    rows = load_runs(sys.argv[1])[0].metrics.height
# this process's own peak (VmHWM): ru_maxrss would keep the benchmark's, which forked it, across the exec
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) * 1024
print(time.perf_counter() - t, peak, rows)
"""

SERVER = """
import logging, sys, time
from moto.server import ThreadedMotoServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]), verbose=False)
server.start()
print("ready", flush=True)
sys.stdin.read()  # until the benchmark closes it
server.stop()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read(path: str, env: dict[str, str], what: str) -> tuple[float, float, int]:
    out = subprocess.run([sys.executable, "-c", READ, path, what], env=env, capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=140_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from forensics.evaluation.experiments import BASE_ARGS, Trajectory, write_run

    run = HERE / "_data" / f"url-read-{args.steps}" / "run"
    if not (run / "train.log").exists():
        write_run(run, BASE_ARGS, Trajectory(lr=2e-4), args.steps, seed=0, log_interval=1)
    size = sum(p.stat().st_size for p in run.iterdir())
    port = free_port()
    env = {**os.environ, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        os.environ.update(env)
        import s3fs

        s3 = s3fs.S3FileSystem()
        s3.mkdir("bench")
        s3.put(str(run), "bench/", recursive=True)
        print(f"one Megatron log of {args.steps:,} steps ({size / 1e6:.1f} MB); best of {args.repeats}, each read in a "
              f"fresh process\n")
        print("| read from | wall s | peak RSS | metric rows (files staged) |")
        print("|---|---:|---:|---:|")
        for label, path, what in (("local disk: load_runs", str(run), "read"),
                                  ("S3 (moto): load_runs, staged", "s3://bench/run", "read"),
                                  ("S3 (moto): staging alone", "s3://bench/run", "stage")):
            times = [read(path, env, what) for _ in range(args.repeats)]
            best = min(times)
            print(f"| {label} | {best[0]:.2f} | {max(t[1] for t in times) / 1e6:.0f} MB | {best[2]:,} |", flush=True)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
