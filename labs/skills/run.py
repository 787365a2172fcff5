"""Skills lab: the same chores with no skill, a given skill and a self-generated skill.

The task set is `tasks/byos` and two variants with other ledgers (made in a temporary
folder). Three conditions per task:

  no-skill        only the `solve` scene, no skills
  given-skill     only the `solve` scene, with `skills/ledger-balances` from this lab
  self-generated  the task's two scenes: `write-skill` writes a skill, `solve` uses it

    python labs/skills/run.py                       # the scripted agent (deterministic)
    python labs/skills/run.py --agent claude --model claude-sonnet-4-5   # a real agent

With the scripted agent the table shows the plumbing (its solver only follows a skill it
finds: no skill, reward 0); with a real agent it measures what the skill is worth.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import anyio
from rich.console import Console
from rich.table import Table

import benchflow as bf
from benchflow.task import load_task

HERE = Path(__file__).resolve().parent
BYOS = HERE.parents[1] / "tasks" / "byos"
GIVEN = HERE / "skills" / "ledger-balances"
LEDGERS = {
    "byos-q2": "date,account,amount\n2026-04-01,rent,-125000\n2026-04-02,salary,460000\n"
               "2026-04-11,travel,-45210\n2026-05-01,rent,-125000\n",
    "byos-eu": "date,account,amount\n2026-07-03,miete,-98000\n2026-07-03,gehalt,380000\n"
               "2026-07-19,lebensmittel,-7342\n2026-07-30,lebensmittel,-2210\n",
}
CONDITIONS = ("no-skill", "given-skill", "self-generated")


def task_set(root: Path) -> list[Path]:
    """tasks/byos and its variants: the same task with another ledger.csv."""
    tasks = [BYOS]
    for name, ledger in LEDGERS.items():
        copy = root / name
        shutil.copytree(BYOS, copy)
        (copy / "environment" / "ledger.csv").write_text(ledger)
        tasks.append(copy)
    return tasks


def scenes_for(task: Path, condition: str, agent: str, model: str | None) -> list[bf.Scene]:
    declared = load_task(task).scenes
    assert declared is not None
    scenes = declared.to_scenes(agent, model)
    if condition == "self-generated":
        return scenes
    solve = next(s for s in scenes if s.name == "solve")
    if condition == "given-skill":
        solve = solve.model_copy(update={"skills": [GIVEN]})
    return [solve]


async def run_all(agent: str, model: str | None, jobs_dir: Path, concurrency: int
                  ) -> dict[tuple[str, str], bf.RolloutResult]:
    results: dict[tuple[str, str], bf.RolloutResult] = {}
    limiter = anyio.CapacityLimiter(concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        tasks = task_set(Path(tmp))

        async def one(task: Path, condition: str) -> None:
            async with limiter:
                config = bf.RolloutConfig(
                    task_path=task, scenes=scenes_for(task, condition, agent, model),
                    jobs_dir=jobs_dir, job_name=f"skills-lab-{condition}",
                    dataset_name="skills-lab")
                results[(task.name, condition)] = await bf.run(config)

        async with anyio.create_task_group() as tg:
            for task in tasks:
                for condition in CONDITIONS:
                    tg.start_soon(one, task, condition)
    return results


def print_table(results: dict[tuple[str, str], bf.RolloutResult]) -> None:
    table = Table(title="skills lab: reward per task and condition")
    table.add_column("task")
    for condition in CONDITIONS:
        table.add_column(condition, justify="right")
    for task in sorted({t for t, _ in results}):
        row = [task]
        for condition in CONDITIONS:
            r = results[(task, condition)]
            row.append(r.error.type if r.error else f"{r.reward}")
        table.add_row(*row)
    means = ["mean"]
    for condition in CONDITIONS:
        rewards = [r.reward or 0.0 for (_, c), r in results.items() if c == condition]
        means.append(f"{sum(rewards) / len(rewards):.2f}")
    table.add_row(*means, style="bold")
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="scripted")
    parser.add_argument("--model", default=None,
                        help="model id; for the scripted agent, its script "
                             "(default: tasks/byos/scripted.yaml)")
    parser.add_argument("--jobs-dir", type=Path, default=Path("jobs"))
    parser.add_argument("--concurrency", type=int, default=3)
    args = parser.parse_args()
    model = args.model or (str(BYOS / "scripted.yaml") if args.agent == "scripted" else None)
    print_table(anyio.run(run_all, args.agent, model, args.jobs_dir, args.concurrency))


if __name__ == "__main__":
    main()
