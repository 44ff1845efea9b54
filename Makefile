# Two commands do all the set-up on a fresh Debian/Ubuntu machine:
#   make demo   every system end to end on loopback (any user, < 1 min)
#   make test   the type and lint gate (make lint), then the whole suite (as
#               root: installs missing Debian tools, runs the namespace tests;
#               as a user: those skip with a reason)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
FULL := $(VENV)/.installed-full
LINTERS := $(VENV)/.installed-lint
# The gate's tools, pinned: a new mypy or ruff release may add checks, and the
# gate must not start failing on its own (docs/typing.md: how to move the pins).
LINT_TOOLS := mypy==2.4.1 ruff==0.17.6
# The ratchet (pyproject.toml, "# ratchet:" lines) only shrinks: these are its
# sizes today; lower them when a module comes off, never raise them.
RATCHET_MYPY := 0
RATCHET_RUFF := 0
SOURCES := pyproject.toml setup.py $(wildcard deliverykit/csrc/*.c deliverykit/csrc/*.h)
# setuptools warns on every editable install about same-named folders in the
# working directory; here the working directory is the source tree, by design.
PIP := PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip

.PHONY: venv demo lint test tools bench bench-quick clean

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

$(LINTERS): $(FULL)
	@$(PIP) install -q $(LINT_TOOLS)
	@touch $@

venv: $(FULL)

demo: $(STAMP)
	$(PY) -m deliverykit.demo

tools:
	@bash scripts/install-tools.sh

# mypy (strict on core/ and wire/) and ruff over the tree, then the ratchet's size.
lint: $(LINTERS)
	$(PY) -m ruff check .
	$(PY) -m mypy
	@m=$$(grep -cE '^ +".*# ratchet:' pyproject.toml); r=$$(grep -cE '^".*# ratchet:' pyproject.toml); \
	echo "lint ratchet: $$m modules exempt from mypy, $$r files from ruff rules (docs/typing.md)"; \
	if [ $$m -gt $(RATCHET_MYPY) ] || [ $$r -gt $(RATCHET_RUFF) ]; then \
	    echo "the ratchet grew past $(RATCHET_MYPY)/$(RATCHET_RUFF): fix the new module instead of listing it" >&2; \
	    exit 1; \
	fi

test: $(FULL) tools lint
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(FULL)
	$(PY) -m bench.harness

bench-quick: $(FULL)
	$(PY) -m bench.harness --quick

clean:
	rm -rf $(VENV) build *.egg-info deliverykit/*.so
