"""Record the golden trajectories of the real agents: `make golden` (docs: tests/golden/README.md).

Two rollouts of `tests/conformance/tasks/offline-coder-reviewer` (coder -> reviewer ->
coder) run against benchflow's scripted model server (`tests/conformance/coder-reviewer.yaml`)
with every model call captured: claude codes and codex reviews; gemini codes and opencode
reviews. The npm agents install inside the sandbox (cached as an image layer afterwards).

The rollout folders are then normalized into `tests/golden/job/` (the layout of a job
folder, so the exporters and the viewer read it as they read a real one): timestamps,
durations, trace ids and host paths fixed; session ids named by role; long strings of
the captured calls (system prompts, tool descriptions) cut; the agents' command lists
(`available_commands_update`) dropped. Everything an exporter or the viewer reads (tool
call updates, usage, messages, tool results) is kept as the agents sent it.

    python -m tests.golden.record            # record and normalize into tests/golden/job
    python -m tests.golden.record --keep DIR # also keep the raw job folder in DIR
    python -m tests.golden.record --normalize DIR/golden  # only normalize a kept folder
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
REPO = HERE.parents[1]
TASK = REPO / "tests" / "conformance" / "tasks" / "offline-coder-reviewer"
SCRIPT = REPO / "tests" / "conformance" / "coder-reviewer.yaml"
GOLDEN_JOB = HERE / "job"
JOB_NAME = "golden"

PAIRS = {  # rollout -> (coder, reviewer)
    "claude+codex": ("claude", "codex"),
    "gemini+opencode": ("gemini", "opencode"),
}
"""Each real agent plays one role of a two-role scene."""

# What the scripted model has each role run, and what the command prints.
COMMANDS = {
    "coder": [("printf '3\\n4\\n5\\n' > /app/numbers.txt", None),
              ("awk '{ s += $1 } END { print s }' /app/numbers.txt | tee /app/sum.txt", "12"),
              ("cat /app/review.md", "approved: 3+4+5 = 12"),
              ("echo done | tee /app/done.txt", "done")],
    "reviewer": [("cat /app/numbers.txt /app/sum.txt", "12"),
                 ("echo 'approved: 3+4+5 = 12' | tee /app/review.md", "approved: 3+4+5 = 12")],
}

_BASE_TS = datetime(2026, 1, 1, tzinfo=UTC)
_MAX_CHARS = 300


async def run_pairs(jobs_dir: Path, job_name: str = JOB_NAME,
                    pairs: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """Run one rollout per pair (in parallel), calls captured; returns results by label."""
    import anyio

    from benchflow.config import ModelEndpoint, RolloutConfig
    from benchflow.roles import RoleAgent
    from benchflow.rollout import Rollout
    from benchflow.rollout.scenes import task_scenes
    from benchflow.task import load_task

    task = load_task(TASK)
    results: dict[str, Any] = {}

    async def one(label: str, coder: str, reviewer: str) -> None:
        scenes = task_scenes(task, None, assigned={"coder": RoleAgent(coder),
                                                   "reviewer": RoleAgent(reviewer)})
        config = RolloutConfig(task_path=TASK, scenes=scenes, jobs_dir=jobs_dir,
                               job_name=job_name, capture_model_calls=True,
                               model_endpoint=ModelEndpoint(script=SCRIPT))
        results[label] = await Rollout(config, task=task).run()

    async with anyio.create_task_group() as tg:
        for label, (coder, reviewer) in (pairs or PAIRS).items():
            tg.start_soon(one, label, coder, reviewer)
    return results


def rollout_dirs(job_dir: Path) -> dict[str, Path]:
    """The rollout folders of a job, by agent label (`claude+codex`)."""
    return {p.parents[1].name: p.parent for p in sorted(job_dir.glob("*/*/*/result.json"))}


def _cut(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= _MAX_CHARS else value[:_MAX_CHARS] + "…[cut]"
    if isinstance(value, list):
        return [_cut(v) for v in value]
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    return value


def _ts(n: int) -> str:
    return (_BASE_TS + timedelta(milliseconds=100 * n)).isoformat().replace("+00:00", "Z")


def normalize_trajectory(src: Path, dst: Path) -> None:
    lines = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    sessions: dict[str, str] = {}
    out = []
    for line in lines:
        if line.get("type") == "header":
            line.update(started_at=_ts(0), run_id=None, trace_id=None, span_id=None)
            out.append({k: v for k, v in line.items() if v is not None})
            continue
        if line.get("type") == "agent_state" and line.get("name") == "available_commands_update":
            continue
        line["ts"] = _ts(line["seq"])
        line.pop("trace_id", None)
        line.pop("span_id", None)
        sid = line.get("session_id")
        if sid:
            line["session_id"] = sessions.setdefault(
                sid, f"session-{line.get('role')}-{len(sessions)}")
        out.append(line)
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in out)
    for raw, fixed in sessions.items():
        text = text.replace(raw, fixed)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text)


_SCHEMA_KEYS = ("input_schema", "parameters", "parametersJsonSchema")


def _slim_tools(value: Any) -> Any:
    """Tool definitions with their schemas reduced to `{"type": "object"}` (names kept)."""
    if isinstance(value, list):
        return [_slim_tools(v) for v in value]
    if isinstance(value, dict):
        return {k: ({"type": "object"} if k in _SCHEMA_KEYS else
                    v[:80] if k == "description" and isinstance(v, str) else _slim_tools(v))
                for k, v in value.items()}
    return value


def normalize_calls(src: Path, dst: Path) -> None:
    out = []
    for line in src.read_text().splitlines():
        if not line.strip():
            continue
        call = json.loads(line)
        call["ts"] = _ts(call.get("seq", 0))
        call["duration_sec"] = 0.0
        request = call.get("request")
        if isinstance(request, dict) and "tools" in request:
            request["tools"] = _slim_tools(request["tools"])
        out.append(_cut(call))
    dst.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in out))


def normalize_result(src: Path, dst: Path) -> None:
    result = json.loads(src.read_text())
    result.update(run_id=None, trace_id=None, span_id=None, trajectory_path=None,
                  task_git_commit_id=None, agent_install_cache=None)
    result["timestamps"] = {k: (_ts(0) if v else None) for k, v in result["timestamps"].items()}
    result["durations"] = {k: None for k in result["durations"]}
    dst.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")


def normalize(job_dir: Path, out: Path = GOLDEN_JOB) -> None:
    """Write the normalized copy of `job_dir`'s rollouts into `out` (replaced)."""
    if out.exists():
        shutil.rmtree(out)
    for rollout in job_dir.glob("*/*/*/result.json"):
        src = rollout.parent
        dst = out / src.relative_to(job_dir)
        dst.mkdir(parents=True)
        normalize_result(src / "result.json", dst / "result.json")
        normalize_trajectory(src / "trajectory" / "acp_trajectory.jsonl",
                             dst / "trajectory" / "acp_trajectory.jsonl")
        if (src / "model_calls.jsonl").exists():
            normalize_calls(src / "model_calls.jsonl", dst / "model_calls.jsonl")


