"""The history a forked rollout gives a role (`rollout/replay.py`) and the fork's steps."""

from __future__ import annotations

from pathlib import Path

from benchflow.config import ForkSource, Role, Scene, Turn
from benchflow.rollout.fork import _history_roles, fork_steps
from benchflow.rollout.replay import FOOTER, HEADER, histories, with_history
from benchflow.steps import desugar
from benchflow.trajectory import TrajectoryHeader, TrajectoryWriter


def write(path: Path) -> None:
    w = TrajectoryWriter(path, TrajectoryHeader())
    c = {"scene": "s"}
    w.record("user_message", role="coder", turn=0, session_id="c1", text="Write it.", **c)
    w.record("tool_call", role="coder", turn=0, session_id="c1", tool_call_id="t1",
             title="write a.py", update={"sessionUpdate": "tool_call", "toolCallId": "t1"}, **c)
    w.record("agent_message", role="coder", turn=0, session_id="c1", text="Draft done.",
             update={"sessionUpdate": "agent_message_chunk"}, **c)
    w.record("user_message", role="reviewer", turn=1, session_id="r1", text="Review.", **c)
    w.record("agent_message", role="reviewer", turn=1, session_id="r1", text="LGTM",
             update={"sessionUpdate": "agent_message_chunk"}, **c)
    w.close()


def scene() -> Scene:
    return Scene(name="s", roles=[Role(name="coder", agent="a"), Role(name="reviewer", agent="b")],
                 turns=[Turn(role="coder", prompt="Write it."), Turn(role="reviewer"),
                        Turn(role="coder", prompt="Revise.")])


def test_history_lists_the_roles_earlier_turns_before_the_fork(tmp_path):
    path = tmp_path / "t.jsonl"
    write(path)
    steps = desugar([scene()], "instr")
    wanted = _history_roles(steps, 1)
    assert wanted == [("reviewer", "s", 1), ("coder", "s", 1)]
    found = histories(path, wanted)
    assert list(found) == ["coder"]  # the reviewer had no turn before turn 1
    assert found["coder"] == (f"{HEADER}\n\n## Turn 0\nPrompt: Write it.\n"
                              "Tools you ran: write a.py\nYour final answer: Draft done.")
    assert histories(path, _history_roles(steps, 0)) == {}


def test_fork_steps_start_at_the_fork_with_the_history_on_each_roles_first_step():
    steps = desugar([scene()], "instr")
    fork = ForkSource(rollout="j/r", step=1, snapshot="snap", history={"coder": "H"})
    out = fork_steps(fork, steps)
    assert [(s.role.name, s.turn_index, s.history, s.session_turn) for s in out] == [
        ("reviewer", 1, None, 0), ("coder", 2, "H", 0)]
    assert with_history("H", "Revise.") == f"H\n\n{FOOTER}\n\nRevise."
