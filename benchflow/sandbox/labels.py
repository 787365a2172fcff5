"""Labels every benchflow sandbox carries (docker labels, Daytona/Modal labels and tags), so
leftovers of a job can be found and removed."""

from __future__ import annotations

LABEL_MANAGED = "benchflow.managed"
LABEL_JOB = "benchflow.job"
LABEL_ROLLOUT = "benchflow.rollout"

__all__ = ["LABEL_JOB", "LABEL_MANAGED", "LABEL_ROLLOUT"]
