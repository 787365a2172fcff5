"""Keep secrets out of the files we write: configs are redacted before they are saved."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from benchflow.settings import host_environ_view

REDACTED = "***"
_REDACTED_BYTES = REDACTED.encode()
M = TypeVar("M", bound=BaseModel)
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable name looks like it holds a credential."""
    return bool(_SECRET_NAME.search(name))


def redact(value: Any, keep: Callable[[str], bool] | None = None, *,
           _env: bool = False) -> Any:
    """Replace the values of secret-looking keys in every `env` mapping, and every value of
    a `headers` mapping (an http agent's: any of them may be a credential), recursively.

    The one redaction of saved configs (rollout and job config.json). A value for which
    `keep(value)` is true stays (a `${VAR}` reference names a secret without holding it; a
    header may also be `Scheme ${VAR}`). Keys outside `env` and `headers` mappings are left
    alone (`api_key_env` names a variable).
    """
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "headers" and isinstance(v, dict):
                out[k] = {h: hv if isinstance(hv, str) and _kept_header(hv, keep) else REDACTED
                          for h, hv in v.items()}
            elif _env and isinstance(v, str) and is_secret_name(str(k)) and not (keep and keep(v)):
                out[k] = REDACTED
            else:
                out[k] = redact(v, keep, _env=k == "env")
        return out
    if isinstance(value, list):
        return [redact(v, keep) for v in value]
    return value


def _kept_header(value: str, keep: Callable[[str], bool] | None) -> bool:
    if keep is None:
        return False
    scheme, _, rest = value.partition(" ")
    return keep(value) or bool(rest and scheme.isalpha() and keep(rest))


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value (longest first, so no prefix leaks) replaced by `***`."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def redacted_config_json(model: BaseModel) -> str:
    """`model` as indented JSON with secret-looking env values replaced by `***`: the text
    of `json.dumps(..., indent=2)`, written by orjson when that is the same text (the
    standard library indents in pure Python: ~850 calls a config, on every rollout)."""
    data = redact(model.model_dump(mode="json"))
    return _indented(data) or json.dumps(data, indent=2)


def _indented(data: Any) -> str | None:
    """`json.dumps(data, indent=2)` by orjson, or None when its text could differ: both
    write the same compact text (the standard library's C encoder; a difference is
    non-ASCII text, NaN or infinity, a float such as 1e-07, an integer over 64 bits) and
    the same indentation of it."""
    try:
        compact = orjson.dumps(data)
    except TypeError:
        return None
    if compact != json.dumps(data, separators=(",", ":")).encode():
        return None
    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()


_CREDENTIAL_PATTERNS = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|AIza[0-9A-Za-z_\-]{30,}|xox[abpr]-[A-Za-z0-9\-]{10,}|(?i:bearer)\s+[A-Za-z0-9._\-]{12,})")

MIN_SECRET_LEN = 6
"""Shorter values are never masked as secrets (masking "1" would mangle every text)."""


def host_secret_values() -> list[str]:
    """Values of the host's secret-looking variables (>= 6 characters), longest first so
    that no prefix of a longer one survives masking."""
    global _host_secrets
    env = host_environ_view()
    if _host_secrets is None or _host_secrets[0] is not env:  # found again once it changed
        values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= 6}
        _host_secrets = (env, sorted(values, key=len, reverse=True))
    return list(_host_secrets[1])


_host_secrets: tuple[Mapping[str, str], list[str]] | None = None
"""The environment `host_secret_values` last looked at, and what it found (each rollout
asks a few times: its redactors, its log)."""


def secret_values(env: Mapping[str, str]) -> set[str]:
    """The values of an injected env (agent, role, task, MCP server) that are credentials:
    those under a secret-looking name (`*_KEY`, `*_TOKEN`, ...)."""
    return {v for k, v in env.items() if is_secret_name(k) and v}


_SECRET_FIELD = re.compile(
    r"(api[_-]?key|secret|passw(or)?d|authorization|credential|(access|refresh|auth|id|"
    r"session|bearer)[_-]?token|[_-]token$)", re.IGNORECASE)
"""Field names of credentials in JSON bodies. Stricter than `is_secret_name` (env names):
model APIs have fields like `token`, `max_tokens` and `logprobs[].token` that are data."""

_CHUNK = 1 << 20


