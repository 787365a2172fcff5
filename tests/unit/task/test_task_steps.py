"""Multi-step and separate-verifier task config: Harbor keys mapped, scoring keys refused,
step files resolved, rewards combined, gates, artifacts and the verifier image chosen."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from benchflow.errors import TaskInvalidError
from benchflow.rollout.result import TaskStepResult
from benchflow.rollout.task_steps import (
    combine_step_rewards,
    step_tests,
    task_placed_files,
    verifier_image_is_own,
    verifier_spec,
)
from benchflow.task import load_task
from benchflow.task.legacy import parse_task_toml
from benchflow.task.models import Artifact, TaskConfigWarning, TaskStepConfig

STEPS_TOML = """version = "1.0"
multi_step_reward_strategy = "final"
artifacts = ["/app/out", {source = "/logs/x.txt", destination = "x.txt"}]

[verifier]
environment_mode = "separate"

[verifier.environment]
docker_image = "verifier:1"
memory = "2G"

[[steps]]
name = "one"
min_reward = 1

[[steps]]
name = "two"
min_reward = {reward = 0.5, style = 1.0}
artifacts = ["/app/two"]

[steps.agent]
timeout_sec = 30
user = 1000

[steps.verifier]
timeout_sec = 20
env = {MODE = "strict"}
"""


def test_harbor_steps_and_separate_verifier_map(recwarn):
    c = parse_task_toml(STEPS_TOML, "t.toml")
    assert c.multi_step_reward_strategy == "final"
    assert [a.source for a in c.artifacts] == ["/app/out", "/logs/x.txt"]
    assert c.artifacts[1].kept_as == "x.txt" and c.artifacts[0].kept_as == "app/out"
    assert c.verifier.separate and c.verifier.environment is not None
    assert (c.verifier.environment.docker_image, c.verifier.environment.memory_mb) == (
        "verifier:1", 2048)
    one, two = c.steps
    assert (one.name, one.min_reward, two.min_reward) == ("one", 1.0, {"reward": 0.5,
                                                                        "style": 1.0})
    assert (two.agent.timeout_sec, two.agent.user, two.verifier.env) == (30, "1000",
                                                                        {"MODE": "strict"})
    assert [a.source for a in two.artifacts] == ["/app/two"]
    assert c.step_separate(one)
    assert not [w for w in recwarn.list if "steps" in str(w.message)]


@pytest.mark.parametrize(("toml", "message"), [
    ('version = "1.0"\n[verifier]\nuser = "1000"\n',
     r"'verifier.user' is not supported by benchflow and changes how the task is scored"),
    ('version = "1.0"\n[[steps]]\nname = "a"\n[steps.verifier]\nuser = 5\n',
     r"'steps\[0\].verifier.user' is not supported"),
])
def test_keys_that_change_scoring_stop_the_load(toml, message):
    with pytest.raises(TaskInvalidError, match=message):
        parse_task_toml(toml, "t.toml")


@pytest.mark.parametrize(("toml", "message"), [
    ('[[steps]]\nname = "a"\nmin_rewrd = 1\n',
     r"unknown key 'steps\[0\].min_rewrd' — did you mean 'min_reward'\? The key was ignored"),
    ('[[steps]]\nname = "a"\nowner = "me"\n', r"'steps\[0\].owner' is not supported"),
    ('[[steps]]\nname = "a"\npath = "stages/a"\n',
     r"'steps\[0\].path' = 'stages/a' was ignored: a step's files are read from "
     r"steps/<name>/ \(steps/a/ here\), as Harbor does"),
    ('[[steps]]\nname = "a"\n[steps.healthcheck]\ncommand = "true"\nshell = "sh"\n',
     r"'steps\[0\].healthcheck.shell' is not supported"),
    ('[[steps]]\nname = "a"\nartifacts = [{source = "/a", mode = 1}]\n',
     r"'steps\[0\].artifacts\[0\].mode' is not supported"),
    ('artifacts = [{source = "/a", mode = 1}]\n', r"'artifacts\[0\].mode' is not supported"),
    ('[environment.healthcheck]\ncommand = "true"\nshell = "sh"\n',
     r"'environment.healthcheck.shell' is not supported"),
    ('[[environment.mcp_servers]]\nname = "m"\ntransport = "streamable-http"\n'
     'url = "http://m:8000/mcp"\ndescription = "x"\n',
     r"'environment.mcp_servers\[0\].description' is not supported"),
])
def test_unknown_keys_in_harbor_tables_warn_as_harbor_ignores_them(toml, message):
    with pytest.warns(TaskConfigWarning, match=message):
        config = parse_task_toml('version = "1.0"\n' + toml, "t.toml")
    assert config is not None


@pytest.mark.parametrize("path", ["steps/a", "steps/a/", "./steps/a"])
def test_a_step_path_naming_the_steps_folder_is_harbors_meaning(path, recwarn):
    config = parse_task_toml(f'version = "1.0"\n[[steps]]\nname = "a"\npath = "{path}"\n',
                             "t.toml")
    assert [s.name for s in config.steps] == ["a"]
    assert not [w for w in recwarn if issubclass(w.category, TaskConfigWarning)]


def test_root_verifier_user_is_accepted():
    assert parse_task_toml('version = "1.0"\n[verifier]\nuser = "root"\n', "t.toml")


def test_step_gates():
    plain = TaskStepConfig(name="a", min_reward=1.0)
    assert plain.gate_failure({"reward": 1.0}) is None
    assert plain.gate_failure({"reward": 0.5}) == "step 'a' scored reward=0.5, below min_reward 1"
    keyed = TaskStepConfig(name="b", min_reward={"style": 0.5})
    assert keyed.gate_failure({"reward": 1.0}) == "step 'b' scored style=-inf, below min_reward 0.5"
    assert TaskStepConfig(name="c").gate_failure({}) is None


def test_rewards_combine_like_harbor():
    runs = [TaskStepResult(name="a", rewards={"reward": 1.0, "x": 1.0}),
            TaskStepResult(name="b", rewards={"reward": 0.0}),
            TaskStepResult(name="c")]  # did not score: left out of the mean
    mean = combine_step_rewards(runs, None)
    assert (mean["reward"], mean["x"]) == (0.5, 0.5)  # a missing key counts 0
    assert mean["a/x"] == 1.0 and mean["b/reward"] == 0.0 and "c/reward" not in mean
    final = combine_step_rewards(runs, "final")
    assert final["reward"] == 0.0 and "x" not in final and final["a/reward"] == 1.0
    assert combine_step_rewards([TaskStepResult(name="a")], "mean") == {}


@pytest.mark.parametrize("bad", ["relative/path", "/app/../etc", ""])
def test_artifact_sources_are_absolute_sandbox_paths(bad):
    with pytest.raises(ValidationError):
        Artifact(source=bad)
    with pytest.raises(ValidationError, match="relative path"):
        Artifact(source="/app", destination="/abs")


@pytest.mark.parametrize(("extra", "message"), [
    ({"exclude": ["*.log"]}, "exclude patterns are not supported"),
    ({"service": "-db"}, "String should match pattern"),
])
def test_artifact_keys_benchflow_cannot_honour_are_refused(extra, message):
    with pytest.raises(ValidationError, match=message):
        Artifact(source="/app", **extra)
    assert Artifact(source="/app", service="main").source == "/app"


def make_task(root: Path, steps_md: dict[str, str], tests: dict[str, str] | None = None) -> Path:
    task = root / "t"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM scratch\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("#!/bin/sh\n")
    names = "".join(f'[[steps]]\nname = "{n}"\n' for n in steps_md)
    (task / "task.toml").write_text(f'version = "1.0"\n{names}')
    for name, text in steps_md.items():
        (task / "steps" / name).mkdir(parents=True)
        if text:
            (task / "steps" / name / "instruction.md").write_text(text)
    for rel, content in (tests or {}).items():
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_text(content)
    return task


def test_steps_resolve_their_files_and_need_no_top_level_instruction(tmp_path):
    task = load_task(make_task(tmp_path, {"a": "do a", "b": "do b"}, {
        "steps/b/tests/test.sh": "#!/bin/sh\n", "steps/b/solution/solve.sh": "#!/bin/sh\n",
        "steps/b/workdir/setup.sh": "#!/bin/sh\n", "tests/Dockerfile": "FROM x\n"}))
    a, b = task.steps
    assert task.instruction == "do a" and (a.instruction, b.instruction) == ("do a", "do b")
    assert (a.verifier_dir, a.solution_dir, a.workdir_dir) == (None, None, None)
    assert b.verifier_dir == task.path / "steps" / "b" / "tests"
    assert b.solution_dir is not None and b.workdir_dir is not None
    assert task.verifier_image_dir(b) == task.path / "tests"


def test_a_step_without_its_instruction_names_the_file(tmp_path):
    with pytest.raises(TaskInvalidError, match=r"steps/b/instruction.md: missing: every "
                                               r"\[\[steps\]\] entry needs"):
        load_task(make_task(tmp_path, {"a": "do a", "b": ""}))


def test_multi_container_tasks_load_with_their_compose_file(tmp_path):
    task = make_task(tmp_path, {"a": "x"}, {"environment/docker-compose.yaml": "services: {}\n"})
    assert load_task(task).compose_file == task / "environment" / "docker-compose.yaml"
    assert load_task(make_task(tmp_path / "plain", {"a": "x"})).compose_file is None


def test_step_tests_lay_the_steps_files_over_the_tasks(tmp_path):
    task = load_task(make_task(tmp_path, {"a": "x"}, {
        "tests/helper.py": "shared\n", "steps/a/tests/test.sh": "#!/bin/sh\necho step\n"}))
    with step_tests(task.verifier_dir, task.steps[0]) as merged:
        assert (merged / "helper.py").read_text() == "shared\n"
        assert "echo step" in (merged / "test.sh").read_text()
    assert not merged.exists()
    with step_tests(task.verifier_dir, None) as plain:
        assert plain == task.verifier_dir


def _toml(task: Path, extra: str) -> None:
    (task / "task.toml").write_text((task / "task.toml").read_text() + extra)


@pytest.mark.parametrize(("extra", "key"), [
    ('[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ndocker_image = "v"\n',
     "verifier"),
    ('[steps.verifier]\nenvironment_mode = "shared"\n[steps.verifier.environment]\ncpus = 2\n',
     r"steps\[0\].verifier"),
])
def test_a_shared_verifier_with_its_own_environment_is_refused(tmp_path, extra, key):
    """Harbor refuses the contradiction too; benchflow must not pick one reading silently."""
    task = make_task(tmp_path, {"a": "x"})
    _toml(task, extra)
    with pytest.raises(TaskInvalidError, match=rf"'{key}.environment_mode' is \"shared\" but "
                                               rf"'{key}.environment' describes a separate"):
        load_task(task)


def test_a_step_agent_user_other_than_the_tasks_is_refused(tmp_path):
    task = make_task(tmp_path, {"a": "x", "b": "y"})
    _toml(task, '[steps.agent]\nuser = "alice"\n')  # belongs to the last step, b
    with pytest.raises(TaskInvalidError, match=r"'steps\[1\].agent.user' = 'alice' differs from "
                                               r"'agent.user' \(None\)"):
        load_task(task)
    same = make_task(tmp_path / "same", {"a": "x"})
    text = (same / "task.toml").read_text().replace('version = "1.0"\n',
                                                     'version = "1.0"\n[agent]\nuser = "alice"\n')
    (same / "task.toml").write_text(text + '[steps.agent]\nuser = "alice"\n')
    assert load_task(same).steps[0].config.agent.user == "alice"


def test_a_separate_verifier_without_local_tests_says_why(tmp_path):
    task = make_task(tmp_path, {"a": "x"})
    (task / "tests" / "test.sh").unlink()
    _toml(task, '[verifier]\nenvironment_mode = "separate"\n')
    with pytest.raises(TaskInvalidError, match="tests that exist only inside the verifier's "
                                               "image are not supported"):
        load_task(task)


def _rollout_for(task_dir: Path, tmp_path: Path):
    from benchflow import Rollout, RolloutConfig, Scene
    from benchflow.sandbox.spec import SandboxSpec

    task = load_task(task_dir)
    rollout = Rollout(RolloutConfig(task_path=task_dir, scenes=[Scene.single(agent="oracle")],
                                    jobs_dir=tmp_path / "jobs"), task=task)
    rollout.spec = SandboxSpec(name="t", environment_dir=task.environment_dir, workdir="/app",
                               cpus=2, memory_mb=4096, env={"A": "1"}, network="bf-model-net",
                               network_policy="model-only")
    return rollout, task


@pytest.mark.parametrize(("extra", "policy"), [
    ('[environment]\nnetwork_mode = "no-network"\n', "none"),
    ('[environment]\nallow_internet = true\n', "public"),
])
def test_the_separate_verifier_copies_the_task_environment(tmp_path, extra, policy):
    """No [verifier.environment]: the task's image, resources and network (Harbor copies
    [environment]); never the agent's model-only network."""
    task_dir = make_task(tmp_path, {"a": "x"})
    _toml(task_dir, f'[verifier]\nenvironment_mode = "separate"\n{extra}')
    rollout, task = _rollout_for(task_dir, tmp_path)
    spec = verifier_spec(rollout, None)
    assert (spec.environment_dir, spec.docker_image) == (task.environment_dir, None)
    assert (spec.cpus, spec.memory_mb, spec.workdir, spec.env) == (2, 4096, "/app", {"A": "1"})
    assert (spec.network, spec.network_policy) == (None, policy)
    assert not verifier_image_is_own(rollout, None)


