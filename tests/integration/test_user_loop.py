"""Multi-round user loops end to end: the scripted ACP agent on a real container.

Each round is a fresh ACP session in the same sandbox, scored by a soft verify; the
final score comes from the hardened verify. The task is tasks/progressive-disclosure
(slugify, pytest-verified, with an oracle solution).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchflow import BaseUser, FunctionUser, RolloutConfig, RoundResult, Scene
from benchflow.rollout import Rollout

from .conftest import TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

TASK = TASKS / "progressive-disclosure"
SOLUTION = (TASK / "oracle" / "solve.sh").read_text()
WRONG_SLUG = 'def slugify(text):\n    return text.lower().replace(" ", "-")\n'
RIGHT_SLUG = ("import re\n\n\ndef slugify(text):\n"
              '    text = re.sub(r"[^a-z0-9 -]", "", text.lower())\n'
              '    return re.sub(r"[ -]+", "-", text).strip("-")\n')


def write_script(folder: Path, *rounds: list[dict[str, Any]]) -> Path:
    """A scripted-agent script: one turn per round (the agent counts prompts across sessions)."""
    path = folder / "script.json"
    path.write_text(json.dumps({"turns": [{"actions": actions} for actions in rounds]}))
    return path


def shell(command: str) -> dict[str, Any]:
    return {"type": "shell", "command": command}


def shell_outputs(events: Any) -> list[dict[str, Any]]:
    """The `{exit_code, output}` of each finished shell action, in order."""
    return [e.update["rawOutput"] for e in events
            if e.type == "tool_call_update" and isinstance(e.update.get("rawOutput"), dict)]


def rollout_for(tmp_path: Path, job: str, script: Path, user: BaseUser, **kw: Any) -> Rollout:
    config = RolloutConfig(task_path=TASK, scenes=[Scene.single(agent="scripted",
                                                                model=str(script))],
                           user=user, jobs_dir=tmp_path, job_name=job, **kw)
    return Rollout(config)


async def test_function_user_stops_after_a_pass(tmp_path: Path, job_label: str):
    script = write_script(
        tmp_path,
        [{"type": "write_file", "path": "/app/slug.py", "content": WRONG_SLUG}],
        [{"type": "write_file", "path": "/app/slug.py", "content": RIGHT_SLUG}],
        [{"type": "message", "text": "a third round must never be asked for"}])
    seen: list[tuple[int, RoundResult | None]] = []

    def next_prompt(round: int, instruction: str, result: RoundResult | None) -> str | None:
        seen.append((round, result))
        if result is not None and result.passed:
            return None
        return instruction if round == 0 else f"Round {round}: the tests still fail. Fix it."

    rollout = rollout_for(tmp_path, job_label, script, FunctionUser(next_prompt),
                          max_user_rounds=5)
    result = await rollout.run()

    assert result.error is None, result.error
    assert result.reward == 1.0 and result.n_prompts == 2
    assert [r for r, _ in seen] == [0, 1, 2]  # asked again after the pass, then stopped
    first, second = seen[1][1], seen[2][1]
    assert first is not None and first.round == 0 and first.rewards["reward"] == 0.0
    assert not first.passed and "failed" in first.verifier_output
    assert second is not None and second.passed and second.n_tool_calls == 1
    assert all(e.round == 1 for e in second.trajectory)
    rounds = [json.loads(line) for line in rollout.paths.user_rounds.read_text().splitlines()]
    assert [(r["round"], r["rewards"]["reward"]) for r in rounds] == [(0, 0.0), (1, 1.0)]
    assert rounds[1]["prompt"].startswith("Round 1") and rounds[1]["n_tool_calls"] == 1
    assert (rollout.paths.verifier_dir / "round-0").is_dir()
    assert (rollout.paths.verifier_dir / "hardening.json").is_file()  # the final verify hardened


class RecordingUser(BaseUser):
    """Records what setup() got; one round with a plain prompt, then stops."""

    def __init__(self) -> None:
        self.setup_calls: list[tuple[str, str | None]] = []

    async def setup(self, instruction: str, solution: str | None) -> None:
        self.setup_calls.append((instruction, solution))

    async def run(self, round: int, instruction: str, round_result: RoundResult | None
                  ) -> str | None:
        return "Say hello." if round == 0 else None


@pytest.mark.parametrize("oracle_access", [True, False], ids=["oracle-access", "no-access"])
async def test_base_user_gets_the_solution_only_with_oracle_access(
        oracle_access: bool, tmp_path: Path, job_label: str):
    script = write_script(tmp_path, [{"type": "message", "text": "hello"}])
    user = RecordingUser()
    rollout = rollout_for(tmp_path, job_label, script, user, oracle_access=oracle_access)
    result = await rollout.run()

    assert result.error is None, result.error
    assert result.n_prompts == 1 and result.reward == 0.0  # the agent only said hello
    assert len(user.setup_calls) == 1
    instruction, solution = user.setup_calls[0]
    assert "slugify" in instruction
    assert solution == (SOLUTION if oracle_access else None)


class SyncUser(BaseUser):
    """The spec's form: `setup` and `run` written as plain (synchronous) methods."""

    def __init__(self) -> None:
        self.instructions: list[str] = []
        self.rounds: list[int] = []

    def setup(self, instruction, solution):  # type: ignore[override]
        self.instructions.append(instruction)

    def run(self, round, instruction, round_result):  # type: ignore[override]
        self.rounds.append(round)
        return "Say hello." if round == 0 else None


