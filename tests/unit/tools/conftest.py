"""Tool-server fixtures: a local corpus, a PDF, a web page served on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

PDF_FACT = "The Zephyr project deadline is March 15, 2025."
PAGE_FACT = "The lighthouse keeper's cat is named Biscuit."


def make_pdf(path: Path, pages: list[str]) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    pdf.output(str(path))
    return path


@pytest.fixture
def documents(tmp_path: Path) -> Path:
    folder = tmp_path / "documents"
    folder.mkdir()
    make_pdf(folder / "project_plan.pdf", ["Project plan, page one: the team and the budget.",
                                           f"Schedule. {PDF_FACT}"])
    (folder / "notes.md").write_text("# Intro\nNothing here.\n\n# Budget\nThe budget is 42k.\n")
    return folder


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web_site(tmp_path: Path) -> Iterator[str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "keeper.html").write_text(
        "<html><head><title>Lighthouse</title></head><body><nav>menu menu menu</nav>"
        f"<article><h1>The lighthouse</h1><p>{PAGE_FACT}</p><p>It sleeps by the lamp "
        "every night, and the keeper feeds it fish.</p></article></body></html>")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "volcanoes.txt").write_text("Mount Etna is an active volcano in Sicily, Italy.")
    (folder / "rivers.md").write_text("# Rivers\nThe Amazon carries more water than any river.")
    (folder / "mountains.html").write_text(
        "<html><body><p>Mount Everest is the tallest mountain above sea level, in the "
        "Himalayas.</p></body></html>")
    (folder / "deserts.txt").write_text("The Sahara is the largest hot desert; mountains "
                                        "are rare there.")
    return folder
