"""Comparisons of job and study folders: the numbers, the pairing, errors, roles."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.errors import ConfigError
from benchflow.study.arms import load_arms
from benchflow.study.compare import CompareSettings, compare_arms
from benchflow.study.trials import ROLES_TOTAL

from .study_fixture import binary_arm, result_json, write_job, write_study

CODER = {"coder": {"input": 1000, "output": 200, "cost": 0.01}}
PAIR = {"coder": {"input": 1500, "output": 300, "cost": 0.015},
        "reviewer": {"agent": "codex", "model": "gpt-x", "input": 800, "output": 100,
                     "cost": 0.005}}


def study(tmp_path: Path) -> Path:
    alone = binary_arm("s.alone", "scripted", {"a": [0, 0, 1], "b": [0, 0, 0], "c": [1, 1, 1],
                                               "d": [0, 1, 0]}, roles=CODER)
    pair = binary_arm("s.pair", "scripted", {"a": [1, 1, 1], "b": [0, 1, 0], "c": [1, 1, 1],
                                             "d": [1, 1, 0]}, roles=PAIR)
    return write_study(tmp_path / "s", {"alone": alone, "pair": pair})


def test_arm_estimates_pairing_and_task_verdicts(tmp_path):
    c = compare_arms(load_arms([study(tmp_path)]))
    assert c.study == "s" and c.baseline == "alone"
    alone, pair = c.arms
    assert (alone.name, alone.tasks, alone.counted, alone.attempts) == ("alone", 4, 12, 3)
    # per-task pass fractions 1/3, 0, 1, 1/3 -> mean 5/12; pair: 1, 1/3, 1, 2/3 -> 3/4
    assert alone.pass_rate.value == pytest.approx(5 / 12)
    assert pair.pass_rate.value == pytest.approx(0.75)
    assert alone.pass_rate.low <= alone.pass_rate.value <= alone.pass_rate.high
    # unbiased pass@3 of a task is 1 when it passed at least once
    assert alone.pass_at_k["3"] == pytest.approx(3 / 4) and pair.pass_at_k["3"] == 1.0
    assert alone.pass_at_k["1"] == pytest.approx(alone.pass_rate.value)
    (p,) = c.pairs
    assert (p.arm, p.baseline, p.tasks) == ("pair", "alone", 4)
    assert p.pass_rate_diff.value == pytest.approx(0.75 - 5 / 12)
    # trials paired by attempt: a: 2 arm-only, 1 both; b: 1 arm-only, 2 neither; c: 3 both;
    # d: 1 arm-only, 1 both, 1 neither
    assert (p.mcnemar.arm_only, p.mcnemar.baseline_only, p.mcnemar.both,
            p.mcnemar.neither) == (4, 0, 5, 3)
    assert p.mcnemar.p_value == pytest.approx(2 / 16)
    assert (p.won, p.lost, p.tied) == (["tasks/a", "tasks/b", "tasks/d"], [], ["tasks/c"])
    row = next(r for r in c.tasks if r.task == "tasks/a")
    assert row.verdicts == {"pair": "won"}
    assert row.cells["pair"].rels == [f"scripted/tasks/a__{n}" for n in (1, 2, 3)]
    assert "McNemar" in c.methods and "4 tasks" in c.methods and "s.alone" not in c.methods


def test_tokens_and_cost_per_role_from_the_results_roles(tmp_path):
    c = compare_arms(load_arms([study(tmp_path)]))
    pair = c.arm("pair")
    roles = {r.role: r for r in pair.roles}
    assert set(roles) == {"coder", "reviewer"}
    assert roles["reviewer"].agents == ["codex"] and roles["reviewer"].models == ["gpt-x"]
    assert roles["reviewer"].tokens_per_trial == (800, 100)
    assert roles["coder"].cost == pytest.approx(12 * 0.015)
    assert pair.cost_per_trial == pytest.approx(0.02)
    assert pair.tokens_per_trial == (2300, 400)
    assert set(pair.models) == {"m-1", "gpt-x"}


def test_results_without_roles_count_their_totals_as_one_role(tmp_path):
    trials = [result_json("j", "claude", "t", 1, 1.0)]
    data = trials[0]
    data.update(tokens={"input": 50, "output": 5, "cached": 0}, cost=0.5)
    job_a = write_job(tmp_path / "a", trials)
    job_b = write_job(tmp_path / "b", [result_json("j2", "codex", "t", 1, 0.0)])
    c = compare_arms(load_arms([job_a, job_b]))
    (role,) = c.arm("a").roles
    assert (role.role, role.tokens_per_trial, role.cost) == (ROLES_TOTAL, (50, 5), 0.5)
    (none,) = c.arm("b").roles
    assert none.role == ROLES_TOTAL and none.tokens_per_trial is None and none.cost is None


def test_oracle_against_nop_is_a_difference_of_one_that_excludes_zero(tmp_path):
    tasks = {t: [1, 1, 1] for t in ("a", "b", "c", "d")}
    nop = write_job(tmp_path / "nop", binary_arm("nop", "nop", {t: [0, 0, 0] for t in tasks}))
    oracle = write_job(tmp_path / "oracle", binary_arm("oracle", "oracle", tasks))
    c = compare_arms(load_arms([nop, oracle]), baseline="nop")
    (p,) = c.pairs
    assert p.pass_rate_diff.value == 1.0 and p.pass_rate_diff.excludes_zero
    assert p.reward_diff.low == p.reward_diff.high == 1.0
    assert p.mcnemar.p_value == pytest.approx(2 / 2 ** 12) and p.mcnemar.p_value < 0.05
    assert p.won == [f"tasks/{t}" for t in tasks]


def test_errors_are_kept_apart_and_the_flag_decides_how_they_count(tmp_path):
    base = binary_arm("b", "x", {"t1": [1, 1], "t2": [1, 1]})
    arm = [result_json("a", "y", "t1", 1, 1.0),
           result_json("a", "y", "t1", 2, None, error="environment_start_failed"),
           result_json("a", "y", "t2", 1, None, error="agent_execution_timeout"),
           result_json("a", "y", "t2", 2, 1.0, error="environment_teardown_failed")]
    arms = [write_job(tmp_path / "b", base), write_job(tmp_path / "a", arm)]
    excluded = compare_arms(load_arms(arms))
    a = excluded.arm("a")
    assert a.outcomes == {"pass": 2, "infra_error": 1, "agent_error": 1}
    assert a.errors == {"agent_execution_timeout": 1, "environment_start_failed": 1,
                        "environment_teardown_failed": 1}
    # t1: the infra error is left out (1/1); t2: the timeout is a failure, the teardown
    # error kept its score (1/2)
    assert a.counted == 3 and a.pass_rate.value == pytest.approx((1 + 0.5) / 2)
    failed = compare_arms(load_arms(arms), settings=CompareSettings(errors="fail"))
    assert failed.arm("a").counted == 4
    assert failed.arm("a").pass_rate.value == pytest.approx((0.5 + 0.5) / 2)
    assert "excluded" in excluded.methods and "scored as failures" in failed.methods


def test_a_retryable_agent_error_is_infrastructure(tmp_path):
    base = write_job(tmp_path / "b", binary_arm("b", "x", {"t": [1]}))
    arm = write_job(tmp_path / "a", [result_json("a", "y", "t", 1, None,
                                                 error="agent_execution_failed", retryable=True)])
    c = compare_arms(load_arms([base, arm]))
    assert c.arm("a").outcomes == {"infra_error": 1} and c.arm("a").tasks == 0
    assert c.pairs[0].tasks == 0 and c.pairs[0].pass_rate_diff.value is None


def test_only_shared_tasks_are_compared(tmp_path):
    a = write_job(tmp_path / "a", binary_arm("a", "x", {"t1": [1], "t2": [1], "extra": [1]}))
    b = write_job(tmp_path / "b", binary_arm("b", "y", {"t1": [0], "t2": [1]}))
    c = compare_arms(load_arms([a, b]))
    assert [r.task for r in c.tasks] == ["tasks/t1", "tasks/t2"]
    assert c.not_shared == {"a": ["tasks/extra"]}
    assert c.arm("a").trials == 2


def test_no_shared_task_is_bad_input(tmp_path):
    a = write_job(tmp_path / "a", binary_arm("a", "x", {"t1": [1]}))
    b = write_job(tmp_path / "b", binary_arm("b", "y", {"t2": [1]}))
    with pytest.raises(ConfigError, match="no task in common") as info:
        compare_arms(load_arms([a, b]))
    assert "\n" not in str(info.value)


def test_arms_of_a_job_with_two_agents_and_of_single_agent_jobs(tmp_path):
    both = write_job(tmp_path / "both", binary_arm("both", "oracle", {"t": [1]})
                     + binary_arm("both", "nop", {"t": [0]}))
    arms = load_arms([both])
    assert [a.name for a in arms.arms] == ["nop", "oracle"]
    single = write_job(tmp_path / "single", binary_arm("single", "oracle", {"t": [1]}))
    assert [a.name for a in load_arms([single, both]).arms] == ["single", "nop", "oracle"]


@pytest.mark.parametrize("case", ["missing", "twice", "not-a-job", "one-arm", "baseline"])
def test_bad_inputs_are_one_line_config_errors(tmp_path, case):
    job = write_job(tmp_path / "job", binary_arm("job", "x", {"t": [1]}))
    other = write_job(tmp_path / "other", binary_arm("other", "x", {"t": [1]}))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError) as info:
        if case == "missing":
            load_arms([job, tmp_path / "nope"])
        elif case == "twice":
            load_arms([job, job])
        elif case == "not-a-job":
            load_arms([tmp_path / "empty"])
        elif case == "one-arm":
            compare_arms(load_arms([job]))
        else:
            compare_arms(load_arms([job, other]), baseline="nobody")
    message = str(info.value)
    assert "\n" not in message
    assert {"missing": "no such job or study folder", "twice": "given twice",
            "not-a-job": "neither a job folder", "one-arm": "two or more arms",
            "baseline": "no such arm"}[case] in message


def test_a_running_arm_counts_its_missing_trials(tmp_path):
    a = write_job(tmp_path / "a", binary_arm("a", "x", {"t1": [1, 1], "t2": [1]}),
                  finished=False, n_attempts=2)
    b = write_job(tmp_path / "b", binary_arm("b", "y", {"t1": [0, 0], "t2": [0, 0]}))
    c = compare_arms(load_arms([a, b]), baseline="b")
    arm = c.arm("a")
    assert arm.running and arm.planned == 4 and arm.missing == 1


def test_a_comparison_is_reproducible_and_the_seed_matters(tmp_path):
    source = study(tmp_path)
    one = compare_arms(load_arms([source])).model_dump_json()
    two = compare_arms(load_arms([source])).model_dump_json()
    other = compare_arms(load_arms([source]), settings=CompareSettings(seed=1))
    assert one == two
    assert other.arm("alone").pass_rate.value == compare_arms(
        load_arms([source])).arm("alone").pass_rate.value


def test_a_role_in_some_trials_only(tmp_path):
    """Per role: tokens per trial it took part in, its prompts and tool calls, where its
    tokens came from; the arm's tokens per trial come from each trial's totals, and the
    roles' shares of it (the stacked bars) add up to them."""
    from benchflow.study.figures import role_token_shares

    both = {"coder": {"input": 100, "output": 10, "prompts": 2, "tool_calls": 3},
            "reviewer": {"agent": "codex", "model": "gpt-x", "input": 40, "output": 4,
                         "source": "model_calls", "tool_calls": 1}}
    trials = [result_json("j", "claude+codex", "t1", 1, 1.0, roles=both),
              result_json("j", "claude+codex", "t2", 1, 0.0,
                          roles={"coder": {"input": 60, "output": 6}})]
    base = [result_json("k", "claude", t, 1, 0.0, roles={"coder": {"input": 50, "output": 5}})
            for t in ("t1", "t2")]
    c = compare_arms(load_arms([write_job(tmp_path / "k", base), write_job(tmp_path / "j",
                                                                          trials)]))
    arm = c.arm("j")
    roles = {r.role: r for r in arm.roles}
    assert (roles["coder"].trials, roles["coder"].tokens_per_trial) == (2, (80, 8))
    assert (roles["reviewer"].trials, roles["reviewer"].tokens_per_trial) == (1, (40, 4))
    assert (roles["coder"].n_prompts, roles["coder"].n_tool_calls) == (3, 3)
    assert roles["reviewer"].usage_sources == ["model_calls"]
    assert roles["coder"].usage_sources == ["acp"]
    assert arm.tokens_per_trial == (100, 10)  # (140 + 60) / 2, (14 + 6) / 2
    shares = role_token_shares(c)
    assert shares == {"coder": {"k": 55, "j": 88}, "reviewer": {"j": 22}}
    assert shares["coder"]["j"] + shares["reviewer"]["j"] == sum(arm.tokens_per_trial)
