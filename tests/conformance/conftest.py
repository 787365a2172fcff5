from tests.integration.conftest import job_label, pytest_collection_modifyitems  # noqa: F401
