"""A comparison of arms on the tasks they share: per-arm estimates, paired differences
against a baseline, per-task outcomes, cost and time. `compare_arms` builds it; the
`Comparison` model is what `benchflow compare --format json` writes, and what the
table, markdown and HTML reports and the viewer's comparison page render.

Units: a task's score is the mean over its counted attempts (see `TrialRecord.score`
for which count); an arm's pass rate and mean reward are means of task scores on the
shared tasks, each task weighing the same (so the pass rate is the unbiased pass@1).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from pydantic import Field

from benchflow._version import package_version
from benchflow._models import StrictModel
from benchflow.errors import ConfigError
from benchflow.job.models import pass_at_k_curve
from benchflow.study import stats
from benchflow.study.arms import Arm, ArmSet
from benchflow.study.methods import methods_paragraph
from benchflow.study.record import ArmRecord
from benchflow.study.trials import ROLES_TOTAL, ErrorPolicy, TrialRecord, models_used

Verdict = Literal["won", "lost", "tied"]
_TIE = 1e-9


class Interval(StrictModel):
    """A point estimate and its confidence interval (None: not computable)."""

    value: float | None = None
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, estimate: stats.Estimate) -> Interval:
        return cls(value=estimate.value, low=estimate.low, high=estimate.high)

    @property
    def excludes_zero(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


class RoleCost(StrictModel):
    """One role's usage over an arm's trials, summed from the results' `roles.<name>`
    (`(all roles)`: the totals of results written without `roles`)."""

    role: str
    agents: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list, description="the models the role used")
    trials: int = Field(default=0, description="trials the role took part in")
    tokens_reported: int = Field(default=0, description="of those, trials whose role tokens "
                                 "are known")
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None
    n_prompts: int = 0
    n_tool_calls: int = 0
    usage_sources: list[str] = Field(default_factory=list, description="acp: the agent "
                                     "reported the tokens; model_calls: benchflow counted them")

    @property
    def tokens_per_trial(self) -> tuple[float, float] | None:
        if not self.tokens_reported:
            return None
        return (self.input_tokens / self.tokens_reported,
                self.output_tokens / self.tokens_reported)


class TaskCell(StrictModel):
    """One arm on one task."""

    trials: int = 0
    counted: int = 0
    passes: int = 0
    mean_reward: float | None = None
    errors: int = 0
    rels: list[str] = Field(default_factory=list, description="trial folders, by attempt")

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.counted if self.counted else None


class ArmStats(StrictModel):
    """One arm on the shared tasks."""

    name: str
    source: str
    job: str
    agent: str | None = None
    running: bool = False
    tasks: int = Field(default=0, description="shared tasks with at least one counted trial")
    trials: int = 0
    counted: int = 0
    planned: int | None = None
    missing: int = 0
    attempts: int = Field(default=0, description="most attempts of one task")
    pass_rate: Interval = Field(default_factory=Interval)
    mean_reward: Interval = Field(default_factory=Interval)
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    outcomes: dict[str, int] = Field(default_factory=dict)
    errors: dict[str, int] = Field(default_factory=dict, description="error type -> trials")
    cost: float | None = None
    cost_per_trial: float | None = None
    mean_trial_sec: float | None = None
    total_trial_sec: float | None = None
    mean_agent_sec: float | None = None
    tokens_reported: int = Field(default=0, description="trials whose tokens are known")
    input_tokens: int = 0
    output_tokens: int = 0
    roles: list[RoleCost] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)

    @property
    def tokens_per_trial(self) -> tuple[float, float] | None:
        """(input, output) tokens per trial, over the trials that report them."""
        if not self.tokens_reported:
            return None
        return (self.input_tokens / self.tokens_reported,
                self.output_tokens / self.tokens_reported)

    @property
    def infra_errors(self) -> int:
        return self.outcomes.get("infra_error", 0)

    @property
    def agent_errors(self) -> int:
        return self.outcomes.get("agent_error", 0)


class McNemar(StrictModel):
    """Trials paired by task and attempt, both counted."""

    arm_only: int = 0
    baseline_only: int = 0
    both: int = 0
    neither: int = 0
    p_value: float | None = None


class Permutation(StrictModel):
    tasks: int = 0
    p_value: float | None = None
    exact: bool = True


class PairStats(StrictModel):
    """One arm against the baseline, paired by task."""

    arm: str
    baseline: str
    tasks: int = 0
    pass_rate_diff: Interval = Field(default_factory=Interval)
    reward_diff: Interval = Field(default_factory=Interval)
    mcnemar: McNemar = Field(default_factory=McNemar)
    permutation: Permutation = Field(default_factory=Permutation)
    won: list[str] = Field(default_factory=list)
    lost: list[str] = Field(default_factory=list)
    tied: list[str] = Field(default_factory=list)


class TaskRow(StrictModel):
    task: str
    cells: dict[str, TaskCell] = Field(default_factory=dict)
    verdicts: dict[str, Verdict] = Field(default_factory=dict, description="arm -> against "
                                         "the baseline, by mean reward")


class CompareSettings(StrictModel):
    confidence: float = stats.DEFAULT_CONFIDENCE
    resamples: int = stats.DEFAULT_RESAMPLES
    seed: int = 0
    errors: ErrorPolicy = "exclude"


class Comparison(StrictModel):
    """Everything a comparison report shows (`benchflow compare --format json`)."""

    schema_version: Literal[1] = 1
    study: str | None = None
    baseline: str
    settings: CompareSettings
    arms: list[ArmStats]
    pairs: list[PairStats]
    tasks: list[TaskRow]
    not_shared: dict[str, list[str]] = Field(default_factory=dict, description="arm -> its "
                                             "tasks that other arms lack (not compared)")
    records: dict[str, ArmRecord] = Field(default_factory=dict)
    benchflow_version: str = Field(default_factory=package_version)
    methods: str = ""

    def arm(self, name: str) -> ArmStats:
        return next(a for a in self.arms if a.name == name)


# -- building -----------------------------------------------------------------------------


def _by_task(trials: list[TrialRecord], tasks: set[str]) -> dict[str, list[TrialRecord]]:
    groups: dict[str, list[TrialRecord]] = defaultdict(list)
    for trial in trials:
        if trial.task_key in tasks:
            groups[trial.task_key].append(trial)
    return {k: sorted(v, key=lambda t: t.attempt) for k, v in groups.items()}


def _cell(trials: list[TrialRecord], policy: ErrorPolicy) -> TaskCell:
    scores = [s for s in (t.score(policy) for t in trials) if s is not None]
    rewards = [reward for reward, _ in scores]
    return TaskCell(trials=len(trials), counted=len(scores), passes=sum(p for _, p in scores),
                    mean_reward=sum(rewards) / len(rewards) if rewards else None,
                    errors=sum(t.error is not None for t in trials),
                    rels=[t.rel for t in trials])


def _roles(trials: list[TrialRecord]) -> list[RoleCost]:
    roles: dict[str, RoleCost] = {}
    for trial in trials:
        for name, usage in trial.role_usage().items():
            cost = roles.setdefault(name, RoleCost(role=name))
            cost.trials += 1
            if usage.agent and usage.agent not in cost.agents:
                cost.agents.append(usage.agent)
            if usage.model and usage.model not in cost.models:
                cost.models.append(usage.model)
            if usage.usage_source and usage.usage_source not in cost.usage_sources:
                cost.usage_sources.append(usage.usage_source)
            cost.n_prompts += usage.n_prompts
            cost.n_tool_calls += usage.n_tool_calls
            if usage.tokens is not None:
                cost.tokens_reported += 1
                cost.input_tokens += usage.tokens.input
                cost.output_tokens += usage.tokens.output
                cost.cached_tokens += usage.tokens.cached
            if usage.cost is not None:
                cost.cost = round((cost.cost or 0.0) + usage.cost, 12)
    if not roles:  # no trial reported usage: one row that says so
        agents = list(dict.fromkeys(t.agent_name for t in trials))
        return [RoleCost(role=ROLES_TOTAL, agents=agents, trials=len(trials))]
    return list(roles.values())


def _trial_tokens(trial: TrialRecord) -> tuple[int, int] | None:
    """A trial's (input, output) tokens: its totals, else the sum over its roles."""
    if trial.tokens is not None:
        return trial.tokens.input, trial.tokens.output
    known = [r.tokens for r in trial.roles.values() if r.tokens is not None]
    if not known:
        return None
    return sum(t.input for t in known), sum(t.output for t in known)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _arm_stats(arm: Arm, groups: dict[str, list[TrialRecord]], cells: dict[str, TaskCell],
               settings: CompareSettings) -> ArmStats:
    trials = [t for group in groups.values() for t in group]
    scored = [c for c in cells.values() if c.counted]
    rng = {"confidence": settings.confidence, "n_resamples": settings.resamples}
    outcomes: dict[str, int] = defaultdict(int)
    errors: dict[str, int] = defaultdict(int)
    for trial in trials:
        outcomes[trial.outcome] += 1
        if trial.error is not None:
            errors[trial.error.type] += 1
    curves: dict[int, list[float]] = defaultdict(list)
    for cell in scored:
        for k, value in enumerate(pass_at_k_curve(cell.counted, cell.passes), start=1):
            curves[k].append(value)
    costs = [t.cost for t in trials if t.cost is not None]
    times = [t.durations.total_sec for t in trials if t.durations.total_sec is not None]
    agent_times = [t.durations.agent_execution_sec for t in trials
                   if t.durations.agent_execution_sec is not None]
    token_counts = [n for n in map(_trial_tokens, trials) if n is not None]
    return ArmStats(
        name=arm.name, source=arm.source, job=arm.job_dir.name, agent=arm.agent,
        running=arm.running, tasks=len(scored), trials=len(trials),
        counted=sum(c.counted for c in scored), planned=arm.planned, missing=arm.missing,
        attempts=max((len(g) for g in groups.values()), default=0),
        pass_rate=Interval.of(stats.bootstrap_mean(
            [c.pass_rate for c in scored if c.pass_rate is not None],
            rng=stats.seeded(settings.seed, "pass_rate", arm.name), **rng)),
        mean_reward=Interval.of(stats.bootstrap_mean(
            [c.mean_reward for c in scored if c.mean_reward is not None],
            rng=stats.seeded(settings.seed, "mean_reward", arm.name), **rng)),
        pass_at_k={str(k): sum(v) / len(v) for k, v in sorted(curves.items())},
        outcomes=dict(outcomes), errors=dict(sorted(errors.items())),
        cost=round(sum(costs), 12) if costs else None, cost_per_trial=_mean(costs),
        mean_trial_sec=_mean(times), total_trial_sec=round(sum(times), 3) if times else None,
        mean_agent_sec=_mean(agent_times), tokens_reported=len(token_counts),
        input_tokens=sum(n[0] for n in token_counts),
        output_tokens=sum(n[1] for n in token_counts),
        roles=_roles(trials), models=models_used(trials),
    )


