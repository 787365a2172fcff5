"""The offline conformance run with benchflow's scripted agent: cheap enough for every run.

The same task, model server and `model-only` network as the real agents'
(`test_real_agents_offline.py`, marked slow). The scripted agent calls no model, but it
must still work under `model-only`; it also probes, from its own process, that the model
endpoint named by `BENCHFLOW_PROVIDER_BASE_URL` answers and that a second server of this
test on the host does not.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from benchflow.config import ModelEndpoint, RolloutConfig, Scene
from benchflow.rollout import Rollout
from benchflow.sandbox import host_firewall
from benchflow.sandbox.network import network_gateway
from tests.conformance import offline

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

AGENT_SCRIPT = Path(__file__).parent / "scripted-two-step.yaml"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class _Other(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def other_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("0.0.0.0", 0), _Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.timeout(600)
async def test_scripted_agent_runs_under_model_only(job_label: str, tmp_path: Path,
                                                    other_port: int) -> None:
    if host_firewall.available() is not None:
        pytest.skip(f"model-only needs the host firewall: {host_firewall.available()}")
    other_url = f"http://{await network_gateway(None)}:{other_port}/"
    rollout = Rollout(RolloutConfig(
        task_path=offline.TASK, jobs_dir=tmp_path, job_name=job_label,
        scenes=[Scene.single(agent="scripted", model=str(AGENT_SCRIPT),
                             env={"OTHER_URL": other_url})],
        model_endpoint=ModelEndpoint(script=offline.MODEL_SCRIPT)))
    result = await rollout.run()
    root = rollout.paths.root
    assert result.error is None, result.error
    assert result.reward == 1.0

    evts = offline.events(root)
    calls = list(offline.tool_calls(evts).values())
    summed = [c for c in calls if c.mentions(offline.SUM_COMMAND)]
    assert [c.status for c in summed] == ["completed"]
    assert any(text.strip() == "12" for text in summed[0].texts)
    probe = [c for c in calls if c.mentions("OTHER_URL")]
    assert [c.status for c in probe] == ["completed"]
    assert any("model endpoint 200" in t and "other server unreachable" in t
               for t in probe[0].texts), probe[0].texts
    assert offline.FINAL_MESSAGE in offline.final_text(evts)
    assert [r["summary"]["answer"] for r in offline.requests(root)] == ["health"]
