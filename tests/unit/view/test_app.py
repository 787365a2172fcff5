"""The viewer's routes (Starlette TestClient on a jobs folder written with benchflow's own
models), path-escape attempts, trajectory paging and the static export."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

import anyio
import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from benchflow.view import create_app, export_site
from benchflow.view import data as view_data

from .jobs_fixture import SECRET, make_jobs, write_two_role_trajectory

TRIAL = "/jobs/job-a/scripted/ds/t1__1/index.html"


@pytest.fixture()
def jobs(tmp_path: Path) -> Path:
    return make_jobs(tmp_path / "jobs")


@pytest.fixture()
def client(jobs: Path) -> TestClient:
    return TestClient(create_app(jobs))


def rows(html: str, table_id: str) -> list[str]:
    body = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr[ >].*?</tr>", body.split("<tbody>", 1)[1], re.DOTALL)


def test_jobs_list_newest_first_with_aggregates(client: TestClient) -> None:
    html = client.get("/").text
    assert client.get("/index.html").text == html
    names = re.findall(r'class="job-link" href="/jobs/([^/]+)/index.html"', html)
    assert names == ["job-b", "job-a"]
    job_a = rows(html, "jobs")[1]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", job_a, re.DOTALL)]
    # name, started, agents, datasets, trials, pass rate, mean reward, errors, duration
    assert cells[2:] == ["other, scripted", "ds", "3", "50%", "0.50", "1", "20.0s"]
    assert "running" in rows(html, "jobs")[0] and 'data-live="1"' in html


def test_job_page_trials_aggregates_matrix(client: TestClient) -> None:
    html = client.get("/jobs/job-a/index.html").text
    assert client.get("/jobs/job-a/").text == html
    trials = rows(html, "trials")
    assert len(trials) == 3
    assert 'data-error="agent_execution_timeout"' in trials[0]  # other/ds/t1
    assert 'data-reward="1.0"' in html and 'data-reward="0.0"' in html
    matrix = html.split("Task × agent", 1)[1].split("</table>", 1)[0]
    assert "ds/t1" in matrix and "ds/t2" in matrix and "1/1" in matrix and "0/1" in matrix
    assert 'data-live' not in html.split('id="live"', 1)[1].split(">", 1)[0]


def test_running_job_is_live_and_lists_running_trial(client: TestClient) -> None:
    html = client.get("/jobs/job-b/index.html").text
    assert 'data-live="1"' in html
    assert html.count('class="badge running"') >= 2  # the job and its running trial


def test_trial_page_pairs_tool_calls_and_roles(client: TestClient) -> None:
    html = client.get(TRIAL).text
    assert 'data-role="coder"' in html and 'data-role="reviewer"' in html
    assert "Write fizzbuzz.py" in html and "LGTM from the reviewer." in html
    coder = html.split('data-role="coder"', 1)[1].split("</section>", 1)[0]
    tool = coder.split('data-tool-call="call-1"', 1)[1]
    assert "cat notes.txt" in tool and "completed" in tool
    assert '<pre class="clip">' + "x" * 100 in tool  # preview, then the expand control
    assert "show all 5018 characters" in tool and "END-OF-LONG-OUTPUT" in tool
    reviewer = html.split('data-role="reviewer"', 1)[1].split("</section>", 1)[0]
    assert "3 passed" in reviewer  # the reviewer's call-1 is its own, not the coder's
    assert '<details class="item thought">' in coder and "120 in · 30 out" in coder
    assert "verifier says t1 1.0" in html and "agent execution" in html
    changes = coder.split('class="item changes"', 1)[1]
    assert "2 files changed" in changes and "print(&#39;FIZZ-DIFF&#39;)" in changes
    assert 'class="deleted flagged"' in changes and "test/verifier/config file" in changes


def test_trial_config_is_redacted(client: TestClient) -> None:
    html = client.get(TRIAL).text
    assert "OPENAI_API_KEY" in html and SECRET not in html


def test_trial_with_error(client: TestClient) -> None:
    html = client.get("/jobs/job-a/other/ds/t1__1/index.html").text
    assert "agent_execution_timeout" in html and "agent ran over 300s" in html
    assert "no trajectory file" in html


def test_raw_log(client: TestClient) -> None:
    r = client.get("/raw/job-a/scripted/ds/t2__1/verifier/stdout.txt")
    assert r.status_code == 200 and r.text == "verifier says t2 0.0\n"


def test_compare_two_jobs(client: TestClient) -> None:
    # each agent of a job is an arm (job-a: other, scripted; job-b: one agent, named by
    # the job); they share ds/t1 (job-b's t2 is still running)
    html = client.get("/compare.html?a=job-a&b=job-b").text
    assert "<h1>other vs scripted vs job-b</h1>" in html
    tasks = html.split("<h2>Mean reward per task", 1)[1].split("</table>", 1)[0]
    assert "ds/t1" in tasks and "ds/t2" not in tasks and "1.00 won" in tasks
    assert 'data-live="1"' in html  # job-b runs: the page refreshes
    assert client.get("/compare.html?a=job-a&b=..").status_code == 404


@pytest.mark.parametrize("url", [
    "/jobs/../index.html",
    "/jobs/%2e%2e/index.html",
    "/jobs/job-a/%2e%2e/%2e%2e/index.html",
    "/jobs/%252e%252e/index.html",
    "/jobs/job-a/scripted/ds/..%2F..%2F..%2F/index.html",
    "/jobs//etc/index.html",
    "/jobs/%2Fetc/index.html",
    "/raw/../outside.txt",
    "/raw/%2e%2e/outside.txt",
    "/raw/%252e%252e/outside.txt",
    "/raw//etc/passwd",
    "/raw/%2Fetc%2Fpasswd",
    "/raw/job-a/..%2f..%2foutside.txt",
    "/raw/job-a/%5c..%5c..%5coutside.txt",
    "/raw/link/outside.txt",
    "/jobs/link/index.html",
    "/compare.html?a=link&b=job-a",
    "/compare.html?a=/etc&b=job-a",
])
def test_paths_cannot_escape_the_jobs_folder(jobs: Path, url: str) -> None:
    outside = jobs.parent / "outside.txt"
    outside.write_text("TOP-SECRET-OUTSIDE")
    os.symlink(jobs.parent, jobs / "link")
    status, body = raw_get(create_app(jobs), url)
    assert status == 404, (url, status)
    assert "TOP-SECRET-OUTSIDE" not in body and "root:" not in body


def raw_get(app: object, url: str) -> tuple[int, str]:
    """GET `url` byte for byte: HTTP clients normalise `..` away before sending, an attacker's
    client does not. The path is percent-decoded once, as uvicorn does."""
    path, _, query = url.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": unquote(path), "raw_path": path.encode(),
             "query_string": query.encode(), "headers": [(b"host", b"testserver")],
             "client": ("127.0.0.1", 1), "server": ("testserver", 80), "root_path": ""}
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    anyio.run(app, scope, receive, send)  # type: ignore[arg-type]
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body.decode("utf-8", "replace")


def test_resolve_inside_unit(jobs: Path) -> None:
    assert view_data.resolve_inside(jobs, ["job-a"]) == (jobs / "job-a").resolve()
    for parts in (["..", "jobs"], ["job-a", "..", "job-b"], ["/etc"], [""], ["a\\b"], ["~"]):
        assert view_data.resolve_inside(jobs, parts) is None, parts


def test_long_trajectory_is_paginated(tmp_path: Path) -> None:
    root = make_jobs(tmp_path / "jobs")
    traj = root / "job-a" / "scripted" / "ds" / "t1__1" / "trajectory" / "acp_trajectory.jsonl"
    traj.unlink()
    write_two_role_trajectory(traj, extra_events=100_000)
    client = TestClient(create_app(root))
    first = client.get(TRIAL)
    pages = view_data.trajectory_page(traj, 1)
    assert pages is not None and pages.n_events == 100_013
    assert pages.pages == -(-100_013 // view_data.PAGE_EVENTS)
    assert f"page 1 of {pages.pages}" in first.text and 'href="page-2.html"' in first.text
    assert len(first.content) < 400_000  # a page, not the 100,000 events
    last = client.get(f"/jobs/job-a/scripted/ds/t1__1/page-{pages.pages}.html")
    assert last.status_code == 200 and "chunk 99999" in last.text and "chunk 0 " not in last.text
    assert "continued from the previous page" in last.text
    assert client.get(f"/jobs/job-a/scripted/ds/t1__1/page-{pages.pages + 1}.html").status_code == 404


def test_static_export(jobs: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    n = export_site(jobs, out)
    assert n == 1 + 2 + 5  # the list, two jobs, five trials
    index = (out / "index.html").read_text()
    assert 'href="jobs/job-a/index.html"' in index and 'href="static/style.css"' in index
    trial = (out / "jobs/job-a/scripted/ds/t1__1/index.html").read_text()
    assert 'href="../../../../../static/style.css"' in trial and "LGTM from the reviewer." in trial
    assert 'data-live="1"' not in trial and "/raw/" not in trial and SECRET not in trial
    assert (out / "static" / "app.js").is_file()
    with pytest.raises(Exception, match="outside the jobs folder"):
        export_site(jobs, jobs / "site")


def test_pages_follow_files_as_they_are_written(jobs: Path, client: TestClient) -> None:
    from benchflow.paths import RolloutPaths

    from .jobs_fixture import _result

    before = client.get("/jobs/job-b/index.html").text
    assert before.count('<span class="badge running">running</span>') == 2
    paths = RolloutPaths.for_trial(jobs, "job-b", "scripted", "ds", "t2", 1)
    paths.result.write_text(_result("job-b", "scripted", "t2", 1, 0.0).model_dump_json())
    after = client.get("/jobs/job-b/index.html").text
    assert after.count('<span class="badge running">running</span>') == 1  # only the job now
    assert '<span class="badge fail">fail</span>' in after
    trial = client.get("/jobs/job-b/scripted/ds/t2__1/index.html").text
    assert 'data-live="1"' not in trial and "reward 0.00" in trial


def test_verifier_output_in_either_layout(jobs: Path, client: TestClient) -> None:
    trial = jobs / "job-a" / "scripted" / "ds" / "t2__1"
    (trial / "verifier" / "stdout.txt").unlink()
    (trial / "logs" / "verifier").mkdir(parents=True)
    (trial / "logs" / "verifier" / "stdout.txt").write_text("moved to logs/verifier\n")
    html = client.get("/jobs/job-a/scripted/ds/t2__1/index.html").text
    assert "verifier stdout" in html and "moved to logs/verifier" in html


def test_forks_link_both_ways(jobs: Path) -> None:
    from benchflow.paths import RolloutPaths
    from benchflow.rollout.result import ParentRef

    from .jobs_fixture import _result

    fork = _result("job-fork", "scripted", "t1", 1, 0.0).model_copy(
        update={"parent": ParentRef(rollout="job-a/scripted/ds/t1__1", turn=1)})
    paths = RolloutPaths.for_trial(jobs, "job-fork", "scripted", "ds", "t1", 1)
    paths.mkdirs()
    paths.result.write_text(fork.model_dump_json())
    client = TestClient(create_app(jobs))
    child = client.get("/jobs/job-fork/scripted/ds/t1__1/index.html").text
    assert ('forked from <a href="/jobs/job-a/scripted/ds/t1__1/index.html">'
            'job-a/scripted/ds/t1__1</a> at turn 1') in child
    original = client.get(TRIAL).text
    assert "forks of this rollout" in original
    assert ('<a href="/jobs/job-fork/scripted/ds/t1__1/index.html">job-fork/scripted/ds/t1__1'
            '</a> <small>at turn 1</small>') in original
