"""The script a scripted model server follows: ordered steps and answers to side requests.

A script replaces the model in an offline run of a real agent. Each step is what "the
model" says next: run a shell command through the agent's own shell tool, call some
other tool, or answer with text (which ends the agent's turn). The step is chosen from
the conversation the agent sends, never from a request counter (see `Script.step_at`).

```yaml
name: write-then-read
steps:
  - shell: "echo 42 > /app/answer.txt"
  - shell: "cat /app/answer.txt"
    say: "Reading it back."
  - text: "The answer file contains 42."
side_answers:
  title: "Scripted session"
```

A script can also answer by content: `answers` pick the steps from a user message of the
conversation (the question, the instruction, a later prompt of the same session), so one
script serves a whole QA dataset; `faults` answer the first requests with an error status
(for retry tests).

```yaml
name: scripted-qa
answers:
  - match: "capital of France"       # case-insensitive substring (or `regex:`)
    text: "Paris"
  - match: "files in /data"
    steps: [{shell: "ls /data"}, {text: "three files"}]
faults:
  - status: 429
    times: 2
```

An answer may also name a `role`: it then serves only the calls made with that role's key
(each role of a rollout has its own), so two roles, even two of the same agent, follow
different scripts. An answer with a `role` and no `match`/`regex` serves all of the role's
calls. Which answer applies: the latest user message of the conversation that some answer
matches (answers tried in order), and the steps count from that message on, so a role's
second prompt in the same session can start its own steps; else a role-only answer; else
the script's `steps`.

```yaml
answers:
  - role: coder
    match: "Address the review"          # the coder's second prompt
    steps: [{shell: "cat /app/review.md"}, {text: "Fixed."}]
  - role: coder
    steps: [{shell: "echo 12 > /app/sum.txt"}, {text: "Wrote it."}]
  - role: reviewer
    steps: [{shell: "cat /app/sum.txt"}, {text: "Looks right."}]
```
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator

from benchflow._models import FrozenModel
from benchflow.errors import ConfigError
from benchflow import bounds as B


class ShellStep(FrozenModel):
    """Run `shell` through the calling agent's shell tool (Bash, shell, run_shell_command...).

    The tool and its argument shape are read from the tools the request offers; `tool`
    forces a tool name and `args` adds or overrides arguments.
    """

    shell: str = Field(min_length=1)
    say: str | None = None
    tool: str | None = Field(default=None, description="the tool's name or a glob pattern "
                             "(see `ToolStep`)")
    args: dict[str, Any] = Field(default_factory=dict)


class ToolStep(FrozenModel):
    """Call the offered tool named `tool` with exactly `args` (e.g. an agent's Write tool).

    `tool` may be a glob pattern (`*`, `?`, `[...]`, case-sensitive) naming the one offered
    tool it matches: agents name MCP tools their own way (`*benchflow*web_search` is claude's
    and codex's `mcp__benchflow__web_search`, gemini's `mcp_benchflow_web_search`,
    opencode's `benchflow_web_search`). No match or several is a request error naming them.
    """

    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    say: str | None = None


class TextStep(FrozenModel):
    """Answer with `text` and no tool call; the agent's turn ends here."""

    text: str


def _step_kind(value: Any) -> str | None:
    if isinstance(value, (ShellStep, ToolStep, TextStep)):
        return {ShellStep: "shell", ToolStep: "tool", TextStep: "text"}[type(value)]
    if isinstance(value, dict):
        for key in ("shell", "tool", "text"):
            if key in value:
                return key
    return None


Step = Annotated[
    Annotated[ShellStep, Tag("shell")]
    | Annotated[ToolStep, Tag("tool")]
    | Annotated[TextStep, Tag("text")],
    Discriminator(
        _step_kind,
        custom_error_type="invalid_step",
        custom_error_message="a step needs one of the keys `shell`, `tool` or `text`",
    ),
]


class SideRule(FrozenModel):
    """Answer a side request whose prompt contains `contains` (case-insensitive) with `text`."""

    contains: str = Field(min_length=1)
    text: str


class SideAnswers(FrozenModel):
    """Fixed answers to the side requests agents send besides the main loop.

    Side requests (session titles, topic detection, routing, next-speaker checks) offer no
    tools or ask for JSON. Free-text ones get the first matching rule's text, else `title`.
    JSON ones get a valid instance of the schema they send, with `json` merged over the
    top-level fields (e.g. `{"complexity_score": 80}` to route gemini to its pro model).
    """

    model_config = ConfigDict(populate_by_name=True)

    title: str = "Scripted session"
    rules: list[SideRule] = Field(default_factory=list)
    json_fields: dict[str, Any] = Field(default_factory=dict, alias="json")


class AnswerRule(FrozenModel):
    """Steps for conversations with a user message that matches `match` (a case-insensitive
    substring) or `regex`, and/or made with the key of `role`; `text` is shorthand for one
    text step."""

    match: str | None = Field(default=None, min_length=1)
    regex: str | None = Field(default=None, min_length=1)
    role: str | None = Field(default=None, min_length=1)
    text: str | None = None
    steps: list[Step] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_of_each(self) -> AnswerRule:
        if self.match is not None and self.regex is not None:
            raise ValueError("an answer takes one of `match` and `regex`, not both")
        if self.match is None and self.regex is None and self.role is None:
            raise ValueError("an answer needs `match`, `regex` or `role`")
        if (self.text is None) == (not self.steps):
            raise ValueError("an answer needs exactly one of `text` and `steps`")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"`regex` {self.regex!r} is not a valid pattern: {exc}") from exc
        return self

    @property
    def has_pattern(self) -> bool:
        return self.match is not None or self.regex is not None

    def serves(self, role: str | None) -> bool:
        """Whether the answer may serve a call made with `role`'s key."""
        return self.role is None or self.role == role

    def matches(self, message: str) -> bool:
        if self.match is not None:
            return self.match.lower() in message.lower()
        if self.regex is not None:
            return re.search(self.regex, message, re.IGNORECASE) is not None
        return False

    @property
    def all_steps(self) -> list[ShellStep | ToolStep | TextStep]:
        return list(self.steps) if self.steps else [TextStep(text=self.text or "")]


class Fault(FrozenModel):
    """Answer the next `times` model requests with HTTP `status` (429, 500...) before any reply."""

    status: int = Field(ge=400, le=599)
    times: int = Field(default=1, ge=1, le=B.MAX_TURNS)
    message: str = "injected by the model-server script"


DEFAULT_MODELS = (
    "claude-sonnet-4-6",
    "claude-opus-4-6",
    "claude-haiku-4-5",
    "gpt-5",
    "gpt-5-codex",
    "gemini-2.5-pro",
    "gemini-2.5-flash",
)


class Script(FrozenModel):
    """What the scripted model says, step by step, to any agent that calls it."""

    name: str = "scripted"
    steps: list[Step] = Field(default_factory=list)
    answers: list[AnswerRule] = Field(default_factory=list)
    faults: list[Fault] = Field(default_factory=list)
    side_answers: SideAnswers = Field(default_factory=SideAnswers)
    done_text: str = "Done."
    models: list[str] = Field(default_factory=lambda: list(DEFAULT_MODELS))

    @model_validator(mode="after")
    def _has_steps_or_answers(self) -> Script:
        if not self.steps and not self.answers:
            raise ValueError("a script needs `steps` or `answers`")
        return self

    def answer_for(self, user_messages: str | list[str], role: str | None = None
                   ) -> AnswerRule | None:
        """The answer for a conversation with these user messages, made with `role`'s key
        (see `select`)."""
        chosen = self.select(user_messages, role)
        return chosen[0] if chosen is not None else None

    def select(self, user_messages: str | list[str], role: str | None = None
               ) -> tuple[AnswerRule, int] | None:
        """(answer, index of the user message it matched): the latest user message some
        answer matches (answers in order, only those serving `role`), else the first
        role-only answer of `role` (index 0); None: the script's own steps."""
        messages = [user_messages] if isinstance(user_messages, str) else list(user_messages)
        serving = [a for a in self.answers if a.serves(role)]
        for index in reversed(range(len(messages))):
            for answer in serving:
                if answer.has_pattern and answer.matches(messages[index]):
                    return answer, index
        for answer in serving:
            if not answer.has_pattern:
                return answer, 0
        return None

    def steps_for(self, user_messages: str | list[str], role: str | None = None
                  ) -> list[ShellStep | ToolStep | TextStep]:
        """The steps of the matching answer, else the script's own steps."""
        answer = self.answer_for(user_messages, role)
        return answer.all_steps if answer is not None else list(self.steps)

    def step_at(self, position: int, steps: list[ShellStep | ToolStep | TextStep] | None = None
                ) -> tuple[int | None, ShellStep | ToolStep | TextStep]:
        """The step for a conversation at `position` and its index (None past the end).

        `position` is the number of tool results in the conversation plus the number of
        assistant turns that already ended in text. Past the end the script repeats its
        last text step (or `done_text`), so an agent that keeps asking is told it is done.
        """
        steps = list(self.steps) if steps is None else steps
        if 0 <= position < len(steps):
            return position, steps[position]
        for step in reversed(steps):
            if isinstance(step, TextStep):
                return None, step
        return None, TextStep(text=self.done_text)


def parse_script(data: Any, source: str = "<script>") -> Script:
    """Validate an already-loaded YAML/JSON document as a `Script`.

    Raises:
        ConfigError: the document is not a valid script; the message names `source` and the field.
    """
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid model-server script {source}: {exc}") from exc


def load_script(path: str | Path) -> Script:
    """Read a YAML script file.

    Raises:
        ConfigError: the file is missing, is not YAML, or is not a valid script.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read model-server script {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"model-server script {path} is not valid YAML: {exc}") from exc
    return parse_script(data, str(path))
