"""Tool-server pieces without a server: the network policy, sessions' settings, extras."""

from __future__ import annotations

import sys
import subprocess

import pytest

from benchflow._extras import require
from benchflow.errors import ConfigError
from benchflow.tools.base import check_resource_types, check_tool_names
from benchflow.tools.session import ToolSession
from benchflow.tools.web import check_url


def test_the_browse_policy():
    assert check_url("https://example.org/x", {}) is None
    assert "link-local" in check_url("http://169.254.169.254/latest", {})
    assert "only http(s)" in check_url("file:///etc/passwd", {})
    closed = {"allow_internet": False, "allowed_hosts": ["127.0.0.1"]}
    assert check_url("http://127.0.0.1:8000/a", closed) is None
    assert "example.org is not among them" in check_url("http://example.org/", closed)


def test_settings_layer_defaults_init_configs_and_the_items_kwargs():
    session = ToolSession(["doc:read"], defaults={"doc": {"roots": ["/srv"], "seed_path": "/a"}},
                          init_configs={"doc": {"content": {"seed_path": "/b"}}},
                          kwargs={"seed_path": "/c/plan.pdf"})
    assert session.config("doc") == {"roots": ["/srv"], "seed_path": "/c/plan.pdf"}


def test_unknown_names_are_config_errors_listing_the_known_ones():
    with pytest.raises(ConfigError, match="did you mean 'doc:read'.*known tools: web:search"):
        check_tool_names(["doc:reed"])
    with pytest.raises(ConfigError, match="resource types: web, doc, code, vm"):
        check_resource_types(["gpu"])


def test_a_missing_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigError, match=r"needs the 'models' extra .*benchflow\[models\]"):
        require("openai", "models", "the QA API")


def test_the_qa_api_names_the_models_extra_before_any_item(tmp_path, monkeypatch):
    from benchflow.qa import quick_rollout

    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigError, match=r"pip install 'benchflow\[models\]'"):
        quick_rollout("What is 2+2?", model_name="m", base_url="http://127.0.0.1:9/v1")


def test_tools_serve_rejects_a_bad_config_file_with_exit_2(tmp_path):
    bad = tmp_path / "tools.yaml"
    bad.write_text("web: {corpus: x}\n")
    proc = subprocess.run([sys.executable, "-c", "from benchflow.cli.main import main; main()",
                           "tools", "serve", "--config", str(bad)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 2, proc.stderr
    assert "resources" in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