async def test_a_synchronous_base_user_drives_rounds(tmp_path: Path, job_label: str):
    script = write_script(tmp_path, [{"type": "message", "text": "hello"}])
    user = SyncUser()
    result = await rollout_for(tmp_path, job_label, script, user).run()

    assert result.error is None, result.error
    assert result.n_prompts == 1
    assert user.rounds == [0, 1] and "slugify" in user.instructions[0]


PROBES = [
    "cat /oracle/solve.sh",
    "cat /solution/solve.sh",
    "ls -d /oracle /solution",
    # the solution's one distinctive line, anywhere on the filesystem the agent can read
    ("grep -rlsF 'strip(\"-\")' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
     "--exclude-dir=app"),
]


class ProbingUser(BaseUser):
    """Holds the solution (oracle access); after each round checks, as root, that no copy
    of it reached the sandbox. Two rounds."""

    def __init__(self) -> None:
        self.solution: str | None = None
        self.rollout: Rollout | None = None
        self.results: list[RoundResult] = []
        self.root_checks: list[str] = []

    async def setup(self, instruction: str, solution: str | None) -> None:
        self.solution = solution

    async def run(self, round: int, instruction: str, round_result: RoundResult | None
                  ) -> str | None:
        if round_result is not None:
            self.results.append(round_result)
            assert self.rollout is not None and self.rollout.sandbox is not None
            check = await self.rollout.sandbox.exec(
                ["sh", "-c", "ls -d /oracle /solution 2>&1; ls /verifier; stat -c '%U %a' /verifier"],
                user="root", timeout=30)
            self.root_checks.append(check.stdout.decode())
        return "Probe the sandbox." if round < 2 else None


async def test_the_solution_never_reaches_the_agent(tmp_path: Path, job_label: str):
    probes = [shell(p) for p in PROBES]
    script = write_script(
        tmp_path, probes,
        [*probes, shell("cat /verifier/test_slug.py"), shell("ls /verifier")])
    user = ProbingUser()
    rollout = rollout_for(tmp_path, job_label, script, user, oracle_access=True)
    user.rollout = rollout
    result = await rollout.run()

    assert result.error is None, result.error
    assert user.solution == SOLUTION  # the user has it; the sandbox must not
    assert len(user.results) == 2
    for round_result in user.results:
        outputs = shell_outputs(round_result.trajectory)
        assert len(outputs) >= len(PROBES), outputs
        for probe, out in zip(PROBES, outputs, strict=False):
            assert out["exit_code"] != 0, (probe, out)
            assert 'strip("-")' not in out["output"] and "pipefail" not in out["output"], probe
        assert "No such file" in outputs[2]["output"]  # absent, not merely protected
    # round 1: the verifier folder exists now (round 0's soft verify) but is root-only
    tests_probe, ls_probe = shell_outputs(user.results[1].trajectory)[-2:]
    assert tests_probe["exit_code"] != 0 and "Permission denied" in tests_probe["output"]
    assert ls_probe["exit_code"] != 0
    for check in user.root_checks:  # seen as root between rounds: no solution anywhere
        assert "'/oracle': No such file" in check and "'/solution': No such file" in check
        assert "test_slug.py" in check and "root 700" in check


SERVER_UP = ("mkdir -p /tmp/srv && echo pong > /tmp/srv/ping.txt && "
             "nohup python3 -m http.server 8123 --bind 127.0.0.1 --directory /tmp/srv "
             ">/dev/null 2>&1 </dev/null & "
             "for i in $(seq 50); do python3 -c \"import urllib.request as u; "
             "u.urlopen('http://127.0.0.1:8123/ping.txt')\" 2>/dev/null && exit 0; sleep 0.1; "
             "done; exit 1")
SERVER_CHECK = ("python3 -c \"import urllib.request as u; "
                "print(u.urlopen('http://127.0.0.1:8123/ping.txt', timeout=5).read().decode())\"")


async def test_soft_verify_keeps_the_agents_server_for_the_next_round(
        tmp_path: Path, job_label: str):
    script = write_script(tmp_path, [shell(SERVER_UP)],
                          [shell(SERVER_CHECK)])
    results: list[RoundResult] = []

    def next_prompt(round: int, instruction: str, result: RoundResult | None) -> str | None:
        if result is not None:
            results.append(result)
        return ["Start the helper server.", "Use the helper server."][round] if round < 2 else None

    rollout = rollout_for(tmp_path, job_label, script, FunctionUser(next_prompt))
    result = await rollout.run()

    assert result.error is None, result.error
    assert [r.round for r in results] == [0, 1]
    (started,) = shell_outputs(results[0].trajectory)
    assert started["exit_code"] == 0, started
    assert results[0].verifier_error is None and results[0].rewards is not None  # soft verify ran
    (fetched,) = shell_outputs(results[1].trajectory)
    assert fetched["exit_code"] == 0 and fetched["output"].strip() == "pong", fetched
    # the final, hardened verify does kill it
    report = json.loads((rollout.paths.verifier_dir / "hardening.json").read_text())
    assert report["killed"] >= 1
