# Two commands on a fresh machine: `make demo` runs the main job, `make test` runs the tests.
# Both create .venv and install the project from pyproject.toml first.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
DEMO_DIR ?= demo-output

.PHONY: demo test install bench clean

$(VENV)/.installed: pyproject.toml
	bash scripts/ensure-java.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/eventtime replay examples/scenarios/allowed_lateness.json --pretty

test: $(VENV)/.installed
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -p no:cacheprovider -q

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache .hypothesis
