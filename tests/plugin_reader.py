"""A third-party reader, as a plug-in package would ship it (used by tests/test_readers.py): ``TINY`` files of
``step loss`` lines."""

from pathlib import Path

import polars as pl

from parsers import schema as s
from parsers.reader import Piece, ReadContext
from parsers.schema import ParsedLog

FORMAT = "tinylog"


def sniff(head: bytes, name: str) -> bool:
    return head.startswith(b"TINY\n")


def read(path: Path, context: ReadContext) -> list[Piece]:
    rows = [line.split() for line in path.read_text().splitlines()[1:] if line.strip()]
    frame = pl.DataFrame({"step": [int(r[0]) for r in rows], "value": [float(r[1]) for r in rows]})
    metrics = s.conform(frame.with_columns(run=pl.lit(context.run), source=pl.lit(context.shown), attempt=pl.lit(1),
                                           metric=pl.lit(s.LOSS)), s.METRICS_SCHEMA)
    return [Piece(path, FORMAT, ParsedLog(metrics, s.empty(s.EVENTS_SCHEMA), s.empty(s.CONFIGS_SCHEMA), n_attempts=1))]
