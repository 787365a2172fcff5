"""The scrubber applied to exports and captured model calls: credentials masked, model data
(`token`, `max_tokens`, logprob tokens) kept."""

from __future__ import annotations

import pytest

from benchflow.rollout.secrets import REDACTED, Scrubber


def test_masks_credentials_keeps_model_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_SERVICE_PASSWORD", "correct-horse-battery")
    scrub = Scrubber()
    value = {
        "token": "The", "max_tokens": "5", "input_tokens": 3,
        "GITHUB_TOKEN": "x", "OPENAI_API_KEY": "y", "authorization": "z", "api_key": "k",
        "env": {"MY_PASSWORD": "p", "PATH": "/usr/bin"},
        "text": "use Bearer abcdefghijklmnop or sk-abcdefghijklmnopqrstuv, "
                "pw correct-horse-battery",
        "list": ["AKIAABCDEFGHIJKLMNOP", "plain"],
    }
    assert scrub(value) == {
        "token": "The", "max_tokens": "5", "input_tokens": 3,
        "GITHUB_TOKEN": REDACTED, "OPENAI_API_KEY": REDACTED, "authorization": REDACTED,
        "api_key": REDACTED, "env": {"MY_PASSWORD": REDACTED, "PATH": "/usr/bin"},
        "text": f"use {REDACTED} or {REDACTED}, pw {REDACTED}",
        "list": [REDACTED, "plain"],
    }
