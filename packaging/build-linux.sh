#!/usr/bin/env bash
# Builds the Linux bundle with PyInstaller (one folder) and packs it as a tarball:
#   DIST/signoff-linux-ARCH/                   signoff, _internal/, share/ (desktop entry and
#                                              icons), install.sh
#   DIST/signoff-VERSION-linux-ARCH.tar.gz     that folder, packed
# Usage: bash packaging/build-linux.sh [--dist DIR] [--no-setup]
#   --dist DIR   where to write (default: dist/ in the checkout)
#   --no-setup   use .venv as it is (the tests, which run from it, build this way)
# It sets up .venv with scripts/setup.sh, installs the PyInstaller pinned in pyproject.toml's
# `bundle` extra, and prints the bundle's size and the build's time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dist=$root/dist
setup=1
while [ $# -gt 0 ]; do
    case $1 in
        --dist) dist=$(realpath -m "$2"); shift 2 ;;
        --no-setup) setup=0; shift ;;
        *) echo "usage: bash packaging/build-linux.sh [--dist DIR] [--no-setup]" >&2; exit 2 ;;
    esac
done
started=$(date +%s%N)

[ "$setup" = 1 ] && bash scripts/setup.sh
python=$root/.venv/bin/python
# The pins live in pyproject.toml alone; pip does nothing when they are installed already.
mapfile -t pins < <("$python" -c '
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["bundle"]))')
"$python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"

arch=$(uname -m)
version=$("$python" -c 'from importlib.metadata import version; print(version("signoff"))')
name=signoff-linux-$arch
bundle=$dist/$name
tarball=$dist/signoff-$version-linux-$arch.tar.gz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export QT_QPA_PLATFORM=offscreen  # the icon renderer and PyInstaller's Qt probes need no display

echo "== PyInstaller ($("$python" -m PyInstaller --version)): $bundle"
"$python" -m PyInstaller --noconfirm --log-level WARN --distpath "$work/dist" \
    --workpath "$work/build" packaging/signoff-linux.spec

# Around the executable: the desktop entry, the icons, and the per-user installer.
mkdir -p "$work/dist/signoff/share/applications"
cp resources/dev.signoff.Signoff.desktop "$work/dist/signoff/share/applications/"
"$python" packaging/render_icons.py hicolor "$work/dist/signoff/share/icons" >/dev/null
install -m 0755 packaging/install.sh "$work/dist/signoff/install.sh"

# Every Qt, PySide and Python library a bundled file needs must be in the bundle: trimming Qt
# (packaging/bundle.py) must not have dropped one. System libraries (libGL, libc) are not checked:
# the machine running the bundle provides them.
internal=$work/dist/signoff/_internal
missing=$(find "$work/dist/signoff" -type f \( -name '*.so*' -o -name signoff \) -print0 |
    LD_LIBRARY_PATH=$internal:$internal/PySide6/Qt/lib xargs -0 -n 20 ldd 2>/dev/null |
    grep -E '^\s(lib(Qt6|pyside6|shiboken6|icu|python3)[^ ]*) => not found' | sort -u || true)
if [ -n "$missing" ]; then
    echo "the bundle lacks libraries its files need:" >&2
    echo "$missing" >&2
    exit 1
fi

mkdir -p "$dist"
rm -rf "$bundle" "$tarball"
mv "$work/dist/signoff" "$bundle"
# A tarball that depends only on the files: names sorted, no owner, the last commit's time.
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$dist" -cf - "$name" |
    gzip -n -6 >"$tarball"

elapsed=$((($(date +%s%N) - started) / 1000000))
unpacked=$(du -sb "$bundle" | cut -f1)
packed=$(stat -c %s "$tarball")
files=$(find "$bundle" -type f | wc -l)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "bundle:  $bundle ($(mib "$unpacked") unpacked, $files files)"
echo "tarball: $tarball ($(mib "$packed"))"
printf 'built in %d.%d s\n' $((elapsed / 1000)) $((elapsed % 1000 / 100))
