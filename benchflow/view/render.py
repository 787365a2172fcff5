"""HTML pages from a jobs folder, shared by the live server and the static export.

Every link in a page is `{{ base }}` + a path ending in `.html`, where `base` is `/` when
served and the right number of `../` in a static copy; so the same templates work served
and opened from disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from benchflow.job.store import read_trial_result
from benchflow.paths import RolloutPaths
from benchflow.rollout.result import RolloutResult
from benchflow.trajectory.conversation import (
    Changes,
    Message,
    Note,
    Plan,
    Thought,
    ToolCall,
    TurnUsage,
)
from benchflow.view import data

TOOL_OUTPUT_PREVIEW = 1200
"""Characters of a tool's output shown before the expand control."""
TOOL_OUTPUT_FULL = 200_000
"""Characters of a tool's output sent to the browser at most (the expand control's limit)."""
ROLE_COLOURS = 8


def _fmt_num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.0f}%"


def _fmt_sec(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 60:
        return f"{value:.1f}s"
    minutes, seconds = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _fmt_time(value: Any) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("benchflow.view", "templates"),
        autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(num=_fmt_num, pct=_fmt_pct, sec=_fmt_sec, time=_fmt_time, tojson_pretty=_json)
    env.globals.update(PREVIEW=TOOL_OUTPUT_PREVIEW, FULL=TOOL_OUTPUT_FULL, Message=Message, Thought=Thought,
                       ToolCall=ToolCall, Plan=Plan, TurnUsage=TurnUsage, Note=Note)
    env.tests.update({
        "message": lambda i: isinstance(i, Message), "thought": lambda i: isinstance(i, Thought),
        "toolcall": lambda i: isinstance(i, ToolCall), "plan": lambda i: isinstance(i, Plan),
        "usage": lambda i: isinstance(i, TurnUsage), "note": lambda i: isinstance(i, Note),
        "changes": lambda i: isinstance(i, Changes),
    })
    return env


class Pages:
    """Renders the viewer's pages for the jobs folder `root`.

    `static=True` renders for an exported copy: no live polling, no raw-file links, no
    job comparison form (it needs the server).
    """

    def __init__(self, root: Path, *, static: bool = False) -> None:
        self.root = root
        self.static = static
        self.env = environment()

    def _render(self, template: str, depth: int, **context: Any) -> str:
        base = "../" * depth if self.static else "/"
        return self.env.get_template(template).render(base=base, static=self.static,
                                                      **context)

    def jobs(self) -> str:
        jobs = data.list_jobs(self.root)
        return self._render("jobs.html", 0, jobs=jobs, root=str(self.root),
                            live=any(j.running for j in jobs))

    def job(self, job_dir: Path) -> str:
        job = data.load_job(job_dir)
        others = [j.name for j in data.list_jobs(self.root) if j.name != job.name]
        return self._render("job.html", 2, job=job, matrix=data.matrix(job.trials),
                            others=others, live=job.running,
                            errors=sorted({t.error_type for t in job.trials if t.error_type}))

    def trial(self, job_dir: Path, trial_dir: Path, page: int = 1) -> str | None:
        paths = RolloutPaths(trial_dir)
        traj = data.trajectory_page(paths.trajectory, page)
        if traj is None and page != 1:
            return None
        rel = str(trial_dir.relative_to(job_dir))
        result = read_trial_result(paths.result)
        roles = data.role_names(trial_dir)
        if traj is not None:
            for block in traj.blocks:
                if block.role and block.role not in roles:
                    roles.append(block.role)
        timeline = _timeline(result)
        return self._render(
            "trial.html", 5, job=job_dir.name, rel=rel, result=result, traj=traj,
            roles={name: i % ROLE_COLOURS for i, name in enumerate(roles)},
            config=data.trial_config(trial_dir), logs=data.trial_logs(self.root, trial_dir),
            timeline=timeline, live=result is None, page=page,
            forks=data.forks_of(self.root, f"{job_dir.name}/{rel}") if page == 1 else [],
        )

    def compare(self, a: Path, b: Path) -> str:
        ja, jb = data.load_job(a), data.load_job(b)
        return self._render("compare.html", 0, a=ja, b=jb, rows=data.compare(ja, jb),
                            live=False)


def _timeline(result: RolloutResult | None) -> list[dict[str, Any]]:
    """Phase bars: offset and width as a percentage of the whole rollout."""
    if result is None or result.timestamps.started_at is None:
        return []
    ts, start = result.timestamps, result.timestamps.started_at
    total = result.durations.total_sec or 0.0
    bars = []
    for phase in ("environment_setup", "agent_setup", "agent_execution", "verifier"):
        began, ended = getattr(ts, f"{phase}_started_at"), getattr(ts, f"{phase}_ended_at")
        if began is None or ended is None:
            continue
        offset = (began - start).total_seconds()
        length = (ended - began).total_seconds()
        bars.append({
            "phase": phase.replace("_", " "), "sec": length,
            "left": 100 * offset / total if total else 0.0,
            "width": max(0.5, 100 * length / total) if total else 0.0,
        })
    return bars
