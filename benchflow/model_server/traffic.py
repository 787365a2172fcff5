"""Who calls the model and what the calls hold: per-role keys, token counts, tool results.

Every role of a rollout gets its own key for benchflow's model server or relay
(`token_for(role)`, in the role's env as `BENCHFLOW_PROVIDER_API_KEY`). A call is
attributed to the role whose key it carries (`caller()`), never by timing: a background
call of a coder's session while the reviewer works is still the coder's. In front of a
real endpoint the relay accepts only these keys (and the upstream key, which only host-side
callers such as a judge hold) and sends the upstream key on, so the upstream key never
enters a sandbox.

For every call, whether or not bodies are captured, the traffic keeps:
- the tokens per role (`count`, `take_tokens` per turn, `totals`), for agents that report
  no usage over ACP (codex, gemini);
- the tool calls in the role's conversation with their results (`note_tools`,
  `take_tool_io`), for agents whose ACP updates carry no arguments or output (gemini).

```python
traffic = ModelTraffic({"coder": RoleIdentity(agent="claude", model="claude-sonnet-4-6")})
env = {"BENCHFLOW_PROVIDER_API_KEY": traffic.token_for("coder")}
caller = traffic.caller(request_headers, request_path)   # Caller(role="coder", ...)
```
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from benchflow.model_server.wire import CallTokens, ToolIO, tool_io
from benchflow.roles import RoleIdentity

KEY_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
"""Headers an agent's SDK sends its API key in (OpenAI, Anthropic, Gemini, Azure)."""
QUERY_KEY = "key"
"""Gemini's older clients send the key as `?key=`."""

Place = Callable[[str | None], Mapping[str, Any]]


@dataclass(frozen=True)
class Caller:
    """Who made a call: the role whose key it carried (None: no role's key), and whether
    it carried the upstream key (a host-side caller: a judge, an LLM user)."""

    role: str | None
    key: str | None = None
    upstream: bool = False


def _bearer(value: str) -> str:
    scheme, _, rest = value.partition(" ")
    return rest.strip() if scheme.lower() == "bearer" and rest else value.strip()


def request_keys(headers: Any, path: str) -> list[str]:
    """The API keys a request carries (any key header, then `?key=`), in that order."""
    keys = []
    lowered = {str(k).lower(): v for k, v in headers.items()} if headers is not None else {}
    for name in KEY_HEADERS:
        value = lowered.get(name)
        if value:
            keys.append(_bearer(str(value)) if name == "authorization" else str(value).strip())
    keys += [v for k, v in parse_qsl(urlsplit(path).query) if k == QUERY_KEY and v]
    return keys


def with_key(headers: dict[str, str], path: str, old: str, new: str) -> tuple[dict[str, str],
                                                                              str]:
    """`headers` and `path` with the key `old` replaced by `new` wherever it was sent."""
    out = {}
    for name, value in headers.items():
        if name.lower() in KEY_HEADERS and old and old in value:
            value = value.replace(old, new)
        out[name] = value
    parts = urlsplit(path)
    if parts.query:
        query = [(k, new if k == QUERY_KEY and v == old else v) for k, v in parse_qsl(
            parts.query, keep_blank_values=True)]
        path = urlunsplit(parts._replace(query=urlencode(query)))
    return out, path


