"""Script loading, step selection from the conversation, shell tool shaping and side answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchflow.errors import ConfigError
from benchflow.model_server import (
    Conversation,
    RequestError,
    ShellStep,
    TextStep,
    ToolSpec,
    load_script,
    parse_script,
    plan_reply,
)
from benchflow.model_server.conversation import Progress, progress_of
from benchflow.model_server.replies import schema_instance
from benchflow.model_server.tools import find_shell_tool, shell_arguments

YAML = """
name: write-then-read
steps:
  - shell: "echo 42 > /app/answer.txt"
  - shell: "cat /app/answer.txt"
    say: "Reading it back."
  - text: "The answer file contains 42."
side_answers:
  title: "My session"
  json: {complexity_score: 80}
  rules:
    - {contains: "prefix", text: "none"}
"""


def test_load_script_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(YAML)
    script = load_script(path)
    assert script.name == "write-then-read"
    assert script.steps == [
        ShellStep(shell="echo 42 > /app/answer.txt"),
        ShellStep(shell="cat /app/answer.txt", say="Reading it back."),
        TextStep(text="The answer file contains 42."),
    ]
    assert script.side_answers.title == "My session"
    assert script.side_answers.json_fields == {"complexity_score": 80}


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"steps": []}, "steps"),
        ({"steps": [{"say": "hi"}]}, "`shell`, `tool` or `text`"),
        ({"steps": [{"shell": "ls", "typo": 1}]}, "typo"),
        ({"stepz": [{"text": "x"}]}, "stepz"),
    ],
)
def test_invalid_scripts_name_the_problem(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_script(data)
    assert fragment in str(info.value)


def test_missing_or_broken_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_script(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("steps: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_script(tmp_path / "bad.yaml")


def test_step_at_past_the_end_repeats_the_last_text() -> None:
    script = parse_script(
        {"steps": [{"text": "first"}, {"shell": "ls"}, {"text": "last"}, {"shell": "pwd"}]}
    )
    assert script.step_at(1) == (1, ShellStep(shell="ls"))
    assert script.step_at(4) == (None, TextStep(text="last"))
    only_shell = parse_script({"steps": [{"shell": "ls"}], "done_text": "All done."})
    assert only_shell.step_at(7) == (None, TextStep(text="All done."))


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([], Progress(0, 0)),
        (
            ["user", "assistant_tool_call", "tool_result", "assistant_tool_call", "tool_result"],
            Progress(2, 0),
        ),
        # text and tool call split over two items is one unfinished turn
        (["user", "assistant_text", "assistant_tool_call", "tool_result"], Progress(1, 0)),
        (["user", "assistant_tool_call", "tool_result", "assistant_text", "user"], Progress(1, 1)),
        # a trailing assistant text is a prefill, not a finished turn
        (["user", "assistant_text"], Progress(0, 0)),
    ],
)
def test_progress_counts_tool_results_and_finished_turns(
    events: list[Any], expected: Progress
) -> None:
    assert progress_of(events) == expected


def _tools(schemas: dict[str, dict[str, Any]], *names: str) -> list[ToolSpec]:
    mapping = {
        "claude": [
            ToolSpec("BashOutput", schemas["claude_bash_output"]),
            ToolSpec("KillShell", {}),
            ToolSpec("Bash", schemas["claude"]),
        ],
        "codex_shell": [
            ToolSpec("shell", schemas["codex_shell"]),
            ToolSpec("apply_patch", None, "custom"),
        ],
        "codex_exec": [
            ToolSpec("exec_command", schemas["codex_exec"]),
            ToolSpec("write_stdin", {}),
        ],
        "gemini": [ToolSpec("read_file", {}), ToolSpec("run_shell_command", schemas["gemini"])],
        "opencode": [ToolSpec("read", {}), ToolSpec("bash", schemas["opencode"])],
    }
    return [tool for name in names for tool in mapping[name]]


@pytest.mark.parametrize(
    ("agent", "tool", "args"),
    [
        ("claude", "Bash", {"command": "ls -la"}),
        ("codex_shell", "shell", {"command": ["bash", "-lc", "ls -la"]}),
        ("codex_exec", "exec_command", {"cmd": "ls -la"}),
        ("gemini", "run_shell_command", {"command": "ls -la"}),
        ("opencode", "bash", {"command": "ls -la", "description": "Run ls -la"}),
    ],
)
def test_shell_tool_and_argument_shape_per_agent(
    schemas: dict[str, dict[str, Any]], agent: str, tool: str, args: dict[str, Any]
) -> None:
    found = find_shell_tool(_tools(schemas, agent))
    assert found is not None and found.name == tool
    assert shell_arguments(found, "ls -la") == args


def test_unknown_shell_tool_found_by_schema_and_local_shell() -> None:
    schema = {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}
    tools = [ToolSpec("shell_output", schema), ToolSpec("my_terminal_exec", schema)]
    found = find_shell_tool(tools)
    assert found is not None and found.name == "my_terminal_exec"
    assert find_shell_tool([ToolSpec("read_file", {"type": "object"})]) is None
    local = ToolSpec("local_shell", None, "local_shell")
    assert shell_arguments(local, "pwd") == {"command": ["bash", "-lc", "pwd"]}


def _conv(tools: list[ToolSpec], tool_results: int = 0, **kw: Any) -> Conversation:
    return Conversation(
        api="test", model="m", tools=tools, progress=Progress(tool_results, 0), **kw
    )


def test_plan_reply_steps_and_overrides(schemas: dict[str, dict[str, Any]]) -> None:
    script = parse_script(
        {
            "steps": [
                {"shell": "make test", "args": {"timeout": 600}},
                {"tool": "Write", "args": {"file_path": "/app/a", "content": "x"}},
                {"text": "ok"},
            ]
        }
    )
    tools = [*_tools(schemas, "claude"), ToolSpec("Write", {})]
    first = plan_reply(script, _conv(tools))
    assert first.tool_call is not None and first.tool_call.arguments == {
        "command": "make test",
        "timeout": 600,
    }
    assert first.step_index == 0
    second = plan_reply(script, _conv(tools, 1))
    assert second.tool_call is not None and second.tool_call.name == "Write"
    with pytest.raises(RequestError, match="calls tool `Write` but the request does not offer it"):
        plan_reply(script, _conv(_tools(schemas, "claude"), 1))
    assert plan_reply(script, _conv(tools, 2)).text == "ok"
    # ids are deterministic, so repeated runs log identical trajectories
    assert plan_reply(script, _conv(tools)).tool_call == first.tool_call


@pytest.mark.parametrize("name", ["mcp__benchflow__web_search", "mcp_benchflow_web_search",
                                  "benchflow_web_search"])
def test_a_tool_pattern_calls_the_one_offered_tool_it_matches(name: str) -> None:
    # each agent prefixes MCP tools its own way (claude, gemini, opencode above); the
    # pattern skips gemini's own google_web_search
    script = parse_script({"steps": [{"tool": "*benchflow*web_search", "args": {"query": "q"}},
                                     {"shell": "ls", "tool": "[Bb]ash"}]})
    tools = [ToolSpec("google_web_search", {}), ToolSpec(name, {}), ToolSpec("Bash", {})]
    call = plan_reply(script, _conv(tools)).tool_call
    assert call is not None and (call.name, call.arguments) == (name, {"query": "q"})
    assert plan_reply(script, _conv(tools, 1)).tool_call.name == "Bash"


def test_a_tool_pattern_matching_none_or_several_names_them() -> None:
    script = parse_script({"steps": [{"tool": "*web_search"}, {"text": "ok"}]})
    both = [ToolSpec("google_web_search", {}), ToolSpec("benchflow_web_search", {})]
    with pytest.raises(RequestError, match=r"matches several offered tools \(google_web_search, "
                       r"benchflow_web_search\): make it narrower"):
        plan_reply(script, _conv(both))
    with pytest.raises(RequestError, match=r"does not offer it \(offered: Bash\)"):
        plan_reply(script, _conv([ToolSpec("Bash", {})]))


def test_side_answers(schemas: dict[str, dict[str, Any]]) -> None:
    script = parse_script(
        {
            "steps": [{"shell": "ls"}],
            "side_answers": {
                "title": "T",
                "rules": [{"contains": "Command prefix", "text": "none"}],
            },
        }
    )
    assert plan_reply(script, _conv([], system="Write a title")).text == "T"
    assert (
        plan_reply(script, _conv([], last_user_text="Extract the command prefix of: ls")).text
        == "none"
    )
    branch = plan_reply(
        script, _conv([], system='Return a JSON object with "title" and "branch" fields.')
    )
    assert json.loads(branch.text) == {"title": "T", "branch": "scripted/t"}
    # a JSON request is a side request even when tools are offered
    forced = plan_reply(
        script, _conv(_tools(schemas, "claude"), json_mode=True, response_schema={"type": "object"})
    )
    assert forced.source == "side" and json.loads(forced.text) == {}


def test_schema_instance_is_valid_for_router_like_schemas() -> None:
    router = {
        "type": "OBJECT",
        "properties": {
            "reasoning": {"type": "STRING"},
            "model_choice": {"type": "STRING", "enum": ["pro", "flash"]},
            "complexity_score": {"type": "INTEGER"},
            "tags": {"type": "ARRAY", "items": {"$ref": "#/$defs/tag"}, "minItems": 1},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
        },
        "$defs": {"tag": {"type": "string", "const": "x"}},
    }
    assert schema_instance(router) == {
        "reasoning": "Scripted answer.",
        "model_choice": "flash",
        "complexity_score": 1,
        "tags": ["x"],
        "maybe": False,
    }


def test_public_names() -> None:
    import benchflow.model_server as ms

    assert all(hasattr(ms, name) for name in ms.__all__)
    assert {"ModelServer", "Script", "load_script", "serve_forever"} <= set(ms.__all__)


def test_answers_pick_steps_by_first_user_message() -> None:
    from benchflow.model_server.script import TextStep

    script = parse_script({"answers": [{"match": "France", "text": "Paris"},
                                       {"regex": r"\bls\b", "steps": [{"shell": "ls"},
                                                                       {"text": "done"}]}]})
    assert script.steps_for("capital of FRANCE?") == [TextStep(text="Paris")]
    assert len(script.steps_for("please ls the dir")) == 2
    assert script.answer_for("nothing matches") is None


@pytest.mark.parametrize("bad", [{}, {"answers": [{"match": "a"}]},
                                 {"answers": [{"match": "a", "regex": "b", "text": "x"}]},
                                 {"answers": [{"regex": "(", "text": "x"}]},
                                 {"steps": [{"text": "x"}], "faults": [{"status": 200}]}])
def test_invalid_answers_and_faults_are_config_errors(bad: dict) -> None:
    from benchflow.errors import ConfigError

    with pytest.raises(ConfigError):
        parse_script(bad)
