"""Real agents (claude, codex, gemini, opencode) against the scripted model server.

Each agent installs through the registry (npm inside the sandbox, then cached as an
image layer: later runs skip the install), gets the task `tasks/offline-two-step`, and
its model is `two-step.yaml`: write a file, read it back and sum it, say the sum. The
sandbox is `model-only`: an internal network where only the model server answers.

Asserted for each agent: the verifier scores 1.0; the trajectory holds completed tool
calls for both commands, the second with its real output (`12`: from the ACP updates, or
for gemini, which puts none there, from the tool result it sent back to the model, which
benchflow records as a `tool_result` event); the final message; the server log shows the
agent's own wire API and every script step served.

The four rollouts run in parallel (one job, one model-only network, one model server
each); each sandbox starts public for the npm install and is isolated before the agent
runs (checked from the log). The timing table is printed at the end. Not in the default run (it needs the npm
registry on first run):

    BENCHFLOW_EXTRA_CA_CERTS=... pytest -m slow tests/conformance/test_real_agents_offline.py
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from benchflow.config import ModelEndpoint, RolloutConfig, Scene
from benchflow.rollout import Rollout, RolloutResult
from benchflow.sandbox.network import model_only_names
from tests.conformance import offline

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.anyio]

AGENTS = {  # agent -> (wire API it speaks, whether its ACP updates carry tool output)
    "claude": ("anthropic", True),
    "codex": ("openai-responses", True),
    "gemini": ("gemini", False),  # benchflow adds it from the model calls (tool_result)
    "opencode": ("openai-chat", True),
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def runs(job_label: str, tmp_path_factory: pytest.TempPathFactory,
               request: pytest.FixtureRequest) -> dict[str, tuple[RolloutResult, Path]]:
    """All four rollouts, run in parallel once for the module."""
    jobs_dir = tmp_path_factory.mktemp("offline-jobs")
    rollouts = {
        agent: Rollout(RolloutConfig(
            task_path=offline.TASK, scenes=[Scene.single(agent=agent)], jobs_dir=jobs_dir,
            job_name=job_label, model_endpoint=ModelEndpoint(script=offline.MODEL_SCRIPT)))
        for agent in AGENTS}
    results: dict[str, Any] = {}
    isolated = _Records()
    network_log = logging.getLogger("benchflow.sandbox.network")
    network_log.addHandler(isolated)
    level, network_log.level = network_log.level, logging.INFO
    started = time.monotonic()

    async def one(agent: str) -> None:
        results[agent] = await rollouts[agent].run()

    try:
        async with anyio.create_task_group() as tg:
            for agent in AGENTS:
                tg.start_soon(one, agent)
    finally:
        network_log.removeHandler(isolated)
        network_log.setLevel(level)
    wall = time.monotonic() - started
    network = model_only_names(rollouts["claude"].job_id)[0]  # one per job instance
    assert isolated.messages.count(f"sandbox isolated: model-only ({network})") == 4
    offline.report_durations(request, {a: results[a] for a in AGENTS}, wall)
    return {agent: (results[agent], rollouts[agent].paths.root) for agent in AGENTS}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("agent", sorted(AGENTS))
async def test_agent_runs_the_script_offline(agent: str, runs) -> None:
    result, root = runs[agent]
    api, acp_carries_output = AGENTS[agent]
    assert result.error is None, (result.error, (root / "error.txt").read_text()
                                  if (root / "error.txt").exists() else "")
    assert result.reward == 1.0

    evts = offline.events(root)
    calls = list(offline.tool_calls(evts).values())
    write = [c for c in calls if c.mentions(offline.WRITE_COMMAND)]
    summed = [c for c in calls if c.mentions(offline.SUM_COMMAND)]
    assert [c.status for c in write] == ["completed"], write
    assert [c.status for c in summed] == ["completed"], summed
    if acp_carries_output:
        assert summed[0].output.strip() == "12", summed[0].texts
    else:
        assert "12" in summed[0].output.split(), summed[0].texts
    assert offline.FINAL_MESSAGE in offline.final_text(evts)

    logged = offline.requests(root)
    steps = [r["summary"] for r in logged if r["summary"].get("answer") == "step"]
    assert {s["api"] for s in steps} == {api}
    assert sorted({s["step"] for s in steps}) == [0, 1, 2]
    assert all(r["summary"]["status"] == 200 for r in logged), [r["summary"] for r in logged]
    # the real output of the second command went back to the model
    last = next(r for r in logged if r["summary"].get("step") == 2)
    results = offline.tool_results(api, last["body"])
    assert len(results) >= 2 and "12" in results[-1].split(), results
