"""Keep secrets out of the files we write: configs are redacted before they are saved."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel

from benchflow.settings import host_environ

REDACTED = "***"
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
    """`model` as indented JSON with secret-looking env values replaced by `***`."""
    return json.dumps(redact(model.model_dump(mode="json")), indent=2)


_CREDENTIAL_PATTERNS = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|AIza[0-9A-Za-z_\-]{30,}|xox[abpr]-[A-Za-z0-9\-]{10,}|(?i:bearer)\s+[A-Za-z0-9._\-]{12,})")


def host_secret_values() -> list[str]:
    """Values of the host's secret-looking variables (>= 6 characters), longest first so
    that no prefix of a longer one survives masking."""
    values = {v for k, v in host_environ().items() if is_secret_name(k) and len(v) >= 6}
    return sorted(values, key=len, reverse=True)


_SECRET_FIELD = re.compile(
    r"(api[_-]?key|secret|passw(or)?d|authorization|credential|(access|refresh|auth|id|"
    r"session|bearer)[_-]?token|[_-]token$)", re.IGNORECASE)
"""Field names of credentials in JSON bodies. Stricter than `is_secret_name` (env names):
model APIs have fields like `token`, `max_tokens` and `logprobs[].token` that are data."""


class Scrubber:
    """Masks credentials in data leaving benchflow (exports, captured model calls): values
    of the host's secret variables, common API-key shapes, and credential-named fields."""

    def __init__(self, values: list[str] | None = None) -> None:
        self.values = host_secret_values() if values is None else values

    def text(self, value: str) -> str:
        for secret in self.values:
            value = value.replace(secret, REDACTED)
        return _CREDENTIAL_PATTERNS.sub(REDACTED, value)

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
