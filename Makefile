# `make serve`: set up, then serve the embedded judge and score a few example pairs.
# `make test`: set up, then run the whole test suite (real engine included).
# `make lint`: ruff, as configured in pyproject.toml.
# `make dist`: the sdist and, built from it, the wheel, into dist/ (docs/install.md installs them).
# `make docs`: the documentation site from docs/ (mkdocs.yml) into site/, offline and strict.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done

.PHONY: setup serve test lint proto dist docs
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

docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
