"""Studies in a real browser (Debian's headless chromium through Selenium): the docs'
study (examples/studies/coder-reviewer: four example tasks, three attempts per arm) is
run by `benchflow study`; its `benchflow compare --format html` report shows its four
figures; the viewer's comparison page shows them too, links each task to its trials side
by side, shows the role timeline of a coder + reviewer trial, and refreshes a running
study. Screenshots land in test-artifacts/.

Needs `apt-get install chromium chromium-driver`; run with `make test-browser`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import yaml

from benchflow.study.compare import Comparison

from .conftest import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = REPO / "test-artifacts"
BENCHFLOW = Path(sys.executable).parent / "benchflow"
ARMS = ["coder-alone", "coder-reviewer"]

if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium "
                "chromium-driver)", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver")
uvicorn = pytest.importorskip("uvicorn")

# Every figure is an <img> whose picture decoded and is not blank: drawn onto a canvas,
# some pixel is darker than the white background.
FIGURES_RENDERED = """
const imgs = Array.from(document.querySelectorAll('img.bf-chart'));
return imgs.map(img => {
  if (!img.complete || img.naturalWidth === 0) return [img.alt, 0, 0, 0];
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
  const px = ctx.getImageData(0, 0, c.width, c.height).data;
  let dark = 0;
  for (let i = 0; i < px.length; i += 4) if (px[i] + px[i + 1] + px[i + 2] < 600) dark++;
  return [img.alt, img.naturalWidth, img.naturalHeight, dark];
});
"""


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory, job_label: str) -> Path:
    root = tmp_path_factory.mktemp("studies")
    name = f"{job_label}-docs"
    study = yaml.safe_load((REPO / "examples/studies/coder-reviewer/study.yaml").read_text())
    study.update(name=name, studies_dir=str(root))
    path = root.parent / f"{name}.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    try:
        done = subprocess.run([str(BENCHFLOW), "study", str(path)], cwd=REPO,
                              capture_output=True, text=True, timeout=3000)
    finally:
        client = docker.from_env()
        leaked = [c for arm in ARMS for c in client.containers.list(
            all=True, filters={"label": f"benchflow.job={name}.{arm}"})]
        for container in leaked:
            container.remove(force=True)
        assert not leaked, f"leaked containers: {[c.name for c in leaked]}"
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / name


def test_the_docs_study_gives_the_documented_result(study_dir: Path) -> None:
    done = subprocess.run([str(BENCHFLOW), "compare", str(study_dir), "--format", "json"],
                          capture_output=True, text=True, check=True)
    c = Comparison.model_validate_json(done.stdout)
    alone, pair = c.arm("coder-alone"), c.arm("coder-reviewer")
    assert (alone.pass_rate.value, pair.pass_rate.value) == (0.5, 1.0)
    (p,) = c.pairs
    assert p.won == ["tasks/coder-reviewer", "tasks/fix-python-bug"]
    assert p.tied == ["tasks/byos", "tasks/progressive-disclosure"] and not p.lost
    assert p.mcnemar.p_value == pytest.approx(2 / 2 ** 6)
    assert p.permutation.p_value == pytest.approx(0.5)
    docs = (REPO / "docs/how-to/studies.md").read_text()
    for line in ("coder-alone *       4      12  0.50  0.00–1.00    0.50  0.00–1.00    0.50",
                 "coder-reviewer  pass rate  +0.50  [+0.00, +1.00]  0.031  McNemar 6:0",
                 "coder-reviewer  reviewer  scripted  script.yaml   875   75  $0.0019"):
        assert line in docs and line in subprocess.run(
            [str(BENCHFLOW), "compare", str(study_dir)], capture_output=True, text=True,
            check=True).stdout


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage", "--window-size=1300,2400",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def served(study_dir: Path) -> Iterator[str]:
    from benchflow.view import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(study_dir.parent), log_level="warning"))
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


def assert_figures(browser: object) -> None:
    figures = browser.execute_script(FIGURES_RENDERED)
    assert [f[0] for f in figures] == ["Pass rate per arm", "Per-task wins and losses",
                                       "Cost against reward", "Tokens per role"]
    for alt, width, height, dark in figures:
        assert width > 300 and height > 100 and dark > 500, (alt, width, height, dark)


def test_the_html_report_renders_its_figures(study_dir: Path, browser, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    subprocess.run([str(BENCHFLOW), "compare", str(study_dir), "--format", "html", "-o",
                    str(report)], check=True, capture_output=True)
    browser.get(report.as_uri())
    assert_figures(browser)
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "study-report.png"))


def test_the_viewer_compares_the_study_and_shows_trials_side_by_side(
        study_dir: Path, served: str, browser) -> None:
    from selenium.webdriver.common.by import By

    browser.get(served + "/")
    browser.find_element(By.LINK_TEXT, study_dir.name).click()
    browser.find_element(By.CSS_SELECTOR, "a.study-compare").click()
    assert browser.find_element(By.TAG_NAME, "h1").text == f"study {study_dir.name}"
    assert_figures(browser)
    assert browser.save_screenshot(str(ARTIFACTS / "study-compare.png"))
    browser.find_element(By.PARTIAL_LINK_TEXT, "1.00 won").click()  # coder-reviewer's task
    frames = browser.find_elements(By.CSS_SELECTOR, "iframe.side-frame")
    assert len(frames) == 2 and all(f.is_displayed() for f in frames)
    badges = [b.text for b in browser.find_elements(By.CSS_SELECTOR, ".side-head .badge")]
    assert badges == ["reward 0.00", "reward 1.00"]
    sides = [[r.text for r in side.find_elements(By.CSS_SELECTOR, "[data-side-role]")]
             for side in browser.find_elements(By.CSS_SELECTOR, ".side-roles")]
    assert sides == [["coder scripted · script.yaml"],  # who played each role, per side
                     ["coder scripted · script.yaml", "reviewer scripted · script.yaml"]]
    browser.switch_to.frame(frames[1])  # the coder + reviewer trial: who ran when
    bars = browser.find_elements(By.CSS_SELECTOR, ".role-timeline .phase")
    assert [b.get_attribute("data-timeline-role") for b in bars] == ["coder", "reviewer",
                                                                     "coder"]
    assert [b.find_element(By.CSS_SELECTOR, ".who").text for b in bars] == [
        "scripted · script.yaml"] * 3
    assert {b.get_attribute("data-model") for b in bars} == {
        "examples/studies/coder-reviewer/script.yaml"}
    widths = [b.find_element(By.CSS_SELECTOR, ".bar").size["width"] for b in bars]
    assert all(w > 0 for w in widths)
    browser.switch_to.default_content()
    assert browser.save_screenshot(str(ARTIFACTS / "study-side-by-side.png"))


def test_a_running_study_refreshes(study_dir: Path, served: str, browser) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    live = study_dir.parent / "live-study"
    shutil.copytree(study_dir, live)
    job = live / f"{study_dir.name}.coder-reviewer"
    job_result = (job / "result.json").read_text()
    (job / "result.json").unlink()
    browser.get(served + "/studies/live-study/compare.html")
    note = browser.find_element(By.CSS_SELECTOR, ".bf-notes")
    assert "still running: coder-reviewer" in note.text
    (job / "result.json").write_text(job_result)
    WebDriverWait(browser, 20, poll_frequency=0.5).until(
        lambda d: not d.find_elements(By.CSS_SELECTOR, ".bf-notes"))
    assert_figures(browser)
