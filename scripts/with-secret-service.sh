#!/usr/bin/env bash
# Runs a command inside a private D-Bus session with an unlocked gnome-keyring Secret Service
# whose keyrings live in a temporary directory (the user's own keyring is never touched).
# Used through: dbus-run-session -- scripts/with-secret-service.sh COMMAND...
set -euo pipefail
keyrings=$(mktemp -d)
trap 'rm -rf "$keyrings"' EXIT
# --unlock reads the new login keyring's password from stdin and creates it unlocked.
eval "$(printf 'signoff-tests' | XDG_DATA_HOME="$keyrings" \
    gnome-keyring-daemon --unlock --components=secrets | sed 's/^/export /')"
# Wait (with a deadline) until the Secret Service owns its name on the bus.
for _ in $(seq 1 100); do
    if dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null |
        grep -q "boolean true"; then
        break
    fi
    sleep 0.1
done
"$@"
