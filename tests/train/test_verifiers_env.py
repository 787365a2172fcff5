"""benchflow as a verifiers environment (`benchflow.train.verifiers`, the `benchflow-env`
package), run by verifiers itself: `vf-eval` as a subprocess, and verifiers' own
`load_environment` / `serving` / `run_slot` in this process. The policy is benchflow's
scripted model server on 127.0.0.1 answering the example QA items; every call of each
benchflow rollout goes through verifiers' interception, and each trace's reward must be the
one benchflow's verifier wrote in the rollout's result.json.

verifiers pins openai<3 and mcp==2.0.0, so it lives in its own venv: `make test-verifiers`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verifiers")
pytest.importorskip("benchflow_env")

import verifiers.v1 as vf  # noqa: E402
from verifiers.v1.env import RunSlot  # noqa: E402

from benchflow.config import ModelEndpoint  # noqa: E402
from benchflow.errors import ConfigError  # noqa: E402
from benchflow.model_server import ModelServer  # noqa: E402
from benchflow.rollout.result import RolloutResult  # noqa: E402
from benchflow.train import qa_train_tasks, run_batch  # noqa: E402
from benchflow.train.verifiers import (  # noqa: E402
    BenchflowHarness,
    BenchflowTaskset,
    BenchflowTasksetConfig,
    load_environment,
)

pytestmark = [pytest.mark.timeout(900),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]

ROOT = Path(__file__).resolve().parents[2]
QA = ROOT / "tasks" / "qa-example.jsonl"
SCRIPT = ROOT / "tasks" / "qa-example.script.yaml"
MODEL = "scripted-qa"
METRIC = "f1_score"  # partial credit: the example's scripted answers score 0.4 .. 1.0


@pytest.fixture
def policy(tmp_path: Path) -> Any:
    server = ModelServer(SCRIPT, host="127.0.0.1", log_dir=tmp_path / "policy")
    server.start()
    yield server
    server.stop()


def scored_ids() -> list[str]:
    ids = []
    for line in QA.read_text().splitlines():
        item = json.loads(line)
        answer = item.get("answer", item.get("ground_truth", item.get("expected")))
        if answer:
            ids.append(item.get("id") or item.get("task_id"))
    return ids


def benchflow_alone(policy: ModelServer, jobs: Path) -> dict[str, float | None]:
    """What benchflow's verifier gives each item with the same policy, without verifiers."""
    tasks = qa_train_tasks(QA, model=MODEL, metric=METRIC)
    endpoint = ModelEndpoint(base_url=policy.url, model=MODEL)
    items, _ = run_batch([t.trial(endpoint) for t in tasks], concurrency=4, jobs_dir=jobs)
    return {item.result.task_name: item.result.reward for item in items}


def result_of(trace: dict[str, Any]) -> RolloutResult:
    info = trace["info"]["benchflow"]
    path = Path(info["job_dir"]) / info["rollout"] / "result.json"
    return RolloutResult.model_validate_json(path.read_text())


def last_reply(trace: dict[str, Any]) -> str:
    sampled = [n["message"] for n in trace["nodes"] if n["sampled"]]
    return sampled[-1]["content"]


@pytest.mark.slow
def test_vf_eval_scores_each_rollout_with_benchflows_verifier(tmp_path: Path,
                                                              policy: ModelServer) -> None:
    vf_eval = Path(sys.executable).with_name("vf-eval")
    argv = [str(vf_eval), "benchflow-env", "--env.taskset.qa", str(QA),
            "--env.taskset.metric", METRIC, "-m", MODEL,
            "--client.base-url", f"{policy.url}/v1", "--client.api-key-var", "NO_SUCH_KEY",
            "--env.agent.harness.jobs-dir", str(tmp_path / "jobs"),
            "-c", "4", "--no-push", "--no-rich", "-o", str(tmp_path / "out")]
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert run.returncode == 0, run.stderr[-3000:]
    (traces_file,) = (tmp_path / "out").glob("*/traces.jsonl")
    traces = [trace for line in traces_file.read_text().splitlines()
              for trace in json.loads(line)["traces"]]

    # one verifiers rollout per item with a ground truth (the unscored one is left out)
    ids = scored_ids()
    assert sorted(t["task"]["data"]["id"] for t in traces) == sorted(ids)
    assert all(t["ok"] and not t["errors"] for t in traces), [t["errors"] for t in traces]

    alone = benchflow_alone(policy, tmp_path / "alone")
    for trace in traces:
        result = result_of(trace)
        assert result.error is None and result.reward is not None
        # the reward verifiers records is the one in benchflow's result.json...
        assert trace["rewards"] == {"benchflow": {"score": result.reward, "weight": 1.0}}
        assert trace["metrics"] == result.rewards
        # ...and the one benchflow gives the same answer on its own
        assert result.reward == alone[result.task_name]
        # the model answered through verifiers' interception: the turn is in the trace
        assert [c["model"] for c in trace["calls"]] == [MODEL]
        assert last_reply(trace) in SCRIPT.read_text()
    rewards = [t["rewards"]["benchflow"]["score"] for t in traces]
    assert len(set(rewards)) >= 3, rewards  # partial credit: not a constant
    assert len(policy.requests) == len(ids) + len(alone)  # vf-eval's, then benchflow alone


