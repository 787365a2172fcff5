"""The docs are true: what README.md and docs/ say exists, exists, and every command parses.

- Every `benchflow ...` (or `rollout ...`) command line in a code block or an inline code
  span names a real command and only its real options (checked against the typer app, as
  `--help` would). The side-effect-free ones are also run (`RUNNABLE`); the rest start
  containers or servers, or need a finished job or credentials, and are not run here: the
  tutorial's were run when it was written (their output is in docs/tutorial.md) and the
  integration suite runs the same paths.
- Every repository path the docs name exists; every `make` target they name is in the
  Makefile.
- docs/reference/cli.md is what scripts/gen_cli_docs.py renders (`make cli-docs`).
- docs/architecture.md lists every package and module of benchflow/; docs/reference/
  agent-toml.md names every key of `AgentManifest`.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
CLI_REFERENCE = REPO / "docs" / "reference" / "cli.md"
"""Generated from the app (its usage lines are templates, not commands)."""
PROGRAMS = ("benchflow", ".venv/bin/benchflow", "$bf", "rollout")
PATH_ROOTS = ("benchflow", "docs", "tasks", "tests", "labs", "agents", "examples", "scripts",
              "sdk")
RUNNABLE = {("agents", "list"), ("agents", "show"), ("tasks", "check"), ("datasets", "list")}
"""Command paths the test runs for real: they only read (no container, server or job)."""


@dataclass(frozen=True)
class Command:
    doc: str
    argv: list[str]

    def __str__(self) -> str:
        return f"{self.doc}: {shlex.join(self.argv)}"


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _code(text: str) -> tuple[list[str], list[str]]:
    """(lines of bash/console/sh code blocks, inline code spans) of a markdown text."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else (stripped[3:].strip() or "text")
            continue
        if fence in ("bash", "console", "sh", "shell"):
            if fence == "console":
                if not stripped.startswith("$ "):
                    continue
                stripped = stripped[2:]
            lines.append(stripped)
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return lines, re.findall(r"`([^`\n]+)`", prose)


def _joined(lines: list[str]) -> list[str]:
    """Shell lines with `\\` continuations joined and comments dropped."""
    out, buffer = [], ""
    for line in lines:
        line = re.sub(r"(^|\s)#.*$", "", line).rstrip()
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        out.append((buffer + line).strip())
        buffer = ""
    return [line for line in out if line]


def _argv(line: str) -> list[str] | None:
    """The argv after the program when `line` runs benchflow (env assignments skipped)."""
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", words[0]):
        words = words[1:]
    if len(words) < 2 or words[0] not in PROGRAMS:
        return None
    if words[0] == "rollout" and not re.fullmatch(r"-.*|[a-z-]+|\S+\.(ya?ml|json)", words[1]):
        return None  # prose about a span named `rollout <agent>/...`, not the command
    return words[1:]


def doc_commands() -> list[Command]:
    found: list[Command] = []
    for path in DOCS:
        if path == CLI_REFERENCE:
            continue
        lines, spans = _code(path.read_text())
        for line in [*_joined(lines), *spans]:
            argv = _argv(line)
            if argv is not None and Command(_rel(path), argv) not in found:
                found.append(Command(_rel(path), argv))
    return found


def _app() -> Any:
    """The click group of the whole app (typer's own click: duck-typed here)."""
    import typer.main

    from benchflow.cli.main import build_app

    return typer.main.get_command(build_app())


def resolve(root: Any, argv: list[str]) -> tuple[list[str], Any, list[str]]:
    """(the command path, the command, the words after it); `X.yaml` means `jobs run X.yaml`;
    `a|b` (alternatives in prose) must all be subcommands."""
    words = list(argv)
    while words and words[0].startswith("-"):  # root options
        if words[0] not in _options(root):
            raise LookupError(f"no option {words[0]} before the command")
        words = words[2:] if words[0] == "--log-level" else words[1:]
    if words and words[0].endswith((".yaml", ".yml", ".json")):
        words = ["jobs", "run", *words]
    path: list[str] = []
    command = root
    while hasattr(command, "commands") and words and not words[0].startswith("-"):
        for name in words[0].split("|"):
            if name not in command.commands:
                raise LookupError(f"no command {' '.join([*path, name])!r}")
        if "|" in words[0]:
            return [*path, words[0]], command, []
        path.append(words.pop(0))
        command = command.commands[path[-1]]
    return path, command, words


