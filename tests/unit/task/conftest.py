"""Factories that write task folders of either layout into tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

TEST_SH = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"
DOCKERFILE = "FROM ubuntu:24.04\nWORKDIR /app\n"


def write_native(
    root: Path,
    name: str = "native-task",
    *,
    frontmatter: str | None = "task:\n  name: hello\n",
    body: str = "\nSay hello.\n",
    dockerfile: bool = True,
    test_sh: bool = True,
    solve_sh: bool = False,
    prompts: dict[str, str] | None = None,
) -> Path:
    """A native task folder; frontmatter=None writes a task.md without one."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    text = body if frontmatter is None else f"---\n{frontmatter}---\n{body}"
    (folder / "task.md").write_text(text, encoding="utf-8")
    if dockerfile:
        (folder / "environment").mkdir(exist_ok=True)
        (folder / "environment" / "Dockerfile").write_text(DOCKERFILE)
    if test_sh:
        (folder / "verifier").mkdir(exist_ok=True)
        (folder / "verifier" / "test.sh").write_text(TEST_SH)
    if solve_sh:
        (folder / "oracle").mkdir(exist_ok=True)
        (folder / "oracle" / "solve.sh").write_text("#!/bin/bash\necho hello\n")
    for file, content in (prompts or {}).items():
        (folder / "prompts").mkdir(exist_ok=True)
        (folder / "prompts" / file).write_text(content)
    return folder


def write_legacy(
    root: Path,
    name: str = "legacy-task",
    *,
    toml: str = 'version = "1.0"\n',
    instruction: str | None = "Say hello.\n",
    dockerfile: bool = True,
    test_sh: bool = True,
    solve_sh: bool = False,
) -> Path:
    """A legacy (Harbor) task folder; instruction=None leaves instruction.md out."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(toml, encoding="utf-8")
    if instruction is not None:
        (folder / "instruction.md").write_text(instruction, encoding="utf-8")
    if dockerfile:
        (folder / "environment").mkdir(exist_ok=True)
        (folder / "environment" / "Dockerfile").write_text(DOCKERFILE)
    if test_sh:
        (folder / "tests").mkdir(exist_ok=True)
        (folder / "tests" / "test.sh").write_text(TEST_SH)
    if solve_sh:
        (folder / "solution").mkdir(exist_ok=True)
        (folder / "solution" / "solve.sh").write_text("#!/bin/bash\necho hello\n")
    return folder


@pytest.fixture
def native(tmp_path: Path) -> Callable[..., Path]:
    """Write a native task folder under tmp_path (see `write_native`)."""
    return lambda *args, **kwargs: write_native(tmp_path, *args, **kwargs)


@pytest.fixture
def legacy(tmp_path: Path) -> Callable[..., Path]:
    """Write a legacy task folder under tmp_path (see `write_legacy`)."""
    return lambda *args, **kwargs: write_legacy(tmp_path, *args, **kwargs)


@pytest.fixture
def harbor_toml() -> Callable[[str], str]:
    """The text of a Harbor task.toml fixture by schema (`"1_0"`, `"1_1"`, `"1_2"`)."""
    return lambda version: (FIXTURES / "harbor" / f"v{version}.toml").read_text()


@pytest.fixture(scope="session")
def writers() -> tuple[Callable[..., Path], Callable[..., Path]]:
    """(write_native, write_legacy) taking the root folder first; for hypothesis tests."""
    return write_native, write_legacy
