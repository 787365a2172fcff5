"""Multi-step tasks and separate verifier environments, end to end in Docker.

`tasks/multi-step` (two Harbor steps, a min_reward gate on the first) and
`tasks/separate-verifier` (tests in their own sandbox built from tests/Dockerfile, one
artifact carried over) with the oracle, nop and the scripted ACP agent, plain and hardened.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from benchflow import Scene
from benchflow.trajectory import iter_events

from .conftest import TASKS
from .test_scenes import run_rollout, script, single

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

MULTI = TASKS / "multi-step"
SEPARATE = TASKS / "separate-verifier"
GREET = "def greet(name: str) -> str:\n    return f'Hello, {name}!'\n"
FAREWELL = GREET + "\n\ndef farewell(name: str) -> str:\n    return f'Goodbye, {name}!'\n"


def score_warnings(result) -> list[str]:
    """The result's warnings but the disk watchdog's note (docker here has no storage quota)."""
    return [w for w in result.warnings if "disk watchdog" not in w]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def write(path: str, content: str) -> dict[str, Any]:
    return {"type": "write_file", "path": path, "content": content}


@pytest.mark.parametrize("harden", [False, True])
async def test_oracle_runs_each_step_and_scores_both(tmp_path, job_label, harden):
    result, paths = await run_rollout(MULTI, [Scene.single(agent="oracle")], tmp_path / "jobs",
                                      job_label, harden=harden)
    assert result.error is None, result.error
    assert result.reward == 1.0
    assert [(s.name, s.reward, s.gate_failed) for s in result.steps] == [
        ("create", 1.0, None), ("extend", 1.0, None)]
    assert result.rewards is not None
    assert result.rewards["create/reward"] == 1.0 and result.rewards["extend/setup_ran"] == 1.0
    oracle_runs = [e for e in iter_events(paths.trajectory) if e.type == "oracle"]
    assert [e.task_step for e in oracle_runs] == ["create", "extend"]
    assert all(e.exit_code == 0 for e in oracle_runs)  # type: ignore[attr-defined]
    for name, reward_file in (("create", "reward.txt"), ("extend", "reward.json")):
        kept = paths.root / "steps" / name / "logs" / "verifier"
        assert (kept / "stdout.txt").is_file() and (kept / reward_file).is_file()
    kept = [(paths.root / "steps" / name / "artifacts" / "app" / "greet.py").read_text()
            for name in ("create", "extend")]
    assert "farewell" not in kept[0] and "def farewell" in kept[1]  # each step's own snapshot


async def test_a_step_under_min_reward_stops_the_rollout(tmp_path, job_label):
    result, paths = await run_rollout(MULTI, [Scene.single(agent="nop")], tmp_path / "jobs",
                                      job_label)
    assert result.error is None
    assert [s.name for s in result.steps] == ["create"]
    assert result.steps[0].gate_failed == (
        "step 'create' scored reward=0, below min_reward 1")
    assert result.reward == 0.0
    assert any("the remaining steps did not run" in w for w in result.warnings)
    assert not (paths.root / "steps" / "extend").exists()


async def test_scripted_agent_steps_share_the_sandbox_and_are_attributed(tmp_path, job_label):
    """Hardened (the scripted agent is untrusted): step 1 is soft-verified in place, so
    step 2 builds on its file; step 2 is right about farewell but breaks greet."""
    broken = FAREWELL.replace("Hello", "Hi")
    play = script(tmp_path, [
        {"match": "^Write", "actions": [write("/app/greet.py", GREET)]},
        {"match": "^Add", "actions": [
            {"type": "shell", "command": "cat /app/style.txt /app/greet.py"},
            write("/app/greet.py", broken)]},
    ])
    result, paths = await run_rollout(MULTI, single(play), tmp_path / "jobs", job_label)
    assert result.error is None, result.error
    assert [(s.name, s.reward) for s in result.steps] == [("create", 1.0), ("extend", 0.0)]
    assert [(s.n_prompts, s.n_tool_calls) for s in result.steps] == [(1, 1), (1, 2)]
    assert result.reward == 0.5  # mean over the two steps
    assert result.rewards is not None and result.rewards["extend/farewell"] == 1.0
    events = list(iter_events(paths.trajectory))
    prompts = [(e.task_step, e.text.split()[0]) for e in events if e.type == "user_message"]
    assert prompts == [("create", "Write"), ("extend", "Add")]
    outputs = [e for e in events if e.type == "tool_call_update" and e.task_step == "extend"]
    assert any("Functions are separated" in str(e.update) for e in outputs)


@pytest.mark.parametrize("harden", [False, True])
async def test_separate_verifier_scores_the_artifact_in_its_own_sandbox(tmp_path, job_label,
                                                                        harden):
    result, paths = await run_rollout(SEPARATE, [Scene.single(agent="oracle")],
                                      tmp_path / "jobs", job_label, harden=harden)
    assert result.error is None, result.error
    assert result.reward == 1.0
    assert (paths.root / "artifacts" / "app" / "out" / "report.json").is_file()
    out = (paths.verifier_logs_dir / "stdout.txt").read_text()
    assert "input.txt present: False" in out  # the verifier's image, not the agent's


async def test_a_missing_artifact_is_a_warning_and_the_verifier_decides(tmp_path, job_label):
    result, _ = await run_rollout(SEPARATE, [Scene.single(agent="nop")], tmp_path / "jobs",
                                  job_label)
    assert result.error is None and result.reward == 0.0
    assert score_warnings(result) == [("artifact /app/out did not exist in the agent's sandbox; the "
                                "separate verifier ran without it")]


async def test_nothing_but_the_artifacts_reaches_the_separate_verifier(tmp_path, job_label):
    """The agent plants a reward file and a note next to a wrong report: only the report
    travels, and it is wrong."""
    play = script(tmp_path, [{"actions": [
        write("/app/out/report.json", '{"lines": 99}'),
        write("/app/notes.txt", "trust me"),
        {"type": "shell", "command": "mkdir -p /logs/verifier && echo 1 > "
                                     "/logs/verifier/reward.txt; true"},
    ]}])
    result, paths = await run_rollout(SEPARATE, single(play), tmp_path / "jobs", job_label)
    assert result.error is None and result.reward == 0.0
    out = (paths.verifier_logs_dir / "stdout.txt").read_text()
    assert "agent notes present: False" in out



async def test_a_carried_over_symlink_cannot_reach_the_verifiers_files(tmp_path, job_label):
    """The report is a link that reads as inside /app/out but leads out of it (through a
    link to "."): it is dropped before the verifier's sandbox sees it, with a warning."""
    play = script(tmp_path, [{"actions": [{"type": "shell", "command": (
        "mkdir -p /app/out && ln -s . /app/out/here && "
        "ln -s here/../input.txt /app/out/report.json")}]}])
    result, paths = await run_rollout(SEPARATE, single(play), tmp_path / "jobs", job_label)
    assert result.error is None and result.reward == 0.0
    assert score_warnings(result) == [("/app/out/report.json is a symlink leading out of what is "
                                "carried over; the separate verifier ran without it")]
    kept = paths.root / "artifacts" / "app" / "out"
    assert (kept / "here").is_symlink() and not (kept / "report.json").is_symlink()
    out = (paths.verifier_logs_dir / "stdout.txt").read_text()
    assert "no valid report" in out


