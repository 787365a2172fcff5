"""The TypeScript SDK: its own tests on Node's test runner, and its example endpoint against
`benchflow run -a http` with a standalone `benchflow traces serve` filing the spans.

Slow (npm installs the SDK's dependencies and tsc compiles it): `make test-ts`. Skipped
with a reason when node or npm is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.model_server import ModelServer
from benchflow.rollout.result import RolloutResult
from benchflow.traces import TRACE_EVENTS, read_events, span_tree

ROOT = Path(__file__).parents[2]
SDK = ROOT / "sdk" / "typescript"
TOKEN = "ts-endp0int-token"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None,
                       reason="node and npm are needed for the TypeScript SDK"),
]


@pytest.fixture(scope="module")
def built() -> Path:
    """The SDK with its dependencies (npm ci, from the lock file) and compiled (tsc)."""
    if not (SDK / "node_modules").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=SDK, check=True,
                       capture_output=True, timeout=600)
    subprocess.run(["npm", "run", "build"], cwd=SDK, check=True, capture_output=True,
                   timeout=600)
    return SDK


def test_the_sdk_passes_its_node_tests(built):
    done = subprocess.run(["node", "--test", "test/"], cwd=built, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout and "# pass 22" in done.stdout


def _start(argv: list[str], cwd: Path, marker: str, stream: str = "stdout",
           env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start a server process and read its address from the line containing `marker`."""
    process = subprocess.Popen(argv, cwd=cwd, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    pipe = process.stdout if stream == "stdout" else process.stderr
    assert pipe is not None
    for line in pipe:
        if marker in line:
            url = next(w for w in line.split() if w.startswith("http://"))
            return process, url.rstrip("/")
    process.kill()
    process.communicate(timeout=30)
    raise AssertionError(f"{argv[0]} exited without printing {marker!r}: "
                         f"{process.stderr.read() if process.stderr else ''}")


def test_the_typescript_endpoint_traces_join_through_traces_serve(built, tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    env = {**os.environ, "COLUMNS": "200"}
    serve, otlp = _start([sys.executable, "-c", "from benchflow.cli.main import main; main()",
                          "traces", "serve", "--port", "0", "--jobs-dir", str(jobs)],
                         ROOT, "OTLP/HTTP on", "stderr", env)
    model = ModelServer(ROOT / "examples" / "traced-agent" / "model.yaml")
    model.start()
    endpoint = None
    try:
        endpoint, url = _start(["node", "dist/examples/endpoint.js", "--port", "0", "--token",
                                TOKEN, "--model-base-url", f"{model.url}/v1",
                                "--otlp-endpoint", otlp], built, "listening on")
        run = CliRunner().invoke(app, [
            "run", str(ROOT / "tasks" / "qa-example.jsonl"), "-a", "http",
            "--agent-endpoint", f"{url}/rollout/eval", "--header",
            f"Authorization: Bearer {TOKEN}", "--max-tasks", "2", "--jobs-dir", str(jobs),
            "--job-name", "ts", "--trace-listen", "none"])
        assert run.exit_code == 0, run.output
    finally:
        if endpoint is not None:
            endpoint.terminate()
            endpoint.communicate(timeout=30)  # waits, and closes the pipes
        model.stop()
        serve.terminate()
        serve.communicate(timeout=30)
    results = [RolloutResult.model_validate_json(p.read_text())
               for p in (jobs / "ts").glob("*/*/*/result.json")]
    assert len(results) == 2
    for result in results:
        events = read_events(jobs / "ts" / result.rollout_name / TRACE_EVENTS)
        assert {e["trace_id"] for e in events} == {result.trace_id}
        assert {e["service"] for e in events} == {"benchmark_agent_ts"}
        (root,) = span_tree(events)
        (task,) = root.children
        llm, tool = task.children
        assert (llm.kind, llm.type, tool.kind) == ("llm", "llm.stream_start", "tool")
        assert llm.usage["input_tokens"] > 0 and llm.end["data"]["output"] \
            == "Here is my answer to the task."
        assert tool.end["data"]["output"]["email"] == "[email]"
        assert [e["type"] for e in events][-2:] == ["user.signal", "trace.end"]
    text = "\n".join(p.read_text(errors="replace") for p in jobs.rglob("*") if p.is_file())
    assert "jane.doe@example.com" not in text and TOKEN not in text
