"""Agent manifests: every packaged one loads; bad ones fail naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.agents.manifest import load_manifest
from benchflow.errors import ConfigError

from .conftest import AGENTS, MINIMAL, write_agent

PACKAGED = ["claude", "codex", "gemini", "opencode", "scripted"]


@pytest.mark.parametrize("name", PACKAGED)
def test_packaged_manifest_loads(name: str) -> None:
    manifest = load_manifest(AGENTS / name)
    assert manifest.name == name and manifest.protocol == "acp"
    assert manifest.install.script and (AGENTS / name / manifest.install.script).is_file()
    assert manifest.folder == (AGENTS / name).resolve()
    assert manifest.sandbox_dir == f"/opt/benchflow/agents/{name}"


@pytest.mark.parametrize("name", ["claude", "codex", "gemini", "opencode"])
def test_js_agents_pin_an_npm_package_and_need_node(name: str) -> None:
    manifest = load_manifest(AGENTS / name)
    assert manifest.install.package and manifest.install.node == 20
    assert manifest.version[0].isdigit()
    assert manifest.credentials, "a real agent needs credentials"
    assert manifest.model.default


def test_scripted_needs_python_and_no_credentials() -> None:
    manifest = load_manifest(AGENTS / "scripted")
    assert manifest.install.python == "3.10"
    assert any(p.startswith("agent-client-protocol") for p in manifest.install.python_packages)
    assert manifest.credentials == [] and manifest.model.upload_file
    assert manifest.files == ["agent.py"]


@pytest.mark.parametrize(("toml", "field"), [
    (MINIMAL.format(name="x") + "bogus = 1\n", "bogus"),
    (MINIMAL.format(name="Bad Name"), "name"),
    (MINIMAL.format(name="x") + "[install]\ntimeout_sec = -1\n", "install.timeout_sec"),
    (MINIMAL.format(name="x") + "[model]\nformat = 'weird'\n", "model.format"),
    (MINIMAL.format(name="x") + "[[credentials]]\nenv = ['NOT A VAR']\n", "credentials.0.env"),
    (MINIMAL.format(name="x") + "[[credentials]]\nprovider = 'openai'\n", "credentials.0"),
    (MINIMAL.format(name="x") + "[install]\npython_packages = ['x']\n", "install"),
    ('name = "x"\nversion = "1"\n', "launch"),
    (MINIMAL.format(name="x") + "folder = '/etc'\n", "folder"),
    (MINIMAL.format(name="x").replace('version = "1.0"\n', "") + 'files = ["../up"]\n',
     "files"),
])
def test_invalid_manifest_names_file_and_field(tmp_path: Path, toml: str, field: str) -> None:
    folder = write_agent(tmp_path / "x", toml)
    with pytest.raises(ConfigError) as info:
        load_manifest(folder)
    assert str(folder / "agent.toml") in str(info.value)
    assert field in str(info.value)


def test_bad_toml_and_missing_files_are_config_errors(tmp_path: Path) -> None:
    broken = write_agent(tmp_path / "broken", "name = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_manifest(broken)
    missing = write_agent(tmp_path / "m", MINIMAL.format(name="m") + "[install]\nscript = 'i.j2'\n")
    with pytest.raises(ConfigError, match=r"install.script: 'i.j2' does not exist"):
        load_manifest(missing)
    with pytest.raises(ConfigError, match="cannot read"):
        load_manifest(tmp_path / "nowhere" / "agent.toml")


def test_digest_follows_the_agent_folder(tmp_path: Path) -> None:
    folder = write_agent(tmp_path / "a", MINIMAL.format(name="a"), {"install.sh.j2": "echo 1\n"})
    first = load_manifest(folder).digest()
    assert load_manifest(folder).digest() == first
    (folder / "install.sh.j2").write_text("echo 2\n")
    assert load_manifest(folder).digest() != first
    moved = write_agent(tmp_path / "elsewhere" / "a", MINIMAL.format(name="a"),
                        {"install.sh.j2": "echo 2\n"})
    assert load_manifest(moved).digest() == load_manifest(folder).digest()
