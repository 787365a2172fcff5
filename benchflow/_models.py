"""Pydantic bases shared by every config and result model."""

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """Immutable config: unknown keys are errors, so a misspelled key fails at load."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class StrictModel(BaseModel):
    """Mutable record (results): unknown keys are still errors."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
