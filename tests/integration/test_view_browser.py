"""The viewer in a real browser: Debian's chromium, driven headless through Selenium and
chromedriver. A real two-role job (scripted agent on tasks/coder-reviewer) is served by
`benchflow view`'s app under uvicorn on 127.0.0.1; the test clicks from the jobs list into
the trial and checks what a reader sees. The screenshot lands in test-artifacts/.

Needs `apt-get install chromium chromium-driver`; run with `make test-browser`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_view_export import run_coder_reviewer

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium "
                "chromium-driver)", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver")
uvicorn = pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def jobs_dir(tmp_path_factory: pytest.TempPathFactory, job_label: str) -> Path:
    jobs = tmp_path_factory.mktemp("jobs")
    run_coder_reviewer(jobs, f"{job_label}-browser")
    return jobs


@pytest.fixture(scope="module")
def served(jobs_dir: Path) -> Iterator[str]:
    from benchflow.view import create_app

    jobs = jobs_dir
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(jobs), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage", "--window-size=1300,2000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def test_click_from_jobs_list_into_a_two_role_trial(served: str, browser, job_label: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(served + "/")
    job_link = browser.find_element(By.LINK_TEXT, f"{job_label}-browser")
    assert job_link.is_displayed()
    job_link.click()
    assert browser.find_element(By.TAG_NAME, "h1").text == f"{job_label}-browser"
    rows = browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr")
    assert len(rows) == 1 and "pass" in rows[0].text and "1.00" in rows[0].text

    # the trials filter runs in the browser: reward >= 2 hides the row, clearing shows it
    reward = browser.find_element(By.CSS_SELECTOR, '.filters input[data-col="reward"]')
    reward.send_keys("2")
    assert not rows[0].is_displayed()
    assert browser.find_element(By.CSS_SELECTOR, ".filters .count").text == "0 of 1 trials"
    reward.clear()
    reward.send_keys("1")
    assert rows[0].is_displayed()

    browser.find_element(By.CSS_SELECTOR, "a.trial-link").click()
    turns = browser.find_elements(By.CSS_SELECTOR, "section.turn")
    roles = [t.get_attribute("data-role") for t in turns]
    assert roles == ["coder", "reviewer", "coder"]
    assert all(t.is_displayed() for t in turns)
    reviewer = turns[1]
    assert "Review written to review.md." in reviewer.text
    shell = reviewer.find_element(By.CSS_SELECTOR, '.item.tool[data-tool-call="call-1"]')
    assert shell.is_displayed()
    assert "python3 -c" in shell.find_element(By.CSS_SELECTOR, ".tool-head").text
    assert "completed" in shell.find_element(By.CSS_SELECTOR, ".tool-head .status").text
    output = shell.find_element(By.CSS_SELECTOR, ".tool-output pre")
    assert output.is_displayed() and output.text == "['Fizz', 'Buzz', 'Fizz']"
    # roles are visibly distinct: different badge colours
    badges = {t.get_attribute("data-role"): t.find_element(By.CSS_SELECTOR, ".turn-head .role")
              .value_of_css_property("background-color") for t in turns}
    assert badges["coder"] != badges["reviewer"]
    assert "FizzBuzz" in turns[2].text

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "view-trial.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_a_running_job_updates_live(served: str, browser, jobs_dir: Path, job_label: str) -> None:
    """A job still running (no job result.json, a trial without result.json) refreshes in
    the browser when the trial's result file is written."""
    import shutil

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    done = jobs_dir / f"{job_label}-browser" / "scripted" / "tasks" / "coder-reviewer__1"
    live = jobs_dir / "live-job" / "scripted" / "tasks" / "coder-reviewer__1"
    shutil.copytree(done, live)
    result = (live / "result.json").read_text()
    (live / "result.json").unlink()
    browser.get(served + "/jobs/live-job/index.html")
    status = browser.find_element(By.CSS_SELECTOR, "#trials tbody tr .badge")
    assert status.text == "running"
    (live / "result.json").write_text(result)
    WebDriverWait(browser, 15, poll_frequency=0.5).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "#trials tbody tr .badge").text == "pass")
    assert "1.00" in browser.find_element(By.CSS_SELECTOR, "#trials tbody tr").text
