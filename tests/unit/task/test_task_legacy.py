"""The legacy layout: task.toml + instruction.md + tests/ + solution/, incl. real Harbor 1.0-1.2 files."""

from __future__ import annotations

import warnings

import pytest

from benchflow.errors import TaskInvalidError
from benchflow.task import TaskConfigWarning, load_task


def _warnings_of(folder) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = load_task(folder)
    assert all(issubclass(w.category, TaskConfigWarning) for w in caught)
    return task, [str(w.message) for w in caught]


def test_minimal_legacy_task_defaults(legacy) -> None:
    folder = legacy("hello-world", toml="", solve_sh=True)
    task = load_task(folder)
    assert task.layout == "legacy"
    assert task.name == "hello-world"
    assert task.instruction == "Say hello.\n"  # instruction.md text as written
    c = task.config
    assert c.schema_version == "1.0"  # legacy `version` defaults to "1.0"
    assert (c.agent.timeout_sec, c.agent.install_timeout_sec, c.verifier.timeout_sec) == (
        600,
        300,
        600,
    )
    assert (c.sandbox.cpus, c.sandbox.memory_mb, c.sandbox.storage_mb) == (1, 2048, 10240)
    assert (c.sandbox.build_timeout_sec, c.sandbox.docker_image) == (600, None)
    assert task.verifier_dir == folder.resolve() / "tests"
    assert task.verifier_mount == "/tests"
    assert task.solution_dir == folder.resolve() / "solution"
    assert task.dockerfile == folder.resolve() / "environment" / "Dockerfile"
    assert task.prompts == {} and task.raw_frontmatter == {}


def test_harbor_1_0_spec_example(legacy, harbor_toml) -> None:
    task, messages = _warnings_of(legacy("v10", toml=harbor_toml("1_0"), dockerfile=False))
    assert messages == []
    c = task.config
    assert c.schema_version == "1.0"
    assert c.metadata["tags"] == ["trivial"] and c.metadata["difficulty"] == "easy"
    assert (c.verifier.timeout_sec, c.agent.timeout_sec, c.agent.install_timeout_sec) == (
        120,
        120,
        300,
    )
    assert c.sandbox.docker_image == "some-org/some-name:some-tag"
    assert task.dockerfile is None  # docker_image replaces the Dockerfile


def test_harbor_1_1_task_table_envs_and_solution(legacy, harbor_toml) -> None:
    task, messages = _warnings_of(legacy("v11", toml=harbor_toml("1_1")))
    c = task.config
    assert task.name == "harbor/fix-the-bug"
    assert (c.schema_version, c.source, c.description) == (
        "1.1",
        "terminal-bench",
        "Fix a failing unit test",
    )
    assert [(a.name, a.email) for a in c.authors] == [
        ("Ada Lovelace", "ada@example.com"),
        ("Grace Hopper", None),
    ]
    assert c.keywords == ["python", "debugging"]
    assert c.metadata == {"difficulty": "medium", "custom": {"kept": True}}
    assert c.verifier.env == {"OPENAI_API_KEY": "${OPENAI_API_KEY}", "MODE": "strict"}
    assert c.sandbox.env == {"DATASET": "${DATASET:-sample}"}
    assert c.oracle.env == {"SEED": "42"}
    assert (c.sandbox.cpus, c.sandbox.memory_mb, c.sandbox.storage_mb, c.sandbox.gpus) == (
        2,
        4096,
        20480,
        0,
    )
    assert (c.sandbox.build_timeout_sec, c.sandbox.allow_internet, c.agent.timeout_sec) == (
        1200,
        False,
        900,
    )
    assert messages == []  # mcp_servers = [] and os = "linux" ask for nothing: no warning


def test_harbor_terminal_bench_style_file_loads_silently(legacy, harbor_toml) -> None:
    task, messages = _warnings_of(legacy("tb", toml=harbor_toml("1_1_terminal_bench")))
    assert messages == []
    c = task.config
    assert task.name == "terminal-bench/build-something"
    assert [(a.name, a.email) for a in c.authors] == [("Ada Lovelace", "ada@example.com")]
    assert c.metadata["expert_time_estimate_min"] == 90.0
    assert (c.agent.timeout_sec, c.verifier.timeout_sec) == (900, 900)
    assert c.sandbox.docker_image == "example/build-something:20251031"
    assert (c.verifier.env, c.sandbox.env, c.oracle.env) == ({}, {}, {})


def test_harbor_1_2_honours_and_warns(legacy, harbor_toml) -> None:
    task, messages = _warnings_of(legacy("v12", toml=harbor_toml("1_2")))
    c = task.config
    assert c.schema_version == "1.2"
    assert c.agent.user == "1000"  # Harbor accepts a UID
    assert c.sandbox.memory_mb == 4096  # deprecated memory = "4G"
    assert (c.sandbox.workdir, c.sandbox.gpus, c.sandbox.allow_internet) == ("/workspace", 1, True)
    assert c.verifier.hardening.cleanup_conftests is False
    assert c.verifier.hardening.removes_conftests is False
    assert c.verifier.pytest_plugins == ["pytest_playwright"]
    assert c.oracle.env == {"HINT": "none"}
    assert c.sandbox.skills_dir == "/skills"
    assert c.sandbox.healthcheck is not None
    assert c.sandbox.healthcheck.command == "curl -sf http://127.0.0.1:3847/health"
    assert [(s.name, s.transport, s.url) for s in c.sandbox.mcp_servers] == [
        ("Figma", "streamable-http", "http://127.0.0.1:3847/mcp")]
    ignored = sorted(m.split("'")[1] for m in messages)
    assert ignored == [
        "environment.gpu_types",
    ]  # verifier.user = "root" is what benchflow does anyway
    assert all("not supported by benchflow yet and was ignored" in m for m in messages)
    assert all(m.startswith(str(task.path.parent / "v12" / "task.toml")) for m in messages)


