# The commands of the README. Both create .venv with Python 3.12 (found through
# .python-version by pyenv, or as python3.12 on PATH) and install the package into it.
PYTHON ?= $(shell command -v python3.12 2>/dev/null || command -v python3)
VENV := .venv
export OPENBLAS_NUM_THREADS = 1

.PHONY: setup setup-dev demo test lint docs docs-fresh chromium

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip

# constraints.txt pins the exact versions CI runs with.
setup: $(VENV)/bin/python
	$(VENV)/bin/python -m pip install -q -c constraints.txt -e .

setup-dev: $(VENV)/bin/python
	$(VENV)/bin/python -m pip install -q -c constraints.txt -e ".[dev]"

# Main job: a real BM3KL fit with diagnostics on scikit-learn's bundled breast-cancer data.
demo: setup
	$(VENV)/bin/bayesmkl demo --out bayesmkl-demo

lint: setup-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The documentation site (docs/conf.py): Sphinx with every warning an error, the notebooks
# executed during the build, the API pages generated from the package's public names. An
# incremental build reads (and executes) again only what changed; docs-fresh starts from nothing.
DOCS_BUILD := docs/_build
SPHINX_BUILD = $(VENV)/bin/python -m sphinx -W --keep-going -b html -d $(DOCS_BUILD)/doctrees \
	docs $(DOCS_BUILD)/html

docs: setup-dev
	$(SPHINX_BUILD)

docs-fresh: setup-dev
	rm -rf $(DOCS_BUILD)
	$(SPHINX_BUILD)

# Debian's Chromium, for the browser test of the built site (tests/docs/test_site.py).
chromium:
	@test -x /usr/bin/chromium || { echo "installing Debian's chromium for the site test"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
		>/dev/null || { echo "could not install it: as root, apt-get install -y chromium"; \
		exit 1; }; }

# Tests: lint, a fresh build of the site (which executes every notebook: a failing cell fails
# it), then pytest over tests/ and the package's doctests; tests/docs drive the built site in
# headless Chromium and must not skip here. pytest's exit code 5, "no tests collected", fails
# like any other non-zero code. TEST_WORKERS pytest-xdist processes share the test files (one
# process uses about one core: on 2 cores, 2 workers took pytest from 1,529 s to 900 s);
# --dist loadfile keeps each file's module fixtures (fits) in one worker.
TEST_WORKERS ?= 2
test: lint docs-fresh chromium
	BAYESMKL_SITE_TESTS=required $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
		-n $(TEST_WORKERS) --dist loadfile --durations=15 --doctest-modules bayesmkl tests
