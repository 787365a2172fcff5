"""`benchflow.train.verifiers` is an optional extra: `import benchflow.train` never loads
verifiers, and without it the module says how to install it. The environment itself is
tested under verifiers by `make test-verifiers` (tests/train/test_verifiers_env.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


def test_benchflow_train_does_not_import_verifiers():
    code = "import sys, benchflow.train; print('verifiers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


@pytest.mark.skipif(importlib.util.find_spec("verifiers") is not None,
                    reason="verifiers is installed here")
def test_without_the_extra_the_error_names_it():
    with pytest.raises(ImportError, match=r"pip install 'benchflow\[verifiers\]'"):
        import benchflow.train.verifiers  # noqa: F401