class ModelTraffic:
    """Per-role keys and what their calls used (thread-safe: servers answer on threads).

    Args:
        roles: each role's agent and model (named in captured calls).
        upstream_key: the real endpoint's key (accepted from host-side callers only).
        host_keys: other keys host-side callers may send (a placeholder when the endpoint
            has no key); the relay forwards them unchanged.
    """

    def __init__(self, roles: Mapping[str, RoleIdentity] | None = None, *,
                 upstream_key: str | None = None, host_keys: Iterable[str] = ()) -> None:
        self.roles = dict(roles or {})
        self.upstream_key = upstream_key
        self._host_keys = {k for k in (upstream_key, *host_keys) if k}
        self._tokens = {role: f"benchflow-{secrets.token_hex(16)}" for role in self.roles}
        self._by_token = {token: role for role, token in self._tokens.items()}
        self.place_of: Place = lambda role: {}
        """The scene, turn and round of a role's current (or last) prompt; the rollout
        points it at its trajectory writer."""
        self._lock = threading.Lock()
        self._pending: dict[str, CallTokens] = {}
        self._totals: dict[str, CallTokens] = {}
        self._calls: dict[str, int] = {}
        self._tools: dict[str, dict[str, ToolIO]] = {}
        self._models: dict[str, dict[str, int]] = {}

    def token_for(self, role: str) -> str:
        """The key `role`'s agent uses for the model endpoint.

        Raises:
            KeyError: `role` is not one of the rollout's roles.
        """
        return self._tokens[role]

    @property
    def tokens(self) -> frozenset[str]:
        """Every role key (values to mask in anything written)."""
        return frozenset(self._tokens.values())

    def caller(self, headers: Any, path: str) -> Caller:
        """Who sent a request, from the key it carries."""
        for key in request_keys(headers, path):
            role = self._by_token.get(key)
            if role is not None:
                return Caller(role, key)
            if key in self._host_keys:
                return Caller(None, key, upstream=True)
        return Caller(None)

    def where(self, role: str | None) -> dict[str, Any]:
        """A captured call's attribution: the role's scene, turn and round, agent, model."""
        try:
            place = dict(self.place_of(role) or {}) if role is not None else {}
        except Exception:  # noqa: BLE001 - attribution must never break the agent's call
            place = {}
        identity = self.roles.get(role) if role is not None else None
        return {"scene": place.get("scene"), "role": role, "turn": place.get("turn"),
                "round": place.get("round"),
                "agent": identity.agent if identity else None,
                "model": identity.model if identity else None}

    # -- tokens ------------------------------------------------------------------------

    def count(self, role: str | None, tokens: CallTokens | None, *, model: str | None = None,
              main: bool = False) -> None:
        """Add one call's tokens to `role` (calls without a role are not counted); `model`
        is the model it asked for, `main` whether it was the agent's main loop (it offered
        tools), not a side request such as a session title."""
        if role is None:
            return
        with self._lock:
            self._calls[role] = self._calls.get(role, 0) + 1
            if main and model:
                seen = self._models.setdefault(role, {})
                seen[model] = seen.get(model, 0) + 1
            if tokens is None or tokens.empty:
                return
            self._pending[role] = self._pending.get(role, CallTokens()) + tokens
            self._totals[role] = self._totals.get(role, CallTokens()) + tokens

    def take_tokens(self, role: str) -> CallTokens | None:
        """The tokens of `role`'s calls since the last take (None: none counted)."""
        with self._lock:
            return self._pending.pop(role, None)

    def totals(self) -> dict[str, CallTokens]:
        """Every role's tokens so far."""
        with self._lock:
            return dict(self._totals)

    def main_model(self, role: str) -> str | None:
        """The model `role`'s main-loop calls asked for most (None: none seen)."""
        with self._lock:
            seen = self._models.get(role)
            return max(seen, key=lambda m: seen[m]) if seen else None

    # -- tool results ------------------------------------------------------------------

    def note_tools(self, role: str | None, path: str, request: Any) -> None:
        """Keep the tool calls (and results) in `role`'s request conversation."""
        if role is None:
            return
        found = tool_io(path, request)
        if not found:
            return
        with self._lock:
            known = self._tools.setdefault(role, {})
            for item in found:
                known[item.call_id] = item

    def take_tool_io(self, role: str) -> dict[str, ToolIO]:
        """The tool calls seen in `role`'s conversations since the last take, by wire id."""
        with self._lock:
            return self._tools.pop(role, {})


__all__ = ["Caller", "KEY_HEADERS", "ModelTraffic", "request_keys", "with_key"]
