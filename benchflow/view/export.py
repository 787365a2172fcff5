"""`benchflow view --export DIR`: the viewer's pages as static files, openable from disk.

The pages are the server's (same templates, relative links); the live refresh, raw-file
links, the job comparison form and the side-by-side view are left out, since they need
the server. A study's comparison page is exported with it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from benchflow.errors import ConfigError
from benchflow.view import data
from benchflow.view.render import Pages
from benchflow.view.studies import studies_in, study_of

STATIC_DIR = Path(__file__).parent / "static"


def _write(path: Path, html: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")


def export_site(root: Path, out: Path) -> int:
    """Render every page for the jobs folder `root` into `out`; returns the pages written.

    Raises:
        ConfigError: `root` is not a folder, or `out` is inside it (the copy would be read
            as a job next time).
    """
    root, out = root.resolve(), out.resolve()
    if not root.is_dir():
        raise ConfigError(f"{root}: no such jobs folder")
    if out == root or root in out.parents:
        raise ConfigError(f"--export {out}: choose a folder outside the jobs folder {root}")
    pages = Pages(root, static=True)
    shutil.copytree(STATIC_DIR, out / "static", dirs_exist_ok=True)
    _write(out / "index.html", pages.jobs())
    written = 1
    if study_of(root) is not None:  # a study: its comparison page too
        _write(out / "compare.html", pages.compare([root]))
        written += 1
    for study in studies_in(root):  # studies under the root: each a site of its own
        written += export_site(root / study.name, out / "studies" / study.name)
    for job in data.list_jobs(root):
        job_dir = root / job.name
        _write(out / "jobs" / job.name / "index.html", pages.job(job_dir))
        written += 1
        for trial in job.trials:
            trial_dir = job_dir / trial.rel
            target = out / "jobs" / job.name / trial.rel
            page, html = 1, pages.trial(job_dir, trial_dir, 1)
            while html is not None:
                _write(target / ("index.html" if page == 1 else f"page-{page}.html"), html)
                written += 1
                page += 1
                html = pages.trial(job_dir, trial_dir, page)
    return written
