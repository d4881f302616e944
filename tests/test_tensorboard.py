"""TensorBoard event files: every record kept, restarts annotated, damage survived (real and generated files)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import polars as pl
import pytest
import tb_writer as tb
from conftest import REAL

from parsers import InputError, load_run
from parsers.metric_names import canonical
from parsers.tfrecord import walk

TB = REAL.parent / "tensorboard"
DUP = TB / "janosh_tensorboard-reducer" / "duplicate_steps"
LAX = TB / "janosh_tensorboard-reducer" / "lax"
TF2 = TB / "orktes_go-tensorboard" / "tfevents"


def test_duplicate_steps_file_keeps_every_point_and_finds_the_rollback():
    run = load_run(DUP)
    assert run.metrics.height == 420  # 210 per tag: nothing sampled, nothing purged
    foo = run.metrics.filter(metric="dup_steps/foo")
    assert foo["step"].head(3).to_list() == [0, 1, 2]
    assert foo["value"][0] == pytest.approx(1.49625659, rel=1e-7)
    assert foo.group_by("attempt").agg(lo=pl.col("step").min(), hi=pl.col("step").max()).sort("attempt").rows() == [
        (1, 0, 99), (2, 90, 199),
    ]
    # steps 90-99 logged again after the rollback are the second attempt's own, not duplicates (within an attempt)
    kinds = run.events["kind"].value_counts().sort("kind").rows()
    assert ("step_regression", 1) in kinds and not any(kind == "duplicate_step" for kind, _ in kinds)
    assert run.sources[0].format == "tensorboard"


def test_plain_torch_file_has_all_110_steps_of_each_tag():
    run = load_run(LAX)
    counts = run.metrics.group_by("metric").len().sort("metric").rows()
    assert counts == [("lax/bar_1", 110), ("lax/bar_2", 110), ("lax/foo", 110)]
    assert run.attempts == [1]


def test_tf2_tensor_scalars_are_read():
    run = load_run(TF2)
    rows = run.metrics.filter(metric="my_metric")
    assert rows.height == 100
    assert rows.filter(step=1)["value"].item() == 0.5  # tensor_content 00 00 00 3f


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("lm loss", ("loss", "step")),
        ("lm loss vs samples", ("loss", "samples")),
        ("lm-loss-training/lm loss vs tokens", ("loss", "tokens")),
        ("lm_loss", ("loss", "step")),
        ("grad-norm/grad-norm", ("grad_norm", "step")),
        ("learning-rate", ("lr", "step")),
        ("train/lr", ("lr", "step")),
        ("loss-scale", ("loss_scale", "step")),
        ("lm-loss-validation/lm loss validation", ("val_loss", "step")),
        ("val/loss", ("val_loss", "step")),
        ("custom/thing", ("custom/thing", "step")),
    ],
)
def test_tag_names_map_to_canonical_metrics(tag, expected):
    assert canonical(tag) == expected


def megatron_style(path: Path) -> Path:
    records = [tb.version()]
    records += [tb.text("seed", "42", 0), tb.text("hidden_size", "1024", 0)]
    for step in range(1, 51):
        loss = 8.0 - step * 0.01 + (5.0 if step == 30 else 0.0)
        records += [tb.scalar("lm loss", loss, step), tb.scalar("lm loss vs samples", loss, step * 32)]
        records += [tb.scalar("grad-norm", 1.0, step), tb.scalar("iteration-time", 0.5, step)]
    # the writer restarts from the checkpoint at step 40 with a new seed (torch purge_step)
    records += [tb.session_start(41), tb.text("seed", "43", 40)]
    for step in range(41, 61):
        records += [tb.scalar("lm loss", 7.5 - step * 0.001, step), tb.scalar("grad-norm", 1.0, step)]
    return tb.write(path / "events.out.tfevents.1700000000.host", *records)


def test_megatron_style_file_args_twins_units_and_purge_step(tmp_path):
    run = load_run(megatron_style(tmp_path / "run"))
    loss = run.metrics.filter(metric="loss")
    assert loss.height == 70  # the " vs samples" twins are not extra loss points
    assert loss.filter(step=30, attempt=1)["value"].item() == pytest.approx(12.7, rel=1e-6)
    assert run.metrics.filter(metric="consumed_samples", step=10)["value"].item() == 320
    assert run.metrics.filter(metric="iteration_time_ms", step=1)["value"].item() == 500.0
    assert run.attempts == [1, 2]
    seeds = run.configs.filter(key="seed").sort("attempt")["typed"].to_list()
    assert seeds == ["42", "43"]
    assert "session_start" in run.events["kind"].to_list()


def test_tensorboard_and_text_log_merge_without_counting_a_point_twice(tmp_path):
    run_dir = tmp_path / "run"
    megatron_style(run_dir / "tb")
    lines = [
        f" iteration {i:8d}/      60 | consumed samples: {i * 32:8d} | lm loss: {8.0 - i * 0.01:.6E} |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        for i in range(10, 51, 10)
    ]
    (run_dir / "train.log").write_text("".join(lines))
    run = load_run(run_dir)
    assert {s.format for s in run.sources} == {"megatron", "tensorboard"}
    loss = run.metrics.filter(metric="loss")
    assert loss.filter(step=10).height == 1  # from TensorBoard only, not again from the text log
    assert loss.height == 70 and loss.filter(attempt=1).height == 50
    assert run.configs.filter(key="train_iters")["typed"].to_list() == ["60"]  # the text log's config


def test_flipped_byte_skips_one_record_and_keeps_the_rest(tmp_path):
    path = shutil.copy(LAX / "run_1" / "events.out.tfevents.1622543341.janoshs-mbp.lan.86862.3", tmp_path / "a.tfevents")
    data = bytearray(Path(path).read_bytes())
    payload = int(walk(bytes(data)).starts[50])
    data[payload + 3] ^= 0xFF  # inside the wall time of record 50
    Path(path).write_bytes(bytes(data))
    run = load_run(tmp_path)
    assert run.metrics.height == 329
    assert any(f"bad CRC in the record at byte {payload - 12}; record skipped" in w for w in run.warnings)


def test_cut_tail_is_reported_as_a_partial_last_record(tmp_path):
    src = (LAX / "run_1" / "events.out.tfevents.1622543341.janoshs-mbp.lan.86862.3").read_bytes()
    (tmp_path / "events.out.tfevents.1.cut").write_bytes(src[:-20])
    run = load_run(tmp_path)
    assert run.metrics.height == 329
    assert any("partial last record at byte" in w for w in run.warnings)


def test_bad_length_header_resynchronises_on_the_next_record(tmp_path):
    good = [tb.version()] + [tb.scalar("loss", 1.0 + i, i) for i in range(5)]
    damaged = bytearray(good[2])
    damaged[0] ^= 0x40  # the length of record 2 is now wrong (and its header CRC fails)
    tb.write(tmp_path / "events.out.tfevents.2.x", *good[:2], bytes(damaged), *good[3:])
    run = load_run(tmp_path)
    assert run.metrics.filter(metric="loss")["step"].to_list() == [0, 2, 3, 4]
    assert any("bad record header at byte" in w for w in run.warnings)


def test_resync_over_garbage_and_zeros_finds_the_next_record(tmp_path):
    """Issue 18: resynchronising was a Python loop over every byte (12 s for 50 MB of garbage); now it is vectorised
    (``benchmarks/resync_tfrecord.py``). Garbage with plausible length fields, a zero-filled stretch and an
    empty record must all be told apart from the next real header."""
    import random

    rng = random.Random(7)
    garbage = bytes(rng.randrange(256) for _ in range(70_000)) + b"\x05" + bytes(7) + bytes(5000)
    good = [tb.version()] + [tb.scalar("loss", 1.0 + i, i) for i in range(4)]
    tb.write(tmp_path / "events.out.tfevents.4.x", *good[:2], garbage, *good[2:], b"\x01" * 3000)
    run = load_run(tmp_path)
    assert run.metrics.filter(metric="loss")["step"].to_list() == [0, 1, 2, 3]
    header = len(good[0]) + len(good[1])
    end = header + len(garbage) + sum(map(len, good[2:]))
    assert [w.split(": ", 1)[1] for w in run.warnings] == [
        f"bad record header at byte {header}; skipped {len(garbage)} bytes to the next valid header",
        f"bad record header at byte {end}; no valid header in the 3000 bytes left"]


def test_not_an_event_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "events.out.tfevents.3.x"
    bad.write_bytes(b"this is not a tfrecord file at all\n")
    with pytest.raises(InputError, match=r"events\.out\.tfevents\.3\.x: not a TensorBoard event file"):
        load_run(bad)


def test_nan_and_inf_scalars_are_kept(tmp_path):
    tb.write(tmp_path / "events.out.tfevents.4.x", tb.version(), tb.scalar("loss", float("nan"), 1),
             tb.scalar("loss", float("inf"), 2), tb.tensor_scalar("tf2", 2.5, 0), tb.tensor_scalar("tf2", 3.5, 1))
    run = load_run(tmp_path)
    values = run.metrics.filter(metric="loss")["value"].to_list()
    assert math.isnan(values[0]) and values[1] == math.inf
    assert run.metrics.filter(metric="tf2")["value"].to_list() == [2.5, 3.5]


def test_a_step_that_goes_back_more_than_once_is_one_restart_each(tmp_path: Path) -> None:
    """loss at steps 3, 2, 1: polars' pl.format panicked on the filtered regressions ("i < self.len()")."""
    tb.write(tmp_path / "events.out.tfevents.1.host", tb.version(), tb.scalar("loss", 3.0, 3),
             tb.scalar("loss", 2.0, 2), tb.scalar("loss", 1.0, 1))
    run = load_run(tmp_path)
    assert run.metrics.select("attempt", "step", "value").rows() == [(1, 3, 3.0), (2, 2, 2.0), (3, 1, 1.0)]
    assert run.events.filter(kind="step_regression").select("step", "text").rows() == [
        (2, "loss went back from step 3 to 2"), (1, "loss went back from step 2 to 1")]


