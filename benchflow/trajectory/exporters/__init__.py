"""Trajectories as training data: OpenAI chat messages (SFT), ShareGPT, Harbor's ATIF, and
SFT examples from captured model calls. `benchflow.job.export` applies them to a job."""

from benchflow.trajectory.exporters.atif import ATIF_VERSION, AtifTrajectory, atif_trajectory
from benchflow.trajectory.exporters.chat import openai_messages, sharegpt_conversations
from benchflow.trajectory.exporters.model_calls import model_call_examples
from benchflow.trajectory.exporters.segments import (
    AgentStep,
    UserStep,
    role_steps,
    roles_of,
)

__all__ = [
    "ATIF_VERSION",
    "AgentStep",
    "AtifTrajectory",
    "UserStep",
    "atif_trajectory",
    "model_call_examples",
    "openai_messages",
    "role_steps",
    "roles_of",
    "sharegpt_conversations",
]
