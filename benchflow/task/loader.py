"""`load_task`: a task folder in either layout becomes one `Task`.

```text
native                              legacy (Harbor)
<task>/                             <task>/
├── task.md        frontmatter+prompt  ├── task.toml          config
├── environment/Dockerfile             ├── instruction.md     prompt
├── verifier/test.sh  (-> /verifier)   ├── environment/Dockerfile
├── oracle/solve.sh   (optional)       ├── tests/test.sh      (-> /tests)
└── prompts/{role,scene}.<name>.md     └── solution/solve.sh  (optional)
```

If a folder holds both `task.md` and `task.toml`, `task.md` wins.
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchflow.errors import TaskInvalidError, TaskNotFoundError
from benchflow.task import _files
from benchflow.task.collection import collection_problems
from benchflow.task.legacy import parse_task_toml
from benchflow.task.models import TaskConfig, TaskConfigWarning, TaskStepConfig
from benchflow.task.native import parse_task_md
from benchflow.task.scenes import TaskScenes, parse_task_scenes
from benchflow.task.verifier_doc import (
    VERIFIER_DOC,
    VerifierDoc,
    legacy_verifier_doc,
    parse_verifier_doc,
)

if TYPE_CHECKING:
    from benchflow.task.qa import QaTaskSpec

logger = logging.getLogger(__name__)

Layout = Literal["native", "legacy", "qa"]

_VERIFIER = {"native": ("verifier", "/verifier"), "legacy": ("tests", "/tests")}
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml")
"""A task's compose file names (Harbor reads them in environment/)."""
_SOLUTION = {"native": "oracle", "legacy": "solution"}
_CONFIG_FILE = {"native": "task.md", "legacy": "task.toml"}
_PROMPT_KINDS = ("role", "scene")


@dataclass(frozen=True)
class TaskStep:
    """One step of a multi-step task, with its files resolved (every path in the task)."""

    name: str
    index: int
    instruction: str
    config: TaskStepConfig
    verifier_dir: Path | None
    """`steps/<name>/tests/` (legacy; `verifier/` native) when present: laid over the task's."""
    solution_dir: Path | None
    """`steps/<name>/solution/` (legacy; `oracle/` native) when it holds solve.sh."""
    workdir_dir: Path | None
    """`steps/<name>/workdir/`: copied into the workdir before the step (setup.sh runs)."""


@dataclass(frozen=True)
class Task:
    """One loaded task: its prompt, its normalized config and where its parts live.

    Built by `load_task`; every path is inside the resolved task folder.
    """

    path: Path
    name: str
    layout: Layout
    instruction: str
    config: TaskConfig
    environment_dir: Path
    dockerfile: Path | None
    verifier_dir: Path
    verifier_mount: str
    solution_dir: Path | None
    prompts: dict[str, str] = field(default_factory=dict)
    raw_frontmatter: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    scenes: TaskScenes | None = field(default=None, compare=False, repr=False)
    """Roles and scenes the task declares in its frontmatter (native layout only)."""
    steps: tuple[TaskStep, ...] = ()
    """A multi-step task's steps, in order (empty for a one-step task)."""
    verifier_doc: VerifierDoc = field(default_factory=VerifierDoc, compare=False, repr=False)
    """How the task is scored (verifier/verifier.md, or task.toml's [verifier])."""
    compose_file: Path | None = None
    """`environment/docker-compose.yaml`: more services beside `main`, where the agent and
    the verifier run (Harbor's multi-container tasks; docker only)."""

    @property
    def multi_step(self) -> bool:
        return bool(self.steps)

    def verifier_image_dir(self, step: TaskStep | None = None) -> Path | None:
        """The build context of a separate verifier's own image: the step's, else the
        task's verifier folder when it holds a Dockerfile (None: the task's environment)."""
        for folder in (step.verifier_dir if step else None, self.verifier_dir):
            if folder is not None and _files.is_file(folder / "Dockerfile"):
                return folder
        return None

    @property
    def skills_folder(self) -> Path | None:
        """The task's own `skills/` folder (each subfolder with a SKILL.md is a skill), or None."""
        folder = self.path / "skills"
        return folder if _files.is_dir(folder) else None
    qa: QaTaskSpec | None = field(default=None, compare=False, repr=False)
    """A QA item and how its answer is scored (layout "qa": no environment, no files)."""

    @property
    def config_file(self) -> Path:
        """The file the config was read from (`task.md` or `task.toml`)."""
        return self.path / _CONFIG_FILE[self.layout]

    def git_commit_id(self, max_age_sec: float = 0.0) -> str | None:
        """HEAD of the git repository containing the task folder, or None. Never raises.

        `max_age_sec` > 0 reuses an answer for this folder at most that old (one `git`
        process for many rollouts of the task starting together). Blocks on a subprocess:
        from async code, call it in a worker thread.
        """
        return _files.git_commit_id(self.path, max_age_sec)

    def recent_git_commit_id(self, max_age_sec: float) -> tuple[bool, str | None]:
        """`(True, HEAD)` when `git_commit_id(max_age_sec)` would answer from what it looked
        up at most `max_age_sec` ago (never blocks), else `(False, None)`."""
        return _files.recent_git_commit_id(self.path, max_age_sec)

    def content_hash(self) -> str:
        """sha256 over every file of the task folder (relative path + bytes, sorted)."""
        if self.qa is not None:  # a QA item has no folder: hash the item itself
            item = json.dumps(self.qa.item.to_dict(), sort_keys=True, ensure_ascii=False)
            return hashlib.sha256(item.encode()).hexdigest()
        return _files.content_hash(self.path)


