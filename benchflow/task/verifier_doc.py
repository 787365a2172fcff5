"""`verifier/verifier.md`: how a native task is scored (its frontmatter) and prose for a judge.

```markdown
---
strategy: llm-judge          # script (default: run test.sh) | llm-judge
rubric: rubrics/verifier.toml # relative to verifier/ (this is the default)
model: judge-model            # optional judge model id
script_weight: 0.5            # with a test.sh too: its share of the headline reward
---
Anything written here is shown to the judge as context.
```

The legacy layout declares the same with `[verifier] type = "llm-judge"` and
`[verifier.judge]` in task.toml, and a `tests/rubric.toml` or `tests/rubric.json`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from benchflow._models import FrozenModel
from benchflow.errors import TaskInvalidError

VERIFIER_DOC = "verifier.md"


class VerifierDoc(FrozenModel):
    """The frontmatter of verifier/verifier.md, and its body."""

    strategy: Literal["script", "llm-judge"] = "script"
    command: str = Field(default="test.sh", pattern=r"^(\./|bash )?test\.sh$",
                         description="the script strategy's entry point (test.sh only)")
    rubric: str = "rubrics/verifier.toml"
    model: str | None = None
    script_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    body: str = ""


def parse_verifier_doc(path: Path) -> VerifierDoc | None:
    """The document at `path` (None when the file does not exist).

    Raises:
        TaskInvalidError: unreadable, bad frontmatter, unknown keys or values (file named).
    """
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskInvalidError(f"{path}: cannot read: {exc}") from exc
    data: object = {}
    body = text
    if text.startswith("---"):
        head, sep, rest = text[3:].partition("\n---")
        if not sep:
            raise TaskInvalidError(f"{path}: the frontmatter has no closing '---'")
        try:
            data = yaml.safe_load(head) or {}
        except yaml.YAMLError as exc:
            raise TaskInvalidError(f"{path}: the frontmatter is not valid YAML: {exc}") from exc
        body = rest.split("\n", 1)[1] if "\n" in rest else ""
    if not isinstance(data, dict):
        raise TaskInvalidError(f"{path}: the frontmatter must be a mapping")
    try:
        return VerifierDoc.model_validate({**data, "body": body.strip()})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise TaskInvalidError(f"{path}: {problems}") from exc


__all__ = ["VERIFIER_DOC", "VerifierDoc", "parse_verifier_doc"]
