#!/usr/bin/env bash
# Sets up and runs every check: system packages (as root), the venv, lint, types, all tests.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-packages.sh
bash scripts/setup.sh test
bash scripts/mcp-servers.sh
export QT_QPA_PLATFORM=offscreen
echo "== ruff"
.venv/bin/ruff check .  # each its own command: under set -e, a failure before && would not stop
.venv/bin/ruff format --check .
echo "== mypy (strict on core/)"; .venv/bin/mypy
echo "== pytest"
# Workers side by side, each with a desktop of its own (tests/private_desktop.py); the 15
# slowest tests, then the time of each part against its budget (tests/suite_time.py).
# SIGNOFF_TEST_WORKERS=0 runs them all in this one process.
status=0
.venv/bin/pytest -n "${SIGNOFF_TEST_WORKERS:-4}" --dist loadgroup --durations=15 \
    --junit-xml=build/test-report.xml "$@" || status=$?
.venv/bin/python -m tests.suite_time build/test-report.xml || true
exit "$status"
