"""`benchflow view` and `benchflow export` on the command line: bad input is exit 2 with one
line naming the fix; `--export` writes the static site; the server answers on a free port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from typer.testing import CliRunner

from benchflow.cli.main import app

from .jobs_fixture import make_jobs

runner = CliRunner()
CLI = Path(sys.executable).with_name("benchflow")


def test_view_missing_folder_is_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["view", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no such jobs folder" in result.output


def test_view_export(tmp_path: Path) -> None:
    jobs = make_jobs(tmp_path / "jobs")
    result = runner.invoke(app, ["view", str(jobs), "--export", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "site" / "jobs" / "job-a" / "scripted" / "ds" / "t1__1" /
            "index.html").is_file()
    inside = runner.invoke(app, ["view", str(jobs), "--export", str(jobs / "site")])
    assert inside.exit_code == 2 and "outside the jobs folder" in inside.output


def test_view_port_in_use_is_exit_2(tmp_path: Path) -> None:
    jobs = make_jobs(tmp_path / "jobs")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = runner.invoke(app, ["view", str(jobs), "--port", str(busy.getsockname()[1])])
    assert result.exit_code == 2 and "cannot listen" in result.output


def test_view_serves_on_a_free_port(tmp_path: Path) -> None:
    jobs = make_jobs(tmp_path / "jobs")
    proc = subprocess.Popen([str(CLI), "view", str(jobs), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split("benchflow view: ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0/")
        deadline = time.monotonic() + 20
        while True:
            try:
                page = httpx.get(url, timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert page.status_code == 200 and "job-a" in page.text
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_export_bad_options_are_exit_2(tmp_path: Path) -> None:
    jobs = make_jobs(tmp_path / "jobs")
    for args in (["--errors", "maybe"], ["--from", "nowhere"], ["--format", "csv"]):
        result = runner.invoke(app, ["export", str(jobs / "job-a"), *args,
                                     "-o", str(tmp_path / "o.jsonl")])
        assert result.exit_code == 2, (args, result.output)
    assert not (tmp_path / "o.jsonl").exists()
    ok = runner.invoke(app, ["export", str(jobs / "job-a"), "--role", "coder",
                             "-o", str(tmp_path / "o.jsonl")])
    assert ok.exit_code == 0 and "wrote 1 lines from 2 rollouts" in ok.output
