"""The viewer's comparison pages: jobs and studies compared with figures, studies under
the root, trials side by side, the role timeline of a multi-role trial."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from benchflow.view import create_app
from benchflow.view.timeline import role_timeline

from ..study.study_fixture import binary_arm, write_job, write_study
from .jobs_fixture import make_jobs


@pytest.fixture()
def studies(tmp_path: Path) -> Path:
    root = tmp_path / "studies"
    write_study(root / "s", {
        "alone": binary_arm("s.alone", "scripted", {"a": [0, 0, 1], "b": [0, 0, 0]}),
        "pair": binary_arm("s.pair", "scripted", {"a": [1, 1, 1], "b": [0, 1, 0]})})
    return root


def images(html: str) -> list[bytes]:
    return [base64.b64decode(d) for d in
            re.findall(r'<img class="bf-chart"[^>]+src="data:image/png;base64,([^"]+)"', html)]


def test_a_study_under_the_root_is_listed_and_served(studies: Path) -> None:
    client = TestClient(create_app(studies))
    home = client.get("/").text
    assert 'href="/studies/s/index.html"' in home and "alone, pair" in home
    page = client.get("/studies/s/index.html").text
    assert "Study s" in page and 'href="/studies/s/compare.html"' in page
    assert sorted(re.findall(r'class="job-link" href="([^"]+)"', page)) == [
        "/studies/s/jobs/s.alone/index.html", "/studies/s/jobs/s.pair/index.html"]
    assert client.get("/studies/s/static/style.css").status_code == 200
    trial = client.get("/studies/s/jobs/s.pair/scripted/tasks/a__2/index.html")
    assert trial.status_code == 200 and "reward 1.00" in trial.text


def test_the_study_comparison_page_draws_the_figures(studies: Path) -> None:
    client = TestClient(create_app(studies))
    html = client.get("/studies/s/compare.html").text
    assert "<h1>study s</h1>" in html
    pngs = images(html)
    assert len(pngs) == 4 and all(p.startswith(b"\x89PNG") for p in pngs)
    assert "Against the baseline alone" in html and "Methods" in html
    assert 'href="/studies/s/jobs/s.alone/index.html">alone *</a>' in html
    assert 'data-live' not in html.split('id="live"', 1)[1].split(">", 1)[0]
    # the same study as the viewer's root
    root_html = TestClient(create_app(studies / "s")).get("/compare.html").text
    assert len(images(root_html)) == 4 and 'href="/jobs/s.alone/index.html"' in root_html


def test_tasks_link_to_their_trials_side_by_side(studies: Path) -> None:
    client = TestClient(create_app(studies))
    html = client.get("/studies/s/compare.html").text
    links = re.findall(r'href="(/studies/s/side-by-side\.html\?[^"]+)"', html)
    assert len(links) == 2  # tasks a and b, pair against the baseline
    page = client.get(links[0].replace("&amp;", "&")).text
    frames = re.findall(r'<iframe[^>]+src="([^"]+)"', page)
    assert frames == ["/studies/s/jobs/s.alone/scripted/tasks/a__1/index.html",
                      "/studies/s/jobs/s.pair/scripted/tasks/a__1/index.html"]
    assert all(client.get(f).status_code == 200 for f in frames)
    attempts = re.findall(r'<nav class="pager attempts">(.*?)</nav>', page, re.S)[0]
    assert "<b>1</b>" in attempts and attempts.count("href=") == 2
    assert 'class="badge fail">reward 0.00' in page and 'class="badge pass">reward 1.00' in page


@pytest.mark.parametrize("url", [
    "/side-by-side.html?a=../x/scripted/tasks/a__1&b=s/scripted/tasks/a__1",
    "/side-by-side.html?a=s.alone/scripted/tasks&b=s.pair/scripted/tasks/a__1",
    "/studies/..%2f/index.html",
    "/studies/nope/compare.html",
    "/compare.html?job=../studies",
])
def test_comparison_urls_cannot_leave_the_root(studies: Path, url: str) -> None:
    client = TestClient(create_app(studies))
    assert client.get(url).status_code == 404


def test_a_running_arm_makes_the_page_live_and_a_missing_one_is_explained(tmp_path):
    root = tmp_path / "jobs"
    write_job(root / "a", binary_arm("a", "x", {"t": [1]}), finished=False)
    write_job(root / "b", binary_arm("b", "y", {"t": [0]}))
    (root / "empty").mkdir()
    (root / "empty" / "config.json").write_text("{}")
    client = TestClient(create_app(root))
    html = client.get("/compare.html?job=a&job=b").text
    assert 'data-live="1"' in html and "still running: a" in html
    message = client.get("/compare.html?job=a&job=empty").text
    assert "has no trial results yet" in message and "<img" not in message


def test_a_two_role_trial_shows_who_ran_when(tmp_path):
    root = make_jobs(tmp_path / "jobs")
    trial = root / "job-a" / "scripted" / "ds" / "t1__1"
    bars = role_timeline(trial / "trajectory" / "acp_trajectory.jsonl")
    assert [(b.role, b.turn) for b in bars] == [("coder", 0), ("reviewer", 1)]
    assert bars[0].left == 0.0 and bars[1].start_sec >= bars[0].start_sec
    html = TestClient(create_app(root)).get("/jobs/job-a/scripted/ds/t1__1/index.html").text
    section = html.split("<h2>Role timeline</h2>", 1)[1].split("</div>\n\n", 1)[0]
    assert re.findall(r'data-timeline-role="(\w+)"', section) == ["coder", "reviewer"]
    assert 'class="bar role-0"' in section and 'class="bar role-1"' in section


def test_a_one_role_trial_has_no_role_timeline(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "header"}\n'
                    '{"seq": 0, "ts": "2026-01-01T00:00:00+00:00", "role": "agent", "turn": 0}\n'
                    '{"seq": 1, "ts": "2026-01-01T00:00:05+00:00", "role": "agent", "turn": 0}\n'
                    '{"seq": 2, "ts": "2026-01-01T00:0')
    assert role_timeline(path) == []
    with path.open("a") as fh:  # the file grows: read again
        fh.write('\n{"seq": 3, "ts": "2026-01-01T00:00:06+00:00", "role": "critic", "turn": 1}\n'
                 '{"seq": 4, "ts": "2026-01-01T00:00:10+00:00", "role": "critic", "turn": 1}\n')
    bars = role_timeline(path)
    assert [(b.role, b.sec) for b in bars] == [("agent", 5.0), ("critic", 4.0)]
    assert bars[1].left == pytest.approx(60.0) and bars[1].width == pytest.approx(40.0)


def test_the_static_export_holds_the_study_and_its_comparison(studies: Path, tmp_path):
    from benchflow.view import export_site

    out = tmp_path / "site"
    export_site(studies, out)
    home = (out / "index.html").read_text()
    assert 'href="studies/s/index.html"' in home
    compare = (out / "studies" / "s" / "compare.html").read_text()
    assert len(images(compare)) == 4 and "side-by-side" not in compare
    assert 'href="jobs/s.alone/index.html"' in compare
    assert (out / "studies" / "s" / "jobs" / "s.alone" / "scripted" / "tasks" / "a__1"
            / "index.html").is_file()


def two_roles(root: Path, *, finished: bool) -> Path:
    """A coder (claude) + reviewer (codex) trial: the trajectory header names the roles as
    planned (the reviewer's model unknown: the agent's default); the result, when written,
    names the model actually used."""
    from datetime import UTC, datetime, timedelta

    from benchflow.paths import RolloutPaths
    from benchflow.rollout.result import RolloutResult
    from benchflow.trajectory import TrajectoryHeader, TrajectoryWriter
    from benchflow.trajectory.events import RoleIdentity

    paths = RolloutPaths.for_trial(root, "j", "claude+codex", "ds", "t", 1)
    paths.mkdirs()
    header = TrajectoryHeader(job_name="j", task_name="t", agents=["claude", "codex"],
                              roles={"coder": RoleIdentity(agent="claude",
                                                           model="claude-sonnet-4-6"),
                                     "reviewer": RoleIdentity(agent="codex")})
    t0 = datetime(2026, 1, 2, tzinfo=UTC)
    with TrajectoryWriter(paths.trajectory, header) as writer:
        for role, turn, sec in [("coder", 0, 0), ("coder", 0, 4), ("reviewer", 1, 5),
                                ("reviewer", 1, 9)]:
            writer.record("user_message", role=role, turn=turn, scene="s", text="x",
                          ts=t0 + timedelta(seconds=sec))
    if finished:
        result = RolloutResult(
            job_name="j", rollout_name="claude+codex/ds/t__1", task_name="t", dataset_name="ds",
            agent_name="claude+codex", attempt=1, reward=1.0,
            roles={"coder": {"agent": "claude", "model": "claude-sonnet-4-6"},
                   "reviewer": {"agent": "codex", "model": "gpt-5.4"}})
        paths.result.write_text(result.model_dump_json())
    return paths.trajectory


@pytest.mark.parametrize("finished", [False, True])
def test_the_role_timeline_names_who_played_each_role(tmp_path, finished):
    root = tmp_path / "jobs"
    trajectory = two_roles(root, finished=finished)
    html = TestClient(create_app(root)).get("/jobs/j/claude+codex/ds/t__1/index.html").text
    section = html.split('<div class="timeline role-timeline">', 1)[1].split("</div>\n\n")[0]
    bars = re.findall(r'data-timeline-role="(\w+)" data-agent="(\w+)" data-model="([^"]*)"',
                      section)
    # running: the header's plan (the reviewer's default model not known yet); finished:
    # the result's roles, the model actually used
    assert bars == [("coder", "claude", "claude-sonnet-4-6"),
                    ("reviewer", "codex", "gpt-5.4" if finished else "")]
    assert "claude · claude-sonnet-4-6</span>" in section
    assert ("codex · gpt-5.4</span>" if finished else "codex</span>") in section
    bars_ = role_timeline(trajectory, {"reviewer": ("gemini", "g-2")})
    assert [(b.role, b.agent, b.model, b.sec) for b in bars_] == [
        ("coder", "claude", "claude-sonnet-4-6", 4.0), ("reviewer", "gemini", "g-2", 4.0)]


def test_each_side_names_who_played_each_role(tmp_path):
    pair = {"coder": {"model": "examples/x/script.yaml", "input": 10},
            "reviewer": {"agent": "codex", "model": "gpt-5.4", "input": 5}}
    root = tmp_path / "studies"
    write_study(root / "s", {
        "alone": binary_arm("s.alone", "scripted", {"a": [0]},
                            roles={"coder": pair["coder"]}),
        "pair": binary_arm("s.pair", "scripted", {"a": [1]}, roles=pair)})
    client = TestClient(create_app(root))
    compare = client.get("/studies/s/compare.html").text
    roles_table = compare.split("Tokens and cost per role", 1)[1].split("</table>", 1)[0]
    assert re.findall(r"<tr><td>(\w+)</td><td>(\w+)</td><td>(\w+)</td><td>([^<]+)</td>",
                      roles_table) == [("alone", "coder", "scripted", "script.yaml"),
                                       ("pair", "coder", "scripted", "script.yaml"),
                                       ("pair", "reviewer", "codex", "gpt-5.4")]
    (link,) = re.findall(r'href="(/studies/s/side-by-side\.html\?[^"]+)"', compare)
    page = client.get(link.replace("&amp;", "&")).text
    sides = re.findall(r'<div class="side-roles">(.*?)</div>', page, re.S)
    assert len(sides) == 2
    who = [re.findall(r'data-side-role="(\w+)">.*?<span class="who"[^>]*>([^<]+)</span>', s)
           for s in sides]
    assert who == [[("coder", "scripted · script.yaml")],
                   [("coder", "scripted · script.yaml"), ("reviewer", "codex · gpt-5.4")]]
