"""A real agent (claude) as an `agent-judge` verifier, against the scripted model server.

The solver is the oracle; the judge is claude, installed with it and started after it as
its own read-only user (`bf-judge`). The model script (`judge-offline.yaml`) makes it try
to overwrite the poem, read it, and answer with the rubric's scores. Asserted: the
rewards are the scores, the write was refused by the OS (the poem is unchanged), and the
judge's trajectory is kept apart from the solver's. Slow (claude's npm install on first
run, cached after):

    make test-agent-judge
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchflow.config import ModelEndpoint, RolloutConfig, Scene
from benchflow.rollout import Rollout

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.anyio]

HERE = Path(__file__).parent
TASK = HERE.parent / "integration" / "fixtures" / "tasks" / "agent-judge"
SCRIPT = HERE / "judge-offline.yaml"


async def test_claude_judges_the_oracles_poem_read_only(tmp_path: Path, job_label: str):
    rollout = Rollout(RolloutConfig(
        task_path=TASK, scenes=[Scene.single(agent="oracle")], jobs_dir=tmp_path,
        job_name=job_label, model_endpoint=ModelEndpoint(script=SCRIPT)))
    result = await rollout.run()

    assert result.error is None, result.error
    assert result.rewards == {"reward": round((2 * 1.0 + 0.5) / 3, 6), "judge.form": 1.0,
                              "judge.topic": 0.5}
    judge_dir = rollout.paths.verifier_dir / "judge"
    trajectory = (judge_dir / "trajectory" / "acp_trajectory.jsonl").read_text()
    header = json.loads(trajectory.splitlines()[0])
    assert header["agents"] == ["claude"]
    assert "bf-judge" in trajectory  # `id -un` ran as the judge's own user
    assert "Permission denied" in trajectory  # the workspace refused its write
    assert "Waves fold into foam" in trajectory  # and the poem it read is the oracle's
    assert "vandalised" not in trajectory.split("Permission denied")[-1].split("\\n")[0]
    assert not rollout.paths.trajectory.exists() or "bf-judge" not in \
        rollout.paths.trajectory.read_text()
    scores = json.loads((judge_dir / "scores.json").read_text())
    assert scores["agent"] == "claude" and scores["judge_user"] == "bf-judge"