def strategy_doc(layout: Layout, verifier_dir: Path, config: TaskConfig, label: str
                 ) -> VerifierDoc:
    """How the task is scored: verifier/verifier.md (native) or task.toml's [verifier].

    Raises:
        TaskInvalidError: the document or `[verifier.options]` is invalid.
    """
    if layout == "legacy":
        verifier = config.verifier
        return legacy_verifier_doc(verifier.type, verifier.command, verifier.options,
                                   f"{label} [verifier]")
    return parse_verifier_doc(verifier_dir / VERIFIER_DOC) or VerifierDoc()


def _needs_no_test_sh(doc: VerifierDoc, layout: Layout, config: TaskConfig) -> bool:
    """Whether the task is scored without a test.sh (another strategy, or another command)."""
    if doc.strategy != "script":
        return True
    explicit = config.verifier.command if layout == "legacy" else doc.command
    return explicit is not None and explicit.strip() not in ("test.sh", "./test.sh")


def is_task_dir(path: Path | str) -> bool:
    """Whether `path` is a folder holding `task.md` or `task.toml`. Never raises."""
    try:
        folder = Path(path)
    except TypeError:
        return False
    return _files.is_dir(folder) and (
        _files.is_file(folder / "task.md") or _files.is_file(folder / "task.toml")
    )


def _locate(path: Path | str) -> tuple[Path, Path]:
    """(path as given, resolved folder) or TaskNotFoundError."""
    try:
        given = Path(path)
        exists, folder = given.exists(), given.is_dir()
        resolved = given.resolve() if folder else given
    except (OSError, ValueError, TypeError, RuntimeError) as exc:
        raise TaskNotFoundError(f"{path!s}: not a valid task path ({exc})") from exc
    if not exists:
        raise TaskNotFoundError(f"{given}: no such task folder: check the path")
    if not folder:
        raise TaskNotFoundError(
            f"{given}: is a file, not a task folder: pass the folder that contains "
            "task.md (or task.toml)"
        )
    return given, resolved


def _prompts(folder: Path, label: Path) -> dict[str, str]:
    prompts_dir = folder / "prompts"
    if not _files.is_dir(prompts_dir):
        return {}
    try:
        files = sorted(prompts_dir.iterdir())
    except OSError as exc:
        raise TaskInvalidError(f"{label / 'prompts'}: cannot be listed ({exc.strerror})") from exc
    prompts: dict[str, str] = {}
    for file in files:
        stem = file.name.removesuffix(".md")
        kind, _, name = stem.partition(".")
        if file.suffix == ".md" and kind in _PROMPT_KINDS and name and _files.is_file(file):
            prompts[stem] = _files.read_text(file, str(label / "prompts" / file.name)).strip()
        else:
            warnings.warn(
                f"{label / 'prompts' / file.name}: ignored: prompt files are named "
                "role.<name>.md or scene.<name>.md",
                TaskConfigWarning,
                stacklevel=3,
            )
    return prompts


