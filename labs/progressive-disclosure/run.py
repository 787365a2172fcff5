"""Progressive disclosure: a scripted user reveals the spec round by round and stops on pass.

Round 0 gets a terse spec; round 1 the names of the failing tests (never the expected
values); round 2 the full spec. Each round is a fresh ACP session in the same sandbox; a
soft verify scores every round; the final score comes from the full hardened verify.

    python labs/progressive-disclosure/run.py [--agent scripted] [--model SCRIPT]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

import anyio
from rich.console import Console
from rich.table import Table

import benchflow as bf
from benchflow.users import BaseUser, RoundResult

HERE = Path(__file__).resolve().parent
TASK = HERE.parents[1] / "tasks" / "progressive-disclosure"
TERSE = "Write slugify(text) in /app/slug.py: it turns a title into a URL slug."
FAILED = re.compile(r"^FAILED \S*::(\w+)", re.MULTILINE)


class ProgressiveUser(BaseUser):
    """Terse spec, then failing test names as hints, then the full spec; stops on pass."""

    async def run(self, round: int, instruction: str, round_result: RoundResult | None
                  ) -> str | None:
        if round_result is not None and round_result.passed:
            return None
        if round == 0:
            return TERSE
        if round == 1:
            names = FAILED.findall(round_result.verifier_output if round_result else "")
            hints = ", ".join(names) or "some tests"
            return f"These tests still fail: {hints}. Fix slugify in /app/slug.py."
        if round == 2:
            return instruction
        return None


async def main(agent: str, model: str | None, jobs_dir: Path) -> bf.RolloutResult:
    config = bf.RolloutConfig(
        task_path=TASK, scenes=[bf.Scene.single(agent=agent, model=model)],
        user=ProgressiveUser(), max_user_rounds=4, jobs_dir=jobs_dir,
        job_name="progressive-disclosure")
    return await bf.run(config)


def print_rounds(result: bf.RolloutResult, jobs_dir: Path) -> None:
    rollout_dir = jobs_dir / result.job_name / result.rollout_name
    table = Table(title=f"{result.task_name}: final reward {result.reward}")
    for column in ("round", "prompt", "reward", "passed", "tool calls"):
        table.add_column(column)
    for line in (rollout_dir / "user_rounds.jsonl").read_text().splitlines():
        r = json.loads(line)
        rewards = r["rewards"] or {}
        table.add_row(str(r["round"]), r["prompt"][:60], str(rewards.get("reward", "-")),
                      str(rewards.get("passed_fraction", "-")), str(r["n_tool_calls"]))
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agent", default="scripted")
    parser.add_argument("--model", default=str(HERE / "scripted.yaml"))
    parser.add_argument("--jobs-dir", type=Path, default=None)
    args = parser.parse_args()
    jobs = args.jobs_dir or Path(tempfile.mkdtemp(prefix="bf-progressive-"))
    outcome = anyio.run(main, args.agent, args.model, jobs)
    print_rounds(outcome, jobs)
    if outcome.error:
        raise SystemExit(f"error: {outcome.error.type}: {outcome.error.message}")