def test_damaged_tensor_scalars_and_unknown_session_statuses_are_skipped(tmp_path: Path) -> None:
    """Issue 18: a half_val above 65535, tensor bytes shorter than their dtype and an unknown SessionLog status
    raised (OverflowError, ValueError); the sound scalars around them are kept."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2

    def tensor(step: int, **fields: object) -> bytes:
        value = summary_pb2.Summary.Value(tag="loss", tensor=tensor_pb2.TensorProto(
            tensor_shape=tensor_shape_pb2.TensorShapeProto(), **fields))
        value.metadata.plugin_data.plugin_name = "scalars"
        return tb.record(event_pb2.Event(wall_time=1.0, step=step, summary=summary_pb2.Summary(value=[value])))

    tb.write(tmp_path / "events.out.tfevents.1.host", tb.version(), tb.scalar("loss", 1.5, 1),
             tensor(2, dtype=19, half_val=[70000]), tensor(3, dtype=2, tensor_content=b"\x00\x01"),
             tb.record(event_pb2.Event(wall_time=1.0, step=4, session_log=event_pb2.SessionLog(status=7))),
             tb.scalar("loss", 1.25, 5))
    run = load_run(tmp_path)
    assert run.metrics.filter(metric="loss").select("step", "value").rows() == [(1, 1.5), (5, 1.25)]
    assert run.events.filter(kind="session_status_unspecified")["text"].to_list() == ["SessionLog status 7 at step 4"]


def _read(path: Path, compiled: bool) -> tuple[object, ...]:
    from parsers.tensorboard import parse_event_file

    try:
        parsed = parse_event_file(path, "x", "x", compiled=compiled)
    except InputError as exc:
        return (str(exc),)
    return parsed.metrics, parsed.events, parsed.configs, parsed.warnings, parsed.n_attempts, parsed.tags


def _raw_scalar(tag: bytes, value: float, step: int) -> bytes:
    """A torch-layout scalar record with any tag bytes (tb_writer's protobuf refuses non-UTF-8 tags)."""
    import struct

    from protowire import varint

    from parsers.tfrecord import masked_crc

    value_ = b"\x0a" + varint(len(tag)) + tag + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + varint(len(value_)) + value_
    event = b"\x09" + struct.pack("<d", 1e9) + b"\x10" + varint(step) + b"\x2a" + varint(len(summary)) + summary
    header = struct.pack("<Q", len(event))
    return header + struct.pack("<I", masked_crc(header)) + event + struct.pack("<I", masked_crc(event))


def test_compiled_reader_gives_the_same_frames_as_the_numpy_one(tmp_path: Path) -> None:
    """Files of 32 MB or more are framed and decoded by numba loops (``tfrecord._sound_records``,
    ``tensorboard._scalar_records``), smaller ones in Python and NumPy: both must give the same frames, warnings
    included, on the real files, on the fast path's edge cases (steps of 10 varint bytes, tags of 0 to 20,000 bytes,
    tags that are not UTF-8) and on damaged mutants (bad CRCs, cut tails, garbage, huge lengths)."""
    import random

    from mutants import tfrecord_mutant

    real = sorted(p for p in TB.rglob("*tfevents*") if p.is_file())
    edge = {
        "steps": [tb.scalar("a", 1.0, s) for s in (0, 1, 2**63 - 1, -(2**63), -1, 2**62)],
        "tags": [tb.scalar("t" * n, float(n), n) for n in (0, 1, 7, 8, 9, 16, 127, 128, 300, 20_000)],
        "utf8": [_raw_scalar(b"a\xff", 1.0, 1), _raw_scalar(b"a\xfe", 2.0, 2), _raw_scalar(b"a\xff", 3.0, 3)],
        "mixed": [tb.scalar("loss", float("nan"), 1), tb.tensor_scalar("tf2", 2.5, 0), tb.text("args", "{}", 0),
                  tb.session_start(5), tb.scalar("loss", -0.0, 2), tb.scalar("loss", 1.0, 2)[:-3]],
    }
    paths = list(real)
    for name, records in edge.items():
        paths.append(tb.write(tmp_path / f"events.out.tfevents.{name}", tb.version(), *records))
    seeds = [p.read_bytes() for p in real]
    for k in range(40):
        rng = random.Random(k)
        paths.append(tmp_path / f"events.out.tfevents.mutant{k}")
        paths[-1].write_bytes(tfrecord_mutant(rng.choice(seeds), rng))
    for path in paths:
        numpy_, compiled = _read(path, False), _read(path, True)
        assert len(numpy_) == len(compiled), path.name
        for a, b in zip(numpy_, compiled, strict=True):
            assert a.equals(b) if isinstance(a, pl.DataFrame) else a == b, path.name


def test_hparams_are_read_in_one_order_every_time() -> None:
    """An hparams summary's values are a protobuf map, which has no order of its own: they were read in an order that
    changed from one process to the next, and so did the JSON report's config (arashmozhdeh/Protbert's Lightning
    event file). They are read sorted by key: the same in every process."""
    import json
    import subprocess
    import sys

    path = next((REAL.parent / "tensorboard" / "arashmozhdeh_Protbert" / "single").rglob("events.out.tfevents.*"))
    code = f"import json; from parsers import load_run; print(json.dumps(load_run({str(path)!r}).configs['key'].to_list()))"
    orders = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
              for _ in range(2)}
    # (its 100 hparams less max_steps -1, Lightning's "no limit": no planned length)
    assert len(orders) == 1 and len(json.loads(orders.pop())) == 99
