"""The `agent-judge` verifier strategy: a registered agent scores the solver's work.

```markdown
---
strategy: agent-judge
agent: claude                 # any registered agent (claude, codex, gemini, opencode, ...)
model: claude-sonnet-4-6      # optional
rubric: rubrics/verifier.toml # criteria with weights (the llm-judge rubric format)
timeout_sec: 600
---
Notes for the judge.
```

After the solver, and after hardening, the judge agent starts in the same sandbox as its
own read-only role (`judge_role.py`: its own Unix user, the workspace root's and
unwritable by it), gets the task's instruction, the notes and the rubric, may inspect the
workspace, and must answer with one JSON object of the declared shape:

    {"scores": {"<criterion>": <number in [0, 1]>, ...}, "reasoning": "..."}

Every criterion exactly once; anything else is `verifier_reward_invalid` (never a silent
0). Rewards: `reward` = the weighted mean, `judge.<criterion>` each score. The judge's
trajectory is kept apart, in `<rollout>/verifier/judge/trajectory/acp_trajectory.jsonl`,
with its answer in `verifier/judge/scores.json`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import TYPE_CHECKING, Any

import anyio

from benchflow.config import Role, Scene
from benchflow.errors import RewardInvalidError, TaskInvalidError, VerifierTimeout
from benchflow.steps import Step
from benchflow.verify.rubric import Rubric, load_rubric

if TYPE_CHECKING:
    from benchflow.rollout.rollout import Rollout
    from benchflow.task.verifier_doc import VerifierDoc

PROMPT = """You are the judge of another agent's work in this sandbox. You may read any file
and run read-only commands; you cannot change the workspace ({workdir}), and you must not try.

## The task the agent was given
{instruction}
{notes}
## Rubric
{criteria}