def _secrets_free(out: Path) -> None:
    """The goldens hold no role key (`benchflow-<hex>`)."""
    pattern = re.compile(r"benchflow-[0-9a-f]{32}")
    for path in out.rglob("*"):
        if path.is_file() and pattern.search(path.read_text(errors="replace")):
            raise SystemExit(f"{path}: a role key leaked into the golden files")


def main(argv: list[str] | None = None) -> int:
    import anyio

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="also keep the raw job folder here")
    parser.add_argument("--normalize", type=Path, help="normalize this raw job folder only")
    args = parser.parse_args(argv)
    if args.normalize is not None:
        normalize(args.normalize)
        _secrets_free(GOLDEN_JOB)
        return 0
    jobs_dir = args.keep or Path(tempfile.mkdtemp(prefix="benchflow-golden-"))
    results = anyio.run(run_pairs, jobs_dir, backend="asyncio")
    failed = {k: (r.reward, r.error) for k, r in results.items()
              if r.error is not None or r.reward != 1.0}
    for label, result in results.items():
        roles = {n: (r.agent, r.tokens.input if r.tokens else None, r.usage_source)
                 for n, r in result.roles.items()}
        print(f"{label}: reward {result.reward} error {result.error} roles {roles}")
    if failed:
        print(f"not recorded: {failed} (raw folders in {jobs_dir})", file=sys.stderr)
        return 1
    normalize(jobs_dir / JOB_NAME)
    _secrets_free(GOLDEN_JOB)
    if args.keep is None:
        shutil.rmtree(jobs_dir, ignore_errors=True)
    print(f"golden files written to {GOLDEN_JOB}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
