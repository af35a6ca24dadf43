# greenroute — developer entry points. `make demo` and `make test` work on a fresh clone.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-core

.PHONY: demo test lint format bench loadtest clean install debian-deps

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e ".[dev,opt,rl,agent,scale,serve,llama]"
	touch $(STAMP)

install: $(STAMP)

# Debian packages the tests use: Chromium (the report is opened in a headless browser).
# Installed only when missing; needs root or passwordless sudo.
DEBIAN_PACKAGES := chromium redis-server
debian-deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do command -v $$p >/dev/null || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo -n"; fi; \
	  echo "installing Debian packages:$$missing"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

demo: $(STAMP)
	$(VENV)/bin/greenroute demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/ruff format --check src tests

format: $(STAMP)
	$(VENV)/bin/ruff format src tests
	$(VENV)/bin/ruff check --fix src tests

test: $(STAMP) debian-deps lint
	$(VENV)/bin/python -m pytest -n 2 --dist worksteal -q

bench: $(STAMP)
	$(VENV)/bin/python -m greenroute.bench.perf

# the gateway under 500 req/s for 60 s on loopback, one of 3 regions killed at 20 s, back at 40 s
loadtest: $(STAMP)
	$(VENV)/bin/python -m greenroute.serve.loadtest --rate 500 --duration 60

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis build dist src/*.egg-info
