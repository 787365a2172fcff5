"""Documents to text with well-kept libraries: pypdf (PDF pages), python-docx (DOCX
headings and paragraphs), trafilatura (HTML main text), Markdown sections by heading."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from benchflow._extras import require

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".csv", ".json")
HTML_SUFFIXES = (".html", ".htm")
SUFFIXES = (*TEXT_SUFFIXES, *HTML_SUFFIXES, ".pdf", ".docx")


@dataclass(frozen=True)
class Part:
    """One addressable part of a document: a PDF page or a section under a heading."""

    title: str
    text: str


def html_text(html: str, url: str | None = None) -> str:
    """The readable main text of an HTML page (trafilatura), or all its text."""
    trafilatura = require("trafilatura", "tools", "reading HTML (web:browse, doc:read)")
    text = trafilatura.extract(html, url=url, include_comments=False, include_tables=True,
                               favor_recall=True)
    if text:
        return str(text)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def _markdown_sections(text: str) -> list[Part]:
    parts: list[Part] = []
    title, lines = "(start)", []
    for line in text.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            if any(x.strip() for x in lines):
                parts.append(Part(title, "\n".join(lines).strip()))
            title, lines = heading.group(1).strip(), []
        else:
            lines.append(line)
    if any(x.strip() for x in lines) or not parts:
        parts.append(Part(title, "\n".join(lines).strip()))
    return parts


def read_parts(path: Path) -> tuple[str, list[Part]]:
    """(kind, parts) of a file: PDF pages, DOCX / Markdown sections, one part otherwise.

    Raises:
        ValueError: a file type it cannot read.
        ConfigError: the library for it is not installed (the `tools` extra).
    """
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        pypdf = require("pypdf", "tools", "reading PDF (doc:read)")
        reader = pypdf.PdfReader(str(path))
        return "pdf", [Part(f"page {i}", (page.extract_text() or "").strip())
                       for i, page in enumerate(reader.pages, start=1)]
    if suffix == ".docx":
        docx = require("docx", "tools", "reading DOCX (doc:read)")
        document = docx.Document(str(path))
        parts: list[Part] = []
        title, lines = "(start)", []
        for para in document.paragraphs:
            if para.style is not None and para.style.name.lower().startswith("heading"):
                if lines:
                    parts.append(Part(title, "\n".join(lines)))
                title, lines = para.text.strip(), []
            elif para.text.strip():
                lines.append(para.text)
        if lines or not parts:
            parts.append(Part(title, "\n".join(lines)))
        return "docx", parts
    text = path.read_text(encoding="utf-8", errors="replace")
    if suffix in HTML_SUFFIXES:
        return "html", _markdown_sections(html_text(text))
    if suffix in (".md", ".markdown"):
        return "markdown", _markdown_sections(text)
    if suffix in TEXT_SUFFIXES or suffix == "":
        return "text", [Part("(whole)", text)]
    raise ValueError(f"cannot read {path.name}: supported types are {', '.join(SUFFIXES)}")


def full_text(path: Path) -> str:
    """All of a document's text."""
    _, parts = read_parts(path)
    return "\n\n".join(p.text for p in parts)


__all__ = ["Part", "SUFFIXES", "full_text", "html_text", "read_parts"]
