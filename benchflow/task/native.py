"""The native layout's `task.md`: YAML frontmatter between `---` lines, then the prompt.

```text
---
task: {name: hello-world}
sandbox: {cpus: 2, memory_mb: 4096}
verifier: {timeout_sec: 120}
---
Write "hello" to /app/hello.txt.
```

Unknown keys are errors naming the dotted path and the nearest valid name; values are
not coerced (`"600"` is not a number, `"yes"` is not a bool).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from benchflow._lenient import validate_leniently
from benchflow.errors import TaskInvalidError
from benchflow._suggest import describe, short_repr
from benchflow.task.models import Frontmatter, TaskConfig, TaskConfigWarning

_FENCE = "---"


def split_frontmatter(text: str, label: str) -> tuple[str | None, str]:
    """Split `task.md` text into (frontmatter YAML or None, markdown body).

    Raises:
        TaskInvalidError: the opening `---` is never closed.
    """
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines[0].rstrip() != _FENCE:
        return None, text
    for index in range(1, len(lines)):
        if lines[index].rstrip() == _FENCE:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise TaskInvalidError(
        f"{label}: the frontmatter opened by '---' on line 1 is never closed: "
        "add a line '---' after the last frontmatter key, then the prompt"
    )


def load_yaml(source: str, label: str) -> dict[str, Any]:
    """Parse the frontmatter YAML into a mapping (an empty frontmatter is `{}`).

    Raises:
        TaskInvalidError: the YAML is malformed or is not a mapping.
    """
    import yaml  # only for a task.md frontmatter (~10 ms of import)

    try:
        data = yaml.safe_load(source)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        # +2: YAML counts from 0, and the file's line 1 is the opening '---'
        where = f" (line {mark.line + 2}, column {mark.column + 1})" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise TaskInvalidError(
            f"{label}: frontmatter is not valid YAML{where}: {problem}; fix the YAML syntax"
        ) from exc
    except Exception as exc:  # the parser boundary: any failure means unreadable YAML
        raise TaskInvalidError(
            f"{label}: frontmatter is not valid YAML: {type(exc).__name__}: "
            f"{short_repr(str(exc))}; fix the YAML syntax"
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TaskInvalidError(
            f"{label}: frontmatter must be a mapping of keys (task, agent, verifier, "
            f"sandbox, ...), got a {type(data).__name__}: write 'key: value' lines"
        )
    return data


def parse_task_md(text: str, label: str) -> tuple[TaskConfig, str, dict[str, Any]]:
    """Parse a `task.md` into (config, instruction, raw frontmatter).

    The instruction is the body with leading and trailing whitespace stripped; it may
    be empty here (the loader reports a missing instruction with the other problems).

    Raises:
        TaskInvalidError: bad frontmatter syntax, shape, unknown key (unless the frontmatter
            says `strict: false`) or value type.
    """
    source, body = split_frontmatter(text, label)
    raw = load_yaml(source, label) if source is not None else {}
    bad_keys = [k for k in raw if not isinstance(k, str)]
    if bad_keys:
        raise TaskInvalidError(
            f"{label}: frontmatter key {short_repr(bad_keys[0])} is not a string: "
            "use names such as 'task', 'agent', 'verifier', 'sandbox'"
        )
    try:
        if raw.get("strict") is False:  # unknown keys warned, not refused
            frontmatter = validate_leniently(Frontmatter.model_validate, raw, label,
                                             TaskConfigWarning)
        else:
            frontmatter = Frontmatter.model_validate(raw)
    except ValidationError as exc:
        raise TaskInvalidError(f"{label}: {describe(exc, Frontmatter)}") from exc
    return frontmatter.to_config(), body.strip(), raw


__all__ = ["load_yaml", "parse_task_md", "split_frontmatter"]
