# Every target creates or reuses .venv, installed with the tested versions in constraints.txt.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 2

.PHONY: install demo test lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -c constraints.txt -e ".[jax,dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/jaxlsp discover examples/

lint: install
	$(VENV)/bin/ruff check jaxlsp tests benchmarks
	$(VENV)/bin/ruff format --check jaxlsp tests benchmarks
	$(VENV)/bin/mypy

test: install lint
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q

bench: install
	$(PY) benchmarks/discovery.py
	$(PY) benchmarks/server_memory.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
