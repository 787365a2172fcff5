"""pytest plugins the image installed outside the system site-packages, under hardening.

`fixtures/tasks/tb-venv` follows Terminal-Bench 2.1's advice ("verifier tooling must be
pre-installed"): pytest and pytest-json-ctrf in a venv at /opt/verifier, first on the
image's PATH, with an agent-writable /app/bin after it; test.sh runs
`pytest --ctrf ...`, whose option exists only when the plugin loads.
`fixtures/tasks/tb-tool-envs` has the plugin in a uv tool environment (root's ~/.local/bin
on PATH), in a pipx-style venv (its script linked into /usr/local/bin) and in a venv the
PATH does not name, which test.sh calls by absolute path (`make test-slow`). Each must
score 1.0 hardened and plain; a plugin a root agent adds to the venv must never load; the
workspace's /app/bin stays off the verifier's PATH.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchflow import RolloutConfig, Scene
from benchflow.agents.command import CommandAgent
from benchflow.rollout import Rollout
from benchflow.rollout.result import RolloutResult

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(1200)]

TASKS = Path(__file__).parent / "fixtures" / "tasks"
VENV_TASK = TASKS / "tb-venv"
TOOLS_TASK = TASKS / "tb-tool-envs"

# A root agent that solves the task, then adds a pytest11 plugin to the image's venv (which
# would turn every failure into a pass and leave a marker) and a fake pytest in /app/bin.
SOLVE_AND_PLANT = r"""
echo 'Hello, world!' > /app/hello.txt
site=/opt/verifier/lib/python3.11/site-packages
cat > "$site/evilplug.py" <<'PY'
import pathlib

import pytest

pathlib.Path("/logs/verifier/evil-loaded").write_text("loaded")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
PY
mkdir -p "$site/evilplug-1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: evilplug\nVersion: 1.0\n' > "$site/evilplug-1.0.dist-info/METADATA"
printf '[pytest11]\nevil = evilplug\n' > "$site/evilplug-1.0.dist-info/entry_points.txt"
echo 'Goodbye' > /app/hello.txt
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def rollout(task: Path, agent: str, jobs: Path, job: str, *, harden: bool,
                  script: str | None = None) -> tuple[RolloutResult, Rollout]:
    drivers = {agent: CommandAgent(agent, script)} if script else {}
    config = RolloutConfig(task_path=task, scenes=[Scene.single(agent)], harden=harden,
                           jobs_dir=jobs, job_name=job, dataset_name="on" if harden else "off")
    run = Rollout(config, drivers=drivers)
    return await run.run(), run


@pytest.mark.parametrize("harden", [True, False])
async def test_the_venv_on_path_plugin_loads(harden, tmp_path, job_label):
    result, run = await rollout(VENV_TASK, "oracle", tmp_path, job_label, harden=harden)
    assert (result.reward, result.error) == (1.0, None), run.paths.root
    ctrf = json.loads((run.paths.logs_dir / "verifier" / "ctrf.json").read_text())
    assert ctrf["results"]["summary"]["passed"] == 2
    if harden:
        assert run.baseline is not None
        assert run.baseline.path.split(":")[0] == "/opt/verifier/bin"
        assert "/app/bin" not in run.baseline.path.split(":")  # the workspace is the agent's
        assert "/opt/verifier/bin/python" in run.baseline.interpreters
        report = json.loads((run.paths.verifier_dir / "hardening.json").read_text())
        assert report["pytest_plugins"] == ["ctrf.main"] and report["tampered"] == []


@pytest.mark.parametrize("harden", [True, False])
async def test_a_plugin_planted_in_the_venv_never_loads(harden, tmp_path, job_label):
    result, run = await rollout(VENV_TASK, "plant", tmp_path, job_label, harden=harden,
                                script=SOLVE_AND_PLANT)
    marker = run.paths.logs_dir / "verifier" / "evil-loaded"
    if harden:
        assert (result.reward, result.error) == (0.0, None), run.paths.root
        assert not marker.exists()
        report = json.loads((run.paths.verifier_dir / "hardening.json").read_text())
        assert any("evilplug-1.0.dist-info" in note for note in report["notes"]), report
    else:  # the attack is real: autoload picks the plugin up and it forces a pass
        assert (result.reward, result.error) == (1.0, None), run.paths.root
        assert marker.read_text() == "loaded"


@pytest.mark.slow  # its image installs three environments from PyPI (about 4 min cold)
async def test_plugins_of_uv_pipx_and_named_environments_load_hardened(tmp_path, job_label):
    result, run = await rollout(TOOLS_TASK, "oracle", tmp_path, job_label, harden=True)
    assert (result.reward, result.error) == (1.0, None), run.paths.root
    out = run.paths.logs_dir / "verifier"
    for name in ("uv", "pipx", "named"):
        ctrf = json.loads((out / f"ctrf-{name}.json").read_text())
        assert ctrf["results"]["summary"]["passed"] == 2, name
    assert run.baseline is not None
    interpreters = " ".join(run.baseline.interpreters)
    for env in ("/root/.local/share/uv/tools/pytest/", "/opt/pipx/venvs/pytest-pipx/",
                "/opt/named/bin/python"):
        assert env in interpreters, run.baseline.interpreters
    assert "not loaded" not in (out / "stderr.txt").read_text()
