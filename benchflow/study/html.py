"""A comparison as HTML: the report body (figures, tables, task lists, methods) that the
viewer's comparison page embeds, and the self-contained page `benchflow compare
--format html` writes (figures inlined as PNG data URLs: one file, opened from disk).
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import jinja2
from markupsafe import Markup

from benchflow.study.compare import Comparison
from benchflow.study.figures import Chart, comparison_charts
from benchflow.study.report import TextTable, report_tables, task_lists

Link = Callable[[TextTable, list[str], int], str | None]
"""The URL a table cell links to (table, row, column), or None."""


def _no_link(table: TextTable, row: list[str], column: int) -> str | None:
    return None


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("benchflow.study", "templates"),
                             autoescape=jinja2.select_autoescape(["html"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["b64"] = lambda data: base64.b64encode(data).decode("ascii")
    return env


def report_body(comparison: Comparison, *, charts: list[Chart] | None = None,
                link: Link = _no_link, notes: list[str] | None = None) -> Markup:
    """The report's HTML body (no page around it).

    Raises:
        ConfigError: matplotlib is missing (the `study` extra).
    """
    charts = comparison_charts(comparison) if charts is None else charts
    html = _environment().get_template("report_body.html").render(
        charts=charts, tables=report_tables(comparison), task_lists=task_lists(comparison),
        methods=comparison.methods, link=link, notes=notes or [])
    return Markup(html)


def title_of(comparison: Comparison) -> str:
    names = " vs ".join(a.name for a in comparison.arms)
    return f"study {comparison.study}: {names}" if comparison.study else f"compare: {names}"


def html_report(comparison: Comparison) -> str:
    """A self-contained HTML page of the report."""
    return _environment().get_template("report.html").render(
        title=title_of(comparison), body=report_body(comparison))


__all__ = ["html_report", "report_body", "title_of"]