Inspect the workspace as you need, then reply with one JSON object and nothing else:
{{"scores": {{{example}}}, "reasoning": "<two sentences>"}}
Each score is a number from 0 (not met) to 1 (fully met)."""


def task_rubric(rollout: Rollout) -> Rubric:
    """The rubric named by the task's verifier document.

    Raises:
        TaskInvalidError: missing or invalid.
    """
    assert rollout.task is not None
    path = rollout.task.verifier_dir / rollout.task.verifier_doc.rubric
    prose = path.with_suffix(".md")
    if not path.is_file():
        raise TaskInvalidError(f"{path}: missing: an agent-judge verifier needs a rubric "
                               "(criteria with descriptions and weights)")
    return load_rubric(path, prose.read_text(encoding="utf-8") if prose.is_file() else "")


def build_prompt(rubric: Rubric, *, instruction: str, notes: str, workdir: str) -> str:
    criteria = "\n".join(f"- `{c.name}` (weight {c.weight:g}): {c.description}"
                         for c in rubric.criteria)
    if rubric.prose:
        criteria = f"{rubric.prose.strip()}\n\n{criteria}"
    example = ", ".join(f'"{c.name}": <0..1>' for c in rubric.criteria)
    return PROMPT.format(workdir=workdir, instruction=instruction.strip(),
                         notes=f"\n## Notes for the judge\n{notes.strip()}\n" if notes else "",
                         criteria=criteria, example=example)


def parse_judge_scores(text: str, names: list[str]) -> dict[str, float]:
    """The scores of the judge's answer, strictly in the declared shape.

    Raises:
        RewardInvalidError: no JSON object with `scores`, a criterion missing or unknown, a
            score that is not a number in [0, 1].
    """
    shape = '{"scores": {' + ", ".join(f'"{n}": <0..1>' for n in names) + '}}'
    data: Any = None
    for match in reversed(list(re.finditer(r"\{.*\}", text, re.DOTALL))):
        try:
            data = json.loads(match.group(0))
            break
        except ValueError:
            continue
    if data is None:  # the greedy match failed: try each line-delimited object
        for line in reversed(text.splitlines()):
            try:
                data = json.loads(line.strip())
                break
            except ValueError:
                continue
    if not isinstance(data, dict) or not isinstance(data.get("scores"), dict):
        raise RewardInvalidError(f"the judge's answer has no JSON object with `scores`; "
                                 f"expected {shape}; answer: {text[-300:]!r}")
    scores: dict[str, Any] = data["scores"]
    missing = [n for n in names if n not in scores]
    unknown = [n for n in scores if n not in names]
    if missing or unknown:
        raise RewardInvalidError(
            f"the judge's scores do not match the rubric (missing: {missing or 'none'}, "
            f"unknown: {unknown or 'none'}); expected {shape}")
    out: dict[str, float] = {}
    for name in names:
        value = scores[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise RewardInvalidError(f"the judge's score for {name!r} is {value!r}: each "
                                     "score must be a number from 0 to 1")
        out[name] = float(value)
    return out


def judge_scene(doc: VerifierDoc) -> Scene | None:
    """The agent-judge's one-role scene (role `judge`), or None for other strategies; the
    rollout's model endpoint gives this role its own key from the start, as the solver's."""
    if doc.strategy != "agent-judge" or not doc.agent:
        return None
    return Scene.single(agent=doc.agent, model=doc.model, role="judge")


async def agent_judge(rollout: Rollout) -> dict[str, float]:
    """Harden, start the judge as its own read-only role, score from its answer.

    Raises:
        TaskInvalidError: no judge agent or rubric. RewardInvalidError: malformed scores.
        VerifierTimeout: the judge ran past `timeout_sec`. AgentError, ConfigError: as any
            agent's install and session.
    """
    from benchflow.agents.registry import get_driver
    from benchflow.trajectory.events import TrajectoryHeader
    from benchflow.trajectory.writer import TrajectoryWriter
    from benchflow.verify.hardening import harden
    from benchflow.verify.judge_role import judge_user

    task, sandbox, ctx = rollout.task, rollout.sandbox, rollout.ctx
    assert task is not None and sandbox is not None and ctx is not None
    doc = task.verifier_doc
    if not doc.agent:
        raise TaskInvalidError(f"{task.verifier_dir / 'verifier.md'}: agent: an agent-judge "
                               "verifier names the registered agent that judges (e.g. claude)")
    rubric = task_rubric(rollout)
    out = rollout.paths.verifier_dir / "judge"
    out.mkdir(parents=True, exist_ok=True)
    if rollout.baseline is not None:  # the solver's processes and planted files go first
        report = await harden(sandbox, rollout.baseline, agent_user=ctx.agent_user,
                              config=task.config.verifier.hardening,
                              verifier_mount=task.verifier_mount)
        (rollout.paths.verifier_dir / "hardening.json").write_text(
            report.model_dump_json(indent=2))
    user = await judge_user(sandbox, ctx.workdir)
    scene = judge_scene(task.verifier_doc)
    assert scene is not None
    if rollout.network is not None:
        scene = rollout.network.scenes([scene])[0]
    role: Role = scene.roles[0]
    header = TrajectoryHeader(job_name=rollout.job_name, rollout_name=rollout.rollout_name,
                              task_name=rollout.result.task_name, agents=[doc.agent],
                              models=[role.model] if role.model else [],
                              run_id=rollout.trace.run_id, trace_id=rollout.trace.trace_id,
                              span_id=rollout.trace.span_id)
    writer = TrajectoryWriter(out / "trajectory" / "acp_trajectory.jsonl", header)
    judge_ctx = dataclasses.replace(ctx, agent_user=user.name, trajectory=writer,
                                    created_user=user, python_paths={}, oracle_placed=None,
                                    agent_deadline=None)
    driver = get_driver(doc.agent)
    prompt = build_prompt(rubric, instruction=task.instruction, notes=doc.body,
                          workdir=ctx.workdir)
    (out / "prompt.md").write_text(prompt)
    step = Step(scene="verifier", scene_index=0, turn_index=0, role=role, prompt=prompt)
    limit = doc.timeout_sec * rollout.config.timeout_multiplier
    try:
        with anyio.fail_after(limit):
            await driver.install(judge_ctx)
            async with driver.connect(judge_ctx, role, "verifier") as connection:
                outcome = await connection.prompt(step)
    except TimeoutError as exc:
        raise VerifierTimeout("verifier", limit, f"the judge agent exceeded its timeout of "
                              f"{limit:g} s") from exc
    finally:
        writer.close()
    (out / "reply.txt").write_text(outcome.agent_text)
    names = [c.name for c in rubric.criteria]
    scores = parse_judge_scores(outcome.agent_text, names)
    total = sum(c.weight for c in rubric.criteria)
    weighted = sum(scores[c.name] * c.weight for c in rubric.criteria) / total
    rewards = {"reward": round(weighted, 6), **{f"judge.{n}": scores[n] for n in names}}
    (out / "scores.json").write_text(json.dumps(
        {"agent": doc.agent, "model": role.model, "rubric": rubric.source, "rewards": rewards,
         "judge_user": user.name}, indent=2))
    return rewards


__all__ = ["PROMPT", "agent_judge", "build_prompt", "judge_scene", "parse_judge_scores",
           "task_rubric"]
