# Two commands for a fresh machine:
#   make demo   set up (venv, install, Docker ready) and run the oracle on tasks/hello-world
#   make test   the same setup, then the whole test suite
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# Sandboxes trust the host's extra CA certificates (/usr/local/share/ca-certificates/*.crt)
# by default (benchflow/settings.py); BENCHFLOW_EXTRA_CA_CERTS chooses others.

.PHONY: setup install docker demo test test-unit test-slow test-browser test-ray test-cloud-fakes test-conformance test-scenes bench matrix parity clean

setup: install docker

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m compileall -q benchflow  # bytecode even with PYTHONDONTWRITEBYTECODE: a fast CLI
	touch $@

docker:
	bash scripts/ensure-docker.sh

demo: setup
	$(BIN)/benchflow run tasks/hello-world -a oracle

test: setup
	$(BIN)/pytest

test-unit: install
	$(BIN)/pytest tests/unit

test-slow: setup
	$(BIN)/pytest -m slow

# The viewer in headless chromium (apt-get install chromium chromium-driver); also part of
# test-slow, where it skips when the browser is missing. CI (.ci/run: make test) runs neither.
test-browser: setup
	$(BIN)/pytest -m slow tests/integration/test_view_browser.py

# Jobs on a real local Ray cluster (a head and a second node, started and stopped by the
# tests); installs the ray extra first. Not in CI (make test) for its size and time.
test-ray: setup
	$(BIN)/pip install --quiet -e '.[ray]'
	$(BIN)/pytest -m slow tests/integration/test_ray.py

# The reduced reward-hack matrix, hardened, on the Modal and Daytona SDK fakes (~10 min).
test-cloud-fakes: setup
	$(BIN)/pytest -m slow tests/integration/test_cloud_fakes_e2e.py

bench: setup
	$(BIN)/python labs/benchmarks/cli_overhead.py
	$(BIN)/python labs/benchmarks/provider_overhead.py
	$(BIN)/python labs/benchmarks/rollout_overhead.py
	$(BIN)/python labs/benchmarks/rollout_overhead.py --harden
	$(BIN)/python labs/benchmarks/acp_throughput.py
	$(BIN)/python labs/benchmarks/role_switch.py
	$(BIN)/python labs/benchmarks/job_load.py
	$(BIN)/python labs/benchmarks/scale.py

matrix: setup
	$(BIN)/python labs/reward-hack-matrix/run.py

# Oracle parity on real third-party Harbor tasks (benchflow plain/hardened vs Harbor 0.24).
# Needs the task repositories mirrored locally (see labs/harbor-parity/README.md): not in CI.
parity: setup
	$(BIN)/python labs/harbor-parity/run.py

test-conformance: setup
	$(BIN)/pytest -m slow tests/conformance

# Scenes with a real agent (claude, npm, offline against the scripted model server): the
# coder remembers across the reviewer's turn, the read-only reviewer gets EACCES, a fork
# restores the coder's ACP session (~5 min; also part of test-conformance and test-slow).
test-scenes: setup
	$(BIN)/pytest -m slow tests/conformance/test_real_agent_scenes.py

clean:
	rm -rf $(VENV) jobs
