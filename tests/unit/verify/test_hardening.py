"""harden(), protect_paths() and verifier_env() on a recording fake sandbox (no Docker)."""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchflow.errors import VerifierError, VerifierTampered
from benchflow.sandbox.base import ExecResult, SandboxCapabilities
from benchflow.sandbox.exit_codes import ExitCode
from benchflow.task.models import HardeningConfig
from benchflow.verify.baseline import (
    DEFAULT_PATH,
    PLUGIN_LOADER,
    PLUGIN_LOADER_DIR,
    VERIFIER_TOOLS_DIR,
    Baseline,
    take_baseline,
)
from benchflow.verify._scripts import _BEFORE_DONE
from benchflow.verify.hardening import harden, protect_paths, verify_hardened
from benchflow.verify.runner import VerifierRun, inline_verifier
from benchflow.verify.verifier_env import FIXED_KEYS, pytest_addopts, verifier_env

pytestmark = pytest.mark.anyio

BASELINE = Baseline(workspace="/app", digest="d" * 64, path="/usr/bin:/bin", pythonpath="/app")
CLEAN = {"killed": 2, "survivors": 0, "restored": ["/app/pyproject.toml"],
         "removed": ["/app/conftest.py"], "tampered": [], "notes": []}


class RecordingSandbox:
    """Answers every exec with one canned result and keeps the argv it was given."""

    capabilities = SandboxCapabilities()
    workdir = "/app"

    def __init__(self, stdout: str = "", exit_code: int = 0) -> None:
        self.result = ExecResult(exit_code, stdout.encode(), b"")
        self.calls: list[tuple[list[str], str | None]] = []

    async def exec(self, cmd: Sequence[str], *, user: str | None = None, cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None,
                   ) -> ExecResult:
        self.calls.append((list(cmd), user))
        return self.result

    async def upload(self, src: Path, dst: str) -> None:  # pragma: no cover - unused
        raise AssertionError


def script_args(sandbox: RecordingSandbox) -> list[str]:
    argv, user = sandbox.calls[-1]
    assert user == "root" and argv[:2] == ["sh", "-c"]
    return argv[3:]


async def test_harden_passes_the_enabled_steps_and_reads_the_report():
    sandbox = RecordingSandbox(json.dumps(CLEAN))
    report = await harden(sandbox, BASELINE, agent_user="agent", config=HardeningConfig(),
                          verifier_mount="/tests")
    name, base, digest, ws, user, steps, mount, *protected = script_args(sandbox)
    assert (name, base, digest, ws, user, mount) == ("harden", "/var/lib/benchflow", "d" * 64,
                                                     "/app", "agent", "/tests")
    assert sorted(steps) == sorted("krisc") and "/logs/verifier" in protected
    assert report.killed == 2 and report.restored == ("/app/pyproject.toml",)
    assert report.clean and "kill_agent_processes" in report.steps


@pytest.mark.parametrize(("field", "letters_gone"), [
    ("kill_agent_processes", "k"), ("restore_build_config", "r"),
    ("remove_injected_files", "ic"), ("check_system_integrity", "s"), ("cleanup_conftests", "c"),
])
async def test_each_opt_out_drops_its_step(field, letters_gone):
    sandbox = RecordingSandbox(json.dumps(CLEAN))
    await harden(sandbox, BASELINE, agent_user="agent", config=HardeningConfig(**{field: False}),
                 verifier_mount="/tests")
    steps = script_args(sandbox)[5]
    assert set(steps) == set("kric s".replace(" ", "")) - set(letters_gone)


@pytest.mark.parametrize("user", [None, "root", "0"])
async def test_root_agents_are_passed_as_empty_user(user):
    sandbox = RecordingSandbox(json.dumps(CLEAN))
    await harden(sandbox, BASELINE, agent_user=user, config=HardeningConfig(),
                 verifier_mount="/tests")
    assert script_args(sandbox)[4] == ""


