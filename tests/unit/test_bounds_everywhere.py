"""Every number a user writes has a range (docs/reference/bounds.md), whichever file or flag.

The structural test walks the models of every file format benchflow reads (job file,
task.md and task.toml, scenes, study file, verifier.md, agent.toml, QA config, model-server
script) and fails on a numeric field without an upper bound, so a field added later cannot
slip past the rule (a tool server config's settings are free-form: its numbers are checked
by hand). The others feed out-of-range values through the CLI: exit 2, one line
naming the file and the field, no traceback.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path

import annotated_types as at
import pytest
import yaml
from pydantic import BaseModel
from typer.testing import CliRunner

from benchflow import bounds
from benchflow.agents.manifest import AgentManifest
from benchflow.cli.main import build_app
from benchflow.config import Scene
from benchflow.errors import ConfigError
from benchflow.job.config import JobConfig
from benchflow.model_server.script import Script
from benchflow.qa.config import QaRolloutConfig
from benchflow.study.config import StudySpec
from benchflow.task.models import Frontmatter
from benchflow.task.scenes import TaskScenes
from benchflow.task.verifier_doc import VerifierDoc

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()

FILE_FORMATS = [JobConfig, Frontmatter, TaskScenes, Scene, StudySpec, VerifierDoc,
                AgentManifest, QaRolloutConfig, Script]
NOT_BOUNDED_ABOVE = {
    "TaskStepConfig.min_reward": "a reward threshold: any finite number",
}


def _leaves(annotation: object, metadata: list[object]) -> typing.Iterator[tuple[object,
                                                                               list[object]]]:
    """(type, constraints) of every leaf of an annotation (unions, lists, Annotated)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        found = [m for e in extra for m in getattr(e, "metadata", [e])]
        yield from _leaves(inner, metadata + found)
    elif origin in (typing.Union, types.UnionType, list, tuple, set, frozenset):
        for arg in typing.get_args(annotation):
            if arg is not Ellipsis:
                yield from _leaves(arg, metadata)
    elif origin is dict:
        yield from _leaves(typing.get_args(annotation)[1], metadata)
    else:
        yield annotation, metadata


def _unbounded(model: type[BaseModel], seen: set[type]) -> list[str]:
    if model in seen:
        return []
    seen.add(model)
    found = []
    for name, field in model.model_fields.items():
        for leaf, constraints in _leaves(field.annotation, list(field.metadata)):
            if isinstance(leaf, type) and issubclass(leaf, BaseModel):
                found += _unbounded(leaf, seen)
            elif leaf in (int, float):
                upper = any(isinstance(c, (at.Le, at.Lt)) for c in constraints)
                where = f"{model.__name__}.{name}"
                if not upper and where not in NOT_BOUNDED_ABOVE:
                    found.append(where)
    return found


def test_every_numeric_field_of_every_file_format_has_an_upper_bound():
    seen: set[type] = set()
    missing = [where for model in FILE_FORMATS for where in _unbounded(model, seen)]
    assert not missing, f"numbers without a documented range: {missing}"
    documented = (REPO / "docs" / "reference" / "bounds.md").read_text()
    for limit in ("10,000", "604,800", "1,000,000", "65,535", "4,096"):
        assert limit in documented


def _one_line_exit_2(args: list[str], *names: str) -> str:
    result = runner.invoke(build_app(), args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, (args, result.output)
    assert "Traceback" not in result.output
    text = " ".join(lines)
    for name in names:
        assert name in text, (name, text)
    return text


def _task(root: Path, frontmatter: str) -> Path:
    import shutil

    task = root / "task"
    shutil.copytree(REPO / "tasks" / "hello-world", task)
    (task / "task.md").write_text(f"---\n{frontmatter}\n---\nWrite hello.txt.\n")
    return task


@pytest.mark.parametrize(("frontmatter", "field"), [
    ("agents: {r: {agent: nop, timeout_sec: 1.0e+300}}\nscenes: [{turns: [{role: r}]}]",
     "timeout_sec"),
    ("agents: {r: {agent: nop, idle_timeout_sec: .inf}}\nscenes: [{turns: [{role: r}]}]",
     "idle_timeout_sec"),
])
def test_task_scene_role_timeouts_out_of_range(tmp_path, frontmatter, field):
    task = _task(tmp_path, frontmatter)
    _one_line_exit_2(["tasks", "check", str(task)], "task.md", field)


@pytest.mark.parametrize(("user", "field"), [
    ({"persona": "a tester", "max_rounds": 100_000_000}, "user.max_rounds"),
    ({"persona": "a tester", "temperature": float("nan")}, "user.temperature"),
    ({"persona": "a tester", "max_rounds": "many"}, "user.max_rounds"),
])
def test_a_user_block_out_of_range(tmp_path, user, field):
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "jobs_dir": str(tmp_path / "jobs"), "agents": [{"name": "nop"}], "user": user,
        "datasets": [{"path": str(REPO / "tasks"), "tasks": ["hello-world"]}]}))
    _one_line_exit_2(["jobs", "run", str(job)], str(job), field)
    assert not (tmp_path / "jobs").exists()


