"""Make untrusted text (log lines, file names, config values) inert inside markdown and on the terminal."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

_SPECIAL = str.maketrans({
    "\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]", "|": "\\|", "#": "\\#",
    "<": "&lt;", ">": "&gt;", "&": "&amp;", "\n": " ", "\r": " ", "~": "\\~",
})
MAX_TEXT = 4000  # characters any one value (a config value, a quoted line) may show in a report
# control characters (tabs and line ends are handled apart), and the lone surrogates that stand for the bytes of a
# file name that are not UTF-8
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|[\udc80-\udcff]")


def capped(text: str) -> str:
    """``text`` cut to :data:`MAX_TEXT` characters, saying how long it was (a 50 MB config value made a 262 MB
    report).

    >>> capped("x" * 5000)[-30:]
    'xxxxxxx … (5,000 bytes in all)'
    """
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]} … ({len(text.encode('utf-8', 'replace')):,} bytes in all)"


def visible(text: object) -> str:
    r"""``text`` with its control characters (ESC sequences, bells, backspaces) shown as ``\xNN``, not obeyed.

    >>> visible("loss\x1b[31m 2.1\x07")
    'loss\\x1b[31m 2.1\\x07'
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()) & 0xFF:02x}", str(text))


def md(text: object) -> str:
    """Escape ``text`` for markdown (no links, HTML, emphasis, table breaks or terminal escapes can come through).

    >>> md("<script>*x*</script> | a_b")
    '&lt;script&gt;\\\\*x\\\\*&lt;/script&gt; \\\\| a\\\\_b'
    """
    return visible(capped(str(text))).translate(_SPECIAL)


def terminal(text: object, style: str = "") -> Text:
    """``text`` for a rich console: never read as markup (``[/x]`` in a run name prints as it is), control
    characters shown, not obeyed.

    >>> terminal("run [/x] [bold]a\\x1b[0m").plain
    'run [/x] [bold]a\\\\x1b[0m'
    """
    from rich.text import Text  # (rich loads for the terminal summary, not for every report)

    return Text(visible(capped(str(text))).replace("\t", " "), style=style)
