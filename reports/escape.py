"""Make untrusted text (log lines, file names, config values) inert inside markdown."""

from __future__ import annotations

_SPECIAL = str.maketrans({
    "\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]", "|": "\\|", "#": "\\#",
    "<": "&lt;", ">": "&gt;", "&": "&amp;", "\n": " ", "\r": " ", "~": "\\~",
})


def md(text: object) -> str:
    """Escape ``text`` for markdown (no links, HTML, emphasis or table breaks can come through).

    >>> md("<script>*x*</script> | a_b")
    '&lt;script&gt;\\\\*x\\\\*&lt;/script&gt; \\\\| a\\\\_b'
    """
    return str(text).translate(_SPECIAL)
