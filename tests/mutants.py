"""Mutated training logs for fuzzing (``tests/test_fuzz.py`` and ``benchmarks/fuzz.py``): pure functions of the
input bytes and a seeded ``random.Random``, so every mutant is reproducible from its seed.

* :data:`SEEDS`: one or more real fixtures per reader (the file that is mutated, and the folder copied around it
  so that name- and layout-dependent readers still take it);
* :data:`MUTATORS`: generic byte mutations (flips, cuts, garbage, long lines, encodings), line mutations
  (duplicate, shuffle, steps reordered, numbers replaced by extremes), JSON-tree mutations, and structure-aware
  ones that re-frame TFRecord records and ``.wandb`` log records with valid CRCs, so the readers get past the
  framing to the payloads;
* :func:`mutate` picks and applies mutators; :func:`materialize` writes a mutant as an input folder.

Nothing here imports wandb or uses polars (the fuzz campaign forks its workers from a process that must not
have started polars' thread pool); the framing is read with the parsers' own code (:func:`parsers.tfrecord.walk`,
the ``.wandb`` chunk reader) and TFRecord CRCs come from :func:`parsers.tfrecord.masked_crc`.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
import shutil
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2

from parsers.tfrecord import masked_crc, walk
from parsers.wandb_proto import Record
from parsers.wandb_wire import _BLOCK, _FIRST, _FULL, _LAST, _MIDDLE, MAGIC, _chunks

ROOT = Path(__file__).resolve().parent.parent
REAL = "tests/fixtures/real"

# ----------------------------------------------------------------------------------------------------- seeds ----


@dataclass(frozen=True)
class Seed:
    """A fixture to mutate: ``root`` (repo-relative file or folder) is copied for each mutant and its file
    ``target`` (relative to ``root``; empty when ``root`` is the file) replaced by the mutant. ``reader`` is the
    FORMAT that reads the unmutated target; ``kind`` chooses the structure-aware mutators; a target longer than
    ``max_bytes`` is first cut to a clean prefix (whole lines) to keep each run short."""

    reader: str
    root: str
    target: str = ""
    kind: str = "text"  # text | json | jsonl | csv | yaml | tfrecord | wandb
    max_bytes: int = 120_000
    generated: str = ""  # name of a generator in _GENERATED (the target is made, not copied)

    @property
    def name(self) -> str:
        return f"{self.reader}:{Path(self.root).name}/{self.target}".rstrip("/")


_JACK = f"{REAL}/wandb/jackokeefe11__nanoGPT/wandb/run-20240215_023758-f656tyfr"
_HF_OUT = f"{REAL}/hf_output_dir/zhl-2022_x-algorithm_qwen3_17b_text_effective"
_MLFLOW = f"{REAL}/mlflow/swahili_stt_keras"
_MLRUN = "mlruns/1/ed05f9cd599442fe9a0c9222184710b8"
_LIGHTNING = f"{REAL}/lightning/0Xero7_slm_training/lightning_logs"
_TB_LAX = f"{REAL}/tensorboard/janosh_tensorboard-reducer/lax/run_1"
_TB_V2 = f"{REAL}/tensorboard/orktes_go-tensorboard/tfevents"
_TB_SFT = (f"{REAL}/tensorboard/fyh2001_megatron-sft-recipes/run_mbs1_ga16_gbs64_offload/v0-20260427-025638/runs/"
           "Apr27_02-57-15_am4g1r39bm1")
_MEG = f"{REAL}/megatron/bigscience-workshop+bigscience__"

SEEDS: tuple[Seed, ...] = (
    Seed("megatron", f"{_MEG}experiments_gpt2-meg_meg_gpt2_perf_n16.out"),
    Seed("megatron", f"{_MEG}train_tr8-104B-wide_chronicles.md.log-snippets.txt"),
    Seed("megatron", f"{REAL}/megatron/issue__deepspeedai+DeepSpeed__issue3742__gptneox-format.txt"),
    Seed("megatron", "sample_logs/tr8-104B-sample", "main_log.txt", max_bytes=60_000),
    Seed("tensorboard", _TB_LAX, "events.out.tfevents.1622543341.janoshs-mbp.lan.86862.3", "tfrecord"),
    Seed("tensorboard", _TB_V2, "events.out.tfevents.1585499054.Jaakkos-Mac-mini.local.11684.5.v2", "tfrecord"),
    Seed("tensorboard", _TB_SFT, "events.out.tfevents.1777229835.am4g1r39bm1.182165.0", "tfrecord"),
    Seed("wandb", "tests/fixtures/wandb/v0.31.0/wandb/offline-run-20261129_180310-fxclean01", "run-fxclean01.wandb",
         "wandb"),
    Seed("wandb", "tests/fixtures/wandb/v0.16.6/wandb/offline-run-20261129_180304-fxclean01", "run-fxclean01.wandb",
         "wandb"),
    Seed("wandb", _JACK, "run-f656tyfr.wandb", "wandb"),
    Seed("wandb", _JACK, "files/config.yaml", "yaml"),
    Seed("wandb", _JACK, "files/wandb-summary.json", "json"),
    Seed("wandb", _JACK, "files/output.log"),
    Seed("wandb-history", f"{REAL}/wandb/kingb12__text_aug_experiments/wandb_export.csv", kind="csv"),
    Seed("wandb-history", f"{REAL}/wandb/Lucas-longxutang__Comp3242_Group_Project_nanoGPT/history_data/"
         "baseline_cpc0g0we_history.csv", kind="csv"),
    Seed("wandb-history", "", "history.jsonl", "jsonl", generated="wandb_jsonl"),
    Seed("hf-trainer-state", f"{REAL}/hf_trainer_state/subro608_Deep_learning_Bert_project2/checkpoint-1000",
         "trainer_state.json", "json"),
    Seed("hf-trainer-state", _HF_OUT, "checkpoint-40/trainer_state.json", "json"),
    Seed("hf-trainer", _HF_OUT, "logging.jsonl", "jsonl", max_bytes=30_000),
    Seed("hf-trainer", f"{REAL}/hf_trainer/pink_issue6_gradnorm_nan_padded_excerpt.txt"),
    Seed("lightning", _LIGHTNING, "version_9/metrics.csv", "csv"),
    Seed("lightning", _LIGHTNING, "version_7/hparams.yaml", "yaml"),
    Seed("mlflow", _MLFLOW, f"{_MLRUN}/metrics/loss"),
    Seed("mlflow", _MLFLOW, f"{_MLRUN}/meta.yaml", "yaml"),
    Seed("mlflow", _MLFLOW, f"{_MLRUN}/params/opt_learning_rate"),
    Seed("nanogpt", f"{REAL}/nanogpt/ChenZihua-cn_nanoGPT_train.log"),
    Seed("llm.c", f"{REAL}/llmc/HectorFCardenas_gpt2_train.11679004.log"),
    Seed("llm.c", f"{REAL}/llmc/SiddanthEmani_log124M_main.log", max_bytes=20_000),
    Seed("torchtitan", f"{REAL}/torchtitan/autoresearch_run214_ansi_color.log"),
    Seed("nanotron", f"{REAL}/nanotron/exp6b1_console.log", max_bytes=30_000),
    Seed("olmo", f"{REAL}/olmo/issue692_ce_loss_zero_excerpt.txt"),
    Seed("fairseq", f"{REAL}/fairseq/metaseq_issue419_restart_excerpt.txt"),
    Seed("mlx-lm", f"{REAL}/mlx_lm/neoneye_mlx_examples_lora_v6.txt"),
    Seed("litgpt", f"{REAL}/litgpt/issue628_codellama_spike_excerpt.txt"),
    Seed("llamafactory", f"{REAL}/llamafactory/rameyjm7_SFT-Training-LLM", "trainer_log.jsonl", "jsonl",
         max_bytes=30_000),
)


def _wandb_jsonl() -> bytes:
    """A W&B history dump as JSON lines (``run.history()`` written with ``to_json(lines=True)``), from a real
    history CSV."""
    text = (ROOT / REAL / "wandb/Lucas-longxutang__Comp3242_Group_Project_nanoGPT/history_data/"
            "baseline_cpc0g0we_history.csv").read_text()
    lines = []
    for row in list(csv.DictReader(io.StringIO(text)))[:150]:
        entry = {}
        for key, value in row.items():
            try:
                entry[key] = int(value) if re.fullmatch(r"-?\d+", value) else float(value)
            except ValueError:
                entry[key] = value or None
        lines.append(json.dumps(entry))
    return ("\n".join(lines) + "\n").encode()


_GENERATED: dict[str, Callable[[], bytes]] = {"wandb_jsonl": _wandb_jsonl}


def seed_bytes(seed: Seed) -> bytes:
    """The unmutated target, cut to at most ``max_bytes`` at a line end (a clean prefix)."""
    if seed.generated:
        data = _GENERATED[seed.generated]()
    else:
        root = ROOT / seed.root
        data = (root / seed.target if seed.target else root).read_bytes()
    if len(data) > seed.max_bytes and seed.kind not in ("tfrecord", "wandb"):
        data = data[: data.rfind(b"\n", 0, seed.max_bytes) + 1]
    return data


def materialize(seed: Seed, data: bytes, dest: Path, alone: bool = False) -> Path:
    """Write a mutant into the new folder ``dest`` (the seed's folder copied, its target replaced by ``data``);
    returns the input to analyze: the folder, or with ``alone`` the mutated file itself."""
    dest.mkdir(parents=True, exist_ok=True)
    if seed.generated:
        target = dest / seed.target
    elif seed.target:
        shutil.copytree(ROOT / seed.root, dest / Path(seed.root).name)
        target = dest / Path(seed.root).name / seed.target
    else:
        target = dest / Path(seed.root).name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    if alone:
        return target
    return target.parents[len(Path(seed.target).parts) - 1] if seed.target and not seed.generated else dest


# ------------------------------------------------------------------------------------------ extreme values ----

EXTREME_NUMBERS: tuple[bytes, ...] = (
    b"1e400", b"-1e400", b"1e-400", b"-0", b"-0.0", b"nan", b"NaN", b"-nan", b"inf", b"-inf", b"Infinity",
    b"-Infinity", b"9223372036854775807", b"9223372036854775808", b"-9223372036854775809", b"18446744073709551616",
    b"1" + b"0" * 400, b"-" + b"9" * 400, b"", b"0", b"-1", b"1e308", b"4.9e-324", b"1.7976931348623157e308",
    b"0x10", b"1_000", b"\xd9\xa3", b"1.2.3", b"--5", b"1e", b".", b"00000000000000000001", b"3.4028235e38",
)
EXTREME_STRINGS: tuple[str, ...] = (
    "", " ", "\x00", "\n", "\r", "|", "loss", "lm loss", "nan", "\u202e", "é" * 3, "\ud7ff", "💥", "a" * 300,
    "../../etc/passwd", "%s%n", "{", "[", "\\", "\x1b[31m", "_step", "_runtime", "train/loss", "grad_norm",
)
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STEP_LINE = re.compile(rb"(?i)(?:iteration|iter|step)[\s:=]*\d+")


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


# ------------------------------------------------------------------------------------------ byte mutators ----
# Each takes (data, rng, big) and returns the mutant; ``big`` allows sizes for the campaign (megabytes), not tests.


def flip_bytes(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 16))):
        at = rng.randrange(len(out))
        out[at] = out[at] ^ (1 << rng.randrange(8)) if rng.random() < 0.6 else rng.randrange(256)
    return bytes(out)


def cut(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """Truncated at a random byte (a crashed writer, a partial copy)."""
    return data[: rng.randrange(len(data) + 1)]


def insert_garbage(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    at = rng.randrange(len(data) + 1)
    n = rng.choice((1, 7, 64, 1000))
    junk = rng.choice((
        bytes(rng.randrange(256) for _ in range(n)), b"\x00" * n, b"\xff" * n, b"\r" * n, "\u2028".encode() * n,
        b"\xef\xbb\xbf", b"\xc3", b"\x1b[2K\r", b"\n" * n,
    ))
    return data[:at] + junk + data[at:]


def delete_range(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    if not data:
        return data
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.choice((1, 10, 100, 5000)))
    return data[:a] + data[b:]


def long_line(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """A very long line (no newline for a long while): megabytes in the campaign, kilobytes in tests."""
    n = rng.choice((70_000, 2_000_000, 9_000_000)) if big else rng.choice((5_000, 70_000))
    piece = rng.choice((b"x", b"1", b"iteration ", b" lm loss: 1.0 |", b"\x00", b"{\"a\": [", b"["))
    line = (piece * (n // len(piece) + 1))[:n]
    at = rng.randrange(len(data) + 1)
    return data[:at] + line + data[at:]


def encoding(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """The same text in another encoding or line ending: UTF-16 with BOM, CRLF, lone CR, a UTF-8 BOM, Latin-1."""
    text = data.decode("utf-8", errors="replace")
    how = rng.randrange(6)
    if how == 0:
        return text.encode("utf-16")
    if how == 1:
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    if how == 2:
        return data.replace(b"\n", b"\r")
    if how == 3:
        return b"\xef\xbb\xbf" + data
    if how == 4:
        return text.encode("latin-1", errors="replace")
    return data.replace(b"\n", b"\r\n", 1)  # mixed endings


def empty_like(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    return rng.choice((b"", b"\n", b" ", b"\x00", b"\xef\xbb\xbf", b"\n" * 1000, data[:1], b"{}", b"[]", b"null"))


def splice(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """A stretch of another fixture pasted in (two logs concatenated, a wrong file appended)."""
    other = seed_bytes(rng.choice(SEEDS))
    a = rng.randrange(len(other) + 1)
    piece = other[a : a + rng.choice((200, 5000, 50_000))]
    at = rng.randrange(len(data) + 1)
    return data[:at] + piece + data[at:]


# ------------------------------------------------------------------------------------------ line mutators ----


def duplicate_lines(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    lines = _lines(data)
    if not lines:
        return data
    a = rng.randrange(len(lines))
    b = min(len(lines), a + rng.choice((1, 5, 50)))
    times = rng.choice((2, 3, 100))
    return b"".join(lines[:b] + lines[a:b] * (times - 1) + lines[b:])


def shuffle_lines(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    lines = _lines(data)
    if len(lines) < 2:
        return data
    a = rng.randrange(len(lines) - 1)
    b = min(len(lines), a + rng.choice((2, 10, 100, len(lines))))
    part = lines[a:b]
    rng.shuffle(part)
    return b"".join(lines[:a] + part + lines[b:])


def reorder_steps(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """Lines that carry a step (``iteration 100``, ``step 5``, ``"step": 7``) swapped, reversed or renumbered."""
    lines = _lines(data)
    at = [i for i, line in enumerate(lines) if _STEP_LINE.search(line) or b'"step"' in line or b"_step" in line]
    if not at:
        return shuffle_lines(data, rng)
    how = rng.randrange(3)
    if how == 0:  # shuffled among themselves
        moved = [lines[i] for i in at]
        rng.shuffle(moved)
        for i, line in zip(at, moved, strict=True):
            lines[i] = line
    elif how == 1:  # reversed
        for i, line in zip(at, [lines[i] for i in reversed(at)], strict=True):
            lines[i] = line
    else:  # one step number made extreme or earlier
        i = rng.choice(at)
        match = _STEP_LINE.search(lines[i])
        number = re.compile(rb"\d+")
        new = rng.choice((b"0", b"-1", b"1", b"9223372036854775808", b"99999999999", b"1" + b"0" * 40))
        if match:
            start, end = match.span()
            lines[i] = lines[i][:start] + number.sub(new, lines[i][start:end], count=1) + lines[i][end:]
        else:
            lines[i] = number.sub(new, lines[i], count=1)
    return b"".join(lines)


def extreme_numbers(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """Numbers replaced by extremes (1e400, -0, nan, inf, 2**63, 400-digit integers, nothing): a few, or all of
    one line, or every number in the file."""
    spans = [m.span() for m in _NUMBER.finditer(data)]
    if not spans:
        return data + rng.choice(EXTREME_NUMBERS)
    how = rng.randrange(3)
    if how == 0:
        chosen = set(rng.sample(range(len(spans)), min(len(spans), rng.choice((1, 3, 10)))))
    elif how == 1:
        line_start = data.rfind(b"\n", 0, spans[rng.randrange(len(spans))][0]) + 1
        line_end = data.find(b"\n", line_start)
        line_end = len(data) if line_end < 0 else line_end
        chosen = {i for i, (a, b) in enumerate(spans) if line_start <= a < line_end}
    else:
        chosen = set(range(len(spans)))
    value = rng.choice(EXTREME_NUMBERS)
    out, last = [], 0
    for i, (a, b) in enumerate(spans):
        if i in chosen:
            out += [data[last:a], value if how != 0 else rng.choice(EXTREME_NUMBERS)]
            last = b
    out.append(data[last:])
    return b"".join(out)


# ------------------------------------------------------------------------------------------ JSON mutators ----


def _mutate_tree(value: object, rng: random.Random, depth: int = 0) -> object:
    """One random change somewhere in a JSON value: a leaf made extreme or of another type, a key removed or
    renamed, a list shuffled, reversed or cut."""
    if isinstance(value, dict) and value and (depth < 8 and rng.random() < 0.75):
        key = rng.choice(list(value))
        what = rng.randrange(5)
        if what == 0:
            value.pop(key)
        elif what == 1:
            value[rng.choice(EXTREME_STRINGS)] = value.pop(key)
        else:
            value[key] = _mutate_tree(value[key], rng, depth + 1)
        return value
    if isinstance(value, list) and value and depth < 8:
        what = rng.randrange(6)
        if what == 0:
            rng.shuffle(value)
        elif what == 1:
            value.reverse()
        elif what == 2:
            del value[rng.randrange(len(value)):]
        elif what == 3:
            value.extend(value[: rng.randrange(len(value)) + 1])
        else:
            i = rng.randrange(len(value))
            value[i] = _mutate_tree(value[i], rng, depth + 1)
        return value
    return rng.choice((
        float("nan"), float("inf"), -float("inf"), -0.0, 1e308, 2**63, -(2**63) - 1, 10**400, "", "1e400", "nan",
        None, True, [], {}, [[[[[]]]]], rng.choice(EXTREME_STRINGS), {"value": None}, "2024-01-01T00:00:00",
    ))


def json_tree(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """A JSON document (or each of some JSON lines) decoded, changed in its structure, encoded again (NaN and
    Infinity as Python writes them); bytes that are not JSON get a number mutation instead."""
    lines = _lines(data)
    docs = [data] if not data.lstrip().startswith(b"{") or data.count(b"\n{") == 0 else lines
    chosen = rng.sample(range(len(docs)), min(len(docs), rng.choice((1, 1, 3))))
    out = list(docs)
    for i in chosen:
        try:
            tree = json.loads(docs[i])
        except (ValueError, RecursionError):
            return extreme_numbers(data, rng)
        text = json.dumps(_mutate_tree(tree, rng), indent=1 if len(docs) == 1 else None)
        out[i] = text.encode() + (b"\n" if docs[i].endswith(b"\n") else b"")
    return b"".join(out)


def deep_nesting(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """Brackets nested far deeper than any parser's recursion limit, inside the document or as a line."""
    depth = rng.choice((1000, 100_000)) if big else 1000
    nest = rng.choice((b"[" * depth + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth, b"[" * depth))
    at = data.find(b":") + 1 if rng.random() < 0.5 else len(data)
    return data[:at] + nest + data[at:]


# ------------------------------------------------------------------------------------------ TFRecord ----------


def tfrecord_payloads(data: bytes) -> list[bytes]:
    """The payloads of the sound records of an event file (framed by :func:`parsers.tfrecord.walk`)."""
    framing = walk(data)
    return [data[int(a) : int(b)] for a, b in zip(framing.starts, framing.ends, strict=True)]


def tfrecord_frame(payload: bytes) -> bytes:
    """One TFRecord record with valid length and data CRCs."""
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", masked_crc(header)) + payload + struct.pack("<I", masked_crc(payload))


def tfrecord_file(payloads: list[bytes]) -> tuple[bytes, list[int]]:
    """An event file of these payloads, and the byte offset where each record ends."""
    out, ends = bytearray(), []
    for payload in payloads:
        out += tfrecord_frame(payload)
        ends.append(len(out))
    return bytes(out), ends


def _mutate_event(payload: bytes, rng: random.Random) -> bytes:
    event = event_pb2.Event()
    try:
        event.ParseFromString(payload)
    except DecodeError:
        return flip_bytes(payload, rng)
    what = rng.randrange(6)
    if what == 0:
        event.step = rng.choice((-1, 0, 2**63 - 1, -(2**63), 2**31, 1))
    elif what == 1:
        event.wall_time = rng.choice((float("nan"), float("inf"), -1e300, 0.0, 1e300, -0.0, 4e9))
    elif event.HasField("summary") and event.summary.value:
        value = rng.choice(event.summary.value)
        if what == 2:
            value.tag = rng.choice(EXTREME_STRINGS)
        elif what == 3 and value.HasField("simple_value"):
            value.simple_value = rng.choice((float("nan"), float("inf"), -float("inf"), 3.4e38, -0.0, 1e-45))
        elif what == 3 and value.HasField("tensor"):
            tensor = value.tensor
            tensor.tensor_content = tensor.tensor_content[: rng.randrange(len(tensor.tensor_content) + 1)]
            tensor.dtype = rng.choice((0, 1, 2, 3, 7, 9, 19, 99))
        elif what == 4:
            value.metadata.plugin_data.plugin_name = rng.choice(("scalars", "text", "hparams", "", "images"))
            value.metadata.plugin_data.content = bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
        else:
            event.summary.value.append(value)  # the same tag twice in one event
    else:
        return flip_bytes(payload, rng)
    try:
        return event.SerializeToString()
    except Exception:  # an invalid string (a lone surrogate) cannot be encoded: flip bytes instead
        return flip_bytes(payload, rng)


def _edit_records(payloads: list[bytes], rng: random.Random, change: Callable[[bytes, random.Random], bytes],
                  reorder: Callable[[list[bytes], random.Random], object]) -> None:
    """One to five edits of a file's records, in place: drop, duplicate, shuffle, ``reorder``, flip bytes in one,
    or ``change`` one (a structure-aware edit of its fields)."""
    for _ in range(rng.choice((1, 1, 2, 5))):
        what = rng.randrange(7)
        i = rng.randrange(len(payloads))
        if what == 0:
            del payloads[i]
        elif what == 1:
            payloads[i:i] = [payloads[i]] * rng.choice((1, 10))
        elif what == 2:
            rng.shuffle(payloads)
        elif what == 3:
            reorder(payloads, rng)
        elif what == 4:
            payloads[i] = flip_bytes(payloads[i], rng)
        else:
            payloads[i] = change(payloads[i], rng)
        if not payloads:
            break


def _shuffle_history(payloads: list[bytes], rng: random.Random) -> None:
    """The history records shuffled among their own places (the steps reordered, the rest of the run kept)."""
    history = [k for k, p in enumerate(payloads) if _is_history(p)]
    moved = [payloads[k] for k in history]
    rng.shuffle(moved)
    for k, p in zip(history, moved, strict=True):
        payloads[k] = p


def tfrecord_mutant(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """Records dropped, duplicated, shuffled, reversed, their payload bytes or Event fields changed (extreme steps,
    wall times and values, odd tags, wrong tensor dtypes), then framed again with valid CRCs; sometimes a record
    that claims a huge length (with a valid header CRC) or a cut is added."""
    payloads = tfrecord_payloads(data)
    if not payloads:
        return flip_bytes(data, rng)
    _edit_records(payloads, rng, _mutate_event, lambda records, _: records.reverse())
    out, _ = tfrecord_file(payloads)
    tail = rng.random()
    if tail < 0.1:  # a header that says 2 GiB follows, with a valid header CRC
        header = struct.pack("<Q", rng.choice(((1 << 31) - 1, 1 << 40, 10**6)))
        out += header + struct.pack("<I", masked_crc(header)) + b"\x08\x01"
    elif tail < 0.2:
        out = out[: rng.randrange(len(out) + 1)]
    return out


# ------------------------------------------------------------------------------------------ .wandb -----------


def wandb_payloads(data: bytes) -> list[bytes]:
    """The record payloads of a ``.wandb`` log (read by the parser's own chunk reader)."""
    return _chunks(data, "mutant", [])


def wandb_file(payloads: list[bytes], header: bytes = MAGIC) -> tuple[bytes, list[int]]:
    """A ``.wandb`` log of these payloads (LevelDB-style 32 KiB blocks, chunks FULL / FIRST MIDDLE* LAST with
    their CRC-32), and the byte offset where each record's last chunk ends."""
    out, ends = bytearray(header), []
    type_crc = {kind: zlib.crc32(bytes([kind])) for kind in (_FULL, _FIRST, _MIDDLE, _LAST)}
    for payload in payloads:
        first, rest = True, payload
        while True:
            room = _BLOCK - len(out) % _BLOCK
            if room < 7:
                out += b"\x00" * room
                continue
            n = min(len(rest), room - 7)
            last = n == len(rest)
            kind = (_FULL if last else _FIRST) if first else (_LAST if last else _MIDDLE)
            piece = rest[:n]
            out += struct.pack("<IHB", zlib.crc32(piece, type_crc[kind]), n, kind) + piece
            rest, first = rest[n:], False
            if last:
                break
        ends.append(len(out))
    return bytes(out), ends


def _value_json(rng: random.Random) -> str:
    return rng.choice((
        "1e400", "-1e400", "NaN", "Infinity", "-Infinity", "nan", "", "{", "null", "true", '"text"', "[1, 2]",
        "9223372036854775808", "1" + "0" * 400, "-0", "[" * 1000 + "]" * 1000, '{"a": {"b": NaN}}', "1e-400",
        '{"_type": "histogram", "values": [1, 2], "bins": [0, 1, 2]}', '"\\ud800"', "0.5",
    ))


def _mutate_record(payload: bytes, rng: random.Random) -> bytes:
    record = Record()
    try:
        record.ParseFromString(payload)
    except DecodeError:
        return flip_bytes(payload, rng)
    what = rng.randrange(6)
    if record.HasField("history") and record.history.item:
        items = record.history.item
        item = rng.choice(items)
        if what <= 1:
            item.value_json = _value_json(rng)
        elif what == 2:
            step = next((i for i in items if i.key == "_step"), None)
            if step is not None:
                step.value_json = rng.choice(("-1", "1e30", "9223372036854775808", "nan", "", "0", "1.5", "-0"))
            else:
                record.history.step.num = rng.choice((-1, 2**63 - 1, 0))
        elif what == 3:
            item.key = rng.choice(EXTREME_STRINGS)
        elif what == 4:
            del items[rng.randrange(len(items))]
        else:
            record.history.step.num = rng.choice((-1, 2**63 - 1, -(2**63), 0, 10**12))
    elif record.HasField("run"):
        run = record.run
        if what == 0:
            run.start_time.seconds = rng.choice((2**62, -(2**62), 0, 253402300800))
        elif what == 1:
            run.start_time.nanos = rng.choice((-1, 2**31 - 1))
        elif what == 2:
            run.starting_step = rng.choice((-1, 2**63 - 1))
        elif what == 3:
            run.display_name = rng.choice(EXTREME_STRINGS)
        else:
            run.config.update.add(key=rng.choice(EXTREME_STRINGS), value_json=_value_json(rng))
    elif record.HasField("config") or record.HasField("summary"):
        items = record.config if record.HasField("config") else record.summary
        items.update.add(key=rng.choice(EXTREME_STRINGS), value_json=_value_json(rng))
    elif record.HasField("exit"):
        record.exit.exit_code = rng.choice((-1, 2**31 - 1, -(2**31), 137))
        record.exit.runtime = rng.choice((-1, 0, 2**31 - 1))
    elif record.HasField("output_raw"):
        record.output_raw.line = rng.choice(("Traceback (most recent call last):", "CUDA out of memory", "\x1b[31m",
                                             "x" * 10000, "", "iter 5: loss nan, time 1.0ms"))
    elif record.HasField("metric"):
        record.metric.step_metric = rng.choice(EXTREME_STRINGS)
    else:
        return flip_bytes(payload, rng)
    try:
        return record.SerializeToString()
    except Exception:  # an invalid string (a lone surrogate) cannot be encoded: flip bytes instead
        return flip_bytes(payload, rng)


def _is_history(payload: bytes) -> bool:
    record = Record()
    try:
        record.ParseFromString(payload)
    except DecodeError:
        return False
    return record.HasField("history")


def wandb_mutant(data: bytes, rng: random.Random, big: bool = False) -> bytes:
    """Records dropped, duplicated, shuffled, reversed, their payload bytes or ``Record`` fields changed (history
    values and steps made extreme, keys odd, run start times and exit codes out of range, config values not JSON),
    then written again with valid chunk CRCs; sometimes the header is damaged or the file cut."""
    payloads = wandb_payloads(data)
    if not payloads:
        return flip_bytes(data, rng)
    _edit_records(payloads, rng, _mutate_record, _shuffle_history)
    out, _ = wandb_file(payloads)
    tail = rng.random()
    if tail < 0.05:
        out = flip_bytes(out[:7], rng) + out[7:]
    elif tail < 0.15:
        out = out[: rng.randrange(len(out) + 1)]
    return out


# ------------------------------------------------------------------------------------------ choosing ----------

Mutator = Callable[[bytes, random.Random, bool], bytes]
GENERIC: dict[str, Mutator] = {
    "flip": flip_bytes, "cut": cut, "garbage": insert_garbage, "delete": delete_range, "long-line": long_line,
    "encoding": encoding, "empty": empty_like, "splice": splice,
}
LINES: dict[str, Mutator] = {
    "dup-lines": duplicate_lines, "shuffle-lines": shuffle_lines, "steps": reorder_steps, "numbers": extreme_numbers,
}
BY_KIND: dict[str, dict[str, Mutator]] = {
    "text": LINES,
    "csv": LINES,
    "yaml": {**LINES, "deep": deep_nesting},
    "json": {"json": json_tree, "numbers": extreme_numbers, "deep": deep_nesting, "steps": reorder_steps},
    "jsonl": {**LINES, "json": json_tree, "deep": deep_nesting},
    "tfrecord": {"tfrecord": tfrecord_mutant},
    "wandb": {"wandb": wandb_mutant},
}
MUTATORS: dict[str, Mutator] = {**GENERIC, **LINES, "json": json_tree, "deep": deep_nesting,
                                "tfrecord": tfrecord_mutant, "wandb": wandb_mutant}


def mutators_for(kind: str) -> list[str]:
    """The mutators worth applying to a seed of this kind: its own (weighted up: a binary format's mutants should
    mostly get past its framing) and the generic byte mutations."""
    own = list(BY_KIND.get(kind, LINES))
    return own * (4 if kind in ("tfrecord", "wandb") else 2) + list(GENERIC)


def mutate(data: bytes, kind: str, rng: random.Random, big: bool = False,
           rounds: int | None = None) -> tuple[bytes, list[str]]:
    """Apply one to three mutators chosen for ``kind``; returns the mutant and the mutators' names."""
    names = []
    for _ in range(rounds or rng.choice((1, 1, 1, 2, 3))):
        name = rng.choice(mutators_for(kind))
        data = MUTATORS[name](data, rng, big)
        names.append(name)
    return data, names
