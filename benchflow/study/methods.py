"""The methods paragraph of a comparison: what was compared and how, in words a paper can
cite (numbers of tasks and attempts, estimators, intervals, tests, error handling, the
agents' versions and the benchflow version)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchflow.study.compare import Comparison
    from benchflow.study.record import StudyRecord


def _list(items: list[str]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + f", and {items[-1]}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _role(name: str, agent: str, version: str | None, models: list[str]) -> str:
    return (f"{name} = {agent}" + (f" {version}" if version else "")
            + (f" ({', '.join(models)})" if models else ""))


def _agents(comparison: Comparison) -> str:
    """Who played each role of each arm: the agent (with its installed version, from the
    study record) and the models the results' `roles` say were used."""
    from benchflow.study.trials import ROLES_TOTAL

    parts = []
    for arm in comparison.arms:
        record = comparison.records.get(arm.name)
        used = {r.role: r for r in arm.roles if r.role != ROLES_TOTAL}
        if record is not None and record.roles:
            versions = {a.name: a.version for a in record.agents}
            roles = []
            for name, plan in record.roles.items():
                models = plan.models_used or (used[name].models if name in used else [])
                roles.append(_role(name, plan.agent, versions.get(plan.agent),
                                   models or ([plan.model] if plan.model else [])))
            parts.append(f"{arm.name}: {'; '.join(roles)}")
        elif used:
            roles = [_role(name, ", ".join(r.agents) or "?", None, r.models)
                     for name, r in used.items()]
            parts.append(f"{arm.name}: {'; '.join(roles)}")
        elif arm.models:
            parts.append(f"{arm.name}: {arm.agent or arm.job} ({', '.join(arm.models)})")
        else:
            parts.append(f"{arm.name}: {arm.agent or arm.job}")
    return "; ".join(parts)


def _commits(comparison: Comparison) -> str:
    commits = {task.git_commit for record in comparison.records.values()
               for task in record.tasks.values() if task.git_commit}
    if not commits:
        return ""
    if len(commits) == 1:
        return f" Tasks were at git commit {next(iter(commits))[:12]}."
    return f" Tasks came from {len(commits)} git commits (listed in study.json)."


def methods_paragraph(comparison: Comparison, study: StudyRecord | None = None) -> str:
    """One paragraph describing the comparison's design and analysis."""
    s = comparison.settings
    arms = comparison.arms
    n_tasks = len(comparison.tasks)
    k = max((a.attempts for a in arms), default=0)
    trials = sum(a.trials for a in arms)
    level = f"{s.confidence:.0%}"
    source = f" in study {study.name}" if study is not None else ""
    text = [
        f"We compared {_plural(len(arms), 'configuration')} "
        f"({_list([a.name for a in arms])}; baseline {comparison.baseline}){source} on the "
        f"{_plural(n_tasks, 'task')} they all ran, with up to {_plural(k, 'attempt')} per task "
        f"and configuration ({_plural(trials, 'trial')} in all).",
        "A trial passed when its reward reached 1.0. A configuration's pass rate is the mean "
        "over tasks of each task's fraction of passing attempts (the unbiased pass@1), and "
        "pass@k uses the unbiased estimator 1 - C(n-c, k)/C(n, k) (Chen et al., 2021).",
        f"{level} confidence intervals are bias-corrected and accelerated (BCa) bootstrap "
        f"intervals over tasks, each task's attempts resampled together ({s.resamples:,} "
        f"resamples, seed {s.seed}; scipy.stats.bootstrap).",
        "Differences against the baseline are paired by task: pass/fail with McNemar's exact "
        "test on trials paired by task and attempt, and mean reward with a two-sided paired "
        "permutation test of the per-task differences"
        + (" (exact over all sign flips)." if all(p.permutation.exact
                                                   for p in comparison.pairs)
           else f" ({s.resamples:,} random sign flips)."),
    ]
    infra = sum(a.infra_errors for a in arms)
    agent = sum(a.agent_errors for a in arms)
    uncounted = sum(a.outcomes.get("cancelled", 0) + a.outcomes.get("not_scored", 0)
                    for a in arms)
    handling = ("were excluded from rates and tests" if s.errors == "exclude"
                else "were scored as failures")
    text.append(
        f"Trials that ended in an agent error (a crash, a timeout or tampering with the "
        f"verifier; {agent} in all) count as failures with reward 0; "
        f"{_plural(infra, 'trial')} that ended in an infrastructure error "
        f"{handling if infra != 1 else handling.replace('were', 'was')} "
        f"(--errors {s.errors})"
        + (f", and {_plural(uncounted, 'cancelled or unscored trial')} "
           f"{'was' if uncounted == 1 else 'were'} not counted."
           if uncounted else "."))
    text.append(f"Agents: {_agents(comparison)}.")
    version = study.benchflow_version if study is not None else comparison.benchflow_version
    python = f" on Python {study.python_version}" if study is not None else ""
    text.append(f"Runs used benchflow {version}{python}.{_commits(comparison)}".rstrip())
    return " ".join(text)


__all__ = ["methods_paragraph"]
