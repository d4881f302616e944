"""Benchmark: ``parsers.load_run`` on a 100k-step ``.wandb`` log against the per-record reader it had before.

Writes one ``run-bench.wandb`` under benchmarks/_data/ (once) laid out as the 0.31 client writes it: per step a
summary record of every key logged, every tenth step a runtime summary, and a history record whose items are
nested keys (``loss``, ``grad_norm``, ``lr``, ``_step``, ``_timestamp``, ``_runtime``, ``eval.ppl``,
``train/tokens``, an occasional NaN, ``Infinity`` or string value). Times, each in a fresh process (best of
``--repeat``): ``load_run`` with the per-record reader kept below (``baseline_read``: every chunk framed in a Python
loop, every record decoded by the protobuf runtime) and with today's reader, plus the reader alone both ways.
Both sides must give the same metric rows.

    python benchmarks/read_wandb.py [--steps 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def generate(path: Path, steps: int) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.wandb_writer import frame, history, run_record, summary

    payloads = [run_record(run_id="bench01", project="bench", display_name="bench-run")]
    for step in range(steps):
        loss = 2.0 + 8.0 * (step + 10) ** -0.5 + 0.01 * math.sin(step)
        items: dict[Any, str] = {
            ("_runtime",): repr(0.25 * step), ("_step",): str(step), ("loss",): repr(loss),
            ("grad_norm",): repr(1.0 + 0.05 * math.cos(step)), ("lr",): repr(3e-4 * min(1.0, (step + 1) / 500)),
            ("train/tokens",): str(4096 * step), ("eval", "ppl"): repr(math.exp(min(loss, 20))),
            ("_timestamp",): repr(1.7e9 + 0.25 * step),
        }
        if step % 997 == 3:
            items[("loss",)] = "NaN"
        if step % 1999 == 5:
            items[("grad_norm",)] = "Infinity"
        if step % 500 == 0:
            items[("eval", "note")] = '"periodic"'
        if step % 10 == 0:
            payloads.append(summary({("_wandb", "runtime"): str(step // 4), "_runtime": str(step // 4)}))
        payloads.append(summary(items))
        payloads.append(history(items, step=step or None))
    path.write_bytes(frame(payloads))


# --- the per-record reader as it was before the bulk decoder (parsers/wandb_log.py at 873427e) ---------------------
def baseline_chunks(buf: bytes, shown: str, warnings: list[str]) -> list[bytes]:
    records: list[bytes] = []
    pos, end, pending = 7, len(buf), None
    crc32 = zlib.crc32
    type_crc = {t: zlib.crc32(bytes([t])) for t in (1, 2, 3, 4)}
    while True:
        room = 32768 - pos % 32768
        if room < 7:
            pos += room
            continue
        if pos + 7 > end:
            if pos < end and buf[pos:end].strip(b"\x00"):
                warnings.append(f"{shown}: partial last record at byte {pos} (the run was cut off or still writing)")
            break
        crc, length, kind = int.from_bytes(buf[pos:pos + 4], "little"), int.from_bytes(buf[pos + 4:pos + 6],
                                                                                     "little"), buf[pos + 6]
        if crc == length == kind == 0:
            pos += room
            continue
        start = pos + 7
        if length > room - 7 or kind not in type_crc:
            warnings.append(f"{shown}: bad chunk header at byte {pos}; skipped to the next 32 KiB block")
            pos, pending = pos + room, None
            continue
        if start + length > end:
            warnings.append(f"{shown}: partial last record at byte {pos} (the run was cut off or still writing)")
            break
        data = buf[start:start + length]
        pos = start + length
        if crc32(data, type_crc[kind]) != crc:
            warnings.append(f"{shown}: bad CRC at byte {start - 7}; skipped the rest of that 32 KiB block")
            pos, pending = pos + (32768 - pos % 32768) % 32768, None
            continue
        if kind == 1:
            records.append(data)
        elif kind == 2:
            pending = [data]
        elif pending is not None:
            pending.append(data)
            if kind == 4:
                records.append(b"".join(pending))
                pending = None
    if pending is not None and not any("partial last record" in w for w in warnings):
        warnings.append(f"{shown}: a record split over blocks ends without its last part")
    return records


def baseline_read(path: str | Path, shown: str) -> Any:
    import polars as pl
    from google.protobuf.message import DecodeError

    from parsers import wandb_log as w
    from parsers.textfile import InputError, read_all
    from parsers.wandb_proto import Record

    def key(item: Any) -> str:
        return item.key or ".".join(item.nested_key)

    def fold(items: Any, into: dict[str, Any], remove: Any = ()) -> None:
        for item in items:
            into[key(item)] = item.value_json
        for item in remove:
            into.pop(key(item), None)

    buf = read_all(Path(path))
    if not w.is_wandb_log(buf):
        raise InputError(f"{shown}: not a W&B run log (no ':W&B' header)")
    warnings: list[str] = []
    keys: list[str] = []
    values: list[str] = []
    rows: list[int] = []
    row_steps: list[str | None] = []
    row_nums: list[int | None] = []
    row_stamps: list[str | None] = []
    log = w.WandbLog(history=pl.DataFrame())
    record = Record()
    for payload in baseline_chunks(buf, shown, warnings):
        try:
            record.ParseFromString(payload)
        except DecodeError:
            warnings.append(f"{shown}: a record that is not a valid W&B protobuf was skipped")
            continue
        if record.HasField("history"):
            items = {key(i): i.value_json for i in record.history.item}
            n = len(row_steps)
            row_steps.append(items.pop("_step", None))
            row_nums.append(record.history.step.num if record.history.HasField("step") else None)
            row_stamps.append(items.pop("_timestamp", None))
            items.pop("_runtime", None)
            keys.extend(items)
            values.extend(items.values())
            rows.extend([n] * len(items))
        elif record.HasField("summary"):
            fold(record.summary.update, log.summary, record.summary.remove)
        elif record.HasField("config"):
            fold(record.config.update, log.config, record.config.remove)
            w._note_config(log, len(row_steps))
        elif record.HasField("run"):
            run = record.run
            log.run_id, log.display_name, log.project = run.run_id, run.display_name, run.project
            log.resumed, log.starting_step = run.resumed, run.starting_step
            if run.HasField("start_time"):
                log.start_time = run.start_time.seconds + run.start_time.nanos / 1e9
            fold(run.config.update, log.config)
            fold(run.summary.update, log.summary)
            w._note_config(log, len(row_steps))
        elif record.HasField("exit"):
            log.exit_code, log.runtime = record.exit.exit_code, record.exit.runtime or None
        elif record.HasField("metric") and record.metric.step_metric:
            log.step_metrics[record.metric.name or record.metric.glob_name] = record.metric.step_metric
        elif record.HasField("output_raw"):
            log.console.append(record.output_raw.line)
    log.config = {k: w._json(v) for k, v in log.config.items() if k != "_wandb"}
    log.summary = {k: w._json(v) for k, v in log.summary.items() if k != "_wandb"}
    row_meta = w._row_steps(row_steps, row_nums, row_stamps, shown, warnings)
    log.history = (
        pl.DataFrame({"key": keys, "value_json": values, "row": rows},
                     schema={"key": pl.String, "value_json": pl.String, "row": pl.Int64})
        .join(row_meta, on="row", how="inner", maintain_order="left")
        .select("step", "key", "value_json", "wall_time", "row")
    )
    log.warnings = warnings
    return log


# --- the timed programs (fresh processes) ----------------------------------------------------------------------------
PROGRAM = r'''
import resource, sys, time
sys.path.insert(0, sys.argv[3])
which, path = sys.argv[1], sys.argv[2]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
import polars as pl
import parsers
from parsers import wandb_run
if which.startswith("baseline"):
    import read_wandb
    wandb_run.read_wandb_log = read_wandb.baseline_read
t = time.perf_counter()
if which.endswith("reader"):
    n = wandb_run.read_wandb_log(path, "bench").history.height
else:
    n = parsers.load_run(path).metrics.height
elapsed = time.perf_counter() - t
peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024
print(elapsed, peak, n)
'''


def timed(which: str, path: Path) -> tuple[float, float, int]:
    out = subprocess.run([sys.executable, "-c", PROGRAM, which, str(path), str(HERE)], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def same_frames(path: Path) -> bool:
    """Whether both readers give the same metrics, events, configs and warnings (in this process)."""
    sys.path.insert(0, str(ROOT))
    import parsers
    from parsers import wandb_run

    new = parsers.load_run(path)
    saved, wandb_run.read_wandb_log = wandb_run.read_wandb_log, baseline_read
    try:
        old = parsers.load_run(path)
    finally:
        wandb_run.read_wandb_log = saved
    return (new.metrics.equals(old.metrics) and new.events.equals(old.events) and new.configs.equals(old.configs)
            and new.warnings == old.warnings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data_dir = HERE / "_data"
    data_dir.mkdir(exist_ok=True)
    path = data_dir / f"run-bench{args.steps}.wandb"
    if not path.exists():
        generate(path, args.steps)
    size = path.stat().st_size
    results = {}
    for which in ("baseline load_run", "load_run", "baseline reader", "reader"):
        runs = [timed(which, path) for _ in range(args.repeat)]
        results[which] = (min(r[0] for r in runs), max(r[1] for r in runs), runs[0][2])
    print(f"file: {path.name}, {size / 1e6:.1f} MB, {args.steps:,} steps")
    print("| what                          | seconds | speed-up | peak RSS growth | x file size | rows      |")
    print("|-------------------------------|---------|----------|-----------------|-------------|-----------|")
    for which, (secs, peak, rows) in results.items():
        name = ("per-record reader: " if which.startswith("baseline") else "bulk reader: ") + which.split()[-1]
        base = results["baseline " + which.split()[-1]][0]
        print(f"| {name:<29} | {secs:7.2f} | {base / secs:7.1f}x | {peak / 1e6:12.0f} MB | {peak / size:10.2f}x "
              f"| {rows:9d} |")
    print(f"same rows both ways: {results['load_run'][2] == results['baseline load_run'][2]}; "
          f"same frames and warnings: {same_frames(path)}")
    print(json.dumps({k: v[0] for k, v in results.items()}))


if __name__ == "__main__":
    main()
