#!/usr/bin/env bash
# Runs the same tests N times in a row, each in a fresh process as `make test` runs them, and
# says how each run ended, a crash at exit (a signal after the last test) included:
#   bash scripts/repeat-tests.sh 20 tests/app
# Exit 0 only when every run passed and exited cleanly. Needs `make test` to have set up once.
set -uo pipefail
cd "$(dirname "$0")/.."
count=${1:?how many runs}
shift
export QT_QPA_PLATFORM=offscreen
failed=0
kept=$(mktemp -d)  # the whole output of each run that failed
for i in $(seq 1 "$count"); do
    log=$(mktemp)
    .venv/bin/pytest -q -p no:cacheprovider "$@" >"$log" 2>&1  # its own desktop: tests/conftest.py
    code=$?
    summary=$(grep -E "^(=+ )?[0-9]+ (passed|failed)" "$log" | tail -n 1)
    if [ "$code" -ne 0 ]; then
        failed=$((failed + 1))
        signal=""
        [ "$code" -gt 128 ] && signal=" (signal $((code - 128)))"
        echo "run $i: exit $code$signal: ${summary:-no summary}"
        grep -E "^(FAILED|ERROR)|Fatal Python error|QObject:" "$log" | head -n 5
        cp "$log" "$kept/run-$i.log"
        echo "  its output: $kept/run-$i.log"
    else
        echo "run $i: ok: $summary"
    fi
    rm -f "$log"
done
echo "$((count - failed)) of $count runs passed"
[ "$failed" -eq 0 ]
