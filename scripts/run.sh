#!/usr/bin/env bash
# Sets up Signoff and starts it (the tray app; arguments go to the signoff command instead).
set -euo pipefail
cd "$(dirname "$0")/.."
# Qt's X11 platform plugin needs a few system libraries PySide6 does not ship.
if [ "$(uname)" = Linux ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    libs=(libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
          libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libxkbcommon-x11-0)
    missing=()
    for p in "${libs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi
bash scripts/setup.sh
exec .venv/bin/signoff "$@"