@pytest.mark.parametrize("report", [
    {**CLEAN, "tampered": ["changed: /usr/bin/python3"]},
    {**CLEAN, "survivors": 1},
])
async def test_tampering_fails_closed_with_the_report(report):
    sandbox = RecordingSandbox(json.dumps(report))
    with pytest.raises(VerifierTampered) as caught:
        await harden(sandbox, BASELINE, agent_user="agent", config=HardeningConfig(),
                     verifier_mount="/tests")
    assert caught.value.error_type == "verifier_tampered"
    assert not caught.value.report.clean


async def test_a_changed_baseline_is_tampering():
    sandbox = RecordingSandbox("", exit_code=ExitCode.BASELINE_TAMPERED)
    with pytest.raises(VerifierTampered, match="baseline"):
        await harden(sandbox, BASELINE, agent_user="agent", config=HardeningConfig(),
                     verifier_mount="/tests")


@pytest.mark.parametrize(("code", "stdout"), [(ExitCode.NO_BASELINE, ""), (0, "not json"), (1, "")])
async def test_script_failures_are_verifier_errors(code, stdout):
    sandbox = RecordingSandbox(stdout, exit_code=code)
    with pytest.raises(VerifierError) as caught:
        await harden(sandbox, BASELINE, agent_user="agent", config=HardeningConfig(),
                     verifier_mount="/tests")
    assert not isinstance(caught.value, VerifierTampered)


async def test_take_baseline_reads_the_json_line():
    line = {"digest": "a" * 64, "supported": True, "workspace": True, "path": "/usr/bin",
            "pythonpath": "", "python": "/usr/bin/python3", "watched_dirs": ["/usr/lib/python3"],
            "n_workspace_files": 3, "n_system_entries": 10, "n_processes": 2,
            "pytest_plugin_dists": []}
    sandbox = RecordingSandbox("noise\n" + json.dumps(line) + "\n")
    baseline = await take_baseline(sandbox, workspace="/app/")
    assert script_args(sandbox)[:3] == ["baseline", "/var/lib/benchflow", "/app"]
    assert (baseline.workspace, baseline.digest, baseline.n_workspace_files) == ("/app", "a" * 64, 3)


@pytest.mark.parametrize("workspace", [None, "", "/", "relative"])
async def test_no_workspace_is_passed_as_root(workspace):
    sandbox = RecordingSandbox(json.dumps({"digest": "x", "workspace": False}))
    baseline = await take_baseline(sandbox, workspace=workspace)
    assert script_args(sandbox)[2] == "/" and baseline.workspace is None


async def test_protect_paths_passes_paths_as_arguments():
    sandbox = RecordingSandbox()
    await protect_paths(sandbox, ["/tests", "/oracle", "$(id)"], "agent")
    assert script_args(sandbox) == ["protect", "/tests", "/oracle", "$(id)"]
    empty = RecordingSandbox()
    await protect_paths(empty, [], "agent")
    assert empty.calls == []


# -- verifier_env --------------------------------------------------------------------------


def env(**kw) -> dict[str, str]:
    args = {"workspace": "/app", "verifier_dir": "/tests", "task_env": {},
            "config": HardeningConfig(), "baseline": BASELINE}
    return verifier_env(**{**args, **kw})