class Redactor:
    """The one redactor: masks every secret benchflow knows of in whatever it writes.

    It masks (1) the values it is given: everything the rollout injects that is a
    credential (agent and role env under secret-looking names, the `${VAR}` values of a
    job file, the model endpoint's key, an http agent's headers, MCP and task env
    secrets); (2) the values of the host's secret-looking variables; (3) common API-key
    shapes (`sk-...`, `AKIA...`, `Bearer ...`); and in JSON data (4) the values of
    credential-named fields. Each value is also masked in its JSON-escaped form, so it
    is found inside a JSON line too. Results, error text, rollout.log, the trajectory,
    captured model calls, every file of a rollout's folder (`tree`), exports and the
    viewer all go through it.
    """

    def __init__(self, values: Iterable[str] | None = None, *, host: bool = True) -> None:
        given = {v for v in (values or ()) if len(v) >= MIN_SECRET_LEN}
        if host:
            given |= set(host_secret_values())
        forms = set(given)
        for value in given:
            forms.add(json.dumps(value)[1:-1])  # as it appears inside a JSON string
        self.values = sorted(forms, key=len, reverse=True)
        alternatives = "|".join(re.escape(v) for v in self.values)
        self._text = re.compile(alternatives) if alternatives else None
        self._bytes = re.compile(alternatives.encode()) if alternatives else None
        self._per_line = any("\n" in v for v in self.values)

    def text(self, value: str) -> str:
        """`value` with every known secret and API-key shape replaced by `***`."""
        if self._text is not None:
            value = self._text.sub(REDACTED, value)
        return _CREDENTIAL_PATTERNS.sub(REDACTED, value)

    def bytes(self, value: bytes) -> bytes:
        """`value` with every known secret value replaced (exact values only: fast)."""
        return self._bytes.sub(_REDACTED_BYTES, value) if self._bytes is not None else value

    def lines(self, value: bytes) -> bytes:
        """`bytes` of a block of whole lines, the same bytes as masking each line apart: a
        value is never matched across two lines (the trajectory writes a burst at once)."""
        if self._bytes is None:
            return value
        if self._per_line:  # a value with a newline in it (a PEM key): line by line
            return b"\n".join(self._bytes.sub(_REDACTED_BYTES, line)
                               for line in value.split(b"\n"))
        return self._bytes.sub(_REDACTED_BYTES, value)

    def __call__(self, value: Any) -> Any:
        """`value` with every string scrubbed and credential-named fields' values replaced."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: (REDACTED if isinstance(v, str) and _SECRET_FIELD.search(str(k))
                        else self(v))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        return value

    def model(self, model: M) -> M:
        """A copy of a pydantic model whose every string is scrubbed (`text`)."""
        data = _strings(model.model_dump(mode="json"), self.text)
        return type(model).model_validate(data)

    def file(self, path: Path) -> bool:
        """Mask the known secret values in the file at `path`, in place (read in chunks,
        rewritten only when something was found); returns whether it changed."""
        if self._bytes is None:
            return False
        keep = max(len(v.encode()) for v in self.values) - 1
        with path.open("rb") as src:
            carry, found = b"", False
            while not found and (chunk := src.read(_CHUNK)):
                window = carry + chunk
                found = self._bytes.search(window) is not None
                carry = window[-keep:] if keep else b""
        if not found:
            return False
        tmp = path.with_name(f".{path.name}.redacting.tmp")
        try:
            with path.open("rb") as src, tmp.open("wb") as out:
                self._rewrite(src, out, keep)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def _rewrite(self, src: Any, out: Any, keep: int) -> None:
        """Copy `src` to `out` with the secret values masked, chunk by chunk: a match is
        replaced only once it cannot reach past the chunk read so far (the last `keep`
        bytes wait for the next chunk)."""
        assert self._bytes is not None
        carry = b""
        while chunk := src.read(_CHUNK):
            window = carry + chunk
            safe, pos = max(len(window) - keep, 0), 0
            for match in self._bytes.finditer(window):
                if match.start() >= safe:
                    break
                out.write(window[pos:match.start()] + _REDACTED_BYTES)
                pos = match.end()
            cut = max(pos, safe)
            out.write(window[pos:cut])
            carry = window[cut:]
        out.write(self.bytes(carry))

    def tree(self, root: Path, skip: Iterable[str] = ()) -> list[Path]:
        """Mask the known secret values in every regular file under `root` (links are not
        followed; `skip`: paths relative to `root` left alone); returns what changed."""
        changed: list[Path] = []
        if self._bytes is None or not root.is_dir():
            return changed
        skipped = {root / s for s in skip}
        for folder, _dirs, files in os.walk(root, followlinks=False):
            for name in files:
                path = Path(folder, name)
                if path in skipped:
                    continue
                if path.is_symlink() or not path.is_file():
                    continue
                if self.file(path):
                    changed.append(path)
        return changed


def _strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v, fn) for v in value]
    return value


class Scrubber(Redactor):
    """Masks credentials in data leaving benchflow (exports, captured model calls): values
    of the host's secret variables (or exactly `values` when given), common API-key
    shapes, and credential-named fields. The `Redactor` without rollout-injected values."""

    def __init__(self, values: list[str] | None = None) -> None:
        super().__init__(values, host=values is None)


__all__ = ["MIN_SECRET_LEN", "REDACTED", "Redactor", "Scrubber", "host_secret_values",
           "is_secret_name", "redact", "redact_text", "redacted_config_json", "secret_values"]
