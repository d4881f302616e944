"""What differs between the copies of one line that several ranks print: the launcher's and torch's rank prefixes
(srun's ``0: ``, torchrun's ``[default3]:``, torch's ``[rank3]:``) and NCCL's own ``host:pid:tid [device] `` (behind
the time a launcher may print). Parsers know these shapes; forensics compares lines with :func:`same_line` when it
counts one error printed by every rank once, and with :func:`without_ranks_or_times` when it counts the copies of one
fp16 overflow line (DeepSpeed names the rank and the time inside the line) once."""

from __future__ import annotations

import polars as pl

# launcher and rank prefixes, stacked in any order (Rust regex syntax, as Polars reads it)
RANK_PREFIXES = r"^\s*(?:\d+: |\[[A-Za-z_]+\d+\]: ?)*"  # ('[rank3]: ' is one of '[default3]: ' shape)
# NCCL's own prefix, "host:pid:tid [device] ", behind a time the launcher may print: every rank's copy of a warning
NCCL_PREFIX = r"^(?:\[\d{4}-\d{2}-\d{2}[ T][\d:.,]+\]\s*)?[\w.-]+:\d+:\d+ \[\d+\] "


def same_line(text: pl.Expr) -> pl.Expr:
    """A log line without what differs between the ranks that print it (launcher, rank and NCCL prefixes): the lines
    of one error printed by every rank are the same (a missing line is empty).

    >>> lines = ["[rank3]: KeyboardInterrupt", "0: [default0]: KeyboardInterrupt", "  12: KeyboardInterrupt",
    ...          "[2025-09-24 16:15:28] cw-dfw-h100-001-132-026:2999605:3004403 [0] include/alloc.h:228 NCCL WARN x",
    ...          "host-7:17:42 [5] include/alloc.h:228 NCCL WARN x", "WARNING: x", None]
    >>> for line in pl.DataFrame({"text": lines}).select(same_line(pl.col("text"))).to_series():
    ...     print(repr(line))
    'KeyboardInterrupt'
    'KeyboardInterrupt'
    'KeyboardInterrupt'
    'include/alloc.h:228 NCCL WARN x'
    'include/alloc.h:228 NCCL WARN x'
    'WARNING: x'
    ''
    """
    return text.fill_null("").str.replace(RANK_PREFIXES, "").str.replace(NCCL_PREFIX, "").str.strip_chars()


# DeepSpeed's overflow line names its rank inside it ("OVERFLOW! Rank 6 Skipping step") behind a logging time
RANK_OR_TIME = r"\b[Rr]ank \d+|\d{2}:\d{2}:\d{2}[.,]?\d*"


def without_ranks_or_times(text: pl.Expr) -> pl.Expr:
    """A log line without any rank it names or clock time it prints: the copies of one fp16 overflow line that each
    rank prints, one after the other, are the same (a missing line is empty).

    >>> lines = ["[2022-09-14 22:58:01,089] [INFO] [deepspeed] OVERFLOW! Rank 6 Skipping step. Attempted loss scale: 2",
    ...          "[2022-09-14 22:58:01,093] [INFO] [deepspeed] OVERFLOW! Rank 4 Skipping step. Attempted loss scale: 2"]
    >>> len(set(pl.DataFrame({"text": lines}).select(without_ranks_or_times(pl.col("text"))).to_series()))
    1
    """
    return text.fill_null("").str.replace_all(RANK_OR_TIME, "")
