"""Labels every benchflow sandbox carries (docker labels, Daytona/Modal labels and tags), so
leftovers of a job can be found and removed."""

from __future__ import annotations

LABEL_MANAGED = "benchflow.managed"
LABEL_JOB = "benchflow.job"
LABEL_ROLLOUT = "benchflow.rollout"
LABEL_CREATE = "benchflow.create"
"""On cloud sandboxes: a token unique to one create request, which finds what an ambiguous
create (a timeout or 5xx after the request went out) made."""

__all__ = ["LABEL_CREATE", "LABEL_JOB", "LABEL_MANAGED", "LABEL_ROLLOUT"]
