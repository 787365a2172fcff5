"""The report formats: 80-column tables, markdown, JSON, HTML with figures; the CLI."""

from __future__ import annotations

import base64
import re
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchflow.cli.compare import Format, render
from benchflow.cli.main import build_app
from benchflow.study.arms import load_arms
from benchflow.study.compare import Comparison, compare_arms

from .study_fixture import binary_arm, write_job, write_study

runner = CliRunner()
ROLES = {"coder": {"input": 12000, "output": 3400, "cost": 0.12},
         "reviewer": {"input": 4000, "output": 800, "cost": 0.03, "model": "m-2"}}


def three_arms(tmp_path: Path) -> Path:
    tasks = [f"task-number-{i}" for i in range(6)]
    return write_study(tmp_path / "reviewer-study", {
        "coder-alone": binary_arm("x", "scripted", {t: [0, 1, 0] for t in tasks},
                                  roles={"coder": ROLES["coder"]}),
        "coder-reviewer": binary_arm("x", "scripted", {t: [1, 1, 0] for t in tasks},
                                     roles=ROLES),
        "coder-critic-x": binary_arm("x", "scripted", {t: [1, 1, 1] for t in tasks},
                                     roles=ROLES, error=None)})


def comparison(tmp_path: Path) -> Comparison:
    return compare_arms(load_arms([three_arms(tmp_path)]))


def test_the_table_report_fits_80_columns(tmp_path):
    text = render(comparison(tmp_path), Format.table)
    widths = [len(line.rstrip()) for line in text.splitlines()]
    assert max(widths) <= 80
    for title in ("Arms on 6 shared task(s)", "Against the baseline coder-alone",
                  "Errors, cost and time", "Tokens and cost per role", "Mean reward per task",
                  "Methods"):
        assert title in text
    # arm names are not broken over lines
    assert re.search(r"^coder-reviewer +pass rate +\+0\.33", text, re.M)


def test_markdown_holds_every_table_and_the_methods(tmp_path):
    c = comparison(tmp_path)
    text = render(c, Format.markdown)
    assert text.startswith("# study reviewer-study: coder-alone vs coder-reviewer vs")
    assert text.count("\n## ") == 7  # 5 tables (no errors: no error table), tasks, methods
    assert "| coder-reviewer | reviewer | scripted | m-2 | 4000 | 800 | $0.0300 |" in text
    assert "- coder-critic-x vs coder-alone: won 6 (" in text
    assert c.methods in text


def test_json_round_trips(tmp_path):
    c = comparison(tmp_path)
    again = Comparison.model_validate_json(render(c, Format.json))
    assert again == c


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_html_inlines_the_four_figures(tmp_path):
    html = render(comparison(tmp_path), Format.html)
    images = re.findall(r'<img class="bf-chart" alt="([^"]+)" src="data:image/png;base64,'
                        r'([A-Za-z0-9+/=]+)"', html)
    assert [alt for alt, _ in images] == ["Pass rate per arm", "Per-task wins and losses",
                                          "Cost against reward", "Tokens per role"]
    for _, data in images:
        width, height = png_size(base64.b64decode(data))
        assert width >= 300 and height >= 100
    assert "<table" in html and "Methods" in html


def invoke(*args: str):
    result = runner.invoke(build_app("compare"), ["compare", *args])
    return result.exit_code, result.output


def stderr_of(*args: str) -> tuple[int, str]:
    result = runner.invoke(build_app("compare"), ["compare", *args])
    return result.exit_code, result.stderr


@pytest.mark.parametrize("case", ["missing", "twice", "no-shared"])
def test_compare_bad_input_exits_2_with_one_line(tmp_path, case):
    job = write_job(tmp_path / "a", binary_arm("a", "x", {"t1": [1]}))
    other = write_job(tmp_path / "b", binary_arm("b", "x", {"t2": [1]}))
    args = {"missing": [str(job), str(tmp_path / "gone")], "twice": [str(job), str(job)],
            "no-shared": [str(job), str(other)]}[case]
    code, text = stderr_of(*args)
    assert code == 2, text
    assert len(text.strip().splitlines()) == 1 and "Traceback" not in text
    assert text.startswith("error:")


@pytest.mark.parametrize("fmt", list(Format))
def test_compare_writes_each_format_to_a_file(tmp_path, fmt):
    a = write_job(tmp_path / "a", binary_arm("a", "x", {"t1": [1, 1], "t2": [1, 0]}))
    b = write_job(tmp_path / "b", binary_arm("b", "x", {"t1": [0, 0], "t2": [1, 0]}))
    out = tmp_path / f"report.{fmt.value}"
    code, text = invoke(str(a), str(b), "--baseline", "b", "--format", fmt.value, "-o", str(out))
    assert code == 0, text
    body = out.read_text()
    assert {"table": "Against the baseline b", "markdown": "## Against the baseline b",
            "json": '"baseline": "b"', "html": "data:image/png;base64,"}[fmt.value] in body


def test_compare_prints_the_table_by_default(tmp_path):
    code, text = invoke(str(three_arms(tmp_path)), "--errors", "fail", "--seed", "3")
    assert code == 0, text
    assert "Against the baseline coder-alone" in text and "--errors fail" in text


def test_the_roles_table_marks_counted_tokens_and_names_scripts_by_file(tmp_path):
    from benchflow.study.report import report_tables

    roles = {"coder": {"model": "examples/studies/x/a-long-script-name.yaml", "input": 10,
                       "output": 2},
             "reviewer": {"agent": "codex", "model": "gpt-5.4", "input": 7, "output": 1,
                          "source": "model_calls"}}
    a = write_job(tmp_path / "a", binary_arm("a", "scripted", {"t": [1]}, roles=roles))
    b = write_job(tmp_path / "b", binary_arm("b", "nop", {"t": [0]}))
    c = compare_arms(load_arms([a, b]))
    table = next(t for t in report_tables(c) if t.id == "roles")
    assert table.rows[:2] == [
        ["a", "coder", "scripted", "…-script-name.yaml", "10", "2", "-"],
        ["a", "reviewer", "codex", "gpt-5.4", "7*", "1*", "-"]]
    assert "* tokens counted by benchflow's model server" in table.note
    assert table.rows[2][:2] == ["b", "(all roles)"] and "(all roles): results without" in \
        table.note
