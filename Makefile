# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: install run test test-faults lint bench bench-peers mutation clean

# The runtime (requirements.txt) plus what tests and lint need (requirements-dev.txt includes
# the runtime); the Docker image installs the runtime alone.
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-build.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

# The masker's hot modules compiled with mypyc into build/masking (docs/performance.md, "Figures"), again
# whenever one of its sources changes. Never fails: without a C compiler it warns, writes no
# manifest (so the next install tries again) and the pure-Python modules are used.
build/masking/manifest.json: $(VENV)/.installed scripts/build_masking.py $(wildcard traces/masking/*.py)
	$(PY) scripts/build_masking.py

install: $(VENV)/.installed build/masking/manifest.json

## Set up and serve the demo on embedded defaults (SQLite, filesystem broker, scripted model).
run: install
	$(PY) manage.py migrate --no-input -v0
	$(PY) manage.py collectstatic --no-input -v0
	$(PY) manage.py load_demo
	scripts/run-demo.sh

## Set up and run the whole test suite; the summary says which tier ran.
test: install
	$(PY) -m pytest

## The fault tier (docs/operations.md): a deployment of its own (PostgreSQL made with initdb,
## Redis, gunicorn, Celery workers and beat) under load while its parts fail; prints figures.
## About 5 minutes; not part of `make test`.
test-faults: install
	$(PY) -m pytest tests/faults -m faults -s -p no:cacheprovider

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PYTHONPATH=. $(VENV)/bin/lint-imports --no-cache
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) manage.py spectacular --fail-on-warn --validate --file /dev/null

bench: install
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

## Harness against LangGraph + PostgresSaver on the same task (needs DATABASE_URL: PostgreSQL).
bench/peers/.venv/.installed: bench/peers/requirements.txt
	$(PYTHON) -m venv bench/peers/.venv
	bench/peers/.venv/bin/pip install --quiet --disable-pip-version-check -r bench/peers/requirements.txt
	touch $@

bench-peers: install bench/peers/.venv/.installed
	$(PY) bench/peers/compare.py

## Mutation testing of the modules where a bug leaks data, hides tampering or lets a call
## through (slow: not in CI). MODULE=chain runs one; ARGS="--budget-s 600 --survivors" passes
## options (docs/mutation.md).
mutation: install
	$(PY) scripts/mutation.py $(MODULE) $(ARGS)

clean:
	rm -rf $(VENV) var build
