"""The one error that bad input raises (its own module: the command line imports it before anything heavy)."""


class InputError(Exception):
    """A file or directory that cannot be analyzed; the message is one line that names the path."""


def shown_path(path: object) -> str:
    r"""``path`` as text that any writer can take: bytes of a file name that are not UTF-8 (Python holds them as
    lone surrogates, which Polars, JSON and UTF-8 files refuse) are shown as ``\xNN``.

    >>> import os
    >>> shown_path(os.fsdecode(b"runs/train\xff.log"))
    'runs/train\\xff.log'
    """
    import os

    return os.fsencode(path).decode("utf-8", "backslashreplace")  # type: ignore[arg-type]
