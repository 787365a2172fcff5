"""`doc:read`: a PDF, DOCX, HTML, Markdown or text file as text, by page or by section.

Paths are relative to the session's `seed_path` (resource `doc`, or the item's kwargs):
a folder of documents or one file (then `path` may be omitted). Nothing outside the
seed path (and the server's `roots`) is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from benchflow.tools.base import ToolResult, ToolSpec
from benchflow.tools.session import ToolSession
from benchflow.tools.text import read_parts

MAX_CHARS = 20_000


def _roots(session: ToolSession) -> list[Path]:
    config = session.config("doc")
    roots = [config.get("seed_path"), *config.get("roots", [])]
    return [Path(str(r)).expanduser().resolve() for r in roots if r]


def resolve_document(session: ToolSession, path: str | None) -> Path:
    """The file `path` names, inside one of the session's roots.

    Raises:
        ValueError: no seed path, a path outside the roots, or no such file.
    """
    roots = _roots(session)
    if not roots:
        raise ValueError("no documents: give the session a seed_path (resource_init_configs "
                         "doc.seed_path, or the item's kwargs.seed_path)")
    for root in roots:
        candidate = root if not path else (Path(path) if Path(path).is_absolute()
                                          else (root if root.is_dir() else root.parent) / path)
        candidate = candidate.resolve()
        inside = candidate == root or (root.is_dir() and root in candidate.parents)
        if not inside and root.is_file():
            inside = candidate == root
        if inside and candidate.is_file():
            return candidate
    listing = sorted(p.name for r in roots if r.is_dir() for p in r.iterdir() if p.is_file())
    raise ValueError(f"no document {path!r} under the seed path; documents: "
                     f"{', '.join(listing[:50]) or '(none)'}")


async def read(session: ToolSession, args: dict[str, Any]) -> ToolResult:
    path = resolve_document(session, args.get("path"))
    kind, parts = await anyio.to_thread.run_sync(read_parts, path)
    page, section = args.get("page"), args.get("section")
    if page is not None:
        if not isinstance(page, int) or not 1 <= page <= len(parts) or kind != "pdf":
            return ToolResult(f"error: page must be 1..{len(parts)} (pages exist in PDFs; "
                              f"{path.name} is {kind})", is_error=True)
        chosen = [parts[page - 1]]
    elif section is not None:
        wanted = str(section).strip().lower()
        chosen = [p for i, p in enumerate(parts, start=1)
                  if wanted in p.title.lower() or wanted == str(i)]
        if not chosen:
            titles = "; ".join(f"{i}: {p.title}" for i, p in enumerate(parts, start=1))
            return ToolResult(f"error: no section {section!r} in {path.name}; sections: {titles}",
                              is_error=True)
    else:
        chosen = parts
    header = f"{path.name} ({kind}, {len(parts)} {'pages' if kind == 'pdf' else 'parts'})"
    body = "\n\n".join(f"[{p.title}]\n{p.text}" for p in chosen)
    if len(body) > MAX_CHARS:
        body = body[:MAX_CHARS] + f"\n[... {len(body) - MAX_CHARS} characters cut: ask for a page " \
                                  "or section]"
    return ToolResult(f"{header}\n{body}")


TOOLS = {
    "doc:read": ToolSpec(
        "doc:read",
        "Read a document (PDF, DOCX, HTML, Markdown, text) as text. Give `page` (PDF, from 1) "
        "or `section` (a heading or its number) to read only part of it.",
        {"type": "object", "properties": {
            "path": {"type": "string", "description": "the document, relative to the "
                     "documents folder (optional when the task has one document)"},
            "page": {"type": "integer", "description": "a PDF page, from 1"},
            "section": {"type": "string", "description": "a section heading or number"}}},
        read),
}

__all__ = ["TOOLS", "read", "resolve_document"]
