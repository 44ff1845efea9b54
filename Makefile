# Two commands do all the set-up on a fresh Debian/Ubuntu machine:
#   make demo   every system end to end on loopback (any user, < 1 min)
#   make test   the whole suite (as root: installs missing Debian tools, runs
#               the namespace tests; as a user: those skip with a reason)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
FULL := $(VENV)/.installed-full
SOURCES := pyproject.toml setup.py $(wildcard deliverykit/csrc/*.c deliverykit/csrc/*.h)
# setuptools warns on every editable install about same-named folders in the
# working directory; here the working directory is the source tree, by design.
PIP := PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip

.PHONY: venv demo test tools bench bench-quick clean

# The demo needs the toolkit and its C extension; tests and benchmarks add
# pytest, hypothesis and the comparison tools (libtorrent, raptorq).
$(STAMP): $(SOURCES)
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install -q --upgrade pip "setuptools>=77"
	@echo "installing the toolkit and its C extension into $(VENV)..."
	@$(PIP) install -q -e '.[fast]'
	@$(PY) -m deliverykit info
	@touch $@

$(FULL): $(STAMP)
	@echo "installing the test and benchmark dependencies into $(VENV)..."
	@$(PIP) install -q -e '.[test,fast,bench]'
	@touch $@

venv: $(FULL)

demo: $(STAMP)
	$(PY) -m deliverykit.demo

tools:
	@bash scripts/install-tools.sh

test: $(FULL) tools
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(FULL)
	$(PY) -m bench.harness

bench-quick: $(FULL)
	$(PY) -m bench.harness --quick

clean:
	rm -rf $(VENV) build *.egg-info deliverykit/*.so
