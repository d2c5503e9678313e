# The contract: the README's two commands, CI and developers all run these targets.
PYTHON ?= python3
PIP    ?= $(PYTHON) -m pip

.PHONY: install install-core system-deps demo test test-fast bench-dev lint

# what `make demo` needs: the core package only (the demo uses no framework)
install-core:
	# CPU torch first (a plain resolve of torch could pull a multi-GB CUDA build)
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e .

# everything: the framework adapters, the benchmarks and the test tools, and HAProxy from
# Debian's packages (the sharded-deployment tests run a real one; docs/deployment.md), and
# Debian's Chromium and its driver (the explorer's tests drive it: docs/explorer.md)
install: install-core system-deps
	$(PIP) install -q -e ".[all,test]"

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	@command -v haproxy >/dev/null || { $(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q haproxy; }
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { $(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium chromium-driver; }

demo: install-core
	$(PYTHON) -m synapse_integrations.cli demo

test: install
	$(PYTHON) -m pytest -q --nbmake --nbmake-timeout=300 tests cookbooks

test-fast:
	$(PYTHON) -m pytest -q -m "not model and not server and not slow"

bench-dev:
	$(PYTHON) -m synapse_integrations.cli bench locomo --data ../shared/data/locomo/locomo_dev.json --out results.json
