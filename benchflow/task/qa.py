"""QA datasets: a JSONL (or JSON) file of question/answer items, each one a task.

```jsonl
{"id": "q1", "question": "What is the capital of France?", "answer": "Paris"}
{"task_id": "q2", "query": "Calculate 15 * 27", "ground_truth": "405", "level": "easy"}
```

Field aliases: `id` / `task_id`; `question` / `query` / `input`; `answer` / `ground_truth` /
`expected` (optional: items without one are run and not scored); `kwargs` (a mapping kept
for tools). Every other field goes to `metadata`. A JSON file holds a list of items (or an
object with an `items` or `data` list). Bad items (no id, no question, a duplicate id, a
line that is not a JSON object) fail the whole file before anything runs, naming the file,
the line and the field.

Each item becomes an in-memory `Task` (layout "qa") with no environment; its folder name
is the item id (characters outside `[A-Za-z0-9_.-]` become `_`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError, TaskInvalidError, TaskNotFoundError

ID_KEYS = ("id", "task_id")
QUESTION_KEYS = ("question", "query", "input")
ANSWER_KEYS = ("answer", "ground_truth", "expected")
QA_SUFFIXES = (".jsonl", ".json")

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class QaItem:
    """One benchmark item: its id, question, optional ground truth, tool kwargs, metadata."""

    id: str
    question: str
    answer: Any = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    """`file:line` (or `list[i]`) the item came from."""

    @property
    def has_answer(self) -> bool:
        return self.answer is not None and self.answer != ""

    @property
    def folder_name(self) -> str:
        """The item's rollout folder name: its id with unsafe characters replaced."""
        name = _UNSAFE.sub("_", self.id).lstrip(".") or "_"
        return name

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "answer": self.answer,
                "kwargs": self.kwargs, "metadata": self.metadata}


@dataclass(frozen=True)
class QaScoring:
    """How a QA item's answer is scored: the headline `metric` (the reward), `extra_metrics`
    added to rewards, an optional `answer_pattern` regex cutting the answer out of the
    agent's reply (its first group, else the whole match), and the evaluator model for
    `llm_judgement` (None: the agent's own endpoint, with `judge_model` if given)."""

    metric: str = "exact_match"
    extra_metrics: tuple[str, ...] = ()
    answer_pattern: str | None = None
    judge_endpoint: ModelEndpoint | None = None
    judge_model: str | None = None
    judge_temperature: float = 0.0
    judge_max_retries: int = 3
    judge_extra_params: dict[str, Any] = field(default_factory=dict)
    judge_prompt: str | None = None

    def __post_init__(self) -> None:
        if self.answer_pattern is not None:
            try:
                re.compile(self.answer_pattern)
            except re.error as exc:
                raise ConfigError(f"answer_pattern {self.answer_pattern!r} is not a valid "
                                  f"regular expression: {exc}") from exc

    @property
    def metrics(self) -> tuple[str, ...]:
        return (self.metric, *(m for m in self.extra_metrics if m != self.metric))


@dataclass(frozen=True)
class QaTaskSpec:
    """What a QA task carries: the item and how to score it."""

    item: QaItem
    scoring: QaScoring


def is_qa_file(path: Path | str) -> bool:
    """Whether `path` is a file benchflow reads as a QA dataset (.jsonl / .json)."""
    p = Path(path)
    return p.suffix.lower() in QA_SUFFIXES and p.is_file()


def _pick(data: Mapping[str, Any], keys: Sequence[str]) -> tuple[str | None, Any]:
    for key in keys:
        if key in data:
            return key, data[key]
    return None, None


