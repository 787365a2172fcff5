"""The same behaviour on every cloud backend, against SDK fakes whose sandboxes are local
containers: `model-only` as an outbound allowlist, a coder and a reviewer sharing one
sandbox over ACP, a 5 MB line and 10,000 updates in order over a live process, a
multi-round user loop, and the reduced reward-hack matrix hardened
(marked slow: `make test-cloud-fakes`). Each ends with nothing left behind.

Backend-specific behaviour (image caching, ledgers, failure injection, SIGINT) is in
`test_modal_fake_e2e.py` and `test_daytona_fake_e2e.py`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import benchflow
from benchflow import FunctionUser, RolloutConfig, RoundResult, Scene
from benchflow.sandbox.registry import get_provider
from benchflow.task import load_task
from tests.fakes import daytona_sdk, modal_sdk

from .conftest import TASKS, job_containers
from .test_network_policy import other_server  # noqa: F401 - a fixture
from .test_user_loop import RIGHT_SLUG, WRONG_SLUG, write_script

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Backend:
    name: str
    provider_config: dict[str, Any]
    fake_label: str
    reset: Callable[[], None]

    def left(self, job: str) -> list[Any]:
        """The fake's containers of `job` still there."""
        return job_containers(job, self.fake_label)


BACKENDS = {
    "modal": Backend("modal", dict(modal_sdk.PROVIDER_CONFIG), modal_sdk.FAKE_LABEL,
                     modal_sdk.reset),
    "daytona": Backend("daytona", {"client_factory": "tests.fakes.daytona_sdk:FakeAsyncDaytona"},
                       daytona_sdk.FAKE_LABEL, daytona_sdk.reset),
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    chosen = BACKENDS[request.param]
    provider = get_provider(chosen.name, chosen.provider_config)
    if not provider.capabilities.live_processes:
        pytest.skip(f"{chosen.name} has no live processes: ACP agents cannot run on it")
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "cache"))  # snapshot indexes
    chosen.reset()
    yield chosen
    chosen.reset()
    modal_sdk.remove_snapshots()


def _config(backend: Backend, tmp_path: Path, job: str, task: Path, scenes: list[Scene],
            **extra: Any) -> RolloutConfig:
    return RolloutConfig(task_path=task, scenes=scenes, environment=backend.name,
                         provider_config=backend.provider_config, jobs_dir=tmp_path / "jobs",
                         job_name=job, **extra)


def _host_address() -> str:
    """An address of this machine other than loopback and docker's bridges."""
    import subprocess

    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        name, address = line.split()[1], line.split()[3].split("/")[0]
        if name != "lo" and not name.startswith(("docker", "br-", "veth")):
            return address
    pytest.skip("no host address besides loopback and docker bridges")


async def test_model_only_is_an_allowlist_holding_the_endpoints_host(
        backend, job_label, other_server):  # noqa: F811 - the fixture
    from benchflow.model_server import ModelServer
    from benchflow.sandbox.network import network_gateway
    from benchflow.sandbox.spec import SandboxSpec

    from .test_network_policy import SCRIPT, _probe

    gateway, elsewhere = await network_gateway(None), _host_address()
    provider = get_provider(backend.name, backend.provider_config)

    def spec(policy):
        return SandboxSpec(name=f"allow-{policy}", docker_image="debian:bookworm-slim",
                           labels={"benchflow.job": job_label}, network_policy=policy,
                           egress_allowlist=(gateway,))

    with ModelServer(SCRIPT, host=gateway) as model:
        endpoint, other = f"{gateway}:{model.port}", f"{elsewhere}:{other_server}"
        created = provider.create(spec("model-only"))
        started_public = provider.create(spec("public"))
        try:
            await created.start()
            await started_public.start()
            seen = await _probe(created, endpoint, other)
            assert seen[endpoint].startswith("open HTTP/1.") and seen[other] == "closed", seen
            before = await _probe(started_public, endpoint, other)
            assert before[other] == "open HTTP/1.0 200 OK", before  # the other service answers
            await started_public.apply_network_policy("model-only", None)
            after = await _probe(started_public, endpoint, other)
            assert after[endpoint].startswith("open HTTP/1.") and after[other] == "closed", after
            await started_public.apply_network_policy("none", None)
            cut = await _probe(started_public, endpoint)
            assert cut[endpoint] == "closed", cut
        finally:
            await created.stop()
            await started_public.stop()
    assert backend.left(job_label) == []