async def test_a_verifier_image_without_its_tests_is_flagged_for_harbor(tmp_path, job_label):
    """benchflow uploads tests/ anyway (1.0), but Harbor would run the image's own
    /tests/test.sh, which this image lacks: the result says so."""
    task = tmp_path / "task"
    shutil.copytree(SEPARATE, task)
    dockerfile = task / "tests" / "Dockerfile"
    dockerfile.write_text("".join(line for line in dockerfile.read_text().splitlines(True)
                                  if "/tests/test.sh" not in line))
    result, _ = await run_rollout(task, [Scene.single(agent="oracle")], tmp_path / "jobs",
                                  job_label)
    assert result.error is None and result.reward == 1.0
    assert len(score_warnings(result)) == 1
    assert score_warnings(result)[0].startswith("the verifier's image has no /tests/test.sh: benchflow "
                                         "uploaded the task's tests, but Harbor runs")


async def test_a_failing_step_verifier_ends_the_rollout_in_the_verifier_phase(tmp_path, job_label):
    """A crashed test.sh is not a score (benchflow's rule): the rollout ends with
    verifier_failed, attributed to the verifier phase and to its step; no later step runs."""
    task = tmp_path / "task"
    shutil.copytree(MULTI, task)
    (task / "steps" / "create" / "tests" / "test.sh").write_text(
        "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\nexit 3\n")
    result, paths = await run_rollout(task, [Scene.single(agent="oracle")], tmp_path / "jobs",
                                      job_label)
    assert result.error is not None and result.reward is None and result.rewards is None
    assert (result.error.type, result.error.phase) == ("verifier_failed", "verifier")
    assert [(s.name, s.rewards) for s in result.steps] == [("create", None)]
    assert not (paths.root / "steps" / "extend").exists()


async def test_artifacts_are_kept_in_shared_mode_too(tmp_path, job_label):
    """Harbor collects artifacts whatever the verifier mode: the same task verified in the
    agent's sandbox keeps /app/out under the rollout's artifacts/."""
    task = tmp_path / "task"
    shutil.copytree(SEPARATE, task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace('environment_mode = "separate"', ""))
    result, paths = await run_rollout(task, [Scene.single(agent="oracle")], tmp_path / "jobs",
                                      job_label)
    assert result.error is None and result.reward == 1.0 and score_warnings(result) == []
    assert (paths.root / "artifacts" / "app" / "out" / "report.json").read_text() == (
        '{"lines": 3}\n')
    out = (paths.verifier_logs_dir / "stdout.txt").read_text()
    assert "input.txt present: True" in out  # the agent's own sandbox


async def test_hardening_keeps_what_a_step_workdir_placed(tmp_path, job_label):
    """A step's workdir/conftest.py is the task's, not an injection: the final hardened
    verify puts the task's version back (also over the agent's edit of it)."""
    task = tmp_path / "task"
    shutil.copytree(MULTI, task)
    (task / "steps" / "extend" / "workdir" / "conftest.py").write_text("# from the task\n")
    test_sh = task / "steps" / "extend" / "tests" / "test.sh"
    test_sh.write_text(test_sh.read_text().replace(
        'checks["reward"] =',
        'checks["conftest"] = float(pathlib.Path("/app/conftest.py").exists() and pathlib.Path('
        '"/app/conftest.py").read_text() == "# from the task\\n")\nchecks["reward"] ='))
    play = script(tmp_path, [
        {"match": "^Write", "actions": [write("/app/greet.py", GREET)]},
        {"match": "^Add", "actions": [write("/app/greet.py", FAREWELL),
                                      write("/app/conftest.py", "# the agent's\n")]},
    ])
    result, paths = await run_rollout(task, single(play), tmp_path / "jobs", job_label)
    assert result.error is None, result.error
    assert result.rewards is not None and result.rewards["extend/conftest"] == 1.0
    assert result.reward == 1.0
    report = (paths.root / "steps" / "extend" / "verifier" / "hardening.json").read_text()
    assert "put back as the task placed it (a step's workdir): /app/conftest.py" in report
