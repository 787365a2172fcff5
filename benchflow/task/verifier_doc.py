"""`verifier/verifier.md`: how a native task is scored (its frontmatter) and prose for a judge.

```markdown
---
strategy: llm-judge          # script (default) | llm-judge | reward-kit | agent-judge | ors-episode
command: ./test.sh            # script: run as `cd /verifier && <command>` (any command)
rubric: rubrics/verifier.toml # llm-judge / agent-judge: relative to verifier/ (the default)
model: judge-model            # optional judge model id
agent: claude                 # agent-judge: the registered agent that judges
script_weight: 0.5            # with a test.sh too: its share of the headline reward
---
Anything written here is shown to the judge as context.
```

The legacy layout declares the same with `[verifier] type = "..."` (`test-script` is
`script`), `[verifier] command`, `[verifier.judge]` for llm-judge, and `[verifier.options]`
holding any other key of this frontmatter (see `legacy_verifier_doc`).
"""

from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, ValidationError

from benchflow._models import FrozenModel
from benchflow.errors import TaskInvalidError
from benchflow import bounds as B

VERIFIER_DOC = "verifier.md"

Strategy = Literal["script", "llm-judge", "reward-kit", "agent-judge", "ors-episode"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
DEFAULT_COMMAND = "./test.sh"


class VerifierDoc(FrozenModel):
    """The frontmatter of verifier/verifier.md, and its body."""

    strategy: Strategy = "script"
    command: str = Field(default=DEFAULT_COMMAND, min_length=1,
                         description="script: the shell command run as `cd <verifier dir> && "
                                     "<command>`; reward-kit: extra arguments are not taken")
    rubric: str = "rubrics/verifier.toml"
    model: str | None = None
    script_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    # agent-judge
    agent: str | None = None
    """agent-judge: the registered agent (e.g. `claude`) that scores the workspace."""
    timeout_sec: float = Field(default=600.0, gt=0, le=B.MAX_SECONDS, allow_inf_nan=False)
    """agent-judge / ors-episode: the judge's or the episode's budget."""
    # reward-kit
    rewardkit: str = "harbor-rewardkit>=0.2"
    """reward-kit: the pip requirement installed when `rewardkit` is not on the image's PATH."""
    tests_dir: str = "."
    """reward-kit: the rewardkit folder, relative to verifier/ (Harbor: `rewardkit /tests`)."""
    # ors-episode
    environment: str | None = None
    """ors-episode: `module:Class` of the task's ORS environment (a file in verifier/)."""
    split: str = "test"
    task_index: int = Field(default=0, ge=0, le=B.MAX_TASKS)
    max_steps: int = Field(default=50, ge=1, le=B.MAX_TURNS)
    body: str = ""

    @property
    def script_command(self) -> str:
        """The script strategy's command (a bare `test.sh` means the file in the folder)."""
        return DEFAULT_COMMAND if self.command.strip() == "test.sh" else self.command


def validate_doc(data: dict[str, Any], where: str, body: str = "") -> VerifierDoc:
    """A VerifierDoc from a mapping; errors name `where` and the key.

    Raises:
        TaskInvalidError: an unknown key or a bad value.
    """
    try:
        return VerifierDoc.model_validate({**data, "body": body.strip()})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise TaskInvalidError(f"{where}: {problems}") from exc


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
        import yaml  # only for a verifier.md (~10 ms of import)

        try:
            data = yaml.safe_load(head) or {}
        except yaml.YAMLError as exc:
            raise TaskInvalidError(f"{path}: the frontmatter is not valid YAML: {exc}") from exc
        body = rest.split("\n", 1)[1] if "\n" in rest else ""
    if not isinstance(data, dict):
        raise TaskInvalidError(f"{path}: the frontmatter must be a mapping")
    return validate_doc(data, str(path), body)


def legacy_verifier_doc(type: str, command: str | None, options: dict[str, Any],
                        where: str) -> VerifierDoc:
    """The VerifierDoc of a legacy task.toml's `[verifier]` (`test-script` is `script`).

    Raises:
        TaskInvalidError: an unknown key in `[verifier.options]` or a bad value.
    """
    data = dict(options)
    data["strategy"] = "script" if type == "test-script" else type
    if command is not None:
        data["command"] = command
    return validate_doc(data, where)


__all__ = ["DEFAULT_COMMAND", "STRATEGIES", "Strategy", "VERIFIER_DOC", "VerifierDoc",
           "legacy_verifier_doc", "parse_verifier_doc", "validate_doc"]
