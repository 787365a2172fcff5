"""No injected secret reaches anything benchflow writes, whichever way it was injected.

One real rollout on Docker gets three secrets, none of them in a secret-named host
variable and none shaped like an API key (so only the rollout's own redactor can know
them): a job file's `${VAR}` under a secret-named agent env key, the model endpoint's
key, and a task env template. The agent prints them to stdout and stderr, writes one to
/logs and fails, so each lands in every place a leak was seen: result.json's error,
error.txt, rollout.log, the trajectory, command/*.txt, the downloaded /logs, exports and
the viewer. The test checks each place holds the mask where the secret was, and that no
byte of any file (or page) holds a secret.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from benchflow.cli.jobs import run_job_file
from benchflow.job.export import ExportFilters, export_lines
from benchflow.view.export import export_site
from benchflow.view.render import Pages

pytestmark = pytest.mark.docker

SECRETS = {"BF_LEAK_PLAIN": "leak-agent-7f3a9c1e5d", "BF_GATEWAY": "leak-model-2b8d4e6f0a",
           "BF_LEAK_DB": "leak-task-9c0a1b2d3e"}


def _leaks(data: bytes) -> list[str]:
    return [v for v in SECRETS.values() if v.encode() in data]


def test_no_injected_secret_is_written_anywhere(tmp_path, job_name, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    task = tmp_path / "tasks" / "leaky"
    (task / "environment").mkdir(parents=True)
    (task / "verifier").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "verifier" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (task / "task.md").write_text("---\nsandbox:\n  env: {DB_PASSWORD: '${BF_LEAK_DB}'}\n---\n"
                                  "Print your secrets.\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({
        "name": job_name, "jobs_dir": str(tmp_path / "jobs"), "retry": {"max_attempts": 0},
        "environment": {"extra_ca_certs": []},
        "model_endpoint": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "BF_GATEWAY"},
        "agents": [{"name": "leaker", "env": {"MY_API_TOKEN": "${BF_LEAK_PLAIN}"},
                    "execute": "echo token=$MY_API_TOKEN model=$BENCHFLOW_PROVIDER_API_KEY\n"
                               "echo db=$DB_PASSWORD >&2\n"
                               "echo \"$MY_API_TOKEN $DB_PASSWORD\" > /logs/agent/keys.txt\n"
                               "exit 3\n"}],
        "datasets": [{"path": str(task.parent)}]}))
    assert run_job_file(spec) == 1
    job = tmp_path / "jobs" / job_name
    trial = job / "leaker" / "tasks" / "leaky__1"

    result = json.loads((trial / "result.json").read_text())
    assert result["error"]["type"] == "agent_execution_failed"
    assert "token=*** model=***" in result["error"]["message"]  # the place was reached
    for place in ("error.txt", "command/stdout.txt", "logs/agent/keys.txt",
                  "trajectory/acp_trajectory.jsonl"):
        assert "***" in (trial / place).read_text(), place
    assert (trial / "command" / "stderr.txt").read_text() == "db=***\n"

    files = [p for p in job.rglob("*") if p.is_file()]
    assert any(p.name == "rollout.log" for p in files)
    leaked = {str(p.relative_to(job)): _leaks(p.read_bytes()) for p in files}
    assert not {k: v for k, v in leaked.items() if v}, leaked

    exported = "\n".join(json.dumps(line) for fmt in ("sft", "atif") for line in export_lines(
        job, fmt, ExportFilters(errors="include")))
    assert exported and not _leaks(exported.encode())

    pages = Pages(tmp_path / "jobs")
    html = pages.trial(job, trial) or ""
    assert "token=" in html and not _leaks(html.encode())
    site = tmp_path / "site"
    export_site(tmp_path / "jobs", site)
    assert not [p for p in site.rglob("*.html") if _leaks(p.read_bytes())]
    assert not re.search(r"leak-(agent|model|task)-", (job / "config.json").read_text())