def test_fixed_env_pins_every_hijackable_variable():
    result = env(pytest_plugins=["xdist", "pytest_json_ctrf"])
    assert set(FIXED_KEYS) <= set(result)
    assert result["PATH"] == "/usr/bin:/bin"
    assert result["PYTHONPATH"] == f"{PLUGIN_LOADER_DIR}:/app"
    assert result["HOME"] == "/root" and result["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert result["LD_PRELOAD"] == "" and result["PYTHONSTARTUP"] == ""
    assert result["PYTHONDONTWRITEBYTECODE"] == "1" and result["PYTHONNOUSERSITE"] == "1"
    assert shlex.split(result["PYTEST_ADDOPTS"]) == [
        "-c", "/dev/null", "--confcutdir=/tests", "--rootdir=/app", "-p", "no:cacheprovider",
        "-p", PLUGIN_LOADER, "-p", "xdist", "-p", "pytest_json_ctrf"]


def test_uv_and_pip_read_no_config_and_build_in_the_fresh_tools_folder():
    result = env()
    assert result["UV_NO_CONFIG"] == "1" and result["PIP_CONFIG_FILE"] == "/dev/null"
    for key in ("UV_CACHE_DIR", "UV_TOOL_DIR", "UV_PYTHON_INSTALL_DIR", "PIP_CACHE_DIR"):
        assert result[key].startswith(VERIFIER_TOOLS_DIR + "/"), key
    assert len({result[k] for k in ("UV_CACHE_DIR", "UV_TOOL_DIR", "UV_PYTHON_INSTALL_DIR",
                                     "PIP_CACHE_DIR")}) == 4
    # The task (never the agent) may choose its own, e.g. a cache its image filled.
    own = env(task_env={"UV_CACHE_DIR": "/opt/uv-cache"})
    assert own["UV_CACHE_DIR"] == "/opt/uv-cache" and own["UV_NO_CONFIG"] == "1"
    # The CA variables the sandbox set stay as they are: uv reads SSL_CERT_FILE.
    ca = {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}
    assert env(task_env=ca)["SSL_CERT_FILE"] == ca["SSL_CERT_FILE"]


def test_task_variables_stay_but_cannot_override_fixed_ones():
    result = env(task_env={"FOO": "1", "PATH": "/home/agent/bin:/usr/bin", "HOME": "/tmp",
                           "PYTHONPATH": "/app/src:/home/agent/lib"})
    assert result["FOO"] == "1" and result["PATH"] == "/usr/bin:/bin" and result["HOME"] == "/root"
    assert result["PYTHONPATH"] == f"{PLUGIN_LOADER_DIR}:/app:/app/src"


def test_without_a_baseline_the_default_path_is_used():
    assert env(baseline=None)["PATH"] == DEFAULT_PATH


def test_opt_out_returns_the_task_env_untouched():
    task_env = {"FOO": "1", "PATH": "/x"}
    assert env(task_env=task_env, config=HardeningConfig(fixed_verifier_env=False)) == task_env


@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1))
def test_addopts_quote_any_path(path):
    args = shlex.split(pytest_addopts(workspace=path, verifier_dir=path, pytest_plugins=[path]))
    assert f"--rootdir={path}" in args and f"--confcutdir={path}" in args and args[-1] == path


# -- the final verify: the verifier folder only after the kill -------------------------


class ScriptedSandbox(RecordingSandbox):
    """Answers each exec with the next of `results` and records, in order, every exec
    (argv, env, stdin: what /proc shows other processes) and upload; a download of /logs
    leaves `reward` in logs/verifier/reward.txt."""

    def __init__(self, *results: ExecResult, reward: str = "1") -> None:
        super().__init__()
        self.results = list(results)
        self.events: list[tuple[str, object]] = []
        self.reward = reward

    async def exec(self, cmd: Sequence[str], *, user: str | None = None, cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None,
                   stdin: bytes | None = None) -> ExecResult:
        self.calls.append((list(cmd), user))
        self.events.append(("exec", (list(cmd), dict(env or {}), stdin or b"")))
        return self.results.pop(0)

    async def upload(self, src: Path, dst: str) -> None:
        self.events.append(("upload", (src, dst)))

    async def download(self, src: str, dst: Path) -> None:
        (dst / "verifier").mkdir(parents=True, exist_ok=True)
        (dst / "verifier" / "reward.txt").write_text(self.reward)


SECRET = "expected-answer-7c1e2f"


def _verifier_run(tmp_path: Path) -> VerifierRun:
    folder = tmp_path / "tests"
    folder.mkdir(exist_ok=True)
    (folder / "test.sh").write_text(f"#!/bin/sh\ngrep -q {SECRET} /app/out.txt\n")
    (folder / "expected.txt").write_text(SECRET + "\n")
    return VerifierRun(verifier_dir=folder, mount="/tests", timeout_sec=60, env={}, cwd="/app")


