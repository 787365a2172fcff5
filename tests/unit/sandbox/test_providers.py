"""The provider seam: registry (built-ins + entry points), capabilities consulted, preflight."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from benchflow.config import RolloutConfig, Scene
from benchflow.errors import ConfigError
from benchflow.sandbox import registry
from benchflow.sandbox.base import Sandbox, SandboxCapabilities
from benchflow.sandbox.daytona import DaytonaSandboxProvider
from benchflow.sandbox.docker import CAPABILITIES as DOCKER_CAPABILITIES
from benchflow.sandbox.docker.provider import DockerProvider
from benchflow.sandbox.modal import ModalSandboxProvider
from benchflow.sandbox.provider import CapabilityError, SandboxNeeds, SandboxProvider
from benchflow.sandbox.spec import SandboxSpec

REPO = Path(__file__).resolve().parents[3]


class PluginProvider(SandboxProvider):
    """A third-party backend that has no live processes and only the public network."""

    name = "plugin"
    capabilities = SandboxCapabilities(live_processes=False, root_exec=False)

    def create(self, spec: SandboxSpec) -> Sandbox:
        raise AssertionError("not started in these tests")

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        return []


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = EntryPoint("plugin", f"{__name__}:PluginProvider", registry.ENTRY_POINT_GROUP)

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        return [ep] if group == registry.ENTRY_POINT_GROUP else []

    registry._plugins.cache_clear()
    monkeypatch.setattr("importlib.metadata.entry_points", fake_entry_points)
    yield
    registry._plugins.cache_clear()


def test_builtins_are_registered_and_resolve_to_providers():
    assert registry.registered_backends()[:3] == ["docker", "daytona", "modal"]
    assert registry.provider_class("docker") is DockerProvider
    assert registry.provider_class("daytona") is DaytonaSandboxProvider
    assert registry.provider_class("modal") is ModalSandboxProvider


def test_entry_point_plugin_is_accepted_everywhere(plugin):
    assert "plugin" in registry.registered_backends()
    assert isinstance(registry.get_provider("plugin"), PluginProvider)
    config = RolloutConfig(task_path=Path("t"), scenes=[Scene.single(agent="oracle")],
                           environment="plugin")
    assert config.environment == "plugin"


def test_unknown_backend_lists_the_registered_ones(plugin):
    with pytest.raises(registry.UnknownBackendError, match="registered: docker, daytona, modal, plugin"):
        registry.get_provider("nosuch")
    with pytest.raises(ValueError, match="unknown sandbox environment 'nosuch'"):
        RolloutConfig(task_path=Path("t"), scenes=[Scene.single(agent="oracle")],
                      environment="nosuch")


def test_capability_errors_name_backend_capability_and_fix(plugin):
    provider = registry.get_provider("plugin")
    provider.require(SandboxNeeds())  # nothing special needed: fine
    with pytest.raises(CapabilityError, match="plugin sandbox backend cannot provide live "
                       "processes .ACP agents.: run ACP agents on a backend"):
        provider.require(SandboxNeeds(live_processes=True))
    with pytest.raises(CapabilityError, match="network policy 'model-only': use --network public"):
        provider.require(SandboxNeeds(network_policy="model-only"))
    with pytest.raises(CapabilityError, match="GPUs .2 requested."):
        provider.require(SandboxNeeds(gpus=2))
    with pytest.raises(CapabilityError, match="exec as another user"):
        provider.require(SandboxNeeds(other_user=True))
    assert issubclass(CapabilityError, ConfigError)


def test_docker_provides_everything_it_did_before():
    DockerProvider().require(SandboxNeeds(live_processes=True, other_user=True,
                                          network_policy="model-only", gpus=1))
    assert DOCKER_CAPABILITIES.network_policies == {"public", "none", "model-only"}
    assert DOCKER_CAPABILITIES.snapshots


def test_docker_provider_config_applies_to_the_spec():
    box = DockerProvider({"runtime": "runsc", "network": "net1"}).create(SandboxSpec(name="t"))
    assert (box.spec.runtime, box.spec.network, box.backend) == ("runsc", "net1", "docker")
    assert box.sandbox_id is None


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "env", "message"), [
    (DaytonaSandboxProvider, {}, "daytona credentials missing: set DAYTONA_API_KEY"),
    (DaytonaSandboxProvider, {"DAYTONA_JWT_TOKEN": "x"}, "set DAYTONA_API_KEY"),
    (DaytonaSandboxProvider, {"DAYTONA_API_KEY": "x"}, None),
    (DaytonaSandboxProvider, {"DAYTONA_JWT_TOKEN": "x", "DAYTONA_ORGANIZATION_ID": "o"}, None),
    (ModalSandboxProvider, {}, "modal credentials missing: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"),
    (ModalSandboxProvider, {"MODAL_TOKEN_ID": "x"}, "set MODAL_TOKEN_SECRET$"),
    (ModalSandboxProvider, {"MODAL_TOKEN_ID": "x", "MODAL_TOKEN_SECRET": "y"}, None),
])
async def test_cloud_preflight_names_the_missing_variable(monkeypatch, tmp_path, provider, env,
                                                          message):
    for name in ("DAYTONA_API_KEY", "DAYTONA_JWT_TOKEN", "DAYTONA_ORGANIZATION_ID",
                 "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_CONFIG_PATH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.modal.toml
    if message is None:  # credentials complete: the SDK is installed here, so preflight passes
        assert await provider().preflight() is None
        return
    with pytest.raises(ConfigError, match=message):
        await provider().preflight()


@pytest.mark.parametrize(("args", "expected"), [
    (["--env", "daytona"], "error: daytona credentials missing: set DAYTONA_API_KEY"),
    (["--env", "modal"], "error: modal credentials missing: set MODAL_TOKEN_ID and "
                         "MODAL_TOKEN_SECRET"),
    (["--env", "nosuch"], "error: unknown sandbox environment 'nosuch'; registered: docker, "
                          "daytona, modal"),
])
def test_cli_run_exits_2_with_one_line(tmp_path, args, expected):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-c", "from benchflow.cli.main import main; main()", "run",
                           str(REPO / "tasks" / "hello-world"), "--jobs-dir",
                           str(tmp_path / "jobs"), *args],
                          capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert lines == [expected]
    assert not (tmp_path / "jobs").exists()


@pytest.mark.anyio
async def test_modal_profile_file_counts_as_credentials(monkeypatch, tmp_path):
    for name in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_CONFIG_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="set MODAL_TOKEN_ID"):
        await ModalSandboxProvider().preflight()
    profile = tmp_path / "elsewhere.toml"
    profile.write_text('[default]\ntoken_id = "ak-1"\ntoken_secret = "as-1"\n')
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(profile))
    assert await ModalSandboxProvider().preflight() is None
    monkeypatch.delenv("MODAL_CONFIG_PATH")
    (tmp_path / ".modal.toml").write_text(profile.read_text())
    assert await ModalSandboxProvider().preflight() is None


def test_modal_provider_config_is_validated():
    with pytest.raises(ConfigError, match="(?s)provider_config for modal: .*app_nam"):
        ModalSandboxProvider({"app_nam": "typo"})
    with pytest.raises(ConfigError, match="sandbox_timeout_sec"):
        ModalSandboxProvider({"sandbox_timeout_sec": 90000})  # over Modal's 24 h
    with pytest.raises(ConfigError, match="region or regions, not both"):
        ModalSandboxProvider({"region": "us-east", "regions": ["us-west"]})
    spec_keys = ModalSandboxProvider({"app_name": "rollout-my-app", "region": "us-east",
                                      "verbose": True}).config
    assert (spec_keys.region_arg, spec_keys.verbose) == ("us-east", True)
    assert ModalSandboxProvider({"regions": ["us-east", "us-west"]}).config.region_arg == [
        "us-east", "us-west"]
    provider = ModalSandboxProvider({"app_name": "evals", "max_sandboxes": 3})
    box = provider.create(SandboxSpec(name="t"))
    assert (box.config.app_name, box.config.max_sandboxes, box.backend) == ("evals", 3, "modal")
    assert box.sandbox_id is None
    for policy in ("none", "model-only"):
        ModalSandboxProvider().require(SandboxNeeds(live_processes=True, other_user=True,
                                                    network_policy=policy, gpus=1))
    # model-only is an outbound allowlist there: the sandbox calls the endpoint itself
    assert ModalSandboxProvider.capabilities.egress_allowlist
    assert not DockerProvider.capabilities.egress_allowlist


def test_sandbox_cleanup_on_modal_without_credentials_exits_2_with_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-c", "from benchflow.cli.main import main; main()",
                           "sandbox", "cleanup", "--env", "modal", "--job", "j1"],
                          capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path,
                          check=False)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert lines == ["error: modal credentials missing: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"]


def test_daytona_runs_acp_agents_and_model_only_but_not_gpus():
    provider = DaytonaSandboxProvider({"stream_retries": 1})
    assert provider.config.stream_retries == 1
    for policy in ("none", "model-only"):
        provider.require(SandboxNeeds(live_processes=True, other_user=True,
                                      network_policy=policy))
    assert DaytonaSandboxProvider.capabilities.egress_allowlist  # model-only as allow lists
    with pytest.raises(CapabilityError, match="daytona sandbox backend"):
        provider.require(SandboxNeeds(gpus=1))


@pytest.mark.parametrize("provider", [DaytonaSandboxProvider, ModalSandboxProvider])
def test_cloud_backends_refuse_multi_container_tasks_in_one_line(provider):
    with pytest.raises(CapabilityError) as caught:
        provider().require(SandboxNeeds(compose=True))
    message = str(caught.value)
    assert message == (f"the {provider.name} sandbox backend cannot provide multi-container "
                       "tasks (environment/docker-compose.yaml): run this task with --env docker")
    assert "\n" not in message


def test_docker_runs_multi_container_tasks_as_a_compose_sandbox(tmp_path):
    from benchflow.sandbox.docker.compose import ComposeSandbox

    DockerProvider().require(SandboxNeeds(compose=True))
    (tmp_path / "docker-compose.yaml").write_text("services: {}\n")
    box = DockerProvider().create(SandboxSpec(name="t", environment_dir=tmp_path,
                                              compose_file=tmp_path / "docker-compose.yaml"))
    assert isinstance(box, ComposeSandbox) and box.project.startswith("bf-t-")
    assert type(DockerProvider().create(SandboxSpec(name="t"))).__name__ == "DockerSandbox"
