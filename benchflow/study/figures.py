"""The figures of a comparison, drawn with matplotlib (the `study` extra) as PNG images:
pass rate with its confidence interval per arm, the per-task matrix of mean rewards
with wins and losses against the baseline, cost (or tokens) against reward per arm,
and tokens per role per arm.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchflow.errors import ConfigError
from benchflow.study.compare import Comparison

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
            "#8c8c8c"]


@dataclass(frozen=True)
class Chart:
    """One figure: an id, a title, a caption and the PNG bytes."""

    id: str
    title: str
    caption: str
    png: bytes


def _figure(width: float, height: float) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError("figures need matplotlib: pip install 'benchflow[study]'") from None
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _png(figure: Figure) -> bytes:
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
    return out.getvalue()


def _colour(index: int) -> str:
    return _COLOURS[index % len(_COLOURS)]


def _whiskers(value: float | None, low: float | None, high: float | None
              ) -> tuple[float, float]:
    """Error-bar lengths below and above `value` (0 without an interval)."""
    if value is None or low is None or high is None:
        return 0.0, 0.0
    return max(0.0, value - low), max(0.0, high - value)


def pass_rate_chart(comparison: Comparison) -> Chart:
    arms = comparison.arms[::-1]  # the baseline on top
    figure = _figure(6.4, 0.6 + 0.45 * len(arms))
    ax = figure.add_subplot()
    values = [a.pass_rate.value or 0.0 for a in arms]
    whiskers = [_whiskers(a.pass_rate.value, a.pass_rate.low, a.pass_rate.high) for a in arms]
    ax.barh([a.name for a in arms], values, xerr=list(zip(*whiskers, strict=True)), capsize=4,
            color=[_colour(len(arms) - 1 - i) for i in range(len(arms))])
    ax.set_xlim(0, 1)
    level = f"{comparison.settings.confidence:.0%}"
    ax.set_xlabel(f"pass rate ({level} CI)")
    for y, value in enumerate(values):
        ax.text(min(value + 0.01, 0.9), y, f"{value:.2f}", va="center", fontsize=8)
    return Chart("pass-rate", "Pass rate per arm", f"Bars: pass rate (unbiased pass@1); "
                 f"whiskers: {level} bootstrap CI over tasks.", _png(figure))


def task_matrix_chart(comparison: Comparison) -> Chart:
    """Tasks x arms, coloured by mean reward, each cell labelled with its value and, for
    arms other than the baseline, won / lost / tied."""
    import numpy as np
    from matplotlib import colormaps

    arms = [a.name for a in comparison.arms]
    tasks = [row.task for row in comparison.tasks]
    values = np.array([[np.nan if row.cells[a].mean_reward is None else row.cells[a].mean_reward
                        for a in arms] for row in comparison.tasks], dtype=float)
    figure = _figure(max(4.0, 1.2 + 1.3 * len(arms)), 0.9 + 0.32 * len(tasks))
    ax = figure.add_subplot()
    image = ax.imshow(values, cmap=colormaps["RdYlGn"], vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(arms)), arms, rotation=20, ha="right", fontsize=8)
    ax.set_yticks(range(len(tasks)), tasks, fontsize=8)
    for y, row in enumerate(comparison.tasks):
        for x, arm in enumerate(arms):
            value = row.cells[arm].mean_reward
            verdict = row.verdicts.get(arm)
            label = ("-" if value is None else f"{value:.2f}") + (f"\n{verdict}" if verdict
                                                                 else "")
            ax.text(x, y, label, ha="center", va="center", fontsize=7)
    figure.colorbar(image, ax=ax, label="mean reward", shrink=0.8)
    return Chart("task-matrix", "Per-task wins and losses",
                 f"Mean reward per task and arm; won/lost/tied against {comparison.baseline}.",
                 _png(figure))


def cost_reward_chart(comparison: Comparison) -> Chart:
    """Mean reward (with its CI) against cost per trial; tokens per trial when no arm
    reports a cost."""
    use_cost = any(a.cost_per_trial is not None for a in comparison.arms)
    figure = _figure(6.4, 3.6)
    ax = figure.add_subplot()
    for index, arm in enumerate(comparison.arms):
        if use_cost:
            x = arm.cost_per_trial
        else:
            per_trial = arm.tokens_per_trial
            x = None if per_trial is None else per_trial[0] + per_trial[1]
        y = arm.mean_reward
        if y.value is None:
            continue
        x = x or 0.0
        below, above = _whiskers(y.value, y.low, y.high)
        ax.errorbar([x], [y.value], yerr=[[below], [above]], fmt="o", capsize=4,
                    color=_colour(index), label=arm.name)
        ax.annotate(arm.name, (x, y.value), textcoords="offset points", xytext=(6, 4),
                    fontsize=8)
    ax.set_xlabel("cost per trial (USD)" if use_cost else "tokens per trial (in + out)")
    ax.set_ylabel("mean reward")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    what = "cost" if use_cost else "tokens (no arm reports a cost)"
    return Chart("cost-reward", "Cost against reward",
                 f"Mean reward ({comparison.settings.confidence:.0%} CI) against {what} per "
                 "trial.", _png(figure))


def role_token_shares(comparison: Comparison) -> dict[str, dict[str, float]]:
    """Per role, per arm: the role's tokens (in + out) per trial of the arm, so that an
    arm's roles add up to its tokens per trial (a role in only some trials counts 0 in the
    others)."""
    shares: dict[str, dict[str, float]] = {}
    for arm in comparison.arms:
        for role in arm.roles:
            total = role.input_tokens + role.output_tokens
            if arm.tokens_reported and role.tokens_reported:
                shares.setdefault(role.role, {})[arm.name] = total / arm.tokens_reported
    return shares


def _role_label(comparison: Comparison, role: str) -> str:
    """`coder (claude)`: the role and the agents that played it, in any arm."""
    agents = list(dict.fromkeys(a for arm in comparison.arms for r in arm.roles
                                if r.role == role for a in r.agents))
    return f"{role} ({', '.join(agents)})" if agents and len(agents) <= 3 else role


def role_tokens_chart(comparison: Comparison) -> Chart:
    """Stacked bars: tokens per trial (in + out) of each role, per arm."""
    arms = comparison.arms
    shares = role_token_shares(comparison)
    figure = _figure(6.4, 0.9 + 0.45 * len(arms))
    ax = figure.add_subplot()
    left = [0.0] * len(arms)
    for index, (role, by_arm) in enumerate(shares.items()):
        widths = [by_arm.get(a.name, 0.0) for a in arms]
        ax.barh([a.name for a in arms], widths, left=left, color=_colour(index),
                label=_role_label(comparison, role))
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("tokens per trial (in + out)")
    if shares:
        ax.legend(fontsize=8, loc="lower right")
    return Chart("role-tokens", "Tokens per role",
                 "Tokens per trial of each role (from each result's roles; a result "
                 "without them counts as one role, '(all roles)').", _png(figure))


def comparison_charts(comparison: Comparison) -> list[Chart]:
    """Every figure of the report.

    Raises:
        ConfigError: matplotlib is not installed (the `study` extra).
    """
    return [pass_rate_chart(comparison), task_matrix_chart(comparison),
            cost_reward_chart(comparison), role_tokens_chart(comparison)]


__all__ = ["Chart", "comparison_charts", "cost_reward_chart", "pass_rate_chart",
           "role_token_shares", "role_tokens_chart", "task_matrix_chart"]
