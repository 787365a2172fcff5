# Two commands for a fresh machine:
#   make demo   set up (venv, install, Docker ready) and run the oracle on tasks/hello-world
#   make test   the same setup, then the whole test suite
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# Sandboxes trust the host's extra CA certificates (Debian's local-CA folder), so pip and
# npm work inside them behind a TLS-intercepting proxy. Override to choose others.
export BENCHFLOW_EXTRA_CA_CERTS ?= $(shell ls /usr/local/share/ca-certificates/*.crt 2>/dev/null | paste -sd: -)

.PHONY: setup install docker demo test test-unit test-slow test-browser test-conformance bench matrix clean

setup: install docker

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
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

bench: setup
	$(BIN)/python labs/benchmarks/rollout_overhead.py
	$(BIN)/python labs/benchmarks/rollout_overhead.py --harden
	$(BIN)/python labs/benchmarks/acp_throughput.py
	$(BIN)/python labs/benchmarks/job_load.py

matrix: setup
	$(BIN)/python labs/reward-hack-matrix/run.py

test-conformance: setup
	$(BIN)/pytest -m slow tests/conformance

clean:
	rm -rf $(VENV) jobs
