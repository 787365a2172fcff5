"""Finding agents (packaged, BENCHFLOW_AGENTS_PATH, entry points), get_driver and credentials."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

from benchflow.agents import catalog as catalog_module
from benchflow.agents.acp_driver import AcpAgentDriver
from benchflow.agents.builtin import OracleAgent
from benchflow.agents.catalog import load_catalog, packaged_agents_dir
from benchflow.agents.manifest import load_manifest
from benchflow.agents.registry import check_credentials, get_driver, known_agents
from benchflow.errors import ConfigError

from .conftest import AGENTS, MINIMAL, write_agent


def test_packaged_agents_are_found_from_the_source_tree() -> None:
    assert packaged_agents_dir() == AGENTS
    catalog = load_catalog()
    assert {"claude", "codex", "gemini", "opencode", "scripted"} <= set(catalog.names())
    assert catalog.errors == {}
    assert catalog.resolve("claude-code") == "claude"


def test_get_driver_resolves_builtins_names_and_aliases() -> None:
    assert isinstance(get_driver("oracle"), OracleAgent)
    driver = get_driver("gemini-cli")
    assert isinstance(driver, AcpAgentDriver) and driver.name == "gemini"
    assert {"oracle", "nop", "claude", "scripted"} <= set(known_agents())


def test_unknown_agent_lists_every_known_agent() -> None:
    with pytest.raises(ConfigError) as info:
        get_driver("claud")
    message = str(info.value)
    for name in ("oracle", "nop", "claude", "codex", "gemini", "opencode", "scripted"):
        assert name in message


def test_agents_path_adds_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_agent(tmp_path / "mine", 'aliases = ["m"]\n' + MINIMAL.format(name="mine"))
    write_agent(tmp_path / "claude", MINIMAL.format(name="claude"))
    write_agent(tmp_path / "broken", "name = 'broken'\n")
    single = write_agent(tmp_path / "solo" / "one", MINIMAL.format(name="one"))
    monkeypatch.setenv("BENCHFLOW_AGENTS_PATH", f"{tmp_path}:{single}")
    catalog = load_catalog()
    assert catalog.manifest("m").name == "mine"
    assert catalog.manifest("one").folder == single.resolve()
    assert catalog.manifest("claude").launch.argv == ["my-agent"]  # the user's wins
    assert "BENCHFLOW_AGENTS_PATH" in catalog.sources["claude"]
    assert any("broken" in where for where in catalog.errors)
    with pytest.raises(ConfigError, match="broken"):  # an unknown name mentions broken files
        catalog.manifest("nope")
    assert get_driver("mine").name == "mine"


def test_an_edited_manifest_is_read_again(tmp_path: Path) -> None:
    """Manifests are parsed once per version of the file, not once per process."""
    toml = write_agent(tmp_path / "mine", MINIMAL.format(name="mine")) / "agent.toml"
    assert load_manifest(toml).version == "1.0"
    toml.write_text(MINIMAL.format(name="mine").replace("1.0", "2.0"))  # same size
    stat = toml.stat()
    os.utime(toml, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load_manifest(toml).version == "2.0"
    toml.write_text(MINIMAL.format(name="mine").replace("1.0", "3.0.1"))
    assert load_manifest(toml).version == "3.0.1"


class _Plugin:
    name = "plugged"

    async def install(self, ctx):  # pragma: no cover - never called here
        return None

    def connect(self, ctx, role, scene):  # pragma: no cover
        raise NotImplementedError


def _entry_points(monkeypatch: pytest.MonkeyPatch, targets: dict[str, object]) -> None:
    eps = []
    for name, obj in targets.items():
        ep = importlib.metadata.EntryPoint(name=name, value=f"fake:{name}",
                                           group="benchflow.agents")
        eps.append((ep, obj))

    class FakeEP:
        def __init__(self, ep, obj):
            self.name, self.value, self._obj = ep.name, ep.value, obj

        def load(self):
            if isinstance(self._obj, Exception):
                raise self._obj
            return self._obj

    monkeypatch.setattr(catalog_module, "_plugins",
                        lambda: [FakeEP(ep, obj) for ep, obj in eps])


def test_entry_points_give_manifests_folders_and_drivers(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_agent(tmp_path / "viafolder", MINIMAL.format(name="viafolder"))
    manifest = load_manifest(write_agent(tmp_path / "viaobj", MINIMAL.format(name="viaobj")))
    _entry_points(monkeypatch, {"a": str(folder), "b": manifest, "plugged": _Plugin,
                                "bad": 42, "boom": ImportError("no module")})
    catalog = load_catalog()
    assert {"viafolder", "viaobj", "plugged"} <= set(catalog.names())
    assert isinstance(get_driver("plugged"), _Plugin)
    assert {w.split(" ")[2] for w in catalog.errors} == {"bad", "boom"}
    check_credentials("plugged")  # drivers from plugins check their own credentials


def test_missing_key_fails_naming_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        check_credentials("claude", "anthropic/claude-opus-4-1")
    message = str(info.value)
    assert "ANTHROPIC_API_KEY" in message and "CLAUDE_CODE_OAUTH_TOKEN" in message
    assert "claude-opus-4-1" in message and "BENCHFLOW_PROVIDER_API_KEY" in message


def test_credentials_from_host_role_env_or_provider_key(monkeypatch: pytest.MonkeyPatch) -> None:
    check_credentials("codex", env={"OPENAI_API_KEY": "x"})
    monkeypatch.setenv("BENCHFLOW_PROVIDER_API_KEY", "dummy")
    check_credentials("gemini")
    monkeypatch.delenv("BENCHFLOW_PROVIDER_API_KEY")
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "tok")
    check_credentials("claude-code")
    check_credentials("oracle")
    check_credentials("scripted", "/some/script.yaml")
    with pytest.raises(ConfigError, match="unknown agent"):
        check_credentials("no-such-agent")


def test_opencode_needs_the_key_of_the_models_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a")
    check_credentials("opencode")  # default model is anthropic/...
    check_credentials("opencode", "claude-sonnet-4-5")  # bare ids are the default provider's
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        check_credentials("opencode", "openai/gpt-5")
    check_credentials("opencode", "some-provider/model")  # no option applies: nothing required
