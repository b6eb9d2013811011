#!/usr/bin/env bash
# Creates .venv (if needed) and installs Signoff into it, with the test tools when asked.
#   scripts/setup.sh          the app
#   scripts/setup.sh test     the app and everything the tests use
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "Signoff needs Python 3.11 or newer ($python is older or missing)" >&2
    exit 2
fi
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
extra=""
[ "${1:-}" = "test" ] && extra="[test]"
# A stamp avoids re-resolving dependencies on every run when nothing changed.
stamp=".venv/.signoff-installed$extra"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".$extra"
    touch "$stamp"
fi
