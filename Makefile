# Two entry points (see README): `make run` and `make test`. Both create the virtual
# environment from pyproject.toml + constraints.txt when it is missing or out of date.
VENV   ?= .venv
PYTHON ?= python3
STAMP  := $(VENV)/.installed
export MLFLOW_DISABLE_TELEMETRY = true
export DO_NOT_TRACK = true
export GX_ANALYTICS_ENABLED = false
export DVC_NO_ANALYTICS = 1
export PREFECT_SERVER_ANALYTICS_ENABLED = false
export OMP_WAIT_POLICY = PASSIVE

.PHONY: setup run test test-all bench lint clean-outputs

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade "pip>=25"
	$(VENV)/bin/python -m pip install --quiet -c constraints.txt -e '.[dev,bench]'
	touch $(STAMP)

run: $(STAMP)  ## install, then run the whole pipeline on the embedded data
	$(VENV)/bin/pucl repro

test: $(STAMP)  ## install, then run the fast test suite
	$(VENV)/bin/python -m pytest

test-all: $(STAMP)  ## fast and slow tests
	$(VENV)/bin/python -m pytest -m ""

bench: $(STAMP)  ## speed and memory benchmarks (not tests); results in reports/benchmarks.md
	$(VENV)/bin/python -m benchmarks

lint: $(STAMP)
	$(VENV)/bin/ruff check src stages flows tests benchmarks
