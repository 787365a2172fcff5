"""The viewer's comparison pages, built on `benchflow.study` (the `study` extra).

```text
/compare.html?job=<job>&job=<job>[&baseline=<arm>][&errors=fail]   jobs' agents as arms
/compare.html?a=<job>&b=<job>                                      the same, two jobs
/compare.html                                                      the study at the root
/side-by-side.html?a=<job>/<trial>&b=<job>/<trial>                 two trials of a task
```

Who played each role (agent and model) comes from the results' `roles`: in the report's
per-role table and on each side of the side-by-side page.

The comparison page shows what `benchflow compare` reports (figures, tables, methods),
each task linking to its trials side by side; it refreshes while an arm is running.
Figures are cached by the comparison they draw, so a refresh that changed nothing
redraws nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from markupsafe import Markup

from benchflow.errors import ConfigError
from benchflow.view import data

if TYPE_CHECKING:
    from benchflow.study.compare import Comparison
    from benchflow.study.figures import Chart

_CHART_CACHE: dict[str, list[Chart]] = {}
_CHART_CACHE_SIZE = 16


@dataclass
class ComparePage:
    """What compare.html shows: the report body, or why there is none yet."""

    title: str
    body: Markup | None = None
    message: str | None = None
    live: bool = False
    jobs: list[str] = field(default_factory=list)


def _charts(comparison: Comparison) -> list[Chart]:
    from benchflow.study.figures import comparison_charts

    key = hashlib.sha256(comparison.model_dump_json().encode()).hexdigest()
    if key not in _CHART_CACHE:
        if len(_CHART_CACHE) >= _CHART_CACHE_SIZE:
            _CHART_CACHE.clear()
        _CHART_CACHE[key] = comparison_charts(comparison)
    return _CHART_CACHE[key]


def _job_path(root: Path, job_dir: Path) -> str | None:
    """The job's folder name when it is a job of the viewer's root (pages exist for it)."""
    try:
        rel = job_dir.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    return rel.as_posix() if len(rel.parts) == 1 else None


def compare_page(root: Path, sources: list[Path], *, base: str, baseline: str | None = None,
                 errors: str = "exclude", side_by_side: bool = True) -> ComparePage:
    """The comparison of `sources` (job or study folders inside `root`); task cells link
    to their trials side by side unless `side_by_side` is off (a static export)."""
    try:
        import scipy  # noqa: F401

        from benchflow.study.arms import load_arms
        from benchflow.study.compare import CompareSettings, compare_arms
        from benchflow.study.html import report_body
        from benchflow.study.report import TextTable
    except ImportError:
        return ComparePage("compare", message="the comparison needs the `study` extra: pip "
                           "install 'benchflow[study]'")
    title = " vs ".join(p.name for p in sources) if sources else "compare"
    try:
        arm_set = load_arms(sources)
    except ConfigError as exc:
        return ComparePage(title, message=str(exc))
    title = (f"study {arm_set.study.name}" if arm_set.study is not None
             else " vs ".join(a.name for a in arm_set.arms))
    try:
        settings = CompareSettings(errors="fail" if errors == "fail" else "exclude")
        comparison = compare_arms(arm_set, baseline=baseline, settings=settings)
    except ConfigError as exc:  # e.g. an arm without results yet: said, and refreshed
        return ComparePage(title, message=str(exc), live=arm_set.running)
    jobs = {arm.name: _job_path(root, arm.job_dir) for arm in arm_set.arms}
    base_arm = comparison.baseline
    names = [a.name for a in comparison.arms]
    by_task = {row.task: row for row in comparison.tasks}

    def link(table: TextTable, row: list[str], column: int) -> str | None:
        if table.id == "arms" and column == 0:
            job = jobs.get(row[0].removesuffix(" *"))
            return f"{base}jobs/{job}/index.html" if job else None
        if table.id != "tasks" or column < 2 or not side_by_side:
            return None
        task = by_task.get(row[0])
        arm = names[column - 1]
        if task is None or not jobs.get(arm) or not jobs.get(base_arm):
            return None
        mine, theirs = task.cells[arm].rels, task.cells[base_arm].rels
        if not mine or not theirs:
            return None
        query = urlencode({"a": f"{jobs[base_arm]}/{theirs[0]}", "b": f"{jobs[arm]}/{mine[0]}"})
        return f"{base}side-by-side.html?{query}"

    notes = []
    running = [a.name for a in arm_set.arms if a.running]
    if running:
        notes.append(f"still running: {', '.join(running)} (the page refreshes)")
    body = report_body(comparison, charts=_charts(comparison), link=link, notes=notes)
    return ComparePage(title, body=body, live=arm_set.running,
                       jobs=list(dict.fromkeys(j for j in jobs.values() if j)))


@dataclass
class SideTrial:
    """One side of the side-by-side page."""

    job: str
    rel: str  # agent/dataset/task__n
    reward: float | None
    error: str | None
    running: bool
    attempts: list[str]  # the rels of the task's attempts in this job
    roles: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    """(role, agent, model) from result.json's `roles`, in the trial's order."""


def side_trial(root: Path, path: str) -> SideTrial | None:
    """`<job>/<agent>/<dataset>/<task>__<n>` inside `root`, or None (a 404)."""
    parts = path.split("/")
    if len(parts) != 4:
        return None
    trial = data.resolve_inside(root, parts)
    if trial is None or not trial.is_dir():
        return None
    from benchflow.study.trials import read_trial

    task = trial.name.rpartition("__")[0]
    record = read_trial(trial / "result.json", "/".join(parts[1:]))
    attempts = sorted((p for p in trial.parent.glob(f"{task}__*")
                       if p.name.rpartition("__")[2].isdigit()),
                      key=lambda p: int(p.name.rpartition("__")[2]))
    return SideTrial(job=parts[0], rel="/".join(parts[1:]),
                     reward=record.reward if record else None,
                     error=record.error.type if record and record.error else None,
                     running=record is None,
                     attempts=[f"{parts[1]}/{parts[2]}/{p.name}" for p in attempts],
                     roles=[(name, r.agent, r.model) for name, r in
                            (record.roles.items() if record else [])])


__all__ = ["ComparePage", "SideTrial", "compare_page", "side_trial"]
