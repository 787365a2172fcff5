"""Token usage from OpenAI responses, in the keyword form `set_usage(**...)` takes."""

from __future__ import annotations

from typing import Any


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_from_openai(response: Any) -> dict[str, int]:
    """`input_tokens`, `output_tokens`, `total_tokens` (and `cached_tokens`,
    `reasoning_tokens` when reported) of an OpenAI response.

    Accepts a Responses API response, a Chat Completions response, a stream's final
    chunk, their `usage` objects, or the same as dicts. Missing counts are left out;
    `total_tokens` is the sum when the response gives none.

    ```python
    llm.set_usage(**usage_from_openai(response))
    ```
    """
    usage = _get(response, "usage")
    if usage is None and any(_get(response, k) is not None
                             for k in ("input_tokens", "prompt_tokens")):
        usage = response
    if usage is None:
        return {}
    input_tokens = _int(_get(usage, "input_tokens"))
    if input_tokens is None:
        input_tokens = _int(_get(usage, "prompt_tokens"))
    output_tokens = _int(_get(usage, "output_tokens"))
    if output_tokens is None:
        output_tokens = _int(_get(usage, "completion_tokens"))
    total = _int(_get(usage, "total_tokens"))
    if total is None and input_tokens is not None and output_tokens is not None:
        total = input_tokens + output_tokens
    in_details = _get(usage, "input_tokens_details") or _get(usage, "prompt_tokens_details")
    out_details = (_get(usage, "output_tokens_details")
                   or _get(usage, "completion_tokens_details"))
    found = {"input_tokens": input_tokens, "output_tokens": output_tokens,
             "total_tokens": total, "cached_tokens": _int(_get(in_details, "cached_tokens")),
             "reasoning_tokens": _int(_get(out_details, "reasoning_tokens"))}
    return {k: v for k, v in found.items() if v is not None}


__all__ = ["usage_from_openai"]
