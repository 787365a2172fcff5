"""Studies: named arms (run configurations) over the same tasks and attempts, and their
comparison with paired statistics, per-role cost and figures.

`load_study` reads a study file; `prepare_study` plans every arm as a job (nothing runs
before every arm is valid); `load_arms` reads job and study folders; `compare_arms`
computes a `Comparison` (scipy and numpy, the `study` extra); `markdown`, `html_report`
and `report_tables` render it.
"""

import importlib

# Exports load on first use: `import benchflow.study` imports neither scipy nor matplotlib.
_EXPORTS = {
    "ArmSpec": "config", "StudySpec": "config", "load_study": "config", "parse_study": "config",
    "StudyRecord": "record", "ArmRecord": "record", "read_record": "record",
    "Arm": "arms", "ArmSet": "arms", "load_arms": "arms",
    "Comparison": "compare", "CompareSettings": "compare", "compare_arms": "compare",
    "markdown": "report", "report_tables": "report",
    "html_report": "html",
    "PreparedStudy": "runner", "prepare_study": "runner",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'benchflow.study' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"benchflow.study.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Arm",
    "ArmRecord",
    "ArmSet",
    "ArmSpec",
    "CompareSettings",
    "Comparison",
    "PreparedStudy",
    "StudyRecord",
    "StudySpec",
    "compare_arms",
    "html_report",
    "load_arms",
    "load_study",
    "markdown",
    "parse_study",
    "prepare_study",
    "read_record",
    "report_tables",
]