def test_a_scenes_file_role_timeout_out_of_range(tmp_path):
    scenes = tmp_path / "scenes.yaml"
    scenes.write_text(yaml.safe_dump({"scenes": [{
        "roles": [{"name": "r", "agent": "nop", "timeout_sec": 10**12}],
        "turns": [{"role": "r"}]}]}))
    _one_line_exit_2(["run", str(REPO / "tasks" / "hello-world"), "--scenes", str(scenes),
                      "--jobs-dir", str(tmp_path / "jobs")], str(scenes), "timeout_sec")
    assert not (tmp_path / "jobs").exists()


def test_a_study_k_out_of_range(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):  # were the bound missing, no sandbox of it starts
        raise AssertionError("a study out of range started a trial")

    monkeypatch.setattr("benchflow.rollout.rollout.create_sandbox", refuse)
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({
        "name": "s", "studies_dir": str(tmp_path / "studies"), "k": 100_000_000,
        "datasets": [{"path": str(REPO / "tasks"), "tasks": ["hello-world"]}],
        "arms": [{"name": "a", "agent": "nop"}, {"name": "b", "agent": "oracle"}]}))
    _one_line_exit_2(["study", str(study)], str(study), "k")
    assert not (tmp_path / "studies").exists()


def test_verifier_doc_and_qa_config_numbers_out_of_range(tmp_path):
    task = _task(tmp_path, "verifier: {timeout_sec: 60}")
    (task / "verifier" / "verifier.md").write_text(
        "---\nstrategy: agent-judge\nagent: claude\ntimeout_sec: 1.0e+12\n---\n")
    _one_line_exit_2(["tasks", "check", str(task)], "timeout_sec")
    from benchflow.qa.config import parse_config

    with pytest.raises(ConfigError, match="max_turns"):
        parse_config({"max_turns": 10**9})


@pytest.mark.parametrize(("settings", "field"), [
    ({"code": {"timeout_sec": 1e300}}, "resources.code.timeout_sec"),
    ({"python": {"content": {"memory_mb": "lots"}}}, "resources.python.memory_mb"),
    ({"vm": {"cpus": 0}}, "resources.vm.cpus"),
])
def test_a_tool_server_config_number_out_of_range(tmp_path, settings, field):
    config = tmp_path / "tools.yaml"
    config.write_text(yaml.safe_dump({"resources": settings}))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "jobs_dir": str(tmp_path / "jobs"), "tool_config": str(config),
        "agents": [{"name": "claude", "tools": ["web:search"]}],
        "datasets": [{"path": str(REPO / "tasks"), "tasks": ["hello-world"]}]}))
    _one_line_exit_2(["jobs", "run", str(job)], str(config), field)
    _one_line_exit_2(["tools", "serve", "--config", str(config)], str(config), field)


def test_an_agent_toml_timeout_out_of_range(tmp_path, monkeypatch):
    agent = tmp_path / "agents" / "slowpoke"
    agent.mkdir(parents=True)
    (agent / "agent.toml").write_text(
        'name = "slowpoke"\n[launch]\nargv = ["slowpoke"]\nhandshake_timeout_sec = 1e300\n')
    monkeypatch.setenv("BENCHFLOW_AGENTS_PATH", str(tmp_path / "agents"))
    text = _one_line_exit_2(["agents", "show", "slowpoke"], "handshake_timeout_sec")
    assert "agent.toml" in text


@pytest.mark.parametrize(("args", "named"), [
    (["compare", ".", "--resamples", str(bounds.MAX_RESAMPLES + 1)], "--resamples"),
    (["compare", ".", "--seed", "-1"], "--seed"),
    (["model-server", str(REPO / "README.md"), "--port", "70000"], "--port"),
    (["tools", "serve", "--port", "70000"], "--port"),
    (["traces", "serve", "--port", "-1"], "--port"),
    (["study", "x.yaml", "-n", str(bounds.MAX_CONCURRENCY + 1)], "--n-concurrent"),
    (["fork", ".", "--at-turn", "0", "-k", str(bounds.MAX_ATTEMPTS + 1)], "-k 10001"),
])
def test_flags_out_of_range(args, named):
    result = runner.invoke(build_app(), args)
    assert result.exit_code == 2, (args, result.output)
    assert "Traceback" not in result.output
    assert named in result.output, result.output
