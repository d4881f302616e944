"""The one error that bad input raises (its own module: the command line imports it before anything heavy)."""


class InputError(Exception):
    """A file or directory that cannot be analyzed; the message is one line that names the path."""
