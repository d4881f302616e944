"""The JSON document of ``forensics analyze --format json`` (schema_version 2)."""

from __future__ import annotations

import json

from forensics.findings import Findings


def render_json(findings: Findings) -> str:
    """Findings as deterministic, strict JSON (NaN and Inf become null).

    >>> from forensics.findings import Findings
    >>> render_json(Findings(runs=[]))
    '{\\n  "schema_version": 2,\\n  "runs": []\\n}\\n'
    """
    return json.dumps(findings.to_dict(), indent=2, allow_nan=False, default=str) + "\n"
