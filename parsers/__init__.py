"""Readers that turn what a training run left behind into canonical Polars frames.

The names below are loaded on first use, so importing :class:`InputError` (the command line does at once) costs
nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parsers.lazy import lazy_names

_WHERE = {"InputError": "parsers.errors", "Run": "parsers.run", "load_run": "parsers.run", "load_runs": "parsers.run",
          "read_frames": "parsers.frames", "write_frames": "parsers.frames"}
__all__ = ["InputError", "Run", "load_run", "load_runs", "read_frames", "write_frames"]

if TYPE_CHECKING:
    from parsers.errors import InputError
    from parsers.frames import read_frames, write_frames
    from parsers.run import Run, load_run, load_runs


__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals())
