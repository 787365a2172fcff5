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
from benchflow.rollout.secrets import Scrubber
from benchflow.traces.reader import read_events, span_tree
from benchflow.traces.store import TRACE_EVENTS
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
from benchflow.view.timeline import role_timeline as role_timeline_of

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


def _model_label(model: str | None) -> str:
    """A model as a label shows it: a script's file name rather than its path."""
    if model is None:
        return "–"
    if "/" in model and model.endswith((".yaml", ".yml", ".json")):
        return model.rsplit("/", 1)[1]
    return model


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("benchflow.view", "templates"),
        autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(num=_fmt_num, pct=_fmt_pct, sec=_fmt_sec, time=_fmt_time, tojson_pretty=_json,
                       model=_model_label)
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
    job comparison form (it needs the server). `base` is where the served pages live
    (`/studies/<name>/` for a study under the viewer's root).
    """

    def __init__(self, root: Path, *, static: bool = False, base: str = "/") -> None:
        self.root = root
        self.static = static
        self.base = base
        self.env = environment()
        self.redact = Scrubber()
        """Every page passes the redactor (the host's secret values, API-key shapes):
        rollouts mask what they write, and files of older versions are masked here."""

    def _render(self, template: str, depth: int, **context: Any) -> str:
        base = "../" * depth if self.static else self.base
        return self.redact.text(self.env.get_template(template).render(
            base=base, static=self.static, **context))

    def jobs(self) -> str:
        from benchflow.view.studies import study_of, studies_in

        jobs = data.list_jobs(self.root)
        return self._render("jobs.html", 0, jobs=jobs, root=str(self.root),
                            live=any(j.running for j in jobs), study=study_of(self.root),
                            studies=studies_in(self.root))

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
        played = {n: (r.agent, r.model) for n, r in result.roles.items()} if result else None
        role_timeline = role_timeline_of(paths.trajectory, played) if page == 1 else []
        for bar in role_timeline:
            if bar.role not in roles:
                roles.append(bar.role)
        agent_trace = span_tree(read_events(trial_dir / TRACE_EVENTS)) if page == 1 else []
        return self._render(
            "trial.html", 5, job=job_dir.name, rel=rel, result=result, traj=traj,
            roles={name: i % ROLE_COLOURS for i, name in enumerate(roles)},
            config=data.trial_config(trial_dir), logs=data.trial_logs(self.root, trial_dir),
            timeline=timeline, role_timeline=role_timeline, live=result is None, page=page,
            agent_trace=agent_trace,
            forks=data.forks_of(self.root, f"{job_dir.name}/{rel}") if page == 1 else [],
        )

    def compare(self, sources: list[Path], baseline: str | None = None,
                errors: str = "exclude") -> str:
        """Arms of job or study folders compared (see `benchflow.view.compare`)."""
        from benchflow.view.compare import compare_page

        page = compare_page(self.root, sources, base="" if self.static else self.base,
                            baseline=baseline, errors=errors, side_by_side=not self.static)
        return self._render("compare.html", 0, page=page, live=page.live)

    def side_by_side(self, a: str, b: str) -> str | None:
        """Two trials of one task (`<job>/<agent>/<dataset>/<task>__<n>` each), side by
        side with links to their other attempts; None when either is not a trial."""
        from urllib.parse import urlencode

        from benchflow.view.compare import side_trial

        sides = [side_trial(self.root, a), side_trial(self.root, b)]
        if sides[0] is None or sides[1] is None:
            return None
        left, right = sides
        attempts = []
        for n, (mine, theirs) in enumerate(zip(left.attempts, right.attempts, strict=False),
                                           start=1):
            query = urlencode({"a": f"{left.job}/{mine}", "b": f"{right.job}/{theirs}"})
            attempts.append((n, f"{self.base}side-by-side.html?{query}"))
        current = left.attempts.index(left.rel) + 1 if left.rel in left.attempts else 0
        task = left.rel.split("/")[-1].rpartition("__")[0]
        return self._render("side_by_side.html", 0, sides=sides, task=task,
                            attempts=attempts, current=current,
                            live=left.running or right.running)


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
