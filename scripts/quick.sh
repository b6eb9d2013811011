#!/usr/bin/env bash
# The developer's quick loop: lint, types, and the fast tests of what changed since BASE (by
# default the last commit), uncommitted work included (tests/touched.py says which):
#   make quick                 BASE=HEAD
#   make quick BASE=main       everything this branch changed
# Needs `make test` to have set up once. `make test` is still the last word.
set -euo pipefail
cd "$(dirname "$0")/.."
export QT_QPA_PLATFORM=offscreen
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
mapfile -t tests < <(.venv/bin/python -m tests.touched "${1:-HEAD}")
if [ "${#tests[@]}" -eq 0 ]; then
    echo "no test touches what changed"
    exit 0
fi
echo "== pytest: ${#tests[@]} files (the slow ones and the mutations wait for make test)"
exec .venv/bin/pytest -q -n "${SIGNOFF_TEST_WORKERS:-4}" --dist loadgroup --max-worker-restart=0 \
    -m "not slow" \
    --durations=5 "${tests[@]}"
