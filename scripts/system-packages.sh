#!/usr/bin/env bash
# Installs the Debian packages the tests need, when run as root on Debian/Ubuntu:
#   dbus, gnome-keyring: a real Secret Service for the keyring tests.
#   xvfb, xdotool, x11-utils (xwininfo, xprop), imagemagick (import), xfce4-notifyd (a
#   notification daemon that draws action buttons), trayer (a tray host), openbox (a window
#   manager, for scripts/screenshots.sh): the tray app on a real X server
#   (tests/app/test_xvfb_*.py, scripts/screenshots.sh);
#   at-spi2-core (an accessibility bus), python3-gi and gir1.2-atspi-2.0 (Debian's Python
#   reading it): what xfce4-notifyd drew, read from its own window
#   (tests/app/test_xvfb_notification_markup.py, scripts/screenshot-notifications.sh);
#   xfce4-panel (its status tray plugin is a StatusNotifierItem host and watcher, as KDE's and
#   GNOME's AppIndicator trays are): the tray menu under such a host (tests/app/test_sni_tray.py);
#   weston (a Wayland compositor with a headless backend): the windows on Wayland
#   (tests/app/test_wayland_smoke.py; Qt's wayland plugin comes in PySide6's wheel);
#   libxcb-*, libxkbcommon-x11-0: what Qt's xcb platform plugin loads.
#   desktop-file-utils (desktop-file-validate): the desktop entries (tests/packaging);
#   binutils (strip): PyInstaller strips the bundle's libraries (packaging/build-linux.sh).
# Elsewhere it says what is missing; tests needing it skip locally and fail in CI.
set -euo pipefail
packages=(dbus gnome-keyring
    xvfb xdotool x11-utils imagemagick xfce4-notifyd trayer openbox xfce4-panel weston
    at-spi2-core python3-gi gir1.2-atspi-2.0
    libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
    libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libxkbcommon-x11-0
    desktop-file-utils binutils)
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
