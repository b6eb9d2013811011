#!/usr/bin/env bash
# Sets up Signoff and starts it. Arguments go to the signoff command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/signoff "$@"
