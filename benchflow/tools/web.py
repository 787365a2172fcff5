"""`web:search` and `web:browse`.

- `web:search`: a pluggable backend chosen by the session's `web` settings. `bm25` (the
  default when `corpus` names a folder): a local BM25 index (rank_bm25) over the folder's
  documents, built once per session; `brave`: the Brave Search API, with the key in the
  host variable named by `api_key_env` (default `BRAVE_SEARCH_API_KEY`).
- `web:browse`: fetch a URL with httpx and return its readable text (trafilatura). The
  network policy: with `allow_internet: false` only `allowed_hosts` may be fetched (a
  link-local metadata address never); redirects are checked the same way.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio

from benchflow._extras import require
from benchflow.errors import ConfigError
from benchflow.settings import host_env
from benchflow.tools.base import ToolResult, ToolSpec
from benchflow.tools.session import ToolSession
from benchflow.tools.text import SUFFIXES, full_text, html_text

MAX_BYTES = 5_000_000
MAX_CHARS = 20_000
BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
_WORD = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass
class Bm25Index:
    """rank_bm25's Okapi BM25 over a folder's documents (one entry per file)."""

    paths: list[Path]
    texts: list[str]
    bm25: Any

    @classmethod
    def build(cls, folder: Path) -> Bm25Index:
        rank_bm25 = require("rank_bm25", "tools", "web:search's local index")
        if not folder.is_dir():
            raise ValueError(f"web.corpus {folder} is not a folder")
        paths = sorted(p for p in folder.rglob("*") if p.is_file()
                       and p.suffix.lower() in SUFFIXES)
        if not paths:
            raise ValueError(f"web.corpus {folder} holds no documents ({', '.join(SUFFIXES)})")
        texts = [full_text(p) for p in paths]
        return cls(paths, texts, rank_bm25.BM25Okapi([tokens(t) or ["_"] for t in texts]))

    def search(self, query: str, k: int) -> list[tuple[Path, float, str]]:
        scores = self.bm25.get_scores(tokens(query))
        order = sorted(range(len(self.paths)), key=lambda i: -scores[i])[:k]
        return [(self.paths[i], float(scores[i]), self.texts[i]) for i in order]


def _snippet(text: str, query: str, width: int = 300) -> str:
    words = set(tokens(query))
    flat = re.sub(r"\s+", " ", text)
    hit = next((m.start() for m in _WORD.finditer(flat.lower()) if m.group(0) in words), 0)
    start = max(0, hit - width // 3)
    return flat[start:start + width].strip()


async def _brave(config: dict[str, Any], query: str, k: int) -> ToolResult:
    import httpx

    env = config.get("api_key_env", "BRAVE_SEARCH_API_KEY")
    key = host_env(env)
    if not key:
        raise ConfigError(f"web:search backend 'brave' needs its key: export {env}=...")
    async with httpx.AsyncClient(timeout=30) as client:
        reply = await client.get(config.get("base_url", BRAVE_URL),
                                 params={"q": query, "count": k},
                                 headers={"X-Subscription-Token": key,
                                          "Accept": "application/json"})
    if reply.status_code != 200:
        return ToolResult(f"error: the search API answered {reply.status_code}", is_error=True)
    results = (reply.json().get("web") or {}).get("results") or []
    lines = [f"{i}. {r.get('title', '')}\n   {r.get('url', '')}\n   {r.get('description', '')}"
             for i, r in enumerate(results[:k], start=1)]
    return ToolResult("\n".join(lines) or "no results")


async def search(session: ToolSession, args: dict[str, Any]) -> ToolResult:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return ToolResult("error: `query` (a string) is required", is_error=True)
    k = args.get("top_k", 5)
    k = k if isinstance(k, int) and 0 < k <= 20 else 5
    config = session.config("web")
    backend = config.get("backend") or ("bm25" if config.get("corpus") else "brave")
    if backend == "brave":
        return await _brave(config, query, k)
    if backend != "bm25":
        raise ConfigError(f"web.backend {backend!r}: backends are bm25, brave")
    corpus = config.get("corpus")
    if not corpus:
        raise ValueError("the bm25 backend needs web.corpus (a folder of documents)")

    async def build() -> Bm25Index:
        return await anyio.to_thread.run_sync(Bm25Index.build, Path(str(corpus)).expanduser())

    index: Bm25Index = await session.shared(f"bm25:{corpus}", build)
    hits = index.search(query, k)
    root = Path(str(corpus)).expanduser()
    lines = [f"{i}. {p.relative_to(root)} (score {score:.2f})\n   {_snippet(text, query)}"
             for i, (p, score, text) in enumerate(hits, start=1)]
    return ToolResult("\n".join(lines))


def check_url(url: str, config: dict[str, Any]) -> str | None:
    """Why the policy forbids `url` (None: allowed)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"only http(s) URLs can be browsed (got {url!r})"
    host = parts.hostname
    try:
        if ipaddress.ip_address(host).is_link_local:
            return f"{host} is a link-local address (never browsed)"
    except ValueError:
        pass
    allowed = [str(h) for h in config.get("allowed_hosts", [])]
    if config.get("allow_internet", True) is False and host not in allowed:
        return (f"the network policy allows only {', '.join(allowed) or 'no hosts'} "
                f"(allow_internet is false); {host} is not among them")
    return None


async def browse(session: ToolSession, args: dict[str, Any]) -> ToolResult:
    import httpx

    url = args.get("url")
    if not isinstance(url, str):
        return ToolResult("error: `url` (a string) is required", is_error=True)
    config = session.config("web")
    refused = check_url(url, config)
    if refused:
        return ToolResult(f"error: {refused}", is_error=True)

    async def guard(request: httpx.Request) -> None:
        why = check_url(str(request.url), config)
        if why:
            raise ValueError(why)

    try:
        async with httpx.AsyncClient(timeout=30, follow_redirects=True, trust_env=False,
                                     event_hooks={"request": [guard]}) as client:
            async with client.stream("GET", url, headers={"User-Agent": "benchflow-tools"}) \
                    as reply:
                body = b""
                async for chunk in reply.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES:
                        break
                status, kind = reply.status_code, reply.headers.get("content-type", "")
                final = str(reply.url)
    except httpx.HTTPError as exc:
        return ToolResult(f"error: cannot fetch {url}: {exc}", is_error=True)
    if status >= 400:
        return ToolResult(f"error: {url} answered HTTP {status}", is_error=True)
    text = body.decode("utf-8", "replace")
    if "html" in kind or text.lstrip()[:1] == "<":
        text = await anyio.to_thread.run_sync(html_text, text, final)
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS] + f"\n[... {len(text) - MAX_CHARS} characters cut]"
    return ToolResult(f"{final}\n\n{text}")


TOOLS = {
    "web:search": ToolSpec(
        "web:search", "Search the web (or the task's document collection); returns the best "
        "matching documents with a snippet each.",
        {"type": "object", "properties": {
            "query": {"type": "string"},
            "top_k": {"type": "integer", "description": "how many results (1-20, default 5)"}},
         "required": ["query"]}, search),
    "web:browse": ToolSpec(
        "web:browse", "Fetch a web page and return its readable text.",
        {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
        browse),
}

__all__ = ["Bm25Index", "TOOLS", "browse", "check_url", "search"]
