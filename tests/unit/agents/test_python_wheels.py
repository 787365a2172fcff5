"""Host-side wheels: platform tags, unpacking, and the cache that makes refetching free."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from benchflow.agents import python_wheels
from benchflow.agents.python_wheels import SandboxPlatform, fetch_wheels, unpack_wheel
from benchflow.errors import AgentInstallError

PROBE = "arch=x86_64\nlibc=glibc\nlibc_version=2.36\npython=3.11\nnode=18\nwheels=yes\n"


def test_probe_output_is_parsed() -> None:
    platform = SandboxPlatform.parse(PROBE)
    assert platform == SandboxPlatform("x86_64", "glibc", (2, 36), (3, 11), 18, True)
    bare = SandboxPlatform.parse("arch=aarch64\nlibc=musl\ngarbage\nnode=\n")
    assert (bare.python, bare.node_major, bare.libc_version) == (None, None, None)


def test_platform_tags_follow_glibc_and_arch() -> None:
    tags = SandboxPlatform.parse(PROBE).platform_tags()
    assert tags[0] == "manylinux_2_36_x86_64" and "manylinux_2_28_x86_64" in tags
    assert tags[-2:] == ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    assert SandboxPlatform("arm64", "musl").platform_tags() == [
        "musllinux_1_2_aarch64", "musllinux_1_1_aarch64"]
    with pytest.raises(AgentInstallError, match="architecture"):
        SandboxPlatform("riscv64", "glibc").platform_tags()
    with pytest.raises(AgentInstallError, match="glibc nor musl"):
        SandboxPlatform("x86_64", "unknown").platform_tags()


def _wheel(path: Path, members: dict[str, tuple[bytes, int]]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, (data, mode) in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            archive.writestr(info, data)
    return path


def test_unpack_keeps_exec_bits_and_rejects_escapes(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "x-1-py3-none-any.whl",
                   {"pkg/bin/tool": (b"#!/bin/sh\n", 0o755), "pkg/__init__.py": (b"", 0o600)})
    dest = tmp_path / "site"
    dest.mkdir()
    unpack_wheel(wheel, dest)
    assert (dest / "pkg/bin/tool").stat().st_mode & 0o777 == 0o755
    assert (dest / "pkg/__init__.py").stat().st_mode & 0o777 == 0o644  # readable by all
    evil = _wheel(tmp_path / "evil-1-py3-none-any.whl", {"../escape": (b"x", 0o644)})
    with pytest.raises(AgentInstallError, match="unsafe path"):
        unpack_wheel(evil, dest)
    assert not (tmp_path / "escape").exists()


@pytest.mark.anyio
async def test_fetch_runs_pip_once_then_serves_the_cache(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    async def fake_pip(argv, check, env):
        calls.append(argv)
        dest = Path(argv[argv.index("--dest") + 1])
        dest.mkdir(parents=True)
        _wheel(dest / "pkg-1-py3-none-any.whl", {"pkg/__init__.py": (b"X = 1\n", 0o644)})
        return type("Done", (), {"returncode": 0, "stdout": b"", "stderr": b""})()

    monkeypatch.setattr(python_wheels.anyio, "run_process", fake_pip)
    platform = SandboxPlatform.parse(PROBE)
    site = await fetch_wheels(["pkg==1"], platform, tmp_path)
    again = await fetch_wheels(["pkg==1"], platform, tmp_path)
    assert site == again and (site / "pkg/__init__.py").read_text() == "X = 1\n"
    assert len(calls) == 1
    argv = calls[0]
    assert "--only-binary=:all:" in argv and argv[argv.index("--python-version") + 1] == "3.11"
    assert argv[argv.index("--platform") + 1] == "manylinux_2_36_x86_64"
    assert site.parent.parent == tmp_path / "wheels"


@pytest.mark.anyio
async def test_pip_failure_is_an_install_error(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    async def failing_pip(argv, check, env):
        return type("Done", (), {"returncode": 1, "stdout": b"",
                                 "stderr": b"No matching distribution"})()

    monkeypatch.setattr(python_wheels.anyio, "run_process", failing_pip)
    with pytest.raises(AgentInstallError, match="No matching distribution"):
        await fetch_wheels(["nope"], SandboxPlatform.parse(PROBE), tmp_path)
    assert not any((tmp_path / "wheels").rglob(".complete"))

