"""Post-hoc forensics of large-model training runs: attempts, anomalies, model checks and suspected causes.

The names below are loaded on first use (``import forensics`` alone costs nothing, so ``forensics --version``
starts at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parsers.lazy import lazy_names

__version__ = "0.1.0"

_WHERE = {
    "Analysis": "forensics.analysis", "analyze": "forensics.analysis", "analyze_path": "forensics.analysis",
    "analyze_run": "forensics.analysis", "detect": "forensics.analysis",
    "Compared": "forensics.compare", "compare_runs": "forensics.compare",
    "Comparison": "forensics.comparison", "RunRow": "forensics.comparison",
    "Anomaly": "forensics.findings", "Attempt": "forensics.findings", "Cause": "forensics.findings",
    "EndReason": "forensics.findings", "Findings": "forensics.findings", "Kind": "forensics.findings",
    "ModelCheck": "forensics.findings", "Outcome": "forensics.findings", "RunFindings": "forensics.findings",
}
__all__ = [  # noqa: RUF022 (as _WHERE, by module)
    "Analysis", "analyze", "analyze_path", "analyze_run", "detect", "Compared", "compare_runs", "Comparison",
    "RunRow", "Anomaly", "Attempt", "Cause", "EndReason", "Findings", "Kind", "ModelCheck", "Outcome", "RunFindings",
    "__version__",
]

if TYPE_CHECKING:
    from forensics.analysis import Analysis, analyze, analyze_path, analyze_run, detect
    from forensics.compare import Compared, compare_runs
    from forensics.comparison import Comparison, RunRow
    from forensics.findings import Anomaly, Attempt, Cause, EndReason, Findings, Kind, ModelCheck, Outcome, RunFindings


__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals())
