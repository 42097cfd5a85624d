# Every target creates or reuses .venv, installed with the tested versions in constraints.txt.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 2

.PHONY: install demo test lint bench fuzz clean system-deps

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -c constraints.txt -e ".[jax,dev]"
	touch $(STAMP)

# jaxlsp's own bytecode, as a wheel install has it (pip compiles at install): an editable install
# under PYTHONDONTWRITEBYTECODE=1 (this machine, many containers) never writes it, and every
# `jaxlsp trace` / `jaxlsp serve` compiled its ~60 modules from source. Incremental: fresh .pyc
# files are skipped, and a stale one is only ever read after an mtime check.
install: $(STAMP)
	@$(PY) -m compileall -q -j 0 jaxlsp

# The last one is defined in a notebook's cell (examples/notebook_models.ipynb).
DEMO_TARGETS := jax_mlp.py::mlp linen_cnn.py::CNN nnx_transformer.py::TransformerBlock eqx_scan.py::ScanRNN \
	notebook_models.ipynb::MLP

demo: install
	$(VENV)/bin/jaxlsp discover examples/
	@mkdir -p build/demo
	@for target in $(DEMO_TARGETS); do \
		name=$${target##*::}; \
		echo; echo "== jaxlsp trace examples/$$target"; \
		$(VENV)/bin/jaxlsp trace examples/$$target -o build/demo/$$name.json --html build/demo/$$name.html || exit 1; \
	done
	@echo; echo "== jaxlsp examples examples/nnx_cnn.py::CNN   (no profile in jaxlsp.toml: the workspace's own call sites)"
	$(VENV)/bin/jaxlsp examples examples/nnx_cnn.py::CNN
	@echo; echo "== jaxlsp trace examples/nnx_cnn.py::CNN   (inputs from examples/train_cnn.py's call)"
	$(VENV)/bin/jaxlsp trace examples/nnx_cnn.py::CNN -o build/demo/CNN_from_call_site.json --html build/demo/CNN_from_call_site.html
	@echo; echo "== jaxlsp trace examples/eqx_scan.py::ScanRNN --values"
	$(VENV)/bin/jaxlsp trace examples/eqx_scan.py::ScanRNN --values -o build/demo/ScanRNN-values.json

lint: install
	$(VENV)/bin/ruff check jaxlsp tests benchmarks editors/jupyterlab/jaxlsp_jupyterlab
	$(VENV)/bin/ruff format --check jaxlsp tests benchmarks editors/jupyterlab/jaxlsp_jupyterlab
	$(VENV)/bin/mypy

# System packages the tests drive, as PATH:PACKAGE pairs (a command name or a file path): a
# missing PATH installs its Debian PACKAGE (CI runs as root). Graphviz checks the DOT export.
SYSTEM_DEPS := dot:graphviz
SYSTEM_DEPS += chromium:chromium
# Emacs batch tests of editors/emacs: emacs-nox, and eglot 1.9 from Debian's elpa-eglot.
SYSTEM_DEPS += emacs:emacs-nox
SYSTEM_DEPS += /usr/share/emacs/site-lisp/elpa-src/eglot-1.9:elpa-eglot
# code-server (real VS Code in a browser) for tests/clients/vscode: its npm postinstall builds
# native modules (a C++ tool chain, the Kerberos headers) and takes ripgrep from Debian.
SYSTEM_DEPS += g++:build-essential
SYSTEM_DEPS += /usr/include/krb5.h:libkrb5-dev
SYSTEM_DEPS += rg:ripgrep
# Targets that build or check something before the suite (each part adds its own).
TEST_DEPS :=
TEST_DEPS += viewer
TEST_DEPS += vscode
TEST_DEPS += code-server
TEST_DEPS += jupyterlab
TEST_DEPS += libtpu

system-deps:
	@missing=""; for pair in $(SYSTEM_DEPS); do \
		path=$${pair%%:*}; package=$${pair#*:}; \
		command -v $$path >/dev/null 2>&1 || test -e $$path || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# The graph viewer (editors/web, TypeScript + esbuild): `make viewer` type-checks it, builds it
# afresh and fails when the committed build in jaxlsp/viewer/ differs; `make viewer-build` updates it.
.PHONY: viewer viewer-build
viewer:
	cd editors/web && npm ci --no-audit --no-fund --loglevel=error
	cd editors/web && ./node_modules/.bin/tsc --noEmit -p . && node build.mjs ../../build/viewer-check
	@for f in viewer.js viewer.css index.html; do \
		cmp -s build/viewer-check/$$f jaxlsp/viewer/$$f || \
		{ echo "jaxlsp/viewer/$$f is out of date with editors/web: run 'make viewer-build' and commit it"; exit 1; }; \
	done

viewer-build:
	cd editors/web && npm ci --no-audit --no-fund --loglevel=error && node build.mjs

# The VS Code extension (editors/vscode): check its wire types against jaxlsp/server/wire.py,
# type-check and bundle it, run its unit tests (the vscode API faked, for logic real VS Code
# cannot reach quickly), put the server it carries into editors/vscode/bundled/libs (jaxlsp and its
# libraries; libcst's native module for CPython 3.11-3.14 of VSCODE_TARGET, scripts/bundle_server.py),
# then package build/jaxlsp.vsix for that platform and check that the viewer and the server are
# inside. The extension itself is tested in real VS Code (code-server) by tests/clients/vscode in
# the suite. `make vscode-platforms` packages build/jaxlsp-TARGET.vsix for every other platform on
# this one Linux machine (pip --platform): linux-arm64, alpine-x64, darwin-arm64, win32-x64 (libcst
# 1.9.0 has no Intel macOS wheel); only linux-x64 is tested, the others are built, not run.
VSCODE_TARGET ?= linux-x64
.PHONY: vscode
vscode: install system-deps
	$(PY) editors/vscode/scripts/wire_ts.py --check
	cd editors/vscode && npm ci --no-audit --no-fund --loglevel=error
	cd editors/vscode && npm run build && npm test
	@mkdir -p build
	$(PY) editors/vscode/scripts/bundle_server.py --target $(VSCODE_TARGET)
	cd editors/vscode && npm run package -- --target $(VSCODE_TARGET)
	$(PY) -c "import sys, zipfile; names = zipfile.ZipFile('build/jaxlsp.vsix').namelist(); \
		want = ['extension/dist/extension.js', 'extension/dist/viewer/viewer.js', 'extension/bundled/tool/server.py', \
			'extension/bundled/libs/jaxlsp/__init__.py', 'extension/bundled/libs/pygls/__init__.py', 'extension/bundled/libs/BUNDLE.json']; \
		missing = [n for n in want if n not in names] + [f'libcst native module for {v}' for v in ('311', '312', '313', '314') \
			if not any(n.startswith('extension/bundled/libs/libcst/native.cp') and (f'cpython-{v}' in n or f'cp{v}-' in n) for n in names)]; \
		sys.exit(f'build/jaxlsp.vsix lacks {missing}' if missing else 0)"
	@ls -l build/jaxlsp.vsix

VSCODE_OTHER_TARGETS := linux-arm64 alpine-x64 darwin-arm64 win32-x64
.PHONY: vscode-platforms
vscode-platforms: vscode
	@for target in $(VSCODE_OTHER_TARGETS); do \
		$(PY) editors/vscode/scripts/bundle_server.py --target $$target || exit 1; \
		(cd editors/vscode && npx vsce package --no-dependencies --allow-missing-repository --target $$target \
			-o ../../build/jaxlsp-$$target.vsix) || exit 1; \
	done; ls -l build/jaxlsp-*.vsix
	$(PY) editors/vscode/scripts/bundle_server.py --target $(VSCODE_TARGET)

# code-server from the npm registry, installed once into build/code-server/VERSION (about 1.5 min
# on 2 cores; later runs find its stamp and return at once). 4.100.3 is the newest on Node 20.
CODE_SERVER_VERSION := 4.100.3
.PHONY: code-server
code-server: install system-deps
	$(PY) tests/clients/vscode/install_code_server.py $(CODE_SERVER_VERSION) build/code-server/$(CODE_SERVER_VERSION)

# The JupyterLab extension (editors/jupyterlab): type-check and test it, rebuild its labextension with
# @jupyterlab/builder against the installed JupyterLab's core and fail when the committed build in
# jaxlsp_jupyterlab/labextension differs (pip installs it without node), then install it into .venv
# (its jupyter-lsp spec starts `jaxlsp serve`) for tests/clients/test_jupyterlab.py.
# `make jupyterlab-build` updates the committed build.
.PHONY: jupyterlab jupyterlab-build
JUPYTERLAB := editors/jupyterlab
LABEXTENSION := $(JUPYTERLAB)/jaxlsp_jupyterlab/labextension
JUPYTERLAB_CORE = $(shell $(PY) -c "import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), 'staging'))")

# webpack names the module-federation container's entry by a hash of the folder it is built in, so
# the labextension is built in one fixed folder (the source copied there, node_modules linked):
# the same bytes from every clone, which is what lets `make jupyterlab` compare it with the committed one.
JUPYTERLAB_BUILD := /tmp/jaxlsp-jupyterlab-build
jupyterlab-build: install
	cd $(JUPYTERLAB) && npm ci --no-audit --no-fund --loglevel=error
	rm -rf $(LABEXTENSION) $(JUPYTERLAB_BUILD) && mkdir -p $(JUPYTERLAB_BUILD)
	cd $(JUPYTERLAB) && tar cf - --exclude=./node_modules --exclude=./lib --exclude=./out \
		--exclude=./tsconfig.tsbuildinfo --exclude=./jaxlsp_jupyterlab/labextension . | (cd $(JUPYTERLAB_BUILD) && tar xf -)
	ln -s $(CURDIR)/$(JUPYTERLAB)/node_modules $(JUPYTERLAB_BUILD)/node_modules
	cd $(JUPYTERLAB_BUILD) && ./node_modules/.bin/tsc -p . && \
		node node_modules/@jupyterlab/builder/lib/build-labextension.js --core-path $(JUPYTERLAB_CORE) . >/dev/null
	cp -r $(JUPYTERLAB_BUILD)/jaxlsp_jupyterlab/labextension $(LABEXTENSION)
	rm -rf $(JUPYTERLAB_BUILD)

jupyterlab: install
	@rm -rf build/labextension-committed && mkdir -p build && cp -r $(LABEXTENSION) build/labextension-committed
	$(MAKE) --no-print-directory jupyterlab-build
	cd $(JUPYTERLAB) && npm test
	@diff -r -x package.json.orig build/labextension-committed $(LABEXTENSION) >/dev/null || \
		{ echo "$(LABEXTENSION) is out of date with editors/jupyterlab/src: run 'make jupyterlab-build' and commit it"; exit 1; }
	$(PY) -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps --force-reinstall ./$(JUPYTERLAB)

# libtpu for tests/cli/test_topology.py (compiling for a TPU pod with no TPU, issue 49): the wheel
# jax[tpu] brings for the tested jax (constraints.txt), 213 MB (684 MB unpacked), installed into
# build/libtpu, not .venv: a libtpu beside jax makes every process that opens a backend probe for a
# chip (warnings, ~0.2 s). The tests lay it under a capture interpreter of their own with a .pth.
LIBTPU := build/libtpu
.PHONY: libtpu
libtpu: $(LIBTPU)/.stamp
$(LIBTPU)/.stamp: constraints.txt | install
	rm -rf $(LIBTPU)
	$(PY) -m pip install --disable-pip-version-check -q --no-deps --target $(LIBTPU) \
		"libtpu==$$(sed -n 's/^libtpu==//p' constraints.txt)"
	touch $@

test: install lint system-deps $(TEST_DEPS)
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q

# The differential fuzzer (tests/fuzz) at length: random JAX programs traced by the worker and
# checked against make_jaxpr; `make test` runs it with a small budget. FUZZ_EXAMPLES sets the count.
FUZZ_EXAMPLES ?= 5000
fuzz: install
	@mkdir -p build
	JAXLSP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) JAXLSP_FUZZ_REPORT=build/fuzz-report.json \
		$(PY) -m pytest tests/fuzz -q -p no:cacheprovider --hypothesis-show-statistics
	@cat build/fuzz-report.json

# Every benchmark runs and prints its figures; the target fails at the end if one missed its bar.
# live_repos measures the repository checkouts in build/live-repos/ (skipped when there are none).
bench: install
	@status=0; for b in discovery server_memory capture first_call zero_config costs lsp viewer values live graph_store soak compiled timing scale init_share topology freshness live_repos; do \
		echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py || status=1; \
	done; exit $$status

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
