"""Role switch cost: the gap between one role's turn ending and the next role's prompt
being sent, in a coder/reviewer scene of alternating turns.

Each role keeps its agent process and ACP session for the whole scene, so a switch to a
role that already had a turn should cost next to nothing; the first turn of each role
includes starting its agent (reported apart). `--fresh` runs the same scene with
`session: fresh` roles (a new agent process at every switch, the behaviour before
persistent sessions) for comparison. Target: warm switches median < 0.5 s, p95 < 1 s.

Agents: `scripted` (benchflow's deterministic ACP agent), or real npm agents (claude,
codex, gemini, opencode) against benchflow's scripted model server, offline: each turn
the model runs one shell command, then answers. The first run of a real agent installs
it with npm (cached as an image layer afterwards).

    python labs/benchmarks/role_switch.py [--agents scripted,claude] [--turns 8] [--runs 3]
        [--fresh] [--no-workspace-changes] [--workspace-files N]

A switch includes what benchflow does between two turns: recording the turn's workspace
changes (a stat walk of the workspace, then one call hashing and diffing the files whose
status changed; `--no-workspace-changes` leaves it out). `--workspace-files N` puts N
small files (2.7 KB) in the workspace before the first turn, as a repository would: the
walk's cost grows with them.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import yaml

from benchflow import Role, RolloutConfig, Scene, Turn
from benchflow.agents.base import StepOutcome
from benchflow.config import ModelEndpoint
from benchflow.rollout import Rollout
from benchflow.steps import Step

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tests" / "conformance" / "tasks" / "offline-two-step"
ROLES = ("coder", "reviewer")


class TimedRollout(Rollout):
    """A rollout that notes when each turn ends and when the next prompt goes out."""

    def __init__(self, *args, seed_files: int = 0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.marks: list[tuple[str, str, float]] = []  # (event, role, monotonic time)
        self.seed_files = seed_files

    async def install_agent(self) -> None:
        await super().install_agent()
        if self.seed_files and self.sandbox is not None:  # a few processes, not one a file
            size = self.seed_files * 36 * 57  # base64: 57 bytes a line, 36 lines a file
            await self.sandbox.exec(["sh", "-c", f"mkdir -p /app/seed && cd /app/seed && "
                                     f"head -c {size} /dev/urandom | base64 | "
                                     "split -l 36 -a 6 - f"])

    def _enter_step(self, step: Step) -> None:
        super()._enter_step(step)
        self.marks.append(("send", step.role.name, time.monotonic()))

    async def _after_step(self, step: Step, outcome: StepOutcome) -> None:
        self.marks.append(("end", "", time.monotonic()))  # then what benchflow does between
        await super()._after_step(step, outcome)          # turns (workspace changes)


def scripted_script(folder: Path, turns: int) -> Path:
    path = folder / "script.yaml"
    shell = {"type": "shell", "command": "echo turn >> /app/log.txt"}
    path.write_text(yaml.safe_dump({"roles": {role: {"turns": [
        {"repeat": True, "actions": [shell, {"type": "message", "text": f"{role} done"}]}]}
        for role in ROLES}}))
    return path


def model_script(folder: Path, turns: int) -> Path:
    """Each turn of each role: one shell command, then text. One step list serves both
    roles: a step is chosen by the position in the calling role's own conversation (its
    tool results and finished turns), so a role's k-th turn plays steps 2k and 2k+1."""
    path = folder / "model.yaml"
    steps: list[dict[str, str]] = []
    for i in range(turns):
        steps += [{"shell": f"echo turn-{i} >> /app/log.txt"}, {"text": f"turn {i} done"}]
    path.write_text(yaml.safe_dump({"name": "role-switch", "steps": steps}))
    return path


def scene(agent: str, model: str | None, turns: int, fresh: bool) -> Scene:
    session = "fresh" if fresh else "persistent"
    roles = [Role(name=r, agent=agent, model=model, session=session) for r in ROLES]
    prompts = {r: f"ROLE-SWITCH-{r.upper()}: append a line to /app/log.txt." for r in ROLES}
    return Scene(name="switch", roles=roles,
                 turns=[Turn(role=ROLES[i % 2], prompt=prompts[ROLES[i % 2]])
                        for i in range(turns)])


async def one_run(agent: str, turns: int, fresh: bool, jobs_dir: Path, i: int,
                  changes: bool = True, multiplier: float = 1.0, seed_files: int = 0
                  ) -> tuple[list[float], list[float], float]:
    folder = jobs_dir / f"scripts-{i}"
    folder.mkdir(parents=True, exist_ok=True)
    if agent == "scripted":
        model, endpoint = str(scripted_script(folder, turns)), None
    else:
        model, endpoint = None, ModelEndpoint(script=model_script(folder, turns))
    rollout = TimedRollout(RolloutConfig(
        task_path=TASK, scenes=[scene(agent, model, turns, fresh)], jobs_dir=jobs_dir,
        job_name=f"switch-{agent}", attempt=i + 1, verifier_disabled=True,
        model_endpoint=endpoint, workspace_changes=changes, timeout_multiplier=multiplier),
        seed_files=seed_files)
    result = await rollout.run()
    if result.error is not None:
        raise SystemExit(f"{agent}: {result.error.type}: {result.error.message}")
    if result.n_tool_calls < turns:  # every turn ran its command: the turns were real
        raise SystemExit(f"{agent}: {result.n_tool_calls} tool calls in {turns} turns")
    warm, cold, seen = [], [], set()
    last_end = None
    for event, role, at in rollout.marks:
        if event == "end":
            last_end = at
            continue
        if last_end is not None:
            (warm if role in seen else cold).append(at - last_end)
        seen.add(role)
    return warm, cold, result.durations.agent_execution_sec or 0.0


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def main(agents: list[str], turns: int, runs: int, fresh: bool, changes: bool,
               multiplier: float = 1.0, seed_files: int = 0) -> None:
    print(f"role switches: {turns} alternating turns (coder/reviewer, one agent program), "
          f"{runs} run(s) per agent, {'fresh' if fresh else 'persistent'} sessions, "
          f"workspace changes {'on' if changes else 'off'}, "
          f"{seed_files} more files in the workspace")
    print(f"{'agent':<9} {'warm n':>6} {'median s':>9} {'p95 s':>7} {'max s':>7}"
          f" {'first-turn s':>12} {'agent phase s':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for agent in agents:
            warm: list[float] = []
            cold: list[float] = []
            phase: list[float] = []
            for i in range(runs):
                w, c, p = await one_run(agent, turns, fresh, Path(tmp), i, changes, multiplier,
                                        seed_files)
                warm += w
                cold += c
                phase.append(p)
            print(f"{agent:<9} {len(warm):>6} {statistics.median(warm):>9.3f} "
                  f"{p95(warm):>7.3f} {max(warm):>7.3f} {statistics.median(cold):>12.3f} "
                  f"{statistics.median(phase):>13.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="scripted")
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fresh", action="store_true",
                        help="session: fresh roles (a new agent at every switch)")
    parser.add_argument("--no-workspace-changes", action="store_true",
                        help="do not record workspace changes between turns")
    parser.add_argument("--timeout-multiplier", type=float, default=1.0,
                        help="more time for slow agents on a busy machine")
    parser.add_argument("--workspace-files", type=int, default=0,
                        help="put this many small files in the workspace first")
    args = parser.parse_args()
    anyio.run(main, args.agents.split(","), args.turns, args.runs, args.fresh,
              not args.no_workspace_changes, args.timeout_multiplier, args.workspace_files)
