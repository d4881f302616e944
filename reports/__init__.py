"""Renderers: the markdown incident chronicle and the JSON document (of an analysis or a comparison), rendered with
:func:`render` and written with :func:`write`."""

from reports.files import FORMATS, export_frames, render, write
from reports.json_report import render_json
from reports.markdown import render_markdown


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # the comparison's renderers load forensics.comparison: imported when first asked for, not by ``analyze``
    if name in ("render_compare_json", "render_compare_markdown"):
        from reports import compare_report

        return getattr(compare_report, name)
    raise AttributeError(f"module 'reports' has no attribute {name!r}")


__all__ = [
    "FORMATS", "export_frames", "render", "render_compare_json", "render_compare_markdown", "render_json",
    "render_markdown", "write",
]
