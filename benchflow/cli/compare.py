"""`benchflow compare JOB_OR_STUDY...`: compare arms (jobs' agents, a study's arms) on the
tasks they share, with confidence intervals, paired tests, per-role cost and figures.

Exit codes: 0 the report was written, 2 bad input (a missing folder, no task in common,
an arm name twice, an unknown baseline, the `study` extra missing).
"""

import enum
import io
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from benchflow import bounds as B
from benchflow.cli._common import console, user_errors
from benchflow.errors import ConfigError

if TYPE_CHECKING:
    from benchflow.study.compare import Comparison
    from benchflow.study.report import TextTable

REPORT_WIDTH = 80
"""Columns a table report is laid out in when written to a file."""


class Format(enum.StrEnum):
    table = "table"
    markdown = "markdown"
    json = "json"
    html = "html"


class Errors(enum.StrEnum):
    exclude = "exclude"
    fail = "fail"


def require_study_extra() -> None:
    """Raises ConfigError (exit 2) when scipy or numpy is missing."""
    try:
        import numpy  # noqa: F401
        import scipy  # noqa: F401
    except ImportError:
        raise ConfigError("benchflow compare needs the `study` extra (numpy, scipy, "
                          "matplotlib): pip install 'benchflow[study]'") from None


def rich_table(table: "TextTable") -> Table:
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for index, header in enumerate(table.headers):
        out.add_column(header, justify="right" if index in table.right else "left",
                       overflow="fold")
    for row in table.rows:
        out.add_row(*(Text(cell) for cell in row))
    return out


def rich_report(comparison: "Comparison") -> Group:
    """The report as rich renderables: the tables, the task lists and the methods."""
    from benchflow.study.report import report_tables, task_lists

    parts: list[Table | Text] = []
    for table in report_tables(comparison):  # title and notes as wide as the screen
        parts += [Text(table.title, style="italic"), rich_table(table),
                  *([Text(table.note, style="dim")] if table.note else []), Text("")]
    parts.append(Text("Tasks won, lost and tied", style="italic"))
    parts += [Text(f"  {line}") for line in task_lists(comparison)]
    parts += [Text(""), Text("Methods", style="italic"), Text(comparison.methods)]
    return Group(*parts)


def render(comparison: "Comparison", fmt: Format) -> str:
    """The report as text in `fmt` (tables laid out in 80 columns)."""
    if fmt is Format.json:
        return comparison.model_dump_json(indent=2) + "\n"
    if fmt is Format.markdown:
        from benchflow.study.report import markdown

        return markdown(comparison)
    if fmt is Format.html:
        from benchflow.study.html import html_report

        return html_report(comparison)
    out = io.StringIO()
    Console(width=REPORT_WIDTH, file=out, color_system=None, emoji=False,
            highlight=False).print(rich_report(comparison))
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"


def build_comparison(sources: list[Path], *, baseline: str | None, errors: str, seed: int,
                     resamples: int, confidence: float) -> "Comparison":
    require_study_extra()
    from benchflow.study.arms import load_arms
    from benchflow.study.compare import CompareSettings, compare_arms

    settings = CompareSettings(confidence=confidence, resamples=resamples, seed=seed,
                               errors=errors)  # type: ignore[arg-type]
    return compare_arms(load_arms(sources), baseline=baseline, settings=settings)


def compare_command(
    sources: Annotated[list[Path], typer.Argument(
        metavar="JOB_OR_STUDY...", help="job folders (one arm per agent) and study folders "
        "(their arms)")],
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="the arm the others are compared with (default: the study's, "
        "else the first)")] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table | markdown | json | html "
                                        "(html: with figures)")] = Format.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="write the report "
                                                "to FILE instead of the terminal")] = None,
    errors: Annotated[Errors, typer.Option(
        "--errors", help="trials ended by an infrastructure error: exclude (from rates and "
        "tests; counted apart) or fail (scored 0). Agent errors always score 0")
    ] = Errors.exclude,
    seed: Annotated[int, typer.Option("--seed", min=0, max=B.MAX_SEED, help="seed of the "
                                      "bootstrap and permutation draws")] = 0,
    resamples: Annotated[int, typer.Option("--resamples", min=1000, max=B.MAX_RESAMPLES,
                                           help="bootstrap "
                                           "resamples and permutation draws")] = 10_000,
    confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.999,
                                              help="confidence level of the intervals")] = 0.95,
) -> None:
    """Compare arms (jobs' agents, a study's arms) on the tasks they share.

    Pass rates and rewards with confidence intervals, paired differences and tests against
    a baseline, errors, per-role tokens and cost, time, and (html) figures.
    """
    with user_errors():
        comparison = build_comparison(sources, baseline=baseline, errors=errors.value,
                                      seed=seed, resamples=resamples, confidence=confidence)
        if output is not None:
            output.write_text(render(comparison, fmt), encoding="utf-8")
            console.print(f"wrote {output}", highlight=False)
        elif fmt is Format.table and console.is_terminal:
            console.print(rich_report(comparison))
        else:  # plain text in 80 columns when piped
            console.out(render(comparison, fmt), end="", highlight=False)


__all__ = ["Format", "compare_command", "render", "rich_report"]
