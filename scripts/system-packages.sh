#!/usr/bin/env bash
# Installs the Debian packages the tests need, when run as root on Debian/Ubuntu:
#   dbus, gnome-keyring: a real Secret Service for the keyring tests.
# Elsewhere it says what is missing; tests needing it skip locally and fail in CI.
set -euo pipefail
packages=(dbus gnome-keyring)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "note: not installing ${missing[*]} (needs root and apt); tests that need them skip" >&2
fi
