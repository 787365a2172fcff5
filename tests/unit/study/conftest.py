"""Study unit tests reuse the job tests' fake sandboxes and task folders."""

from tests.unit.job.conftest import _no_hardening, behaviour, dataset  # noqa: F401