def load_task(path: Path | str) -> Task:
    """Load a task folder in either layout.

    Raises:
        TaskNotFoundError: the path does not exist, is not a folder, or holds neither
            task.md nor task.toml.
        TaskInvalidError: the config or a required file is missing or malformed; the
            message names the file and the fix.
    """
    given, folder = _locate(path)
    _files.check_contained(folder, given)  # before any file of it is read
    if _files.is_file(folder / "task.md"):
        layout: Layout = "native"
        if _files.is_file(folder / "task.toml"):
            logger.info("%s: both task.md and task.toml exist; task.md wins", given)
    elif _files.is_file(folder / "task.toml"):
        layout = "legacy"
    else:
        raise TaskNotFoundError(
            f"{given}: not a task folder: it holds neither task.md nor task.toml; "
            "add task.md (native layout) or task.toml + instruction.md (legacy layout)"
        )
    config_label = str(given / _CONFIG_FILE[layout])
    text = _files.read_text(folder / _CONFIG_FILE[layout], config_label)
    problems: list[str] = []
    raw: dict[str, Any] = {}
    scenes: TaskScenes | None = None
    if layout == "native":
        config, instruction, raw = parse_task_md(text, config_label)
        scenes = parse_task_scenes(raw, config_label, folder)
        if not instruction and not config.steps:
            problems.append(
                f"{config_label}: has no instruction: write the task prompt below the "
                "frontmatter's closing '---'"
            )
    else:
        config = parse_task_toml(text, config_label)
        instruction = _legacy_instruction(folder, given, problems, optional=bool(config.steps))
    steps = _steps(config, folder, given, layout, problems)
    problems.extend(_mode_conflicts(config, config_label))
    if not instruction and steps:
        instruction = steps[0].instruction
    verifier_name, mount = _VERIFIER[layout]
    verifier_dir = folder / verifier_name
    steps_have_tests = bool(steps) and all(
        s.verifier_dir is not None and _files.is_file(s.verifier_dir / "test.sh") for s in steps)
    doc = strategy_doc(layout, verifier_dir, config, config_label)
    judged = _needs_no_test_sh(doc, layout, config)
    if doc.strategy != "script" and (config.verifier.separate or steps):
        problems.append(f"{config_label}: a {doc.strategy} verifier scores the agent's sandbox "
                        "once, after the last turn: it cannot be combined with a separate "
                        "verifier environment or [[steps]]; use test.sh for those")
    if (not _files.is_file(verifier_dir / "test.sh") and not steps_have_tests
            and not judged):
        hint = ""
        if layout == "native" and _files.is_file(folder / "tests" / "test.sh"):
            hint = " (tests/test.sh is the legacy layout's name: rename tests/ to verifier/)"
        elif config.verifier.separate or any(config.step_separate(s) for s in config.steps):
            hint = (" (a separate verifier's tests are uploaded from the task folder: tests that "
                    "exist only inside the verifier's image are not supported)")
        problems.append(
            f"{given / verifier_name / 'test.sh'}: missing: add {verifier_name}/test.sh "
            f"(the script that writes /logs/verifier/reward.txt){hint}"
        )
    environment_dir = folder / "environment"
    dockerfile: Path | None = environment_dir / "Dockerfile"
    if not _files.is_file(environment_dir / "Dockerfile"):
        dockerfile = None
    if dockerfile is None and config.sandbox.docker_image is None:
        key = "sandbox.docker_image" if layout == "native" else "environment.docker_image"
        problems.append(
            f"{given / 'environment' / 'Dockerfile'}: missing and no docker_image is set: "
            f"add environment/Dockerfile or set {key} in {_CONFIG_FILE[layout]}"
        )
    compose = next((environment_dir / n for n in COMPOSE_FILES
                    if _files.is_file(environment_dir / n)), None)
    problems.extend(collection_problems(config, config_label, compose is not None))
    if problems:
        raise TaskInvalidError("; ".join(problems))

    solution_dir = folder / _SOLUTION[layout]
    return Task(
        path=folder,
        name=config.name or folder.name,
        layout=layout,
        instruction=instruction,
        config=config,
        environment_dir=environment_dir,
        dockerfile=dockerfile,
        verifier_dir=verifier_dir,
        verifier_mount=mount,
        solution_dir=solution_dir if _files.is_file(solution_dir / "solve.sh") else None,
        prompts=_prompts(folder, given) if layout == "native" else {},
        raw_frontmatter=raw,
        scenes=scenes,
        verifier_doc=doc,
        steps=tuple(steps),
        compose_file=compose,
    )


