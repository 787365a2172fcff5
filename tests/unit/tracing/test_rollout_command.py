"""`rollout login|check|benchmarks`: the 0600 login file, one line per check with exit 1 on
any failure (Docker unreachable, a bad token, an endpoint that is down), the shipped
registry, and pulls into a workspace."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

ROLLOUT = [sys.executable, "-c", "from benchflow.cli.main import main; main()"]
GOOD = "g00d-endpoint-token"


class _Endpoint(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        ok = self.headers.get("Authorization") == f"Bearer {GOOD}"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def endpoint():
    server = HTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/rollout/eval"
    server.shutdown()
    server.server_close()


def rollout(tmp_path: Path, *args: str, stdin: str = "", **env: str):
    environ = {k: v for k, v in os.environ.items() if k != "BENCHFLOW_REGISTRY"}
    environ.update({"BENCHFLOW_CONFIG_DIR": str(tmp_path / "config"), "COLUMNS": "200", **env})
    return subprocess.run([*ROLLOUT, *args], input=stdin, capture_output=True, text=True,
                          env=environ, cwd=tmp_path, timeout=120)


def test_login_stores_a_0600_file_and_token_env_stores_no_secret(tmp_path, endpoint):
    done = rollout(tmp_path, "login", "--endpoint", endpoint, stdin=f"{GOOD}\n")
    assert done.returncode == 0, done.stderr
    path = tmp_path / "config" / "rollout.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"endpoint": endpoint, "token": GOOD}
    assert GOOD not in done.stdout + done.stderr
    done = rollout(tmp_path, "login", "--token-env", "MY_AGENT_TOKEN")
    assert done.returncode == 0, done.stderr
    saved = json.loads(path.read_text())
    assert saved == {"endpoint": endpoint, "token_env": "MY_AGENT_TOKEN"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_login_rejects_a_bad_endpoint_in_one_line(tmp_path):
    done = rollout(tmp_path, "login", "--endpoint", "ftp://x", stdin="t\n")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--endpoint" in done.stderr


def lines(done) -> dict[str, str]:
    return {line.split()[1]: line for line in done.stdout.splitlines() if line.strip()}


def test_check_passes_with_a_good_token(tmp_path, endpoint):
    rollout(tmp_path, "login", "--endpoint", endpoint, stdin=f"{GOOD}\n")
    done = rollout(tmp_path, "check", DOCKER_HOST="unix:///nonexistent/docker.sock")
    found = lines(done)
    assert set(found) == {"docker", "registry", "credentials", "endpoint"}
    assert found["credentials"].startswith("ok") and found["endpoint"].startswith("ok")
    assert found["registry"].startswith("ok") and "2 dataset(s)" in found["registry"]
    # Docker unreachable: its own line fails, and the exit code is 1
    assert found["docker"].startswith("FAIL") and "no Docker daemon answers" in found["docker"]
    assert done.returncode == 1


def test_check_with_a_bad_token_and_with_the_endpoint_down(tmp_path, endpoint):
    rollout(tmp_path, "login", "--endpoint", endpoint, "--token-env", "AGENT_TOKEN")
    done = rollout(tmp_path, "check", AGENT_TOKEN="wrong-token")
    found = lines(done)
    assert done.returncode == 1
    assert found["credentials"].startswith("FAIL") and "HTTP 401" in found["credentials"]
    assert found["endpoint"].startswith("ok")
    assert "wrong-token" not in done.stdout + done.stderr
    server = HTTPServer(("127.0.0.1", 0), _Endpoint)
    down = f"http://127.0.0.1:{server.server_port}/eval"
    server.server_close()
    done = rollout(tmp_path, "check", "--agent-endpoint", down, AGENT_TOKEN=GOOD)
    found = lines(done)
    assert done.returncode == 1 and found["endpoint"].startswith("FAIL")
    assert "is down" in found["endpoint"] and found["credentials"].startswith("ok")
    done = rollout(tmp_path, "check")
    assert lines(done)["credentials"].startswith("FAIL") and "$AGENT_TOKEN is not set" in \
        lines(done)["credentials"]


def test_check_a_bad_registry_fails_its_line(tmp_path, endpoint):
    (tmp_path / "bad.json").write_text("{")
    done = rollout(tmp_path, "check", "--registry", str(tmp_path / "bad.json"))
    assert lines(done)["registry"].startswith("FAIL") and done.returncode == 1


def test_benchmarks_list_uses_the_shipped_registry(tmp_path):
    done = rollout(tmp_path, "benchmarks", "list")
    assert done.returncode == 0, done.stderr
    assert "hello-world" in done.stdout and "examples" in done.stdout


def test_benchmarks_pull_copies_tasks_and_verifiers_once(tmp_path):
    done = rollout(tmp_path, "benchmarks", "pull", "examples",
                   BENCHFLOW_CACHE_DIR=str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr
    assert "4 task(s) added" in done.stdout
    workspace = tmp_path / "workspace"
    manifest = json.loads((workspace / "workspace.json").read_text())
    tasks = manifest["datasets"]["examples@1.0"]["tasks"]
    assert tasks["hello-world"]["verifier"] == {"path": "verifier",
                                                "files": ["verifier/test.sh"]}
    assert tasks["hello-world-legacy"]["verifier"]["path"] == "tests"
    assert (workspace / "datasets" / "examples@1.0" / "fix-python-bug" / "task.md").is_file()
    marker = workspace / "datasets" / "examples@1.0" / "hello-world" / "note"
    marker.write_text("kept")
    again = rollout(tmp_path, "benchmarks", "pull", "examples@1.0",
                    BENCHFLOW_CACHE_DIR=str(tmp_path / "cache"))
    assert "already in the workspace" in again.stdout and marker.read_text() == "kept"
    unknown = rollout(tmp_path, "benchmarks", "pull", "nope")
    assert unknown.returncode == 2 and "no dataset named 'nope'" in unknown.stderr


def test_benchmarks_run_needs_an_endpoint(tmp_path):
    done = rollout(tmp_path, "benchmarks", "run", "hello-world")
    assert done.returncode == 2 and "--agent-endpoint" in done.stderr
