"""Trajectories as training data: OpenAI chat messages (SFT), ShareGPT, Harbor's ATIF, the
Agent Data Protocol, SFT examples and token samples from captured model calls.
`benchflow.job.export` applies them to a job."""

from benchflow.trajectory.exporters.adp import ADP_VERSION, AdpTrajectory, adp_trajectory
from benchflow.trajectory.exporters.atif import ATIF_VERSION, AtifTrajectory, atif_trajectory
from benchflow.trajectory.exporters.chat import openai_messages, sharegpt_conversations
from benchflow.trajectory.exporters.model_calls import model_call_examples
from benchflow.trajectory.exporters.segments import (
    AgentStep,
    UserStep,
    role_steps,
    roles_of,
)
from benchflow.trajectory.exporters.tokens import TokenSample, read_calls, role_tokens, samples_of

__all__ = [
    "ADP_VERSION",
    "ATIF_VERSION",
    "AdpTrajectory",
    "AgentStep",
    "AtifTrajectory",
    "TokenSample",
    "UserStep",
    "adp_trajectory",
    "atif_trajectory",
    "model_call_examples",
    "openai_messages",
    "read_calls",
    "role_steps",
    "role_tokens",
    "roles_of",
    "samples_of",
    "sharegpt_conversations",
]