async def test_coder_and_reviewer_share_one_sandbox(backend, tmp_path, job_label):
    task_path = TASKS / "coder-reviewer"
    task = load_task(task_path)
    assert task.scenes is not None
    scenes = task.scenes.to_scenes("scripted", str(task_path / "scripted.yaml"))
    result = await benchflow.run(_config(backend, tmp_path, job_label, task_path, scenes))
    assert result.error is None, result.error
    assert (result.reward, result.n_prompts, result.n_tool_calls) == (1.0, 3, 6)
    assert result.hardened is True
    assert backend.left(job_label) == []


async def test_acp_holds_a_5mb_line_and_10000_updates_in_order(backend, tmp_path, job_label):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"roles": {"agent": {"turns": [{"actions": [
        {"type": "huge_message", "bytes": 5_000_000},
        {"type": "stream", "count": 10_000, "text": "u", "numbered": True}]}]}}}))
    scenes = [Scene.single(agent="scripted", model=str(script))]
    result = await benchflow.run(_config(backend, tmp_path, job_label, TASKS / "fix-python-bug",
                                         scenes, verifier_disabled=True))
    assert result.error is None, result.error
    events = [json.loads(line) for line in
              Path(result.trajectory_path).read_text().splitlines()[1:]]
    texts = [e["text"] for e in events if e["type"] == "agent_message"]
    assert len(texts[0]) == 5_000_000
    assert texts[1:] == [f"u{i}\n" for i in range(10_000)]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs)
    assert backend.left(job_label) == []


async def test_user_loop_rounds_run_in_one_sandbox(backend, tmp_path, job_label):
    script = write_script(
        tmp_path,
        [{"type": "write_file", "path": "/app/slug.py", "content": WRONG_SLUG}],
        [{"type": "write_file", "path": "/app/slug.py", "content": RIGHT_SLUG}])
    rounds: list[RoundResult | None] = []

    def next_prompt(round: int, instruction: str, result: RoundResult | None) -> str | None:
        rounds.append(result)
        if result is not None and result.passed:
            return None
        return instruction if round == 0 else "The tests still fail. Fix it."

    scenes = [Scene.single(agent="scripted", model=str(script))]
    config = _config(backend, tmp_path, job_label, TASKS / "progressive-disclosure", scenes,
                     user=FunctionUser(next_prompt), max_user_rounds=4)
    result = await benchflow.run(config)
    assert result.error is None, result.error
    assert (result.reward, result.n_prompts) == (1.0, 2)
    first, second = rounds[1], rounds[2]
    assert first is not None and not first.passed
    assert second is not None and second.passed
    assert backend.left(job_label) == []


def _matrix_lab() -> Any:
    name = "reward_hack_matrix"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, REPO / "labs" / "reward-hack-matrix" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # about 4 min per backend: `make test-cloud-fakes`
async def test_reduced_reward_hack_matrix_hardened(backend, tmp_path, job_label):
    lab = _matrix_lab()
    exploits = lab.load_exploits()
    specs = [s for s in lab.reduced_specs(exploits, lab.REDUCED_TASK) if s.mode == "on"]
    matrix = await lab.run_matrix(specs, exploits=exploits, jobs_dir=tmp_path / "rhm",
                                  job_name=job_label, concurrency=4, environment=backend.name,
                                  provider_config=backend.provider_config)
    print("\n" + lab.render(matrix))
    ran = {s: c for s, c in matrix.cells.items() if not c.skipped}
    oracles = [c for s, c in ran.items() if s.row == lab.ORACLE]
    assert oracles and all(c.reward == 1.0 for c in oracles), oracles
    exploited = {s.row: c.text for s, c in ran.items() if s.row != lab.ORACLE and c.reward}
    assert exploited == {}
    assert len(ran) >= len(specs) - 1  # at most the C-compiler row is skipped
    assert backend.left(job_label) == []
