"""Renderers: the markdown incident chronicle and the JSON document, written with :func:`write`."""

from reports.files import FORMATS, write
from reports.json_report import render_json
from reports.markdown import render_markdown


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # the comparison's renderers load forensics.comparison: imported when first asked for, not by ``analyze``
    if name in ("render_compare_json", "render_compare_markdown"):
        from reports import compare_report

        return getattr(compare_report, name)
    raise AttributeError(f"module 'reports' has no attribute {name!r}")


def render(findings, fmt: str = "markdown") -> str:  # type: ignore[no-untyped-def]
    """Render findings as ``markdown`` or ``json``."""
    if fmt == "json":
        return render_json(findings)
    if fmt == "markdown":
        return render_markdown(findings)
    raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")


__all__ = [
    "FORMATS", "render", "render_compare_json", "render_compare_markdown", "render_json", "render_markdown", "write",
]
