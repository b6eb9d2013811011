#!/usr/bin/env bash
# Installs real third-party MCP servers and the MCP Inspector for the tests, into
# .cache/mcp-servers/ (never into .venv):
#   npm/   @modelcontextprotocol/server-{filesystem,memory,everything} and the inspector
#   time/  a venv with mcp-server-time     (its own venv: it pins its own mcp)
#   git/   a venv with mcp-server-git
# Each part is skipped when its stamp names the pinned versions already. Without node/npm it
# installs them via apt as root on Debian/Ubuntu, otherwise it says so and goes on: the tests
# that need them skip locally and fail in CI. tests/mcp_servers.py reads the same layout.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned after `npm view` / `pip index versions` (2026-10). The inspector declares
# node >=22.19; its --cli mode runs on node 20 as the tests check.
npm_packages=(
    @modelcontextprotocol/server-filesystem@2026.8.31
    @modelcontextprotocol/server-memory@2026.8.31
    @modelcontextprotocol/server-everything@2026.8.31
    @modelcontextprotocol/inspector@2.12.0
)
time_package="mcp-server-time==2026.10.19"
git_package="mcp-server-git==2026.10.19"

cache=.cache/mcp-servers
mkdir -p "$cache"
status=0

# --- npm: the three Node servers and the inspector -------------------------------------------
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
    else
        echo "note: node/npm missing (needs root and apt to install); the MCP server tests skip" >&2
    fi
fi
if command -v node >/dev/null && command -v npm >/dev/null; then
    stamp="$cache/npm/.signoff-installed"
    want="${npm_packages[*]}"
    if [ ! -d "$cache/npm/node_modules" ] || [ ! -f "$stamp" ] ||
        [ "$(cat "$stamp")" != "$want" ]; then
        rm -f "$stamp"
        mkdir -p "$cache/npm"
        # --ignore-scripts: the only install script in the tree is the inspector's postinstall,
        # which does nothing outside its own source checkout.
        if npm install --prefix "$cache/npm" --save-exact --ignore-scripts --no-audit --no-fund \
            --loglevel=error "${npm_packages[@]}" >/dev/null; then
            printf '%s\n' "$want" >"$stamp"
        else
            echo "error: npm install of the MCP servers failed" >&2
            status=1
        fi
    fi
fi

# --- PyPI: each Python server in its own venv -------------------------------------------------
python=${PYTHON:-python3}
install_venv() { # DIR REQUIREMENT
    local dir="$cache/$1" want="$2" stamp="$cache/$1/.signoff-installed"
    [ -x "$dir/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
    rm -rf "$dir"
    if "$python" -m venv "$dir" &&
        "$dir/bin/python" -m pip install -qq --disable-pip-version-check "$want"; then
        printf '%s\n' "$want" >"$stamp"
    else
        echo "error: could not install $want into $dir" >&2
        status=1
    fi
}
if "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    install_venv time "$time_package"
    install_venv git "$git_package"
else
    echo "note: $python missing or older than 3.10; mcp-server-time/git not installed" >&2
fi
# A failed install fails `make test` in CI; locally the tests that need it skip with the reason.
[ -n "${CI:-}" ] && exit $status
exit 0