def run_item(env: vf.Env, base_url: str, item_id: str) -> vf.Episode:
    task = next(t for t in env.taskset if t.data.id == item_id)
    ctx = vf.ModelContext(model=MODEL, client=vf.EvalClientConfig(
        base_url=base_url, api_key_var="NO_SUCH_KEY"))

    async def main() -> vf.Episode:
        async with env.serving():
            return await env.run_slot(RunSlot(task), ctx)

    return asyncio.run(main())


@pytest.mark.slow
def test_the_policy_is_verifiers_interception_and_its_secret_is_never_written(
        tmp_path: Path, policy: ModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str]] = []
    launch = BenchflowHarness.launch

    async def spy(self: BenchflowHarness, ctx: Any, trace: Any, runtime: Any, endpoint: str,
                  secret: str, *args: Any, **kwargs: Any) -> Any:
        seen.append((endpoint, secret))
        return await launch(self, ctx, trace, runtime, endpoint, secret, *args, **kwargs)

    monkeypatch.setattr(BenchflowHarness, "launch", spy)
    env = load_environment(qa=QA, metric=METRIC, jobs_dir=tmp_path / "jobs")
    episode = run_item(env, f"{policy.url}/v1", "capital-france")

    ((endpoint, secret),) = seen
    assert endpoint.startswith("http://127.0.0.1:") and secret
    (trace,) = episode.traces
    assert trace.ok and trace.reward == 1.0
    job_dir = Path(trace.info["benchflow"]["job_dir"])
    result = RolloutResult.model_validate_json(
        (job_dir / trace.info["benchflow"]["rollout"] / "result.json").read_text())
    assert result.reward == trace.reward and result.rewards == trace.metrics
    # benchflow's relay recorded the call it passed to verifiers' interception
    calls = [json.loads(line) for line in (job_dir / result.rollout_name /
                                           "model_calls.jsonl").read_text().splitlines()]
    assert len(calls) == 1 and trace.num_turns == 1
    # the per-rollout secret was the key, and nothing benchflow wrote holds it
    written = [p for p in job_dir.rglob("*") if p.is_file()]
    assert written and not [p for p in written if secret.encode() in p.read_bytes()]


@pytest.mark.slow
def test_an_env_server_runs_dispatched_tasks_as_prime_rl_does(tmp_path: Path,
                                                             policy: ModelServer) -> None:
    """prime-rl's path: the env config crosses to a spawned env server (`serve_env`), the
    trainer side owns the taskset and dispatches each task's data over ZMQ (`EnvClient`)."""
    import multiprocessing

    from verifiers.v1.serve import EnvClient, env_config_data, serve_env

    env = load_environment(qa=QA, metric=METRIC, jobs_dir=tmp_path / "jobs")
    tasks = [t for t in env.taskset if t.data.id in ("capital-france", "largest-planet")]
    spawn = multiprocessing.get_context("spawn")
    addresses = spawn.Queue()
    server = spawn.Process(target=serve_env, kwargs={
        "max_workers": 1, "address": "tcp://127.0.0.1:0", "address_queue": addresses,
        "config_data": env_config_data(env.config)})
    server.start()
    try:
        address = addresses.get(timeout=300)
        client_config = vf.EvalClientConfig(base_url=f"{policy.url}/v1",
                                            api_key_var="NO_SUCH_KEY")

        async def main() -> list[Any]:
            client = EnvClient(address)
            try:
                return list(await asyncio.gather(*(
                    client.run(client_config, MODEL, vf.SamplingConfig(),
                               t.data.model_dump(mode="json")) for t in tasks)))
            finally:
                await client.close()

        episodes = asyncio.run(main())
    finally:
        server.terminate()
        server.join(60)
    assert server.exitcode is not None
    for task, episode in zip(tasks, episodes, strict=True):
        (trace,) = episode.traces
        assert trace.ok and trace.task.data.id == task.data.id
        result = result_of(trace.model_dump(mode="json"))
        assert result.task_name == task.data.name and result.reward is not None
        assert trace.rewards["benchflow"].score == result.reward
    assert sorted(t.reward for t in (e.traces[0] for e in episodes)) == [0.4, 1.0]


