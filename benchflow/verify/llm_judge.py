"""The LLM-judge verifier of container tasks.

After hardening (and test.sh, when the task has one too), the judge model sees the
instruction, the agent's final message, the verifier prose and the rubric's files read
from the sandbox, and scores every criterion in [0, 1]. Rewards:

- `judge`: the weighted mean of the criteria; `judge.<criterion>`: each score;
- with test.sh: `script` (test.sh's reward) and its other keys, and `reward` =
  `script_weight * script + (1 - script_weight) * judge`; without: `reward` = `judge`.

The prompt and the raw reply are kept in `<rollout>/verifier/judge/`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from benchflow.config import ModelEndpoint
from benchflow.errors import ProviderError, VerifierError
from benchflow.sandbox.base import Sandbox
from benchflow.verify.metrics.judge import parse_score
from benchflow.verify.rubric import JudgeVerifier

MAX_FILE_CHARS = 20_000
MAX_FILES = 20

JUDGE_PROMPT = """You are a strict grader. Score an AI agent's work against a rubric.

## The task the agent was given
{instruction}

## The agent's final message
{agent_message}
{context}
## Files from the agent's workspace
{files}

## Rubric
{criteria}

For each criterion give a score from 0 (not met) to 1 (fully met).
Reply with a JSON object only:
{{"scores": {{{example}}}, "reasoning": "<two sentences>"}}"""


@dataclass(frozen=True)
class JudgeRun:
    """The judge's endpoint (with a model id) and call limits."""

    endpoint: ModelEndpoint
    max_retries: int = 3
    timeout_sec: float = 120.0


async def read_files(sandbox: Sandbox, judge: JudgeVerifier) -> dict[str, str]:
    """The rubric's files (or up to MAX_FILES files of `input_dir`), read as root."""
    paths = list(judge.rubric.files)
    if not paths:
        listing = await sandbox.exec(
            ["sh", "-c", (f"find {shlex.quote(judge.input_dir)} -maxdepth 2 -type f "
                          f"-not -path '*/.git/*' | sort | head -n {MAX_FILES}")],
            user="root", timeout=30)
        paths = [p for p in listing.stdout.decode("utf-8", "replace").splitlines() if p]
    files: dict[str, str] = {}
    for path in paths:
        result = await sandbox.exec(["cat", "--", path], user="root", timeout=30)
        if result.ok:
            text = result.stdout.decode("utf-8", "replace")
            if len(text) > MAX_FILE_CHARS:
                text = text[:MAX_FILE_CHARS] + f"\n[... {len(text) - MAX_FILE_CHARS} characters cut]"
        else:
            text = "(this file does not exist or cannot be read)"
        files[path] = text
    return files


def build_prompt(judge: JudgeVerifier, *, instruction: str, agent_message: str,
                 files: dict[str, str]) -> str:
    criteria = "\n".join(f"- `{c.name}` (weight {c.weight:g}): {c.description}"
                         for c in judge.rubric.criteria)
    if judge.rubric.prose:
        criteria = f"{judge.rubric.prose}\n\n{criteria}"
    shown = "\n\n".join(f"### {path}\n```\n{text}\n```" for path, text in files.items())
    context = f"\n## Notes for the grader\n{judge.context}\n" if judge.context else ""
    example = ", ".join(f'"{c.name}": <0..1>' for c in judge.rubric.criteria)
    return JUDGE_PROMPT.format(instruction=instruction.strip(),
                               agent_message=agent_message.strip() or "(none)",
                               context=context, files=shown or "(no files)",
                               criteria=criteria, example=example)


def parse_scores(reply: str, names: list[str]) -> dict[str, float]:
    """Each criterion's score from the judge's reply (a JSON `scores` object, or lines
    `name: score`).

    Raises:
        VerifierError: a criterion has no score.
    """
    found: dict[str, float] = {}
    for match in re.finditer(r"\{.*\}", reply, re.DOTALL):
        try:
            data = json.loads(match.group(0))
        except ValueError:
            continue
        scores = data.get("scores", data) if isinstance(data, dict) else None
        if isinstance(scores, dict):
            for name in names:
                value = scores.get(name)
                if isinstance(value, dict):
                    value = value.get("score")
                score = parse_score(json.dumps({"score": value})) if value is not None else None
                if score is not None:
                    found[name] = score
        if found:
            break
    for name in names:
        if name not in found:
            line = re.search(rf"{re.escape(name)}\W+(.+)", reply)
            score = parse_score(line.group(1)) if line else None
            if score is not None:
                found[name] = score
    missing = [n for n in names if n not in found]
    if missing:
        raise VerifierError(f"the judge gave no score for {', '.join(missing)}; reply: "
                            f"{reply[:300]!r}")
    return found


async def run_judge(sandbox: Sandbox, judge: JudgeVerifier, run: JudgeRun, *, instruction: str,
                    agent_message: str, out_dir: Path) -> dict[str, float]:
    """Ask the judge; returns `judge` and `judge.<criterion>` rewards.

    Raises:
        VerifierError: the judge's call failed or its reply lacks a criterion's score.
    """
    from benchflow.models import ModelClient

    files = await read_files(sandbox, judge)
    prompt = build_prompt(judge, instruction=instruction, agent_message=agent_message,
                          files=files)
    folder = out_dir / "judge"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prompt.md").write_text(prompt)
    try:
        async with ModelClient(run.endpoint, max_retries=run.max_retries,
                               timeout_sec=run.timeout_sec) as client:
            reply = await client.chat([{"role": "user", "content": prompt}], temperature=0.0)
    except ProviderError as exc:
        raise VerifierError(f"the LLM judge failed: {exc}") from exc
    (folder / "reply.txt").write_text(reply.text)
    names = [c.name for c in judge.rubric.criteria]
    scores = parse_scores(reply.text, names)
    total = sum(c.weight for c in judge.rubric.criteria)
    weighted = sum(scores[c.name] * c.weight for c in judge.rubric.criteria) / total
    rewards = {"judge": round(weighted, 6), **{f"judge.{n}": round(scores[n], 6) for n in names}}
    (folder / "scores.json").write_text(json.dumps(
        {"model": reply.model, "rubric": judge.rubric.source, "rewards": rewards,
         "tokens": {"input": reply.usage.input, "output": reply.usage.output}}, indent=2))
    return rewards


def combine(judge: JudgeVerifier, judge_rewards: dict[str, float],
            script_rewards: dict[str, float] | None) -> dict[str, float]:
    """The headline and every score, from the judge's and (if any) test.sh's rewards."""
    if script_rewards is None:
        return {"reward": judge_rewards["judge"], **judge_rewards}
    script = script_rewards["reward"]
    headline = judge.script_weight * script + (1 - judge.script_weight) * judge_rewards["judge"]
    others = {k: v for k, v in script_rewards.items() if k != "reward"}
    return {"reward": round(headline, 6), "script": script, **others, **judge_rewards}


__all__ = ["JUDGE_PROMPT", "JudgeRun", "build_prompt", "combine", "parse_scores", "read_files",
           "run_judge"]