def _leaks(argv: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bool:
    """Whether the tests' content shows in an exec's argv, env or stdin, as is or as the
    base64 of a (tar) archive of them."""
    for word in (*argv, *env.values(), stdin.decode("latin-1")):
        if SECRET in word or "test.sh" in word and "grep -q" in word:
            return True
        try:
            data = base64.b64decode(word, validate=True)
        except ValueError:
            continue
        if SECRET.encode() in data:
            return True
    return False


async def _final_verify(tmp_path, config: HardeningConfig):
    """A hardened verify on the scripted sandbox: its events, the run and the outcome."""
    line = {"digest": "a" * 64, "supported": True, "workspace": True, "unpack": True,
            "path": "/usr/bin:/bin", "pythonpath": ""}
    sandbox = ScriptedSandbox(ExecResult(0, json.dumps(line).encode(), b""),
                              ExecResult(0, json.dumps(CLEAN).encode(), b""),
                              ExecResult(0, _BEFORE_DONE.encode() + b"\nok\n", b""))
    baseline = await take_baseline(sandbox, workspace="/app")
    del sandbox.events[0]
    run = _verifier_run(tmp_path)
    done = await verify_hardened(sandbox, run, tmp_path / "out", tmp_path / "logs",
                                 baseline=baseline, agent_user="agent", config=config)
    harden_argv = sandbox.events[0][1][0]
    assert harden_argv[3] == "harden"  # sh -c TEXT harden ...: the kill comes first
    assert not _leaks(*sandbox.events[0][1]), sandbox.events[0]
    test_argv = sandbox.events[-1][1][0]
    assert test_argv[0] == "/bin/sh" and "seal" in test_argv  # seal, reset, test.sh
    assert done.outcome.reward == 1.0 and done.outcome.exec_result.stdout == b"ok\n"
    assert json.loads((tmp_path / "out" / "hardening.json").read_text())["killed"] == 2
    return sandbox.events, run


async def test_the_verifier_folder_enters_the_sandbox_only_after_the_harden_exec(tmp_path):
    # Regression: the folder carried as a base64 tar in the argv of an exec that started
    # before harden.sh's kill (/proc/PID/cmdline is world-readable) let a process the agent
    # left read the tests and write the expected answer before it was killed. After the
    # harden exec ended (everything the agent left is dead), it travels in test.sh's exec.
    events, _ = await _final_verify(tmp_path, HardeningConfig())
    assert [kind for kind, _ in events] == ["exec", "exec"]
    test_argv = events[1][1][0]
    assert test_argv.index("unpack") < test_argv.index("seal")  # unpacked, then sealed
    assert _leaks(*events[1][1])  # the leak check sees it there: it would see it earlier


async def test_without_the_kill_the_verifier_folder_is_uploaded_and_in_no_exec(tmp_path):
    events, run = await _final_verify(tmp_path, HardeningConfig(kill_agent_processes=False))
    assert [kind for kind, _ in events] == ["exec", "upload", "exec"]
    assert events[1][1] == (run.verifier_dir, "/tests")
    for kind, what in events:
        if kind == "exec":
            assert not _leaks(*what), what


def test_the_leak_check_sees_an_archive_in_an_argument(tmp_path):
    # the check above can fail: the leaky one-exec form (the folder as a base64 tar argument)
    archive = inline_verifier(_verifier_run(tmp_path))
    assert archive is not None and _leaks(["sh", "-c", "x", "seal", archive], {}, b"")
    assert not _leaks(["sh", "-c", "x", "seal", "/tests"], {"PATH": "/bin"}, b"")


async def test_tampering_stops_before_the_verifier_folder_is_uploaded(tmp_path):
    report = {**CLEAN, "tampered": ["changed: /usr/bin/python3"]}
    sandbox = ScriptedSandbox(ExecResult(0, json.dumps(report).encode(), b""))
    with pytest.raises(VerifierTampered, match="python3"):
        await verify_hardened(sandbox, _verifier_run(tmp_path), tmp_path / "out",
                              tmp_path / "logs", baseline=BASELINE, agent_user="agent",
                              config=HardeningConfig())
    assert [kind for kind, _ in sandbox.events] == ["exec"]
    assert "python3" in (tmp_path / "out" / "hardening.json").read_text()