@pytest.mark.slow
def test_a_failed_benchflow_rollout_fails_the_trace_without_a_reward(tmp_path: Path) -> None:
    with socket.socket() as closed:  # bound, never listening: every connection is refused
        closed.bind(("127.0.0.1", 0))
        env = load_environment(qa=QA, metric=METRIC, jobs_dir=tmp_path / "jobs")
        episode = run_item(env, f"http://127.0.0.1:{closed.getsockname()[1]}/v1", "multiply")
    (trace,) = episode.traces
    assert not trace.ok and trace.errors
    assert trace.rewards.get("benchflow") is None
    outcome = trace.info["benchflow"]
    assert outcome["error"] and outcome["reward"] is None
    rollout_dir = Path(outcome["job_dir"]) / outcome["rollout"]
    result = RolloutResult.model_validate_json((rollout_dir / "result.json").read_text())
    assert result.error is not None and result.reward is None
    # benchflow did not retry inside the trace (verifiers' retries start a fresh one)
    assert result.retried_errors == [] and not (rollout_dir / "retries").exists()


HELLO_SCRIPT = """\
name: hello
steps:
  - shell: printf 'Hello, world!\\n' > /app/hello.txt
  - text: Wrote /app/hello.txt.
"""


def docker_answers() -> bool:
    try:
        import docker

        docker.from_env().ping()
    except Exception:  # noqa: BLE001 - any failure means "no daemon"
        return False
    return True


@pytest.mark.slow
def test_a_task_folder_in_docker_with_tool_calls_through_the_interception(
        tmp_path: Path) -> None:
    """tasks/hello-world: the model agent's shell tool runs in benchflow's Docker sandbox,
    its two model calls go through verifiers' interception, the task's test.sh scores."""
    if not docker_answers():
        pytest.skip("no Docker daemon answers")
    script = tmp_path / "hello.yaml"
    script.write_text(HELLO_SCRIPT)
    with ModelServer(script, host="127.0.0.1") as server:
        env = load_environment(tasks=[ROOT / "tasks" / "hello-world"], agent="model",
                               jobs_dir=tmp_path / "jobs")
        episode = run_item(env, f"{server.url}/v1", "hello-world")
    (trace,) = episode.traces
    assert trace.ok, trace.errors
    result = result_of(trace.model_dump(mode="json"))
    assert result.error is None and result.reward == trace.reward == 1.0
    assert trace.num_turns == 2  # the shell call, then the final text
    tool_results = [n.message for n in trace.nodes if n.message.role == "tool"]
    assert len(tool_results) == 1  # the sandbox's output went back through verifiers


def test_the_taskset_needs_one_dataset(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="exactly one of --env.taskset.qa"):
        list(BenchflowTaskset(BenchflowTasksetConfig(id="benchflow-env")))
    with pytest.raises(ConfigError, match="exactly one of --env.taskset.qa"):
        list(BenchflowTaskset(BenchflowTasksetConfig(id="benchflow-env", qa=QA,
                                                     tasks=[ROOT / "tasks" / "hello-world"])))
    with pytest.raises(ConfigError, match="no_such.jsonl"):
        list(BenchflowTaskset(BenchflowTasksetConfig(id="benchflow-env",
                                                     qa=tmp_path / "no_such.jsonl")))
    with pytest.raises(ConfigError, match="metric"):
        list(BenchflowTaskset(BenchflowTasksetConfig(id="benchflow-env", qa=QA,
                                                     metric="no_such_metric")))


def test_task_folders_become_tasks_with_their_instructions() -> None:
    tasks = list(BenchflowTaskset(BenchflowTasksetConfig(
        id="benchflow-env", tasks=[ROOT / "tasks" / "hello-world"], agent="oracle")))
    (task,) = tasks
    assert task.data.name == "hello-world" and task.data.index == 0
    assert task.data.prompt and task.data.prompt in (ROOT / "tasks" / "hello-world" /
                                                     "task.md").read_text()
