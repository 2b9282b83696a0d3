VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: lock install test typescript-tools junit-schema test-external lint format bench-ingest bench-aggregate bench-reports bench-bundles conformance-bundles chromium screenshots serve

install:
	python3 -m venv $(VENV) && $(VENV)/bin/pip install -q --require-hashes -r requirements/test.lock && $(VENV)/bin/pip install -q --no-deps -e .

# Re-resolves both lock files (hashes of every wheel, any platform, Python 3.11 and newer).
lock:
	$(VENV)/bin/pip install -q uv
	$(VENV)/bin/uv pip compile pyproject.toml --generate-hashes --universal --python-version 3.11 -q -o requirements/service.lock
	$(VENV)/bin/uv pip compile pyproject.toml --extra test --extra bench --generate-hashes --universal --python-version 3.11 -q -o requirements/test.lock
	$(PY) deploy/lock_without.py

test: chromium typescript-tools junit-schema
	$(PY) -m pytest

# The JUnit schema Jenkins reads (junit-10.xsd), from pytest's source distribution, pinned.
junit-schema:
	[ -f .cache/junit-10.xsd ] || { d=$$(mktemp -d) && python3 -m pip download -q --no-deps --no-binary :all: --require-hashes -r tests/clients/junit-schema.txt -d $$d && mkdir -p .cache && tar -xzf $$d/pytest-9.2.0.tar.gz -O pytest-9.2.0/testing/example_scripts/junit-10.xsd > .cache/junit-10.xsd; }

# openapi-typescript, openapi-fetch and tsc at the versions tests/clients/typescript pins.
typescript-tools:
	[ -x tests/clients/typescript/node_modules/.bin/openapi-typescript ] || npm ci --prefix tests/clients/typescript --no-audit --no-fund

test-external:
	EVALBOOK_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test $(PY) -m pytest -n 0 -m "server and not embedded_only"

lint:
	$(VENV)/bin/ruff check app tests bench
	$(VENV)/bin/ruff format --check app tests bench
	$(VENV)/bin/mypy

format:
	$(VENV)/bin/ruff format app tests bench
	$(VENV)/bin/ruff check --fix app tests bench

bench-ingest:
	$(PY) -m bench.ingest

bench-aggregate:
	$(PY) -m bench.aggregate

bench-reports:
	command -v wrk >/dev/null || apt-get install -y wrk
	$(PY) -m bench.reports

bench-bundles:
	$(PY) -m bench.bundles

# Regenerates tests/bundles/ (new ids and times; the expectations are in generate.py).
conformance-bundles:
	$(PY) -m tests.bundles.generate
	$(PY) -m tests.bundles.generate_log
	$(PY) -m tests.bundles.forger_classes
	$(PY) -m tests.bundles.generate_test_result

# Debian's Chromium drives the end-to-end tests of the Reports pages (through Playwright).
chromium:
	command -v chromium >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
	command -v go >/dev/null && [ -d /usr/share/gocode/src/golang.org/x/mod/sumdb ] \
	  || DEBIAN_FRONTEND=noninteractive apt-get install -y -q golang-go golang-golang-x-mod-dev

# Regenerates docs/screenshots/: the browser test saves one picture per page state there.
screenshots: chromium
	EVALBOOK_SCREENSHOT_DIR=docs/screenshots $(PY) -m pytest -q tests/web/test_browser_compare.py tests/web/test_browser.py tests/web/test_browser_board.py

serve:
	$(VENV)/bin/evalbook serve
