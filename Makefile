# Two commands do all the set-up on a fresh Debian/Ubuntu machine:
#   make demo   every system end to end on loopback (any user, < 1 min)
#   make test   the whole suite (as root: installs missing Debian tools, runs
#               the namespace tests; as a user: those skip with a reason)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SOURCES := pyproject.toml setup.py $(wildcard deliverykit/csrc/*.c deliverykit/csrc/*.h)

.PHONY: venv demo test tools bench bench-quick clean

$(STAMP): $(SOURCES)
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip "setuptools>=77"
	@echo "installing the toolkit and its C extension into $(VENV)..."
	@$(PY) -m pip install -q -e '.[test,fast,bench]'
	@$(PY) -m deliverykit info
	@touch $@

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m deliverykit.demo

tools:
	@bash scripts/install-tools.sh

test: $(STAMP) tools
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m bench.harness

bench-quick: $(STAMP)
	$(PY) -m bench.harness --quick

clean:
	rm -rf $(VENV) build *.egg-info deliverykit/*.so
