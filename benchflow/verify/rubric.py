"""Rubrics for the LLM-judge verifier, and which tasks are judged.

A rubric (`verifier/rubrics/verifier.toml` native; `tests/rubric.toml` or `rubric.json`
legacy) lists criteria and the sandbox files the judge sees:

```toml
model = "judge-model"          # optional
files = ["/app/poem.txt"]      # read from the sandbox after hardening
[[criteria]]
name = "rhymes"                # also accepted: id
description = "Lines 1 and 2 rhyme."   # also accepted: text
weight = 2.0                   # default 1
```

`verifier/rubrics/verifier.md` (native) holds prose shown to the judge with the criteria.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchflow.errors import TaskInvalidError
from benchflow.task import Task

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Criterion:
    name: str
    description: str
    weight: float = 1.0


@dataclass(frozen=True)
class Rubric:
    criteria: tuple[Criterion, ...]
    files: tuple[str, ...] = ()
    prose: str = ""
    model: str | None = None
    source: str = ""


@dataclass(frozen=True)
class JudgeVerifier:
    """How a task is judged: its rubric, model, context, and whether test.sh runs too."""

    rubric: Rubric
    model: str | None
    context: str = ""
    input_dir: str = "/app"
    with_script: bool = False
    script_weight: float = 0.5
    extra: dict[str, Any] = field(default_factory=dict)


def parse_rubric(data: Any, source: str, prose: str = "") -> Rubric:
    """A rubric from a decoded TOML/JSON document.

    Raises:
        TaskInvalidError: no criteria, a criterion without name or description, a bad weight.
    """
    if not isinstance(data, dict):
        raise TaskInvalidError(f"{source}: a rubric is a table with `criteria`")
    raw = data.get("criteria")
    if not isinstance(raw, list) or not raw:
        raise TaskInvalidError(f"{source}: `criteria` must be a non-empty list of "
                               "{name, description, weight}")
    criteria: list[Criterion] = []
    for i, entry in enumerate(raw):
        where = f"{source}: criteria[{i}]"
        if not isinstance(entry, dict):
            raise TaskInvalidError(f"{where}: must be a table")
        name = entry.get("name", entry.get("id"))
        text = entry.get("description", entry.get("text"))
        weight = entry.get("weight", 1.0)
        if not isinstance(name, str) or not _NAME.match(name):
            raise TaskInvalidError(f"{where}: `name` must be a word of letters, digits, '_', "
                                   "'-' or '.'")
        if not isinstance(text, str) or not text.strip():
            raise TaskInvalidError(f"{where}: `description` is required")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            raise TaskInvalidError(f"{where}: `weight` must be a positive number")
        criteria.append(Criterion(name, text.strip(), float(weight)))
    names = [c.name for c in criteria]
    if len(set(names)) != len(names):
        raise TaskInvalidError(f"{source}: criterion names must be unique ({names})")
    files = data.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) and f.startswith("/")
                                              for f in files):
        raise TaskInvalidError(f"{source}: `files` must be a list of absolute sandbox paths")
    model = data.get("model")
    return Rubric(tuple(criteria), tuple(files), prose.strip(),
                  model if isinstance(model, str) else None, source)


def load_rubric(path: Path, prose: str = "") -> Rubric:
    """A rubric file (.toml or .json).

    Raises:
        TaskInvalidError: missing, unparsable or invalid (file named).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskInvalidError(f"{path}: cannot read the rubric: {exc}") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise TaskInvalidError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from exc
    return parse_rubric(data, str(path), prose)


def judge_verifier(task: Task) -> JudgeVerifier | None:
    """The task's LLM-judge verifier, or None when test.sh alone scores it.

    Raises:
        TaskInvalidError: the verifier document or rubric is invalid or missing.
    """
    has_script = (task.verifier_dir / "test.sh").is_file()
    if task.layout == "native":
        doc = task.verifier_doc
        if doc.strategy != "llm-judge":
            return None
        rubric_path = task.verifier_dir / doc.rubric
        prose_path = rubric_path.with_suffix(".md")
        prose = prose_path.read_text(encoding="utf-8") if prose_path.is_file() else ""
        if not rubric_path.is_file():
            raise TaskInvalidError(f"{rubric_path}: missing: an llm-judge verifier needs a "
                                   "rubric (criteria with descriptions and weights)")
        rubric = load_rubric(rubric_path, prose)
        return JudgeVerifier(rubric=rubric, model=doc.model or rubric.model, context=doc.body,
                             with_script=has_script, script_weight=doc.script_weight)
    if task.layout != "legacy" or task.config.verifier.type != "llm-judge":
        return None
    judge = task.config.verifier.judge
    if judge.rubric_path:
        candidates = [task.path / judge.rubric_path]
    else:
        candidates = [task.verifier_dir / "rubric.toml", task.verifier_dir / "rubric.json"]
    rubric_path = next((p for p in candidates if p.is_file()), None)
    if rubric_path is None:
        raise TaskInvalidError(f"{candidates[0]}: missing: [verifier] type = \"llm-judge\" needs "
                               "a rubric (tests/rubric.toml or rubric.json, or "
                               "[verifier.judge] rubric_path)")
    rubric = load_rubric(rubric_path)
    return JudgeVerifier(rubric=rubric, model=judge.model or rubric.model, context=judge.context,
                         input_dir=judge.input_dir, with_script=has_script)


__all__ = ["Criterion", "JudgeVerifier", "Rubric", "judge_verifier", "load_rubric",
           "parse_rubric"]
