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
# The tests side by side, 4 workers each with a desktop of its own (tests/private_desktop.py);
# then, in a whole run, alone on the whole machine, the ones that measure it (marked
# whole_machine). Each run prints its slowest tests; then the time of each part against its
# budget (tests/suite_time.py). With arguments, one run side by side of what they select.
# SIGNOFF_TEST_WORKERS=0 runs the tests in one process.
# A worker that crashes (a segmentation fault, a test past its timeout) ends the run, naming
# the test: xdist 3.8 replacing it under --dist loadgroup can wait forever on work it requeued
# (pytest-dev/pytest-xdist#1378).
side_by_side=(-n "${SIGNOFF_TEST_WORKERS:-4}" --dist loadgroup --max-worker-restart=0
              --durations=15)
rm -f build/test-report.xml build/test-report-apart.xml
status=0
if [ "$#" -gt 0 ]; then
    .venv/bin/pytest "${side_by_side[@]}" --junit-xml=build/test-report.xml "$@" || status=$?
else
    .venv/bin/pytest "${side_by_side[@]}" -m "not whole_machine" \
        --junit-xml=build/test-report.xml || status=$?
    apart=0
    .venv/bin/pytest -n 0 --durations=15 -m whole_machine \
        --junit-xml=build/test-report-apart.xml || apart=$?
    [ "$status" -eq 0 ] && status=$apart
fi
.venv/bin/python -m tests.suite_time build/test-report.xml build/test-report-apart.xml || true
exit "$status"
