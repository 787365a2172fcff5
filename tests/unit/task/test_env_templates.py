"""`${VAR}` / `${VAR:-default}` in a task's env tables (Harbor's convention)."""

from __future__ import annotations

import pytest

from benchflow.errors import ConfigError
from benchflow.task import load_task
from benchflow.mcp import McpServer
from benchflow.task.env_templates import resolve_mcp_servers, resolve_task_env

LEGACY = '''version = "1.0"

[environment.env]
PLAIN = "value"
REGION = "${BF_REGION:-eu}"

[verifier.env]
OPENROUTER_API_KEY = "${OPENROUTER_API_KEY}"
HEADER = "Bearer ${OPENROUTER_API_KEY}"

[solution.env]
EMPTY_OK = "${BF_EMPTY}"
MODE = "${BF_MODE:-fast}"
'''


def test_legacy_tables_resolve_from_the_host_and_defaults(legacy):
    task = load_task(legacy(toml=LEGACY))
    host = {"OPENROUTER_API_KEY": "sk-or-123456", "BF_EMPTY": "", "BF_MODE": "slow"}
    resolved = resolve_task_env(task, host.get)
    config = resolved.task.config
    assert config.sandbox.env == {"PLAIN": "value", "REGION": "eu"}
    assert config.verifier.env == {"OPENROUTER_API_KEY": "sk-or-123456",
                                   "HEADER": "Bearer sk-or-123456"}
    assert config.oracle.env == {"EMPTY_OK": "", "MODE": "slow"}  # set, even empty: the host's
    assert resolved.secrets == {"sk-or-123456", "slow"}  # host values only, never defaults
    assert task.config.verifier.env["OPENROUTER_API_KEY"] == "${OPENROUTER_API_KEY}"


def test_an_unset_variable_without_default_names_the_variable_and_the_table(legacy):
    task = load_task(legacy(toml=LEGACY))
    with pytest.raises(ConfigError) as info:
        resolve_task_env(task, {"BF_EMPTY": "x"}.get)
    message = str(info.value)
    assert str(task.config_file) in message
    assert "[verifier.env] OPENROUTER_API_KEY = '${OPENROUTER_API_KEY}': the host variable " \
           "OPENROUTER_API_KEY is not set" in message
    assert "[verifier.env] HEADER" in message and "BF_MODE" not in message


def test_native_tables_use_the_frontmatter_names(native):
    folder = native(frontmatter="task:\n  name: t\nsandbox:\n  env:\n    TOKEN: ${BF_TOKEN}\n")
    with pytest.raises(ConfigError, match=r"sandbox\.env TOKEN = '\$\{BF_TOKEN\}'"):
        resolve_task_env(load_task(folder), {}.get)
    resolved = resolve_task_env(load_task(folder), {"BF_TOKEN": "tok-abcdef"}.get)
    assert resolved.task.config.sandbox.env == {"TOKEN": "tok-abcdef"}


def test_a_task_without_templates_is_returned_as_is(legacy):
    task = load_task(legacy())
    resolved = resolve_task_env(task, {}.get)
    assert resolved.task is task and resolved.secrets == frozenset()


STEPS = '''version = "1.0"

[verifier]
environment_mode = "separate"

[verifier.environment.env]
JUDGE = "${BF_JUDGE:-small}"

[[steps]]
name = "one"

[steps.verifier.env]
KEY = "${BF_STEP_KEY}"

[[steps]]
name = "two"
'''


def test_step_and_separate_verifier_tables_resolve_too(legacy):
    """Harbor resolves [steps.verifier.env] and the verifier environment's env as well."""
    folder = legacy(toml=STEPS)
    for name in ("one", "two"):
        (folder / "steps" / name).mkdir(parents=True)
        (folder / "steps" / name / "instruction.md").write_text("do it\n")
    task = load_task(folder)
    with pytest.raises(ConfigError) as info:
        resolve_task_env(task, {}.get)
    assert ("[steps.verifier.env] (step 'one') KEY = '${BF_STEP_KEY}': the host variable "
            "BF_STEP_KEY is not set") in str(info.value)
    resolved = resolve_task_env(task, {"BF_STEP_KEY": "k-123456", "BF_JUDGE": "big"}.get)
    one, two = resolved.task.steps
    assert one.config.verifier.env == {"KEY": "k-123456"} and two is task.steps[1]
    assert resolved.task.config.steps[0].verifier.env == {"KEY": "k-123456"}
    assert resolved.task.config.verifier.environment is not None
    assert resolved.task.config.verifier.environment.env == {"JUDGE": "big"}
    assert resolved.secrets == {"k-123456", "big"}


MCP = '''version = "1.0"

[[environment.mcp_servers]]
name = "search"
transport = "stdio"
command = "search-mcp"
env = { SEARCH_KEY = "${BF_SEARCH_KEY}", MODE = "${BF_SEARCH_MODE:-fast}" }

[[environment.mcp_servers]]
name = "docs"
transport = "streamable-http"
url = "http://127.0.0.1:9000/mcp"
headers = { Authorization = "Bearer ${BF_DOCS_TOKEN}" }
'''


def test_mcp_server_env_and_headers_resolve_too(legacy):
    task = load_task(legacy(toml=MCP))
    host = {"BF_SEARCH_KEY": "k-123456", "BF_DOCS_TOKEN": "t-654321"}
    resolved = resolve_task_env(task, host.get)
    search, docs = resolved.task.config.sandbox.mcp_servers
    assert search.env == {"SEARCH_KEY": "k-123456", "MODE": "fast"}
    assert docs.headers == {"Authorization": "Bearer t-654321"}
    assert resolved.secrets == {"k-123456", "t-654321"}
    with pytest.raises(ConfigError, match=r"mcp_servers\]\] 'docs' headers Authorization.*"
                                          r"BF_DOCS_TOKEN is not set"):
        resolve_task_env(task, {"BF_SEARCH_KEY": "k"}.get)


def test_job_mcp_servers_resolve_or_name_the_missing_variable():
    servers = [McpServer(name="files", command="mcp-files",
                         env={"ROOT": "${BF_ROOT:-/data}", "TOKEN": "${BF_FILES_TOKEN}"})]
    resolved, secrets = resolve_mcp_servers(servers, {"BF_FILES_TOKEN": "tok-files-42"}.get)
    assert resolved[0].env == {"ROOT": "/data", "TOKEN": "tok-files-42"}
    assert secrets == {"tok-files-42"}
    assert servers[0].env["TOKEN"] == "${BF_FILES_TOKEN}"
    with pytest.raises(ConfigError, match=r"mcp_servers 'files' env TOKEN = "
                                          r"'\$\{BF_FILES_TOKEN\}': the host variable "
                                          r"BF_FILES_TOKEN is not set"):
        resolve_mcp_servers(servers, {}.get)
    plain = [McpServer(name="p", command="x", env={"A": "b"})]
    assert resolve_mcp_servers(plain, {}.get) == (plain, frozenset())
