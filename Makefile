# `make serve`: set up, then serve the embedded judge and score a few example pairs.
# `make test`: set up, then run the whole test suite (real engine included).
# `make lint`: ruff, as configured in pyproject.toml.
# `make dist`: the sdist and, built from it, the wheel, into dist/ (docs/install.md installs them).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done

.PHONY: setup serve test lint proto dist
setup: $(STAMP)
$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh
	touch $(STAMP)

serve: setup
	$(VENV)/bin/geval-reward serve --demo

test: setup
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .

proto: setup
	$(PY) scripts/gen_proto.py

dist: setup
	rm -rf dist
	$(PY) -m build --outdir dist .
