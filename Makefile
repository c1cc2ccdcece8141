# Two entry points (see README): `make run` and `make test`. Both create the virtual
# environment from pyproject.toml + constraints.txt when it is missing or out of date.
VENV   ?= .venv
PYTHON ?= python3
STAMP  := $(VENV)/.installed
# The libraries' telemetry is switched off by pucl itself (src/pucl/runtime/environment.py).

.PHONY: setup run test test-all bench lint clean-outputs

setup: $(STAMP)

# The registry's connection sometimes stalls mid-download for minutes (a CI run failed
# that way): pip resumes a partial file within one attempt, and a fresh attempt after a
# pause outlasts a longer outage. Downloads already finished come from pip's cache.
PIP          = $(VENV)/bin/python -m pip
UPGRADE_PIP  = $(PIP) install --quiet --retries 10 --upgrade "pip>=25.1"
# pip's own lines stay on, so a first install of several minutes shows what it fetches
INSTALL_DEPS = $(PIP) install --retries 10 --resume-retries 20 -c constraints.txt -e '.[dev,bench]'
retrying     = for pause in 30 90 270 none; do $(1) && break; \
               test $$pause != none || { echo "install failed 4 times; giving up" >&2; exit 1; }; \
               echo "install failed; retrying in $$pause s" >&2; sleep $$pause; done

# A new environment takes about 6.6 GB (torch's build from the registry bundles CUDA
# libraries): say so at once rather than after four failed attempts (a CI run did that).
NEED_GB := 7
free_gb  = $$(df -Pk . | awk 'NR == 2 {print int($$4 / 1048576)}')

$(STAMP): pyproject.toml constraints.txt
	@test -x $(VENV)/bin/python || test $(free_gb) -ge $(NEED_GB) || { echo "make: the \
	install needs about $(NEED_GB) GB free on this disk, found $(free_gb) GB (df -h .)" >&2; \
	exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(call retrying,$(UPGRADE_PIP))
	@echo "make: installing pucl and its dependencies into $(VENV) (about 6.6 GB the first time: minutes)"
	$(call retrying,$(INSTALL_DEPS))
	touch $(STAMP)

run: $(STAMP)  ## install, then run the whole pipeline on the embedded data
	$(VENV)/bin/pucl repro

# Tests run in parallel, one worker per core. A test file runs whole on one worker, so its
# module-scoped fixtures (a finished project, a Prefect server) are built once; files go
# out longest first (tests/conftest.py: SLOWEST_FIRST), not by xdist's count of tests.
# PYTEST_WORKERS=0 runs everything in one process. The log ends with the DURATIONS slowest
# tests (15; DURATIONS=0: all), so a CI run shows where the suite's time went.
PYTEST_WORKERS ?= auto
DURATIONS ?= 15
PYTEST = $(VENV)/bin/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	--durations=$(DURATIONS)

test: lint  ## install, then lint (ruff, import layers) and run the fast test suite
	$(PYTEST)

test-all: lint  ## the same with the slow tests too
	$(PYTEST) -m ""

bench: $(STAMP)  ## speed and memory benchmarks (not tests); results in reports/benchmarks.md
	$(VENV)/bin/python -m benchmarks

lint: $(STAMP)  ## ruff, and the import-linter contracts of pyproject.toml (the layers)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports --no-cache
