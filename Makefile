# Every target creates or reuses .venv, installed with the tested versions in constraints.txt.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 2

.PHONY: install demo test lint bench clean system-deps

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -c constraints.txt -e ".[jax,dev]"
	touch $(STAMP)

install: $(STAMP)

DEMO_TARGETS := jax_mlp.py::mlp linen_cnn.py::CNN nnx_transformer.py::TransformerBlock eqx_scan.py::ScanRNN

demo: install
	$(VENV)/bin/jaxlsp discover examples/
	@mkdir -p build/demo
	@for target in $(DEMO_TARGETS); do \
		name=$${target##*::}; \
		echo; echo "== jaxlsp trace examples/$$target"; \
		$(VENV)/bin/jaxlsp trace examples/$$target -o build/demo/$$name.json --html build/demo/$$name.html || exit 1; \
	done

lint: install
	$(VENV)/bin/ruff check jaxlsp tests benchmarks
	$(VENV)/bin/ruff format --check jaxlsp tests benchmarks
	$(VENV)/bin/mypy

# System packages the tests drive, as PATH:PACKAGE pairs (a command name or a file path): a
# missing PATH installs its Debian PACKAGE (CI runs as root). Graphviz checks the DOT export.
SYSTEM_DEPS := dot:graphviz
# Targets that build or check something before the suite (each part adds its own).
TEST_DEPS :=

system-deps:
	@missing=""; for pair in $(SYSTEM_DEPS); do \
		path=$${pair%%:*}; package=$${pair#*:}; \
		command -v $$path >/dev/null 2>&1 || test -e $$path || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

test: install lint system-deps $(TEST_DEPS)
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q

# Every benchmark runs and prints its figures; the target fails at the end if one missed its bar.
bench: install
	@status=0; for b in discovery server_memory capture lsp; do \
		echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py || status=1; \
	done; exit $$status

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
