"""`benchflow study`'s library side on fake sandboxes: the folder, the record, resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchflow.errors import ConfigError
from benchflow.job.loop import run_job_loop
from benchflow.study.config import load_study, parse_study
from benchflow.study.record import read_record
from benchflow.study.runner import (
    finish_record,
    prepare_study,
    run_study,
    split_concurrency,
    start_study,
)


def study_file(tmp_path: Path, dataset: Path, **extra: object) -> Path:
    data = {"name": "s", "studies_dir": str(tmp_path / "studies"), "k": 2,
            "environment": {"type": "fake"}, "n_concurrent_trials": 3,
            "datasets": [{"path": str(dataset), "tasks": ["alpha", "bravo"]}],
            "arms": [{"name": "nop", "agent": "nop"},
                     {"name": "oracle", "agent": {"name": "oracle"}, "harden": False}],
            **extra}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(path: Path, **kw: object):
    study = prepare_study(path, **kw)
    start_study(study)
    run_job_loop(lambda: run_study(study, lambda arm: None))
    run_job_loop(lambda: finish_record(study))
    return study


def test_a_study_runs_each_arm_as_a_job_in_one_folder(tmp_path, dataset, behaviour):
    study = run(study_file(tmp_path, dataset))
    folder = tmp_path / "studies" / "s"
    assert sorted(p.name for p in folder.iterdir()) == ["s.nop", "s.oracle", "study.json",
                                                        "study.yaml"]
    assert (folder / "study.yaml").read_bytes() == (tmp_path / "study.yaml").read_bytes()
    for arm in ("nop", "oracle"):
        trials = sorted(p.parent.name for p in (folder / f"s.{arm}").glob("*/*/*/result.json"))
        assert trials == ["alpha__1", "alpha__2", "bravo__1", "bravo__2"]
    assert [a.prepared.config.n_concurrent_trials for a in study.arms] == [2, 1]
    assert {name: r.total_trials for name, r in study.results.items()} == {"nop": 4,
                                                                          "oracle": 4}
    record = read_record(folder)
    assert (record.name, record.baseline, record.k) == ("s", "nop", 2)
    assert record.tasks == ["bench/alpha", "bench/bravo"]
    assert record.started_at is not None and record.finished_at is not None
    oracle = record.arm("oracle")
    assert oracle is not None and oracle.job == "s.oracle"
    assert oracle.config["harden"] is False and oracle.config["n_attempts"] == 2
    assert [a.name for a in oracle.agents] == ["oracle"] and oracle.agents[0].version
    assert oracle.roles["agent"].agent == "oracle"
    assert oracle.tasks["bench/alpha"].content_sha256


def test_running_it_again_resumes_only_what_has_no_result(tmp_path, dataset, behaviour):
    path = study_file(tmp_path, dataset)
    run(path)
    again = prepare_study(path)
    assert again.resuming and again.to_run == 0 and again.finished == 8
    (tmp_path / "studies/s/s.oracle/oracle/bench/bravo__2/result.json").unlink()
    again = prepare_study(path)
    assert again.to_run == 1
    assert [t.rollout_name for t in again.arms[1].prepared.to_run] == ["oracle/bench/bravo__2"]
    starts = behaviour.starts
    run(path)
    assert behaviour.starts == starts + 1
    from_folder = prepare_study(tmp_path / "studies" / "s")
    assert from_folder.resuming and from_folder.to_run == 0
    assert [a.name for a in from_folder.arms] == ["nop", "oracle"]


@pytest.mark.parametrize(("change", "expected"), [
    ({"k": 3}, "k 2 -> 3"),
    ({"arms": [{"name": "nop", "agent": "nop"}, {"name": "other", "agent": "oracle"}]},
     "arm 'oracle' removed"),
    ({"timeout_multiplier": 2.0}, "arm 'nop': timeout_multiplier changed"),
])
def test_a_changed_study_is_not_resumed(tmp_path, dataset, behaviour, change, expected):
    run(study_file(tmp_path, dataset))
    with pytest.raises(ConfigError, match="cannot resume") as info:
        prepare_study(study_file(tmp_path, dataset, **change))
    assert expected in str(info.value)


@pytest.mark.parametrize(("data", "expected"), [
    ({"arms": [{"name": "a", "agent": "nop"}, {"name": "a", "agent": "oracle"}]},
     "arms[1].name: arm name 'a' is given twice"),
    ({"arms": [{"name": "a", "agent": "nop"}]}, "arms: List should have at least 2 items"),
    ({"arms": [{"name": "a", "agent": "nop", "datasets": []}, {"name": "b", "agent": "nop"}]},
     "arms[0].datasets: set by the study"),
    ({"agents": [{"name": "nop"}]}, "a study's agents are its arms"),
    ({"baseline": "zzz"}, "baseline 'zzz' is not an arm"),
    ({"arms": [{"name": "a"}, {"name": "b", "agent": "nop"}]}, "an arm needs `name` and `agent`"),
])
def test_bad_study_files(tmp_path, data, expected):
    base = {"name": "s", "datasets": [{"path": "x"}],
            "arms": [{"name": "a", "agent": "nop"}, {"name": "b", "agent": "oracle"}]}
    with pytest.raises(ConfigError) as info:
        parse_study({**base, **data}, "study.yaml")
    assert expected in str(info.value) and str(info.value).startswith("study.yaml")


def test_an_arm_key_the_job_file_does_not_know_names_the_arm(tmp_path, dataset, behaviour):
    path = study_file(tmp_path, dataset, arms=[
        {"name": "a", "agent": "nop"}, {"name": "b", "agent": "oracle", "hardne": True}])
    with pytest.raises(ConfigError, match=r"arms\[1\] \(b\): invalid arm: hardne: unknown"):
        prepare_study(path)


def test_arms_become_job_files(tmp_path, dataset):
    spec = load_study(study_file(tmp_path, dataset, arms=[
        {"name": "alone", "agent": "scripted:./coder.yaml"},
        {"name": "pair", "agent": {"name": "scripted", "model": "./pair.yaml"},
         "skills": ["./skills"]}], skills=["./shared"], baseline="pair"))
    assert spec.baseline_arm == "pair" and spec.job_name("alone") == "s.alone"
    alone, pair = (spec.job_data(a) for a in spec.arms)
    assert alone["agents"] == [{"name": "scripted", "model": "./coder.yaml"}]
    assert alone["skills"] == ["./shared"] and pair["skills"] == ["./skills"]
    assert alone["n_attempts"] == 2 and alone["name"] == "s.alone"


@pytest.mark.parametrize(("total", "arms", "expected"), [
    (4, 2, [2, 2]), (5, 2, [3, 2]), (4, 3, [2, 1, 1]), (2, 3, [1, 1, 1])])
def test_concurrency_is_shared_by_the_arms(total, arms, expected):
    assert split_concurrency(total, arms) == expected


@pytest.mark.parametrize(("arms", "expected"), [
    ([{"name": "a", "agent": "nop"}, {"name": "a", "agent": "oracle"}], "given twice"),
    ([{"name": "a", "agent": "nop"}, {"name": "b", "agent": "no-such-agent"}], "no-such-agent"),
])
def test_the_study_command_exits_2_on_bad_input(tmp_path, dataset, arms, expected):
    from typer.testing import CliRunner

    from benchflow.cli.main import build_app

    path = study_file(tmp_path, dataset, arms=arms, environment={"type": "docker"})
    result = CliRunner().invoke(build_app("study"), ["study", str(path)])
    assert result.exit_code == 2, result.output
    assert expected in result.stderr and "Traceback" not in result.output
    assert result.stderr.startswith("error:")
    assert not (tmp_path / "studies").exists()


def test_an_arm_can_bring_a_simulated_user_and_each_trial_gets_its_own(tmp_path, dataset,
                                                                       behaviour):
    from benchflow.users import LLMUser

    user = {"type": "llm", "persona": "a busy maintainer", "model": "persona", "max_rounds": 2}
    study = prepare_study(study_file(tmp_path, dataset, arms=[
        {"name": "plain", "agent": "oracle"},
        {"name": "with-user", "agent": "oracle", "user": user}]))
    plain, with_user = study.arms
    assert all(t.config.user is None for t in plain.prepared.trials)
    users = [t.config.user for t in with_user.prepared.trials]
    assert all(isinstance(u, LLMUser) and u.persona == "a busy maintainer" for u in users)
    assert len({id(u) for u in users}) == len(users) == 4
    assert study.record.arm("with-user").config["user"] == user
    with pytest.raises(ConfigError, match=r"arms\[1\] \(b\): invalid arm: user: .*persona"):
        prepare_study(study_file(tmp_path, dataset, arms=[
            {"name": "a", "agent": "oracle"}, {"name": "b", "agent": "oracle",
                                               "user": {"type": "llm"}}]))


@pytest.mark.parametrize("terminal", [True, False])
def test_study_progress_counts_each_arm(tmp_path, dataset, behaviour, terminal):
    import io

    from rich.console import Console

    from benchflow.cli.study import StudyProgress
    from benchflow.rollout.events import RolloutEvent, RolloutEventKind
    from benchflow.rollout.result import ErrorInfo, RolloutResult

    study = prepare_study(study_file(tmp_path, dataset))
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=100)

    def end(arm: str, reward: float | None, error: str | None = None) -> RolloutEvent:
        result = RolloutResult(job_name=f"s.{arm}", rollout_name=f"{arm}/bench/alpha__1",
                               task_name="alpha", dataset_name="bench", agent_name=arm,
                               attempt=1, reward=reward,
                               error=ErrorInfo(type=error, message="x") if error else None)
        return RolloutEvent(RolloutEventKind.END, result.rollout_name, result)

    with StudyProgress(console, study) as progress:
        progress.listener("nop")(end("nop", 0.0))
        progress.listener("oracle")(end("oracle", 1.0))
        progress.listener("oracle")(end("oracle", None, "agent_execution_failed"))
        progress.listener("oracle")(RolloutEvent(RolloutEventKind.START, "x"))
    assert (progress.done, progress.passed, progress.errors) == (
        {"nop": 1, "oracle": 2}, {"nop": 0, "oracle": 1}, {"nop": 0, "oracle": 1})
    text = out.getvalue()
    if terminal:
        assert progress.progress is not None
        assert [t.completed for t in progress.progress.tasks] == [1, 2]
    else:
        assert "[oracle 2/4] oracle/bench/alpha__1: error agent_execution_failed" in text


ROLES_TASK = """---
task:
  name: review
