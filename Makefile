# Everyday commands (`make help` lists them). Each is a plain command you can also type.
# Extra arguments go in ARGS, e.g. `make train ARGS="model/net=cnn trainer.max_epochs=5"`.
PYTHON ?= python
ARGS ?=

.PHONY: help install hooks train test test-fast lint format bench update clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-10s %s\n", $$1, $$2}'

install:  ## the project and its dev tools, editable (install the torch build you want first)
	$(PYTHON) -m pip install -e ".[dev]"

hooks:  ## run the .pre-commit-config.yaml checks before every commit
	pre-commit install

train:  ## train with the default config, plus any Hydra overrides in ARGS
	$(PYTHON) train.py $(ARGS)

test:  ## the whole test suite (what CI runs)
	$(PYTHON) -m pytest $(ARGS)

test-fast:  ## the tests that take seconds (skips the training runs marked slow)
	$(PYTHON) -m pytest -m "not slow" $(ARGS)

lint:  ## ruff lint, ruff format check, mypy, import layers (what CI runs)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy
	lint-imports --no-cache

format:  ## let ruff fix what it can and format the code
	$(PYTHON) -m ruff check --fix .
	$(PYTHON) -m ruff format .

bench:  ## the speed benchmarks (they print ratios, they do not fail)
	$(PYTHON) -m my_project.machinery.bench $(ARGS)

update:  ## the template's changes (cruft update); fails naming the files to merge by hand
	@$(PYTHON) -c "import cruft" 2>/dev/null || { echo "make update runs cruft: pip install cruft"; exit 2; }
	$(PYTHON) -m cruft update --skip-apply-ask $(ARGS)
	@left="$$(git diff --name-only --diff-filter=U; git ls-files --others --exclude-standard '*.rej')"; \
	if [ -n "$$left" ]; then \
		echo "make update: merge these by hand (conflict markers, or a .rej file of the rejected change):"; \
		echo "$$left" | sed 's/^/  /'; exit 1; \
	fi

clean:  ## caches and build outputs (runs under logs/ are kept)
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