def test_unknown_keys_are_errors_with_a_suggestion(legacy) -> None:
    toml = 'version = "1.0"\n[environment]\nmemroy_mb = 4\n'
    with pytest.raises(TaskInvalidError, match="unknown key 'environment.memroy_mb' — did you "
                       "mean 'memory_mb'?.*strict = false"):
        load_task(legacy("typo", toml=toml))
    with pytest.raises(TaskInvalidError, match="unknown key 'sauce'"):
        load_task(legacy("top", toml='version = "1.0"\nsauce = "x"\n'))
    with pytest.raises(TaskInvalidError, match="'strict' must be true or false"):
        load_task(legacy("bad", toml='strict = "no"\n'))


def test_unknown_keys_warn_with_strict_false(legacy) -> None:
    toml = ('version = "1.0"\nstrict = false\nsauce = "x"\n[environment]\nmemroy_mb = 4\n'
            '[agent]\ntimeout_sec = 5\n')
    task, messages = _warnings_of(legacy("typo", toml=toml))
    assert task.config.sandbox.memory_mb == 2048 and task.config.agent.timeout_sec == 5
    assert any(
        "unknown key 'environment.memroy_mb' — did you mean 'memory_mb'?" in m for m in messages
    )
    assert any("unknown key 'sauce' — did you mean 'source'?" in m for m in messages)


def test_network_mode_maps_to_allow_internet(legacy) -> None:
    task = load_task(legacy("nonet", toml='[environment]\nnetwork_mode = "no-network"\n'))
    assert task.config.sandbox.allow_internet is False
    with pytest.warns(
        TaskConfigWarning, match=r"'environment\.network_mode' is not supported.*'allowlist'"
    ):
        task = load_task(legacy("allow", toml='[environment]\nnetwork_mode = "allowlist"\n'))
    assert task.config.sandbox.allow_internet is True


def test_schema_version_wins_over_version(legacy) -> None:
    task = load_task(legacy("both", toml='version = "1.0"\nschema_version = "1.2"\n'))
    assert task.config.schema_version == "1.2"


def test_lax_numbers_like_harbor(legacy) -> None:
    task = load_task(legacy("lax", toml="[environment]\nmemory_mb = 4096.0\ncpus = 2\n"))
    assert (task.config.sandbox.memory_mb, task.config.sandbox.cpus) == (4096, 2.0)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        (
            "[verifier.hardening]\nkill_agent_process = false\n",
            r"unknown key 'verifier\.hardening\.kill_agent_process' — did you mean 'kill_agent_processes'\?",
        ),
        (
            '[verifier.hardening]\ncleanup_conftests = "false"\n',
            r"'verifier\.hardening\.cleanup_conftests' must be true or false \(got 'false'\)",
        ),
        ('[environment]\ncpus = "lots"\n', r"'environment\.cpus' must be a valid number"),
        ("[environment]\nmemory_mb = -1\n", r"'environment\.memory_mb' must be greater than 0"),
        (
            '[environment]\nmemory = "lots"\n',
            r"'environment\.memory' must be a size such as \"2G\".*memory_mb = 2048",
        ),
        ("[solution]\nenv = { SEED = 1 }\n", r"'solution\.env\.SEED' must be a valid string"),
        ("version = 1.0\n", r"'version' must be a valid string"),
        ("environment = 3\n", r"'environment' must be a mapping of keys \(got 3\)"),
        ("[agent]\ntimeout_sec = inf\n", r"'agent\.timeout_sec' must be a finite number"),
        ("[task\nname = 1\n", r"not valid TOML: .*fix the TOML syntax"),
    ],
)
def test_toml_errors_name_file_path_and_fix(legacy, toml: str, expected: str) -> None:
    folder = legacy("bad", toml=toml)
    with pytest.raises(TaskInvalidError, match=expected) as info:
        load_task(folder)
    assert str(folder / "task.toml") in str(info.value)


def test_missing_instruction_and_test_sh(legacy) -> None:
    folder = legacy("bare", instruction=None, test_sh=False, dockerfile=False)
    with pytest.raises(TaskInvalidError) as info:
        load_task(folder)
    message = str(info.value)
    assert (
        f"{folder / 'instruction.md'}: missing: add instruction.md with the task prompt" in message
    )
    assert (
        f"{folder / 'tests' / 'test.sh'}: missing: add tests/test.sh (the script that writes /logs/verifier/reward.txt)"
        in message
    )
    assert "add environment/Dockerfile or set environment.docker_image in task.toml" in message


def test_blank_instruction_is_invalid(legacy) -> None:
    with pytest.raises(TaskInvalidError, match=r"instruction\.md: is empty: write the task prompt"):
        load_task(legacy("blank", instruction=" \n\t\n"))


def test_non_utf8_files(legacy) -> None:
    folder = legacy("latin1", instruction="x")
    (folder / "instruction.md").write_bytes(b"caf\xe9")
    with pytest.raises(TaskInvalidError, match=r"instruction\.md: is not valid UTF-8"):
        load_task(folder)
    (folder / "task.toml").write_bytes(b'source = "\xff"\n')
    with pytest.raises(TaskInvalidError, match=r"task\.toml: is not valid UTF-8"):
        load_task(folder)
