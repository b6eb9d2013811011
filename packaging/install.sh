#!/bin/sh
# Installs Signoff for you alone, from the folder this script is in (the unpacked tarball):
#   ~/.local/opt/signoff/                                    the bundle
#   ~/.local/bin/signoff                                     a symbolic link to its executable
#   ~/.local/share/applications/dev.signoff.Signoff.desktop  the menu entry
#   ~/.local/share/icons/hicolor/*/apps/dev.signoff.Signoff.*  its icon
# ./install.sh --uninstall removes them, and a "Start at login" entry pointing at them. Your
# configuration, database and keyring entry stay. No root, no system file is touched.
# XDG_DATA_HOME moves ~/.local/share; SIGNOFF_PREFIX moves ~/.local (for opt/ and bin/).
set -eu

APP_ID=dev.signoff.Signoff
prefix=${SIGNOFF_PREFIX:-$HOME/.local}
opt=$prefix/opt/signoff
bin=$prefix/bin
data=${XDG_DATA_HOME:-$HOME/.local/share}
autostart=${XDG_CONFIG_HOME:-$HOME/.config}/autostart/signoff.desktop
here=$(cd "$(dirname "$0")" && pwd -P)

# An Exec argument, quoted as the Desktop Entry Specification asks when it must be.
exec_quoted() {
    case $1 in
        *[!A-Za-z0-9_/.+,:@=-]*)
            escaped=$(printf '%s' "$1" | sed -e 's/\\/\\\\\\\\/g' -e 's/["`$]/\\\\&/g' -e 's/%/%%/g')
            printf '"%s"' "$escaped" ;;
        *) printf '%s' "$1" ;;
    esac
}

# A text for the right side of sed's s|...|...|.
sed_text() {
    printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'
}

refresh() {
    command -v update-desktop-database >/dev/null 2>&1 &&
        update-desktop-database -q "$data/applications" 2>/dev/null || true
    command -v gtk-update-icon-cache >/dev/null 2>&1 &&
        gtk-update-icon-cache -q -t -f "$data/icons/hicolor" 2>/dev/null || true
}

# Whether a desktop entry's Exec runs this bundle's program: directly, or through env with a
# SIGNOFF_HOME, as the app's "Start at login" writes it when the app has one.
starts_this_bundle() {
    line=$(grep -m 1 '^Exec=' "$1") || return 1
    case "$line" in
        "Exec=$opt/"* | "Exec=\"$opt/"*) return 0 ;;
        "Exec=env SIGNOFF_HOME="*" $opt/"* | "Exec=env SIGNOFF_HOME="*" \"$opt/"*) return 0 ;;
        "Exec=env \"SIGNOFF_HOME="*"\" $opt/"* | "Exec=env \"SIGNOFF_HOME="*"\" \"$opt/"*) return 0 ;;
    esac
    return 1
}

uninstall() {
    if [ -L "$bin/signoff" ] && [ "$(readlink "$bin/signoff")" = "$opt/signoff" ]; then
        rm -f "$bin/signoff"
    fi
    rm -f "$data/applications/$APP_ID.desktop"
    rm -f "$data"/icons/hicolor/*/apps/"$APP_ID".png "$data/icons/hicolor/scalable/apps/$APP_ID.svg"
    if [ -f "$autostart" ] && starts_this_bundle "$autostart"; then
        rm -f "$autostart"
    fi
    rm -rf "$opt"
    refresh
    echo "Signoff is uninstalled. Your configuration and database stay (signoff's data and"
    echo "config folders, ~/.local/share/signoff and ~/.config/signoff by default)."
}

install() {
    [ -x "$here/signoff" ] && [ -d "$here/_internal" ] || {
        echo "install.sh: run it from the unpacked Signoff folder (signoff and _internal/ beside it)" >&2
        exit 2
    }
    if [ "$here" != "$opt" ]; then
        mkdir -p "$prefix/opt"
        rm -rf "$opt.new"
        cp -R "$here" "$opt.new"
        rm -rf "$opt"
        mv "$opt.new" "$opt"
    fi
    mkdir -p "$bin" "$data/applications" "$data/icons"
    ln -sfn "$opt/signoff" "$bin/signoff"
    sed -e "s|^Exec=.*|Exec=$(sed_text "$(exec_quoted "$opt/signoff")")|" \
        -e "s|^TryExec=.*|TryExec=$(sed_text "$(printf '%s' "$opt/signoff" | sed 's/\\/\\\\/g')")|" \
        "$opt/share/applications/$APP_ID.desktop" >"$data/applications/$APP_ID.desktop"
    cp -R "$opt/share/icons/hicolor" "$data/icons/"
    refresh
    echo "Signoff is installed in $opt."
    echo "Start it from your applications menu, or run: signoff"
    case ":$PATH:" in
        *":$bin:"*) ;;
        *) echo "Note: $bin is not on your PATH; add it, or run $bin/signoff." ;;
    esac
    echo "If Signoff was running, quit it from its tray menu and start it again."
}

case ${1:-} in
    "") install ;;
    --uninstall) uninstall ;;
    *) echo "usage: ./install.sh [--uninstall]" >&2; exit 2 ;;
esac
