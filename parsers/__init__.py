"""Readers that turn what a training run left behind into canonical Polars frames."""

from parsers.frames import read_frames, write_frames
from parsers.run import Run, load_run, load_runs
from parsers.textfile import InputError

__all__ = ["InputError", "Run", "load_run", "load_runs", "read_frames", "write_frames"]
