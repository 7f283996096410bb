# Everyday commands (`make help` lists them). Two are all a fresh clone needs:
#   make train    trains the example        make test    runs the tests (what CI runs)
# Every target runs in the project's virtual environment, $(VENV): the first one creates it and
# installs torch ($(TORCH)) and the locked dependencies (requirements/lock.txt, hashes verified),
# step by step with pip's progress (requirements/install.py); later ones install nothing until
# the lock or pyproject.toml changes.
# Extra arguments go in ARGS, e.g. `make train ARGS="model/net=cnn trainer.max_epochs=5"`.
VENV ?= .venv
# The Python that creates $(VENV) (one that pyproject.toml's requires-python admits), e.g.
# `make test PYTHON3=python3.12`.
PYTHON3 ?= python3
# torch is pinned here, not locked: the build differs by machine. TORCH_BUILD picks it: auto
# (on Linux the CPU build unless an NVIDIA driver is found; elsewhere PyPI's wheel), cpu or
# cuda (PyPI's Linux wheel, with its CUDA libraries); TORCH_INDEX gives torch's step another
# index, e.g. https://download.pytorch.org/whl/cu126. requirements/install.py says what it
# takes and why.
TORCH ?= torch==2.13.0
TORCH_BUILD ?= auto
TORCH_INDEX ?=
ARGS ?=

# The floors environment of `make test-floors`: the lowest versions pyproject.toml allows.
FLOORS ?= .venv-floors

PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
# Test processes: one per core (pytest-xdist), each taking whole files (their trained runs are
# made once per file); `make test WORKERS=0` runs everything in one process.
WORKERS ?= auto
PYTEST := $(PYTHON) -m pytest -n $(WORKERS) --dist loadfile

.PHONY: help install lock hooks train test test-slurm test-fast test-all test-floors lint format bench update clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-11s %s\n", $$1, $$2}'

install: $(INSTALLED)  ## the virtual environment, from the lock (what every target does first)

$(INSTALLED): requirements/lock.txt pyproject.toml
	@$(PYTHON3) requirements/install.py $(VENV) --torch "$(TORCH)" \
		--torch-build "$(TORCH_BUILD)" --torch-index "$(TORCH_INDEX)"
	@touch $@

lock:  ## resolve every dependency but torch again, newest allowed, into requirements/lock.txt
	@test -x $(PYTHON) || $(PYTHON3) -m venv $(VENV)
	@test -x $(VENV)/bin/uv || $(PYTHON) -m pip install -q uv
	$(VENV)/bin/uv pip compile pyproject.toml --all-extras --universal --python-version 3.10 \
		--generate-hashes --upgrade --overrides requirements/without-torch.txt \
		--no-emit-package torch --custom-compile-command "make lock" -q -o requirements/lock.txt
	$(PYTHON) requirements/lock.py stamp

hooks: $(INSTALLED)  ## run the .pre-commit-config.yaml checks before every commit
	@git rev-parse --git-dir >/dev/null 2>&1 || { echo "make hooks: this folder is no git repository yet; run 'git init' first (pre-commit installs into .git/hooks)."; exit 2; }
	$(PYTHON) -m pre_commit install

train: $(INSTALLED)  ## train with the default config, plus any Hydra overrides in ARGS
	$(PYTHON) train.py $(ARGS)

test: $(INSTALLED)  ## the tests, without the soak, exhaustive and SLURM tiers (what the project's CI runs)
	$(PYTEST) -m "not soak and not exhaustive and not slurm" $(ARGS)

# The SLURM tier starts a one-node cluster on this machine for its jobs: it needs root (slurmd
# starts jobs as their user), and installs SLURM and munge with apt-get where they are missing;
# elsewhere its tests are skipped, saying why. One test process: the jobs share the cores.
test-slurm: $(INSTALLED)  ## jobs on a one-node SLURM cluster on this machine, as root (what CI runs after test)
	$(PYTHON) -m tests.machinery.slurm_cluster
	$(PYTHON) -m pytest -n 0 -m "slurm and not soak and not exhaustive" $(ARGS)

test-fast: $(INSTALLED)  ## the in-process tests only: no training in a process of its own
	$(PYTEST) -m "not slow and not soak and not exhaustive" $(ARGS)

test-all: $(INSTALLED)  ## every test: the soak and exhaustive tiers too, then test-floors
	$(PYTEST) $(ARGS)
	$(MAKE) test-floors ARGS=

$(FLOORS)/.installed: pyproject.toml requirements/floors.py | $(INSTALLED)
	rm -rf $(FLOORS)
	$(PYTHON) requirements/floors.py $(FLOORS) --python $(PYTHON3) --torch "$(TORCH)" \
		--torch-build "$(TORCH_BUILD)" --torch-index "$(TORCH_INDEX)"
	@touch $@

test-floors: $(FLOORS)/.installed  ## the fast tier and lint on the lowest versions pyproject.toml allows
	$(FLOORS)/bin/python -m pytest -n $(WORKERS) --dist loadfile \
		-m "not slow and not soak and not exhaustive" $(ARGS)
	$(call lint_with,$(FLOORS)/bin/python,--cache-dir $(FLOORS)/.mypy_cache)

lint: $(INSTALLED)  ## ruff lint, ruff format check, mypy, import layers (what CI runs)
	$(call lint_with,$(PYTHON))

# make lint's checks, by the Python $(1) and its environment's tools; $(2): mypy's options.
# import-linter has no `python -m` form: its `lint-imports` command, run by that Python.
define lint_with
	$(1) -m ruff check . || { echo 'make lint: `make format` fixes what ruff marks [*] above (import order among them); then `make lint` again.' >&2; exit 1; }
	$(1) -m ruff format --check . || { echo 'make lint: the layout of the files above differs from ruff'\''s (whitespace and line breaks): `make format` rewrites it; then `make lint` again.' >&2; exit 1; }
	$(1) -m mypy $(2)
	$(1) -c "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())" --no-cache
endef

format: $(INSTALLED)  ## let ruff fix what it can and format the code
	$(PYTHON) -m ruff check --fix .
	$(PYTHON) -m ruff format .

bench: $(INSTALLED)  ## the speed benchmarks (they print ratios, they do not fail)
	$(PYTHON) -m my_project.machinery.bench $(ARGS)

update: $(INSTALLED)  ## the template's changes (cruft update); fails naming the files to merge by hand
	@test -f .cruft.json || { echo "make update: no .cruft.json, so which template and commit this project came from is unknown (it was made from a copy without git history). Link it once with 'cruft link <the template's git URL>', commit, then run make update."; exit 2; }
	$(PYTHON) -m cruft update --skip-apply-ask $(ARGS)
	@left="$$(git diff --name-only --diff-filter=U; git ls-files --others --exclude-standard '*.rej')"; \
	if [ -n "$$left" ]; then \
		echo "make update: merge these by hand (conflict markers, or a .rej file of the rejected change):"; \
		echo "$$left" | sed 's/^/  /'; exit 1; \
	fi

clean:  ## caches and build outputs (runs under logs/ and the .venv are kept)
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
