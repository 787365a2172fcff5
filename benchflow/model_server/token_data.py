"""Token-level data of a model call: asking an OpenAI-compatible server for it, and reading
it back exactly as the server returned it.

A trainer can only use a sample whose tokens are the ones the model produced: text turned
back into tokens afterwards may tokenise differently and silently breaks RL. So benchflow
never tokenises; it asks the server for its own token ids and log-probabilities and
records them unchanged, with a `token_data` marker on every captured call:

- `exact`: the server returned the prompt's and the completion's token ids (and, when it
  did, one log-probability per completion token);
- `absent`: it did not (a hosted API, a streamed SGLang call, an Anthropic call, a server
  that ignored the options): such calls are never turned into token samples.

What the relay adds to each `POST .../chat/completions` and `.../completions` body, by
server (`ModelEndpoint.request_tokens`):

- `vllm` (0.10.2 or later): `logprobs`, `return_token_ids`; the response carries
  `prompt_token_ids` (top level), `choices[0].token_ids` and
  `choices[0].logprobs.content[].logprob`;
- `sglang` (0.5.13 or later): `logprobs`, `return_prompt_token_ids`, `return_meta_info`
  (not on streamed calls: SGLang refuses them there); the response carries
  `choices[0].prompt_token_ids` and `choices[0].meta_info.output_token_logprobs`
  (`[logprob, token_id, text]` each).

vLLM's `return_tokens_as_token_ids` (`"token_id:42"` tokens in the logprobs) is read too:
it gives the completion's ids when `token_ids` is missing.
"""

from __future__ import annotations

import json
from typing import Any, Literal

TokenDialect = Literal["vllm", "sglang"]
"""Whose request options ask a server for token ids and log-probabilities."""
TOKEN_DIALECTS: tuple[TokenDialect, ...] = ("vllm", "sglang")
TokenData = Literal["exact", "absent"]

_TOKEN_ID_PREFIX = "token_id:"


def _generation_path(path: str) -> bool:
    path = path.split("?")[0]
    return path.endswith("/chat/completions") or path.endswith("/completions")


def with_token_options(body: bytes, path: str, dialect: TokenDialect) -> bytes:
    """`body` asking for token ids and log-probabilities in `dialect`'s options, when it
    is a JSON generation request (chat or text completions); anything else unchanged.

    Options the agent set itself are kept, except that log-probabilities are always
    turned on (a trainer needs them)."""
    if not _generation_path(path):
        return body
    try:
        request = json.loads(body) if body else None
    except ValueError:
        return body
    if not isinstance(request, dict):
        return body
    chat = path.split("?")[0].endswith("/chat/completions")
    if chat and request.get("logprobs") is not True:
        request["logprobs"] = True
    elif not chat and not isinstance(request.get("logprobs"), int):
        request["logprobs"] = 0  # text completions: 0 = the sampled token's alone
    if dialect == "vllm":
        request["return_token_ids"] = True
    elif not request.get("stream"):
        request["return_prompt_token_ids"] = True
        request["return_meta_info"] = True
    return json.dumps(request, ensure_ascii=False).encode()


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                       for v in value):
        return value
    return None


def _sglang_completion(choice: dict[str, Any]) -> tuple[list[int], list[float | None]] | None:
    meta = choice.get("meta_info")
    entries = meta.get("output_token_logprobs") if isinstance(meta, dict) else None
    if not isinstance(entries, list):
        return None
    ids: list[int] = []
    logprobs: list[float | None] = []
    for entry in entries:
        if isinstance(entry, dict):
            token_id, logprob = entry.get("token_id", entry.get("id")), entry.get("logprob")
        elif isinstance(entry, list | tuple) and len(entry) >= 2:
            logprob, token_id = entry[0], entry[1]
        else:
            return None
        if not isinstance(token_id, int):
            return None
        ids.append(token_id)
        logprobs.append(float(logprob) if isinstance(logprob, int | float) else None)
    return ids, logprobs


def _ids_from_token_strings(tokens: list[Any]) -> list[int] | None:
    """vLLM's `return_tokens_as_token_ids`: every token is `"token_id:<id>"`."""
    ids = []
    for token in tokens:
        if not (isinstance(token, str) and token.startswith(_TOKEN_ID_PREFIX)):
            return None
        try:
            ids.append(int(token.removeprefix(_TOKEN_ID_PREFIX)))
        except ValueError:
            return None
    return ids


def token_fields(response: Any) -> dict[str, Any]:
    """Usage, token ids and log-probabilities of a (reassembled) response, as the server
    returned them, and the `token_data` marker (see the module docstring)."""
    out: dict[str, Any] = {}
    if not isinstance(response, dict):
        return {"token_data": "absent"}
    if response.get("usage") is not None:
        out["usage"] = response["usage"]
    elif response.get("usageMetadata") is not None:  # gemini
        out["usage"] = response["usageMetadata"]
    for key in ("prompt_token_ids", "prompt_logprobs"):
        if response.get(key) is not None:
            out[key] = response[key]
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    if isinstance(first, dict):
        if "prompt_token_ids" not in out and first.get("prompt_token_ids") is not None:
            out["prompt_token_ids"] = first["prompt_token_ids"]  # SGLang: on the choice
        if first.get("token_ids") is not None:
            out["completion_token_ids"] = first["token_ids"]
        logprobs = first.get("logprobs")
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        if isinstance(content, list):
            entries = [t for t in content if isinstance(t, dict)]
            out["logprobs"] = [t.get("logprob") for t in entries]
            out["logprob_tokens"] = [t.get("token") for t in entries]
        elif isinstance(logprobs, dict) and isinstance(logprobs.get("token_logprobs"), list):
            out["logprobs"] = logprobs["token_logprobs"]  # text completions
            if isinstance(logprobs.get("tokens"), list):
                out["logprob_tokens"] = logprobs["tokens"]
        sglang = _sglang_completion(first)
        if sglang is not None and "completion_token_ids" not in out:
            out["completion_token_ids"], out["logprobs"] = sglang
        if "completion_token_ids" not in out and out.get("logprob_tokens"):
            ids = _ids_from_token_strings(out["logprob_tokens"])
            if ids is not None:
                out["completion_token_ids"] = ids
    out["token_data"] = token_data_of(out)
    return out


def token_data_of(call: dict[str, Any]) -> TokenData:
    """`exact` when `call` holds the prompt's and the completion's token ids (and either no
    log-probabilities or one per completion token), else `absent`."""
    prompt = _ints(call.get("prompt_token_ids"))
    completion = _ints(call.get("completion_token_ids"))
    if prompt is None or completion is None:
        return "absent"
    logprobs = call.get("logprobs")
    if logprobs is None:
        return "exact"
    aligned = isinstance(logprobs, list) and len(logprobs) == len(completion)
    return "exact" if aligned else "absent"


__all__ = ["TOKEN_DIALECTS", "TokenData", "TokenDialect", "token_data_of", "token_fields",
           "with_token_options"]