agents:
  coder: {}
  reviewer: {}
scenes:
  - name: review-loop
    turns:
      - {role: coder}
      - {role: reviewer}
      - {role: coder, prompt: "Revise after the review."}
---
Write hello.
"""


@pytest.fixture
def roles_dataset(tmp_path: Path) -> Path:
    """`tmp/duo/review`: a task that declares a coder and a reviewer."""
    from tests.unit.job.conftest import write_task

    folder = write_task(tmp_path / "duo", "review")
    (folder / "task.md").write_text(ROLES_TASK)
    return folder.parent


@pytest.mark.parametrize("arm", [
    {"roles": {"coder": "scripted:./c.yaml", "reviewer": "scripted:./r.yaml"}},
    {"roles": ["coder=scripted:./c.yaml", "reviewer = scripted:./r.yaml"]},
    {"agent": {"roles": ["coder=scripted:./c.yaml", "reviewer=scripted:./r.yaml"]}},
    {"agent": {"roles": {"coder": "scripted:./c.yaml", "reviewer": "scripted:./r.yaml"}}},
])
def test_an_arm_assigns_agents_per_role(tmp_path, arm):
    spec = parse_study({"name": "s", "datasets": [{"path": "tasks"}],
                        "arms": [{"name": "a", "agent": "nop"}, {"name": "b", **arm}]})
    assert spec.arms[1].agent == {"roles": {"coder": "scripted:./c.yaml",
                                            "reviewer": "scripted:./r.yaml"}}
    (config,) = spec.job_configs()["b"].agents
    assert config.name == "scripted"
    assert {k: str(v) for k, v in config.assigned().items()} == {
        "coder": "scripted:./c.yaml", "reviewer": "scripted:./r.yaml"}


def test_an_arm_with_roles_and_an_agent_for_the_others(tmp_path):
    spec = parse_study({"name": "s", "datasets": [{"path": "tasks"}], "arms": [
        {"name": "a", "agent": "nop"},
        {"name": "b", "roles": ["reviewer=codex:gpt-5.4"], "agent": "claude:claude-sonnet-4-6"},
        {"name": "c", "roles": {"reviewer": "codex"},
         "agent": {"name": "scripted", "model": "./c.yaml", "scenes": "./scenes.yaml"}}]})
    assert spec.arms[1].agent == {"roles": {"reviewer": "codex:gpt-5.4"}, "agent": "claude",
                                  "model": "claude-sonnet-4-6"}
    assert spec.arms[2].agent == {"roles": {"reviewer": "codex"}, "agent": "scripted",
                                  "model": "./c.yaml", "scenes": "./scenes.yaml"}
    assert spec.job_data(spec.arms[1])["agents"][0]["agent"] == "claude"


@pytest.mark.parametrize(("arm", "expected"), [
    ({"roles": ["coder:claude"]}, "arms[1].roles: 'coder:claude': expected NAME=AGENT[:MODEL]"),
    ({"roles": ["coder=claude", "coder=codex"]}, "arms[1].roles: role 'coder' given twice"),
    ({"roles": {"coder": "claude:"}}, "arms[1].roles.coder: the model after ':' is empty"),
    ({"roles": {"bad role": "claude"}}, "arms[1].roles: 'bad role' is not a role name"),
    ({"roles": {"coder": 3}}, "arms[1].roles.coder: expected AGENT[:MODEL]"),
    ({"roles": []}, "arms[1].roles: empty"),
    ({"roles": "coder=claude"}, "arms[1].roles: expected {role: AGENT[:MODEL]} or a list"),
    ({"roles": {"coder": "claude"}, "agent": {"roles": {"reviewer": "codex"}}},
     "arms[1].agent.roles: the arm sets roles already"),
    ({"roles": {"coder": "claude"}, "agent": {"name": "x", "install": "pip install x"}},
     "arms[1].agent.install: not with the arm's roles"),
    ({"agent": {"roles": ["reviewer"]}}, "arms[1].agent.roles: 'reviewer': expected NAME="),
])
def test_bad_roles_of_an_arm(arm, expected):
    with pytest.raises(ConfigError) as info:
        parse_study({"name": "s", "datasets": [{"path": "x"}],
                     "arms": [{"name": "a", "agent": "nop"}, {"name": "b", **arm}]},
                    "study.yaml")
    assert str(info.value).startswith("study.yaml: " + expected), str(info.value)
    assert "\n" not in str(info.value)


def test_a_roles_arm_plans_each_role_and_the_record_names_what_was_used(
        tmp_path, roles_dataset, behaviour):
    """Roles assigned per arm reach every trial's scenes and study.json; after the run the
    record adds the agents and models the results' `roles` name (the model actually used:
    here the agent's default, which the plan left unset)."""
    from tests.unit.study.study_fixture import result_json, write_trial

    (tmp_path / "c.yaml").write_text("turns: []\n")
    path = study_file(tmp_path, roles_dataset, datasets=[{"path": str(roles_dataset)}], k=1,
                      arms=[{"name": "pair", "roles": {"coder": f"scripted:{tmp_path}/c.yaml",
                                                       "reviewer": "scripted"}},
                            {"name": "same", "roles": [f"coder=scripted:{tmp_path}/c.yaml",
                                                       f"reviewer=scripted:{tmp_path}/c.yaml"]}])
    study = prepare_study(path)
    pair = study.arms[0].prepared
    (trial,) = pair.trials
    (scene,) = trial.config.scenes
    assert [(r.name, r.agent, r.model) for r in scene.roles] == [
        ("coder", "scripted", f"{tmp_path}/c.yaml"), ("reviewer", "scripted", None)]
    record = study.record.arm("pair")
    assert {n: (p.agent, p.model) for n, p in record.roles.items()} == {
        "coder": ("scripted", f"{tmp_path}/c.yaml"), "reviewer": ("scripted", None)}
    assert [(a.name, a.version) for a in record.agents] == [("scripted", "1.0.0")]
    assert pair.config.agents[0].roles == {"coder": f"scripted:{tmp_path}/c.yaml",
                                           "reviewer": "scripted"}

    start_study(study)  # the results, as the rollouts would write them
    for arm in study.arms:
        write_trial(arm.prepared.job_dir, result_json(
            arm.prepared.config.name, "scripted", "review", 1, 1.0, dataset="duo",
            model=None, roles={"coder": {"model": f"{tmp_path}/c.yaml", "input": 10},
                               "reviewer": {"model": "scripted-default", "input": 5}}))
    run_job_loop(lambda: finish_record(study))
    saved = read_record(tmp_path / "studies" / "s").arm("pair")
    assert saved.roles["reviewer"].model is None
    assert saved.roles["reviewer"].models_used == ["scripted-default"]
    assert saved.roles["reviewer"].agents_used == ["scripted"]
    assert saved.roles["coder"].models_used == [f"{tmp_path}/c.yaml"]
    from benchflow.study.arms import load_arms
    from benchflow.study.compare import compare_arms

    methods = compare_arms(load_arms([tmp_path / "studies" / "s"])).methods
    assert (f"pair: coder = scripted 1.0.0 ({tmp_path}/c.yaml); reviewer = scripted 1.0.0 "
            "(scripted-default)") in methods
