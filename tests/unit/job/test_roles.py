"""Who plays which role: `--role NAME=AGENT[:MODEL]`, the job file's `roles:` entries, and
the bad inputs that are exit 2 with one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.cli.run import run_job_data
from benchflow.errors import ConfigError
from benchflow.job.config import RolesAgentConfig, parse_job_config
from benchflow.job.runner import prepare_job
from benchflow.roles import (
    RoleAgent,
    assign_roles,
    parse_agent_spec,
    parse_role_option,
    parse_role_options,
)
from benchflow.rollout.scenes import task_scenes
from benchflow.task import load_task

REPO = Path(__file__).resolve().parents[3]
CODER_REVIEWER = REPO / "tasks" / "coder-reviewer"
runner = CliRunner()
KEYS = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}


def test_parse_role_options() -> None:
    assert parse_role_option("coder=claude:claude-sonnet-4-6") == (
        "coder", RoleAgent("claude", "claude-sonnet-4-6"))
    assert parse_role_option("reviewer=codex") == ("reviewer", RoleAgent("codex"))
    assert parse_agent_spec("model:qwen2.5:7b") == RoleAgent("model", "qwen2.5:7b")
    assert parse_agent_spec("acpx/gemini") == RoleAgent("acpx/gemini")
    assert str(RoleAgent("codex", "gpt-5.4")) == "codex:gpt-5.4"


@pytest.mark.parametrize(("values", "message"), [
    (["coder"], "expected NAME=AGENT"),
    (["=claude"], "is not a role name"),
    (["coder="], "is not an agent name"),
    (["coder=claude:"], "the model after ':' is empty"),
    (["coder=claude,codex"], "is not an agent name"),
    (["coder=claude", "coder=codex"], "given twice"),
])
def test_malformed_role_options(values: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_role_options(values)


def test_assign_keeps_the_tasks_scenes_and_prompts() -> None:
    task = load_task(CODER_REVIEWER)
    scenes = task_scenes(task, None, assigned={"coder": RoleAgent("claude", "claude-sonnet-4-6"),
                                               "reviewer": RoleAgent("codex")})
    assert [(r.name, r.agent, r.model) for r in scenes[0].roles] == [
        ("coder", "claude", "claude-sonnet-4-6"), ("reviewer", "codex", None)]
    own = task_scenes(task, "claude")
    assert [t.model_dump() for t in scenes[0].turns] == [t.model_dump() for t in own[0].turns]
    # -a fills the roles --role leaves out
    mixed = task_scenes(task, "claude", "m", assigned={"reviewer": RoleAgent("codex")})
    assert [(r.agent, r.model) for r in mixed[0].roles] == [("claude", "m"), ("codex", None)]
    with pytest.raises(ConfigError, match="has no role 'reviwer' \\(did you mean 'reviewer'"):
        task_scenes(task, None, assigned={"reviwer": RoleAgent("codex")})
    with pytest.raises(ConfigError, match="role 'coder' of scene .* names no agent"):
        task_scenes(task, None, assigned={"reviewer": RoleAgent("codex")})
    with pytest.raises(ConfigError, match="its roles are agent"):
        task_scenes(load_task(REPO / "tasks" / "hello-world"), None,
                    assigned={"coder": RoleAgent("claude")})
    assert assign_roles(own, {"reviewer": RoleAgent("codex", "x")})[0].roles[1].agent == "codex"


def test_cli_roles_become_a_roles_entry_that_plans_per_role(tmp_path, monkeypatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    data = run_job_data(CODER_REVIEWER, agent=None, model=None, attempts=1, concurrency=1,
                        jobs_dir=tmp_path, job_name="j", env="docker", force_build=False,
                        preserve_env="never", ca_cert=None, task_filter=None, scenes_file=None,
                        network=None, timeout_multiplier=1.0, max_retries=0,
                        roles=parse_role_options(["coder=claude:claude-sonnet-4-6",
                                                  "reviewer=codex:gpt-5.4"]))
    config = parse_job_config(data)
    [entry] = config.agents
    assert isinstance(entry, RolesAgentConfig) and entry.name == "claude+codex"
    [trial] = prepare_job(config).trials
    assert trial.config.agent_name == "claude+codex"
    assert [(r.name, r.agent, r.model) for r in trial.config.scenes[0].roles] == [
        ("coder", "claude", "claude-sonnet-4-6"), ("reviewer", "codex", "gpt-5.4")]
    assert [t.role for t in trial.config.scenes[0].turns] == ["coder", "reviewer", "coder"]


def test_job_file_roles_entry(tmp_path, monkeypatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "jobs_dir": str(tmp_path / "jobs"),
        "agents": [{"roles": {"coder": "claude:claude-sonnet-4-6", "reviewer": "codex"}},
                   {"name": "duo", "agent": "claude", "roles": {"reviewer": "codex:gpt-5.4"}}],
        "datasets": [{"path": str(REPO / "tasks"), "tasks": ["coder-reviewer"]}]}))
    from benchflow.job.config import load_job_config

    config = load_job_config(job)
    assert [a.name for a in config.agents] == ["claude+codex", "duo"]
    with pytest.raises(ConfigError, match="share|both store results"):
        prepare_job(config)  # both store their results under claude+codex


@pytest.mark.parametrize(("args", "message"), [
    (["-a", "claude", "-a", "codex"], "-a/--agent given 2 times (claude, codex)"),
    (["-a", "claude,codex"], "one agent name per -a"),
    (["--role", "bogus=claude"], "task coder-reviewer has no role 'bogus'"),
    (["--role", "coder"], "expected NAME=AGENT[:MODEL]"),
    (["--role", "coder=claude:"], "the model after ':' is empty"),
])
def test_bad_roles_on_the_command_line_are_exit_2_in_one_line(tmp_path, args, message) -> None:
    result = runner.invoke(app, ["run", str(CODER_REVIEWER), "--jobs-dir", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output
    assert "Traceback" not in result.output
    assert not any(tmp_path.iterdir())  # nothing started, nothing written
