"""The native layout: task.md frontmatter + body, verifier/, oracle/, prompts/."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.errors import ConfigError, TaskInvalidError
from benchflow.task import HardeningConfig, Task, TaskConfig, TaskConfigWarning, load_task

FULL = """\
schema_version: "1.0"
task:
  name: full-task
  description: Everything set
  authors: [Ada Lovelace, {name: Grace Hopper, email: grace@example.com}]
  keywords: [python, debugging]
metadata:
  difficulty: hard
  nested: {a: 1}
source: unit-tests
agent:
  timeout_sec: 120
  install_timeout_sec: 60.5
  user: agent
verifier:
  timeout_sec: 90
  env: {MODE: strict}
  hardening:
    kill_agent_processes: false
    cleanup_conftests: false
  pytest_plugins: [pytest_playwright]
sandbox:
  docker_image: python:3.12-slim
  cpus: 2.5
  memory_mb: 4096
  storage_mb: 8192
  gpus: 1
  workdir: /app
  env: {PYTHONUNBUFFERED: "1"}
  build_timeout_sec: 1200
  allow_internet: false
oracle:
  timeout_sec: 30
  env: {SEED: "7"}
agents: {coder: {agent: scripted}, reviewer: {model: m2}}
scenes: [{name: loop, turns: [{role: coder}, {role: reviewer, prompt: check}]}]
user: {kind: scripted}
"""


def test_minimal_native_task_defaults(native) -> None:
    folder = native("hello-world", frontmatter=None, body="\n\n  Say hello.  \n\n")
    task = load_task(folder)
    assert task.layout == "native"
    assert task.path == folder.resolve()
    assert task.name == "hello-world"  # no [task].name: folder basename
    assert task.instruction == "Say hello."
    assert task.config == TaskConfig()
    assert task.environment_dir == folder.resolve() / "environment"
    assert task.dockerfile == folder.resolve() / "environment" / "Dockerfile"
    assert task.verifier_dir == folder.resolve() / "verifier"
    assert task.verifier_mount == "/verifier"
    assert task.solution_dir is None
    assert task.prompts == {}
    assert task.raw_frontmatter == {}
    assert task.config_file == folder.resolve() / "task.md"


def test_defaults_match_the_spec() -> None:
    config = TaskConfig()
    assert (config.agent.timeout_sec, config.agent.install_timeout_sec) == (600, 300)
    assert config.agent.user is None
    assert (config.verifier.timeout_sec, config.verifier.env) == (600, {})
    assert config.verifier.pytest_plugins == []
    sandbox = config.sandbox
    assert (sandbox.cpus, sandbox.memory_mb, sandbox.storage_mb, sandbox.gpus) == (
        1,
        2048,
        10240,
        0,
    )
    assert (sandbox.docker_image, sandbox.workdir, sandbox.build_timeout_sec) == (None, None, 600)
    assert sandbox.allow_internet is True
    assert (config.oracle.timeout_sec, config.oracle.env) == (None, {})
    assert all(getattr(config.verifier.hardening, f) is True for f in HardeningConfig.model_fields)
    assert config.schema_version is None and config.authors == [] and config.metadata == {}


def test_every_frontmatter_key_is_honoured(native) -> None:
    task = load_task(native("full", frontmatter=FULL, body="# Title\n\nDo it.\n", dockerfile=False))
    c = task.config
    assert task.name == "full-task"
    assert task.instruction == "# Title\n\nDo it."
    assert (c.schema_version, c.description, c.source) == ("1.0", "Everything set", "unit-tests")
    assert [(a.name, a.email) for a in c.authors] == [
        ("Ada Lovelace", None),
        ("Grace Hopper", "grace@example.com"),
    ]
    assert c.keywords == ["python", "debugging"]
    assert c.metadata == {"difficulty": "hard", "nested": {"a": 1}}
    assert (c.agent.timeout_sec, c.agent.install_timeout_sec, c.agent.user) == (120, 60.5, "agent")
    assert (c.verifier.timeout_sec, c.verifier.env) == (90, {"MODE": "strict"})
    assert c.verifier.hardening.kill_agent_processes is False
    assert c.verifier.hardening.cleanup_conftests is False
    assert c.verifier.hardening.removes_conftests is False
    assert c.verifier.hardening.remove_injected_files is True
    assert c.verifier.pytest_plugins == ["pytest_playwright"]
    s = c.sandbox
    assert (s.docker_image, s.cpus, s.memory_mb, s.storage_mb, s.gpus) == (
        "python:3.12-slim",
        2.5,
        4096,
        8192,
        1,
    )
    assert (s.workdir, s.env, s.build_timeout_sec, s.allow_internet) == (
        "/app",
        {"PYTHONUNBUFFERED": "1"},
        1200,
        False,
    )
    assert (c.oracle.timeout_sec, c.oracle.env) == (30, {"SEED": "7"})
    # roles and scenes become Scenes, the run's -a/-m filling what a role leaves out
    (scene,) = task.scenes.to_scenes("nop", "m1")
    assert [(r.name, r.agent, r.model) for r in scene.roles] == [
        ("coder", "scripted", "m1"), ("reviewer", "nop", "m2")]
    assert [(t.role, t.prompt) for t in scene.turns] == [("coder", None), ("reviewer", "check")]
    assert task.raw_frontmatter["user"] == {"kind": "scripted"}
    # docker_image set: a missing Dockerfile is fine
    assert task.dockerfile is None


def test_oracle_and_prompts(native) -> None:
    folder = native(
        "with-extras",
        solve_sh=True,
        prompts={"role.coder.md": "You write code.\n", "scene.review.md": "\nReview it.\n"},
    )
    task = load_task(folder)
    assert task.solution_dir == folder.resolve() / "oracle"
    assert task.prompts == {"role.coder": "You write code.", "scene.review": "Review it."}


def test_stray_prompt_file_warns_and_is_ignored(native) -> None:
    folder = native("stray", prompts={"roles.coder.md": "x", "role.ok.md": "fine"})
    with pytest.warns(TaskConfigWarning, match=r"roles\.coder\.md.*role\.<name>\.md"):
        task = load_task(folder)
    assert task.prompts == {"role.ok": "fine"}


def test_oracle_folder_without_solve_sh_is_no_solution(native) -> None:
    folder = native("no-solve")
    (folder / "oracle").mkdir()
    (folder / "oracle" / "notes.txt").write_text("nothing")
    assert load_task(folder).solution_dir is None


def test_crlf_and_bom_frontmatter(tmp_path: Path, native) -> None:
    folder = native("crlf")
    (folder / "task.md").write_bytes(
        b"\xef\xbb\xbf---\r\ntask:\r\n  name: crlf-task\r\nagent:\r\n  timeout_sec: 5\r\n---\r\nHi\r\n"
    )
    task = load_task(folder)
    assert (task.name, task.config.agent.timeout_sec, task.instruction) == ("crlf-task", 5, "Hi")


def test_empty_frontmatter_is_all_defaults(native) -> None:
    task = load_task(native("empty-fm", frontmatter=""))
    assert task.config == TaskConfig()
    assert task.instruction == "Say hello."


@pytest.mark.parametrize(
    ("frontmatter", "expected"),
    [
        (
            "sandbox:\n  memroy_mb: 10\n",
            r"unknown key 'sandbox\.memroy_mb' — did you mean 'memory_mb'\?",
        ),
        ("agnet:\n  timeout_sec: 1\n", r"unknown key 'agnet' — did you mean 'agent'\?"),
        ("environment:\n  cpus: 2\n", r"unknown key 'environment' — did you mean 'sandbox'\?"),
        (
            "verifier:\n  hardening:\n    kill_agent_process: false\n",
            r"unknown key 'verifier\.hardening\.kill_agent_process' — did you mean 'kill_agent_processes'\?",
        ),
        (
            "task:\n  zzz: 1\n",
            r"unknown key 'task\.zzz' \(valid keys: authors, description, keywords, name\)",
        ),
        ("agent:\n  timeout_sec: '600'\n", r"'agent\.timeout_sec' must be a valid number"),
        (
            "sandbox:\n  allow_internet: 'yes'\n",
            r"'sandbox\.allow_internet' must be a valid boolean",
        ),
        ("sandbox:\n  memory_mb: 2.5\n", r"'sandbox\.memory_mb' must be a valid integer"),
        ("sandbox:\n  cpus: 0\n", r"'sandbox\.cpus' must be greater than 0"),
        ("sandbox:\n  env: {PORT: 8080}\n", r"'sandbox\.env\.PORT' must be a valid string"),
        (
            "verifier:\n  hardening:\n    lock_verifier_dirs: 'false'\n",
            r"'verifier\.hardening\.lock_verifier_dirs' must be a valid boolean",
        ),
        ("task:\n  authors: [{email: a@b.c}]\n", r"'task\.authors\[0\]\.name' is required"),
        (
            "docker_image: x\n",
            r"unknown key 'docker_image' — did you mean 'sandbox\.docker_image'\?",
        ),
        (
            "env: {}\n",
            r"unknown key 'env' — did you mean 'verifier\.env' or 'sandbox\.env' or 'oracle\.env'\?",
        ),
        ("'': 1\n", r"unknown key '\"\"' \(valid keys: "),
        ("agent: 5\n", r"'agent' must be a mapping of keys \(got 5\)"),
        ("schema_version: 1.0\n", r"'schema_version' must be a valid string"),
        ("agent:\n  timeout_sec: .nan\n", r"'agent\.timeout_sec'"),
    ],
)
def test_frontmatter_errors_name_file_path_and_fix(native, frontmatter: str, expected: str) -> None:
    folder = native("bad", frontmatter=frontmatter)
    with pytest.raises(TaskInvalidError, match=expected) as info:
        load_task(folder)
    assert str(folder / "task.md") in str(info.value)
    assert isinstance(info.value, ConfigError)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "---\ntask: [unclosed\n---\nbody\n",
            r"frontmatter is not valid YAML \(line 2, column 16\)",
        ),
        ("---\n- a\n- b\n---\nbody\n", r"frontmatter must be a mapping .* got a list"),
        ("---\njust a string\n---\nbody\n", r"frontmatter must be a mapping .* got a str"),
        ("---\n1: x\n---\nbody\n", r"frontmatter key 1 is not a string"),
        ("---\ntask:\n  name: x\nbody without closing fence\n", r"never closed: add a line '---'"),
        ("---\ntask:\n  name: x\n---\n   \n\n", r"has no instruction: write the task prompt below"),
        ("---\ndate: 2020-02-31\n---\nbody\n", r"frontmatter is not valid YAML"),
    ],
)
def test_task_md_syntax_errors(native, text: str, expected: str) -> None:
    folder = native("syntax")
    (folder / "task.md").write_text(text)
    with pytest.raises(TaskInvalidError, match=expected) as info:
        load_task(folder)
    assert str(folder / "task.md") in str(info.value)


def test_non_utf8_task_md(native) -> None:
    folder = native("latin1")
    (folder / "task.md").write_bytes(b"---\ntask: {name: caf\xe9}\n---\nbody\n")
    with pytest.raises(
        TaskInvalidError, match=r"task\.md: is not valid UTF-8 \(byte 0xe9 at offset 20\): re-save"
    ):
        load_task(folder)


def test_non_utf8_prompt_file(native) -> None:
    folder = native("bad-prompt", prompts={"role.coder.md": "x"})
    (folder / "prompts" / "role.coder.md").write_bytes(b"\xff\xfe")
    with pytest.raises(TaskInvalidError, match=r"prompts/role\.coder\.md: is not valid UTF-8"):
        load_task(folder)


def test_missing_parts_are_all_reported_with_fixes(native) -> None:
    folder = native("bare", body="\n", dockerfile=False, test_sh=False)
    with pytest.raises(TaskInvalidError) as info:
        load_task(folder)
    message = str(info.value)
    assert "has no instruction" in message
    assert (
        f"{folder / 'verifier' / 'test.sh'}: missing: add verifier/test.sh (the script that writes /logs/verifier/reward.txt)"
        in message
    )
    assert "add environment/Dockerfile or set sandbox.docker_image in task.md" in message


def test_legacy_tests_folder_in_native_task_gets_a_rename_hint(native) -> None:
    folder = native("mixed", test_sh=False)
    (folder / "tests").mkdir()
    (folder / "tests" / "test.sh").write_text("exit 0\n")
    with pytest.raises(TaskInvalidError, match=r"rename tests/ to verifier/"):
        load_task(folder)


def test_task_is_frozen(native) -> None:
    task = load_task(native("frozen"))
    assert isinstance(task, Task)
    with pytest.raises(AttributeError):
        task.name = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="frozen"):
        task.config.sandbox.cpus = 4  # type: ignore[misc]


def test_turn_naming_an_undeclared_role_is_a_load_error(tmp_path):
    task = tmp_path / "t"
    (task / "verifier").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (task / "verifier" / "test.sh").write_text("#!/bin/sh\n")
    (task / "task.md").write_text("---\nagents: {coder: {}}\nscenes:\n  - turns: [{role: ghost}]\n"
                                  "---\nDo it.\n")
    with pytest.raises(TaskInvalidError, match="names role 'ghost'.*declared: coder"):
        load_task(task)
