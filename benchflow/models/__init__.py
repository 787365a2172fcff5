"""The model client: benchflow calling OpenAI-compatible endpoints itself (model agent,
LLM judges, LLM users). The openai SDK is imported only when a call is made."""

from benchflow.models.client import (
    ChatReply,
    ModelClient,
    Price,
    ToolCallRequest,
    Usage,
    UsageTotals,
    api_base_url,
    resolve_api_key,
)
from benchflow.models.errors import map_openai_errors

__all__ = ["ChatReply", "ModelClient", "Price", "ToolCallRequest", "Usage", "UsageTotals",
           "api_base_url", "map_openai_errors", "resolve_api_key"]