def _options(command: Any) -> set[str]:
    names = {"--help"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def test_the_docs_show_commands():
    commands = doc_commands()
    assert len(commands) > 100
    assert {c.doc for c in commands} >= {"README.md", "docs/tutorial.md"}


@pytest.mark.parametrize("command", doc_commands(), ids=str)
def test_every_documented_command_parses(command: Command):
    root = _app()
    try:
        path, cmd, rest = resolve(root, command.argv)
    except LookupError as exc:
        pytest.fail(f"{command}: {exc} (see `benchflow --help`)")
    assert path or command.argv[0] in ("--version", "--help"), f"{command}: names no command"
    known = _options(cmd)
    for word in rest:
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1 and not re.fullmatch(r"-\d.*", word):
            for name in word.split("=", 1)[0].split("/"):  # `--harden/--no-harden` in prose
                assert name in known, (f"{command}: `benchflow {' '.join(path)}` has no "
                                       f"option {name} (it has: {', '.join(sorted(known))})")


def _runnable(command: Command) -> bool:
    """A read-only command whose arguments are real: existing paths, shipped agents (not
    placeholders, nor files or agents its page creates first)."""
    try:
        path, _, rest = resolve(_app(), command.argv)
    except LookupError:
        return False
    if tuple(path) not in RUNNABLE or "--help" in rest:
        return False
    words = [w for w in rest if not w.startswith("-")]
    shipped = {p.name for p in (REPO / "agents").iterdir()}
    if path == ["agents", "show"]:
        return bool(words) and words[0] in shipped
    if path in (["tasks", "check"], ["datasets", "list"]):
        return bool(words) and all((REPO / w).exists() for w in words)
    return not words


@pytest.mark.parametrize("command", [c for c in doc_commands() if _runnable(c)], ids=str)
def test_the_read_only_commands_run(command: Command, monkeypatch: pytest.MonkeyPatch):
    from benchflow.cli.main import build_app

    monkeypatch.chdir(REPO)
    path, _, rest = resolve(_app(), command.argv)
    result = CliRunner().invoke(build_app(), [*path, *rest])
    assert result.exit_code == 0, f"{command}: exit {result.exit_code}\n{result.output}"


def _mentioned_paths(text: str) -> set[str]:
    """Repository paths in a text; not placeholders (`NAME`, `...`), cut table cells (`…`)
    or the reader's own files (`my-task`)."""
    pattern = rf"(?<![\w./$~@-])((?:{'|'.join(PATH_ROOTS)})/[\w./-]*[\w/])(?![\w./-]*…)"
    return {m for m in re.findall(pattern, text)
            if "..." not in m and not re.search(r"[A-Z]{3,}", m.split("/")[-1])
            and not any(part.startswith(("my-", "my_")) for part in m.split("/"))}


NOT_IN_THE_TREE = {
    "benchflow/_agents": "the wheel's copy of agents/ (pyproject force-include)",
    "benchflow/_tasks": "the wheel's copy of tasks/ (pyproject force-include)",
    "tests/test.sh": "inside a legacy (Harbor) task folder",
    "tests/Dockerfile": "inside a legacy (Harbor) task folder",
    "tests/rubric.json": "inside a legacy (Harbor) task folder",
    "tests/rubric.toml": "inside a legacy (Harbor) task folder",
    "tests/test_fizzbuzz.py": "a file an agent writes in the multi-agent how-to's example",
}


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_every_path_the_docs_name_exists(doc: Path):
    missing = sorted(p for p in _mentioned_paths(doc.read_text())
                     if p.rstrip("/") not in NOT_IN_THE_TREE and not (REPO / p).exists())
    assert not missing, f"{_rel(doc)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_every_make_target_the_docs_name_exists(doc: Path):
    targets = set(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), re.M))
    lines, spans = _code(doc.read_text())
    named = {m for code in [*lines, *spans] for m in re.findall(r"^make ([\w-]+)", code)}
    assert named <= targets, f"{_rel(doc)}: no such make target: {sorted(named - targets)}"


def test_the_cli_reference_is_current():
    spec = importlib.util.spec_from_file_location("gen_cli_docs",
                                                  REPO / "scripts" / "gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.OUTPUT.read_text() == gen.render(), (
        "docs/reference/cli.md is stale: run `make cli-docs` "
        "(python scripts/gen_cli_docs.py) and commit the result")


def test_the_architecture_page_lists_every_package_and_module():
    text = (REPO / "docs" / "architecture.md").read_text()
    parts = [f"benchflow/{p.name}/" for p in (REPO / "benchflow").iterdir()
             if (p / "__init__.py").is_file()]
    parts += [f"benchflow/{p.name}" for p in (REPO / "benchflow").glob("*.py")]
    missing = sorted(p for p in parts if f"`{p}`" not in text)
    assert not missing, f"add to docs/architecture.md's tables: {missing}"


def _keys(model: type[BaseModel]) -> set[str]:
    keys = set()
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        keys.add(name)
        for arg in [field.annotation, *getattr(field.annotation, "__args__", ())]:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                keys |= _keys(arg)
    return keys


def test_the_agent_toml_reference_names_every_key():
    from benchflow.agents.manifest import AgentManifest

    text = (REPO / "docs" / "reference" / "agent-toml.md").read_text()
    missing = sorted(k for k in _keys(AgentManifest)
                     if not any(f in text for f in (f"`{k}`", f"`[{k}]`", f"`[[{k}]]`")))
    assert not missing, f"docs/reference/agent-toml.md does not describe: {missing}"
