"""The scripted agent's script logic (its ACP behaviour is covered end to end elsewhere)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.acp.conftest import AGENT


def _agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scripted_agent", AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


agent = _agent()

TURNS = [
    {"actions": [], "id": 0},
    {"match": "^review", "actions": [], "id": "r"},
    {"actions": [], "id": 1, "repeat": True},
    {"actions": [], "id": 2},
]


@pytest.mark.parametrize(
    ("k", "prompt", "expected"),
    [
        (0, "go", 0),
        (1, "go", 1),
        (2, "go", 2),
        (3, "go", 1),
        (9, "go", 1),
        (0, "review this", "r"),
    ],
)
def test_choose_turn(k: int, prompt: str, expected: object) -> None:
    assert agent.choose_turn(TURNS, k, prompt)["id"] == expected


def test_no_repeat_means_no_more_turns() -> None:
    assert agent.choose_turn([{"actions": []}], 1, "x") is None


def test_roles_fall_back_to_default_and_top_level(tmp_path: Path) -> None:
    script = {"roles": {"default": {"turns": [{"id": "d"}]}, "coder": {"turns": [{"id": "c"}]}}}
    assert agent.role_turns(script, "coder") == [{"id": "c"}]
    assert agent.role_turns(script, "reviewer") == [{"id": "d"}]
    assert agent.role_turns({"turns": [{"id": "t"}]}, "any") == [{"id": "t"}]


def test_yaml_and_json_scripts(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "roles:\n  coder:\n    turns:\n      - actions: [{type: message, text: hi}]\n"
    )
    (tmp_path / "s.json").write_text('{"turns": [{"actions": []}]}')
    assert (
        agent.load_script(tmp_path / "s.yaml")["roles"]["coder"]["turns"][0]["actions"][0]["text"]
        == "hi"
    )
    assert agent.load_script(tmp_path / "s.json") == {"turns": [{"actions": []}]}


def test_prompt_counter_is_per_role_and_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRIPTED_AGENT_STATE_DIR", str(tmp_path / "state"))
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert [agent.next_prompt_index("coder", a) for _ in range(3)] == [0, 1, 2]
    assert agent.next_prompt_index("reviewer", a) == 0
    assert agent.next_prompt_index("coder", b) == 0
