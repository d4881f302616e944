"""Post-hoc forensics of large-model training runs: attempts, anomalies, model checks and suspected causes."""

from forensics.analyze import analyze, analyze_run, detect
from forensics.compare import compare_runs
from forensics.comparison import Comparison, RunRow
from forensics.findings import Anomaly, Attempt, Cause, Findings, ModelCheck, RunFindings

__version__ = "0.1.0"

__all__ = [
    "Anomaly",
    "Attempt",
    "Cause",
    "Comparison",
    "Findings",
    "ModelCheck",
    "RunFindings",
    "RunRow",
    "__version__",
    "analyze",
    "analyze_run",
    "compare_runs",
    "detect",
]