def test_the_separate_verifier_uses_its_own_image_and_settings(tmp_path):
    task_dir = make_task(tmp_path, {"a": "x", "b": "y"}, {"steps/b/tests/Dockerfile": "FROM x\n"})
    _toml(task_dir, '[verifier.environment]\ndocker_image = "verifier:1"\ncpus = 1\n'
                    'memory_mb = 512\nnetwork_mode = "no-network"\nenv = {B = "2"}\n')
    rollout, task = _rollout_for(task_dir, tmp_path)
    a, b = task.steps
    spec_a = verifier_spec(rollout, a)
    assert (spec_a.environment_dir, spec_a.docker_image) == (None, "verifier:1")
    assert (spec_a.cpus, spec_a.memory_mb, spec_a.network_policy) == (1, 512, "none")
    assert spec_a.env == {"A": "1", "B": "2"}
    spec_b = verifier_spec(rollout, b)  # the step's tests/Dockerfile wins over docker_image
    assert (spec_b.environment_dir, spec_b.docker_image) == (task.path / "steps" / "b" / "tests",
                                                             None)
    assert verifier_image_is_own(rollout, a) and verifier_image_is_own(rollout, b)


@pytest.mark.parametrize("force_build", [False, True])
def test_a_named_verifier_image_is_used_as_given_over_the_tests_dockerfile(tmp_path,
                                                                          force_build):
    """Harbor's order: [verifier.environment] docker_image before tests/Dockerfile, which is
    built only with force_build (or when no image is named)."""
    task_dir = make_task(tmp_path, {"a": "x"}, {"tests/Dockerfile": "FROM x\n"})
    _toml(task_dir, '[verifier]\nenvironment_mode = "separate"\n'
                    '[verifier.environment]\ndocker_image = "verifier:prebuilt"\n')
    rollout, task = _rollout_for(task_dir, tmp_path)
    rollout.spec = rollout.spec.model_copy(update={"force_build": force_build})
    spec = verifier_spec(rollout, None)
    assert (spec.docker_image, spec.environment_dir) == ("verifier:prebuilt", task.path / "tests")
    assert spec.force_build is force_build  # DockerSandbox builds the context only then
    assert verifier_image_is_own(rollout, None)
    (task_dir / "tests" / "Dockerfile").unlink()
    spec = verifier_spec(rollout, None)
    assert (spec.docker_image, spec.environment_dir) == ("verifier:prebuilt", None)


def test_task_placed_files_are_the_step_workdirs_up_to_a_step(tmp_path):
    task = load_task(make_task(tmp_path, {"a": "x", "b": "y", "c": "z"}, {
        "steps/a/workdir/conftest.py": "a\n", "steps/a/workdir/pkg/setup.cfg": "a\n",
        "steps/b/workdir/conftest.py": "b\n", "steps/c/workdir/late.txt": "c\n"}))
    a, b, _ = task.steps
    placed = task_placed_files(task, b, "/app")
    assert sorted(placed) == ["/app/conftest.py", "/app/pkg/setup.cfg"]
    assert placed["/app/conftest.py"].read_text() == "b\n"  # the later step's version
    assert list(task_placed_files(task, a, "/w")) == ["/w/conftest.py", "/w/pkg/setup.cfg"]
    assert task_placed_files(task, None, "/app") == {}