def _pair(arm: str, baseline: str, groups: dict[str, dict[str, list[TrialRecord]]],
          cells: dict[str, dict[str, TaskCell]], settings: CompareSettings) -> PairStats:
    tasks = sorted(t for t in cells[arm] if cells[arm][t].counted and cells[baseline][t].counted)
    pass_diffs, reward_diffs = [], []
    won, lost, tied = [], [], []
    mcnemar = McNemar()
    for task in tasks:
        a, b = cells[arm][task], cells[baseline][task]
        assert a.pass_rate is not None and b.pass_rate is not None
        pass_diffs.append(a.pass_rate - b.pass_rate)
        delta = (a.mean_reward or 0.0) - (b.mean_reward or 0.0)
        reward_diffs.append(delta)
        (won if delta > _TIE else lost if delta < -_TIE else tied).append(task)
        by_attempt = {t.attempt: t.score(settings.errors) for t in groups[baseline][task]}
        for trial in groups[arm][task]:
            mine, theirs = trial.score(settings.errors), by_attempt.get(trial.attempt)
            if mine is None or theirs is None:
                continue
            if mine[1] and theirs[1]:
                mcnemar.both += 1
            elif mine[1]:
                mcnemar.arm_only += 1
            elif theirs[1]:
                mcnemar.baseline_only += 1
            else:
                mcnemar.neither += 1
    mcnemar.p_value = stats.mcnemar_exact(mcnemar.arm_only, mcnemar.baseline_only).p_value
    options = {"confidence": settings.confidence, "n_resamples": settings.resamples}
    permutation = stats.paired_permutation(
        reward_diffs, rng=stats.seeded(settings.seed, "permutation", arm, baseline),
        n_resamples=settings.resamples)
    return PairStats(
        arm=arm, baseline=baseline, tasks=len(tasks),
        pass_rate_diff=Interval.of(stats.bootstrap_mean(
            pass_diffs, rng=stats.seeded(settings.seed, "pass_diff", arm, baseline), **options)),
        reward_diff=Interval.of(stats.bootstrap_mean(
            reward_diffs, rng=stats.seeded(settings.seed, "reward_diff", arm, baseline),
            **options)),
        mcnemar=mcnemar,
        permutation=Permutation(tasks=permutation.n, p_value=permutation.p_value,
                                exact=permutation.exact),
        won=won, lost=lost, tied=tied,
    )


