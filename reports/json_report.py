"""The JSON document of ``forensics analyze --format json`` (schema_version 2)."""

from __future__ import annotations

import json
import math
from typing import Any

from forensics.findings import Findings
from reports.escape import capped


def strict(value: Any) -> Any:
    """``value`` with every non-finite float (anywhere: a config value of 1e400, a NaN setting) as None, and every
    text cut to :data:`reports.escape.MAX_TEXT` characters.

    >>> out = strict({"a": [1.0, float("nan")], "b": float("inf"), "c": "x" * 5000})
    >>> out["a"], out["b"], out["c"][-21:]
    ([1.0, None], None, ' (5,000 bytes in all)')
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return capped(value)
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    return value


def render_json(findings: Findings) -> str:
    """Findings as deterministic, strict JSON (NaN and Inf become null).

    >>> from forensics.findings import Findings
    >>> render_json(Findings(runs=[]))
    '{\\n  "schema_version": 2,\\n  "runs": []\\n}\\n'
    """
    return json.dumps(strict(findings.to_dict()), indent=2, allow_nan=False, default=str) + "\n"