def _steps(config: TaskConfig, folder: Path, given: Path, layout: Layout,
           problems: list[str]) -> list[TaskStep]:
    """The steps of a multi-step task, each with its instruction read (problems collected)."""
    steps = []
    names = [s.name for s in config.steps]
    for dupe in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{given / _CONFIG_FILE[layout]}: two steps are named {dupe!r}; "
                        "step names must be unique")
    for index, step in enumerate(config.steps):
        base, label = folder / "steps" / step.name, given / "steps" / step.name
        file = base / "instruction.md"
        instruction = ""
        if not _files.is_file(file):
            problems.append(f"{label / 'instruction.md'}: missing: every [[steps]] entry needs "
                            f"steps/{step.name}/instruction.md with that step's prompt")
        else:
            instruction = _files.read_text(file, str(label / "instruction.md"))
        tests, solution = base / _VERIFIER[layout][0], base / _SOLUTION[layout]
        steps.append(TaskStep(
            name=step.name, index=index, instruction=instruction, config=step,
            verifier_dir=tests if _files.is_dir(tests) else None,
            solution_dir=solution if _files.is_file(solution / "solve.sh") else None,
            workdir_dir=base / "workdir" if _files.is_dir(base / "workdir") else None))
    return steps


def _mode_conflicts(config: TaskConfig, label: str) -> list[str]:
    """Settings benchflow cannot honour as written, each naming its key and the fix.

    `environment_mode = "shared"` with an `environment` table contradicts itself (Harbor
    refuses it too); a step's `agent.user` other than the task's would change who owns the
    files the verifier checks, and benchflow runs every step's agent as the task's one user.
    """
    found = []
    tables = [("verifier", config.verifier.environment_mode, config.verifier.environment)]
    tables += [(f"steps[{i}].verifier", s.verifier.environment_mode, s.verifier.environment)
               for i, s in enumerate(config.steps)]
    for where, mode, environment in tables:
        if mode == "shared" and environment is not None:
            found.append(f"{label}: '{where}.environment_mode' is \"shared\" but "
                         f"'{where}.environment' describes a separate verifier sandbox: set "
                         "environment_mode = \"separate\" or remove the environment table")
    task_user = config.agent.user
    for i, step in enumerate(config.steps):
        if step.agent.user is not None and step.agent.user != task_user:
            found.append(f"{label}: 'steps[{i}].agent.user' = {step.agent.user!r} differs from "
                         f"'agent.user' ({task_user!r}): benchflow runs every step's agent as "
                         "the task's one agent user; set agent.user for the task instead")
    return found


def _legacy_instruction(folder: Path, given: Path, problems: list[str],
                        optional: bool = False) -> str:
    file = folder / "instruction.md"
    label = str(given / "instruction.md")
    if not _files.is_file(file):
        if not optional:
            problems.append(f"{label}: missing: add instruction.md with the task prompt")
        return ""
    text = _files.read_text(file, label)
    if not text.strip():
        problems.append(f"{label}: is empty: write the task prompt in it")
    return text


__all__ = ["Layout", "Task", "TaskStep", "is_task_dir", "load_task"]