def _shared_tasks(arms: list[Arm]) -> tuple[set[str], dict[str, list[str]]]:
    """The tasks every arm has a result for, and each arm's others.

    Raises:
        ConfigError: an arm has no results, or the arms share no task.
    """
    task_sets = {}
    for arm in arms:
        if not arm.trials:
            raise ConfigError(f"{arm.source}: arm {arm.name!r} has no trial results yet")
        task_sets[arm.name] = {t.task_key for t in arm.trials}
    shared = set.intersection(*task_sets.values())
    if not shared:
        listed = "; ".join(f"{name}: {', '.join(sorted(tasks)[:3])}"
                           f"{' ...' if len(tasks) > 3 else ''}"
                           for name, tasks in task_sets.items())
        raise ConfigError(f"the arms have no task in common ({listed}): compare runs of the "
                          "same tasks")
    others = {name: sorted(tasks - shared) for name, tasks in task_sets.items()
              if tasks - shared}
    return shared, others


def compare_arms(arm_set: ArmSet, *, baseline: str | None = None,
                 settings: CompareSettings | None = None) -> Comparison:
    """Compare the arms on the tasks they share.

    Raises:
        ConfigError: fewer than two arms, an unknown baseline, an arm without results, no
            task in common.
    """
    settings = settings or CompareSettings()
    arms = arm_set.arms
    if len(arms) < 2:
        raise ConfigError("compare needs two or more arms: give two job folders, a job with "
                          "two agents, or a study folder")
    names = [a.name for a in arms]
    baseline = baseline or arm_set.baseline
    if baseline not in names:
        raise ConfigError(f"--baseline {baseline!r}: no such arm (arms: {', '.join(names)})")
    shared, others = _shared_tasks(arms)
    groups = {arm.name: _by_task(arm.trials, shared) for arm in arms}
    cells = {name: {task: _cell(trials, settings.errors) for task, trials in g.items()}
             for name, g in groups.items()}
    ordered = [baseline, *(n for n in names if n != baseline)]
    by_name = {a.name: a for a in arms}
    arm_stats = [_arm_stats(by_name[n], groups[n], cells[n], settings) for n in ordered]
    pairs = [_pair(n, baseline, groups, cells, settings) for n in ordered[1:]]
    verdicts: dict[str, dict[str, Verdict]] = defaultdict(dict)
    for pair in pairs:
        for verdict, tasks in (("won", pair.won), ("lost", pair.lost), ("tied", pair.tied)):
            for task in tasks:
                verdicts[task][pair.arm] = verdict  # type: ignore[assignment]
    rows = [TaskRow(task=task, cells={n: cells[n][task] for n in ordered},
                    verdicts=verdicts.get(task, {})) for task in sorted(shared)]
    records = {a.name: a.record for a in arms if a.record is not None}
    comparison = Comparison(
        study=arm_set.study.name if arm_set.study else None, baseline=baseline,
        settings=settings, arms=arm_stats, pairs=pairs, tasks=rows, not_shared=others,
        records=records)
    comparison.methods = methods_paragraph(comparison, arm_set.study)
    return comparison


__all__ = ["ArmStats", "CompareSettings", "Comparison", "Interval", "McNemar", "PairStats",
           "Permutation", "RoleCost", "TaskCell", "TaskRow", "compare_arms"]
