"""Shapes of real third-party Harbor tasks, end to end in Docker, plain and hardened.

- `fixtures/tasks/separate-prebuilt`: a separate verifier whose `[verifier.environment]
  docker_image` is present locally, next to a tests/Dockerfile that cannot build here: the
  named image is used as given (no build, no registry).
- `fixtures/tasks/oracle-daemon`: solve.sh leaves a background process holding its output:
  the oracle returns when solve.sh exits; hardening kills the leftover before the verifier.
- `fixtures/tasks/steps-path`: `[[steps]]` written with `path = "steps/<name>"`, a key
  Harbor's step model ignores: the task loads without a warning and runs both steps.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import docker
import pytest

from benchflow import RolloutConfig, Scene
from benchflow.rollout import Rollout
from benchflow.rollout.result import RolloutResult

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(600)]

TASKS = Path(__file__).parent / "fixtures" / "tasks"
PREBUILT = TASKS / "separate-prebuilt"
DAEMON = TASKS / "oracle-daemon"
STEPS_PATH = TASKS / "steps-path"
VERIFIER_IMAGE = "benchflow-fixture/separate-prebuilt-verifier:1"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def verifier_image() -> str:
    """The separate verifier's image, made locally as a registry would have served it."""
    files = {"Dockerfile": "FROM debian:bookworm-slim\nRUN echo prebuilt > /verifier-image.txt\n"
                           "COPY test.sh /tests/test.sh\nWORKDIR /app\n",
             "test.sh": (PREBUILT / "tests" / "test.sh").read_text()}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text.encode()), 0o755
            tar.addfile(info, io.BytesIO(text.encode()))
    buf.seek(0)
    docker.from_env().images.build(fileobj=buf, custom_context=True, tag=VERIFIER_IMAGE, rm=True)
    return VERIFIER_IMAGE


async def rollout(task: Path, jobs: Path, job: str, *, harden: bool
                  ) -> tuple[RolloutResult, Rollout]:
    config = RolloutConfig(task_path=task, scenes=[Scene.single("oracle")], harden=harden,
                           jobs_dir=jobs, job_name=job, dataset_name="on" if harden else "off")
    run = Rollout(config)
    return await run.run(), run


@pytest.mark.parametrize("harden", [False, True])
async def test_a_named_separate_verifier_image_is_used_as_given(harden, verifier_image,
                                                               tmp_path, job_label):
    result, run = await rollout(PREBUILT, tmp_path, job_label, harden=harden)
    assert (result.reward, result.error) == (1.0, None), (result.error, run.paths.root)
    assert not (run.paths.verifier_dir / "build.log").exists()  # nothing was built
    kept = run.paths.root / "artifacts" / "app" / "answer.txt"
    assert kept.read_text().strip() == "42"


@pytest.mark.parametrize("harden", [False, True])
async def test_the_oracle_returns_when_solve_sh_exits_whatever_it_leaves_running(
        harden, tmp_path, job_label):
    result, run = await rollout(DAEMON, tmp_path, job_label, harden=harden)
    assert (result.reward, result.error) == (1.0, None), (result.error, run.paths.root)
    assert "service started" in (run.paths.command_dir / "stdout.txt").read_text()
    assert (run.paths.logs_dir / "agent" / "oracle.txt").read_text() == "service started\n"
    if harden:  # the leftover `sleep 600` is killed before the verifier, as any agent's
        report = json.loads((run.paths.verifier_dir / "hardening.json").read_text())
        assert report["killed"] >= 1 and report["survivors"] == 0, report


@pytest.mark.parametrize("harden", [False, True])
async def test_steps_written_with_path_load_and_run(harden, tmp_path, job_label, recwarn):
    result, run = await rollout(STEPS_PATH, tmp_path, job_label, harden=harden)
    assert (result.reward, result.error) == (1.0, None), (result.error, run.paths.root)
    assert [(s.name, s.reward) for s in result.steps] == [("one", 1.0), ("two", 1.0)]
    assert not [w for w in recwarn if "path" in str(w.message)]
