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
if command -v dbus-run-session >/dev/null && command -v gnome-keyring-daemon >/dev/null; then
    exec dbus-run-session -- bash scripts/with-secret-service.sh .venv/bin/pytest "$@"
fi
exec .venv/bin/pytest "$@"
