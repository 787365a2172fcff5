"""A scripted model server: stands in for Anthropic, OpenAI and Gemini so real agents run offline.

It speaks each provider's wire format, follows a YAML script (shell calls through the calling
agent's own shell tool, then a final text), answers side requests with fixed valid answers,
and logs every request. See docs/how-to/test-agents-offline.md.
"""

from benchflow.model_server.conversation import (
    Conversation,
    Reply,
    RequestError,
    ToolCall,
    ToolSpec,
)
from benchflow.model_server.replies import plan_reply
from benchflow.model_server.script import (
    Script,
    ShellStep,
    SideAnswers,
    SideRule,
    TextStep,
    ToolStep,
    load_script,
    parse_script,
)
from benchflow.model_server.server import ModelServer, serve_forever

__all__ = [
    "Conversation",
    "ModelServer",
    "Reply",
    "RequestError",
    "Script",
    "ShellStep",
    "SideAnswers",
    "SideRule",
    "TextStep",
    "ToolCall",
    "ToolSpec",
    "ToolStep",
    "load_script",
    "parse_script",
    "plan_reply",
    "serve_forever",
]
