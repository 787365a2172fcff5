"""A comparison as tables of text: the one place that decides what a report shows.

`report_tables` gives titled tables of strings; the terminal (`cli/compare.py`, rich),
markdown and HTML reports render the same tables, each column narrow enough that a
table of two or three arms fits in 80 columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchflow.study.compare import Comparison, Interval
from benchflow.study.trials import ROLES_TOTAL

VERDICT_MARK = {"won": "won", "lost": "lost", "tied": "tied"}


@dataclass(frozen=True)
class TextTable:
    """A titled table of strings; `right` holds the indexes of right-aligned columns."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    right: frozenset[int] = field(default_factory=frozenset)
    note: str = ""
    id: str = ""
    """Which table (arms, pairs, costs, roles, tasks, errors): for links and styling."""


def num(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def interval(value: Interval, sign: bool = False) -> str:
    """The interval alone: `0.50–1.00`, or `[-0.10, +0.40]` for a signed difference; `-`
    without one (a single task)."""
    if value.low is None or value.high is None:
        return "-"
    if sign:
        return f"[{num(value.low, sign=True)}, {num(value.high, sign=True)}]"
    return f"{num(value.low)}–{num(value.high)}"


def p_value(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.0001" if value < 0.0001 else f"{value:.4f}" if value < 0.01 else f"{value:.3f}"


def money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 60:
        return f"{value:.1f}s"
    minutes, rest = divmod(int(round(value)), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def tokens(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.1f}k" if value >= 10_000 else f"{value:.0f}"


def _short(text: str, limit: int = 24) -> str:
    """`text`, or its end after an ellipsis when longer than `limit` (a script's path)."""
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def model_label(model: str, limit: int = 18) -> str:
    """A model as a table shows it: a script's file name rather than its path."""
    if "/" in model and model.endswith((".yaml", ".yml", ".json")):
        model = model.rsplit("/", 1)[1]
    return _short(model, limit)


def _k(comparison: Comparison) -> int:
    return max((a.attempts for a in comparison.arms), default=1)


def _arms(comparison: Comparison) -> TextTable:
    k = _k(comparison)
    rows = []
    for arm in comparison.arms:
        name = arm.name + (" *" if arm.name == comparison.baseline else "")
        rows.append([name, str(arm.tasks), str(arm.counted), num(arm.pass_rate.value),
                     interval(arm.pass_rate), num(arm.mean_reward.value),
                     interval(arm.mean_reward), num(arm.pass_at_k.get(str(k)))])
    level = f"{comparison.settings.confidence:.0%} CI"
    return TextTable(
        f"Arms on {len(comparison.tasks)} shared task(s), up to {k} attempt(s) each",
        ["arm", "tasks", "trials", "pass", level, "reward", level, f"pass@{k}"], rows,
        frozenset({1, 2, 3, 5, 7}),
        note="* baseline; pass = pass rate (unbiased pass@1); trials = counted trials",
        id="arms")


def _pairs(comparison: Comparison) -> TextTable:
    rows = []
    for pair in comparison.pairs:
        m = pair.mcnemar
        rows.append([pair.arm, "pass rate", num(pair.pass_rate_diff.value, sign=True),
                     interval(pair.pass_rate_diff, sign=True), p_value(m.p_value),
                     f"McNemar {m.arm_only}:{m.baseline_only}"])
        rows.append([pair.arm, "reward", num(pair.reward_diff.value, sign=True),
                     interval(pair.reward_diff, sign=True), p_value(pair.permutation.p_value),
                     f"perm. over {pair.permutation.tasks} task"
                     + ("" if pair.permutation.tasks == 1 else "s")])
    level = f"{comparison.settings.confidence:.0%} CI"
    return TextTable(f"Against the baseline {comparison.baseline} (paired by task)",
                     ["arm", "metric", "Δ", level, "p", "test"], rows, frozenset({2, 4}),
                     note="McNemar a:b = trial pairs (same task and attempt) only the arm "
                          "passed : only the baseline passed; perm.: paired permutation test "
                          "(sign flips of per-task differences)", id="pairs")


def _costs(comparison: Comparison) -> TextTable:
    rows = []
    for arm in comparison.arms:
        per_trial = arm.tokens_per_trial
        rows.append([arm.name, str(arm.infra_errors), str(arm.agent_errors),
                     str(arm.outcomes.get("cancelled", 0) + arm.outcomes.get("not_scored", 0)
                         + arm.missing),
                     "-" if per_trial is None else f"{tokens(per_trial[0])}/{tokens(per_trial[1])}",
                     money(arm.cost_per_trial), seconds(arm.mean_trial_sec)])
    handling = "excluded" if comparison.settings.errors == "exclude" else "scored 0"
    return TextTable("Errors, cost and time", ["arm", "infra", "agent", "not run",
                                               "tokens/trial", "$/trial", "time/trial"],
                     rows, frozenset({1, 2, 3, 4, 5, 6}),
                     note=f"errors: infrastructure ones {handling} (--errors "
                          f"{comparison.settings.errors}), agent ones scored 0; not run: "
                          "cancelled, unscored or missing; tokens in/out", id="costs")


def _roles(comparison: Comparison) -> TextTable:
    rows = []
    counted = False
    for arm in comparison.arms:
        for role in arm.roles:
            per_trial = role.tokens_per_trial
            cost = None if role.cost is None or not role.trials else role.cost / role.trials
            mark = "*" if "model_calls" in role.usage_sources else ""
            counted = counted or bool(mark)
            rows.append([arm.name, role.role, ", ".join(role.agents) or "-",
                         ", ".join(model_label(m) for m in role.models) or "-",
                         "-" if per_trial is None else tokens(per_trial[0]) + mark,
                         "-" if per_trial is None else tokens(per_trial[1]) + mark,
                         money(cost)])
    note = "per trial the role took part in; model: the one the role used"
    if counted:
        note += ("; * tokens counted by benchflow's model server or relay (the agent "
                 "reports none)")
    if any(r.role == ROLES_TOTAL for a in comparison.arms for r in a.roles):
        note += f"; {ROLES_TOTAL}: results without per-role usage"
    return TextTable("Tokens and cost per role (per trial)",
                     ["arm", "role", "agent", "model", "in", "out", "cost"], rows,
                     frozenset({4, 5, 6}), note=note, id="roles")


def _tasks(comparison: Comparison) -> TextTable:
    names = [a.name for a in comparison.arms]
    rows = []
    for row in comparison.tasks:
        cells = []
        for name in names:
            cell = row.cells[name]
            text = num(cell.mean_reward)
            verdict = row.verdicts.get(name)
            cells.append(f"{text} {VERDICT_MARK[verdict]}" if verdict else text)
        rows.append([row.task, *cells])
    return TextTable("Mean reward per task (won/lost/tied against the baseline)",
                     ["task", *names], rows, frozenset(range(1, len(names) + 1)), id="tasks")


def _errors(comparison: Comparison) -> TextTable | None:
    rows = [[arm.name, kind, str(n)] for arm in comparison.arms for kind, n in arm.errors.items()]
    if not rows:
        return None
    return TextTable("Errors by type", ["arm", "error type", "trials"], rows, frozenset({2}),
                     id="errors")


def report_tables(comparison: Comparison) -> list[TextTable]:
    """The report's tables, in reading order."""
    tables = [_arms(comparison), _pairs(comparison), _costs(comparison), _roles(comparison),
              _tasks(comparison)]
    errors = _errors(comparison)
    return tables + ([errors] if errors else [])


def task_lists(comparison: Comparison) -> list[str]:
    """One line per arm naming the tasks it won, lost and tied against the baseline."""
    lines = []
    for pair in comparison.pairs:
        parts = [f"{label} {len(tasks)}" + (f" ({', '.join(tasks)})" if tasks else "")
                 for label, tasks in (("won", pair.won), ("lost", pair.lost),
                                      ("tied", pair.tied))]
        lines.append(f"{pair.arm} vs {pair.baseline}: " + "; ".join(parts))
    for arm, tasks in comparison.not_shared.items():
        lines.append(f"not compared ({arm} only): {', '.join(tasks)}")
    return lines


def markdown(comparison: Comparison) -> str:
    """The report as GitHub-flavoured markdown."""
    title = f"study {comparison.study}" if comparison.study else "comparison"
    out = [f"# {title}: {' vs '.join(a.name for a in comparison.arms)}", ""]
    for table in report_tables(comparison):
        out += [f"## {table.title}", ""]
        out.append("| " + " | ".join(table.headers) + " |")
        out.append("|" + "|".join("---:" if i in table.right else "---"
                                  for i in range(len(table.headers))) + "|")
        out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
                for row in table.rows]
        if table.note:
            out += ["", table.note]
        out.append("")
    out += ["## Tasks won, lost and tied", ""]
    out += [f"- {line}" for line in task_lists(comparison)] + [""]
    out += ["## Methods", "", comparison.methods, ""]
    return "\n".join(out)


__all__ = ["TextTable", "interval", "markdown", "model_label", "money", "num", "p_value", "report_tables",
           "seconds", "task_lists", "tokens"]