def parse_item(data: Any, where: str) -> QaItem:
    """One item from a decoded JSON value.

    Raises:
        TaskInvalidError: not an object, no id, no question; the message names `where` and the field.
    """
    if not isinstance(data, dict):
        raise TaskInvalidError(f"{where}: an item must be a JSON object, got "
                               f"{type(data).__name__}")
    id_key, raw_id = _pick(data, ID_KEYS)
    if id_key is None or raw_id is None or isinstance(raw_id, bool) or \
            not isinstance(raw_id, (str, int)) or str(raw_id).strip() == "":
        raise TaskInvalidError(f"{where}: field `id` is missing or empty: give each item an "
                               f"`id` (or `task_id`), a string or an integer")
    q_key, question = _pick(data, QUESTION_KEYS)
    if q_key is None or not isinstance(question, str) or not question.strip():
        raise TaskInvalidError(f"{where}: field `question` is missing or not a non-empty string "
                               f"(also accepted: `query`, `input`)")
    _, answer = _pick(data, ANSWER_KEYS)
    kwargs = data.get("kwargs", {})
    if not isinstance(kwargs, dict):
        raise TaskInvalidError(f"{where}: field `kwargs` must be an object")
    used = {id_key, q_key, "kwargs", *ANSWER_KEYS}
    metadata = {k: v for k, v in data.items() if k not in used}
    return QaItem(id=str(raw_id).strip(), question=question, answer=answer, kwargs=kwargs,
                  metadata=metadata, source=where)


def _check_unique(items: list[QaItem]) -> list[QaItem]:
    seen: dict[str, QaItem] = {}
    for item in items:
        for key in (item.id, item.folder_name):
            if key in seen:
                raise TaskInvalidError(f"{item.source}: field `id` {item.id!r} duplicates the "
                                       f"item at {seen[key].source}: ids must be unique")
        seen[item.id] = seen[item.folder_name] = item
    return items


def load_qa_items(source: Path | str | Sequence[Mapping[str, Any]]) -> list[QaItem]:
    """Items from a .jsonl / .json file or a list of dicts, validated all at once.

    Raises:
        TaskNotFoundError: the file does not exist.
        TaskInvalidError: a line is not JSON, or an item is invalid (file, line, field named).
    """
    if not isinstance(source, (str, Path)):
        return _check_unique([parse_item(d, f"list[{i}]") for i, d in enumerate(source)])
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TaskNotFoundError(f"{path}: no such QA dataset file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskInvalidError(f"{path}: cannot read the QA dataset: {exc}") from exc
    items: list[QaItem] = []
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise TaskInvalidError(f"{path}: not valid JSON: {exc}") from exc
        if isinstance(data, dict):
            data = data.get("items", data.get("data"))
        if not isinstance(data, list):
            raise TaskInvalidError(f"{path}: a JSON dataset is a list of items (or an object "
                                   "with an `items` list)")
        items = [parse_item(d, f"{path}: item {i}") for i, d in enumerate(data)]
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise TaskInvalidError(f"{where}: not a valid JSON line: {exc}") from exc
            items.append(parse_item(data, where))
    if not items:
        raise TaskInvalidError(f"{path}: the QA dataset holds no items")
    return _check_unique(items)


def select_items(items: list[QaItem], task_ids: Sequence[str] | None = None,
                 limit: int | None = None, where: str = "task_ids") -> list[QaItem]:
    """The items named by `task_ids` (in dataset order), then at most `limit` of them.

    Raises:
        ConfigError: an id in `task_ids` is not in the dataset.
    """
    if task_ids is not None:
        wanted = [str(t) for t in task_ids]
        known = {i.id for i in items}
        missing = [t for t in wanted if t not in known]
        if missing:
            raise ConfigError(f"{where}: no item with id {', '.join(map(repr, missing))} in the "
                              f"dataset")
        keep = set(wanted)
        items = [i for i in items if i.id in keep]
    if limit is not None:
        if limit < 1:
            raise ConfigError(f"the number of tasks must be at least 1 (got {limit})")
        items = items[:limit]
    return items


__all__ = ["ANSWER_KEYS", "ID_KEYS", "QA_SUFFIXES", "QUESTION_KEYS", "QaItem", "QaScoring",
           "QaTaskSpec", "is_qa_file",
           "load_qa_items", "parse_item", "select_items"]
