#!/usr/bin/env bash
# Build editors/vscode into a .vsix outside the repository, with node_modules cached there.
#
#   tests/editors/build-vscode-extension.sh [BUILD_DIR]   (default: ~/.cache/engram-tests/vscode-extension)
#
# `npm ci` runs only when package-lock.json changed since the last build. Runs the unit tests
# (node --test) and prints the path of the .vsix on its last line.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../../editors/vscode" && pwd)
BUILD=${1:-${ENGRAM_TEST_CACHE:-$HOME/.cache/engram-tests}/vscode-extension}
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
# The sources' fingerprint: an unchanged extension is not rebuilt (its unit tests still run).
sources=$(cd "$SRC" && find . \( -path ./node_modules -o -path ./out \) -prune -o -type f ! -name '*.vsix' -print0 \
  | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [ -f "$BUILD/engram.vsix" ] && [ "$(cat "$BUILD/.sources-stamp" 2>/dev/null)" = "$sources" ]; then
  (cd "$BUILD" && node --test test/ >&2)
  echo "$BUILD/engram.vsix"
  exit 0
fi
rm -rf "$BUILD/src" "$BUILD/test" "$BUILD/test-support" "$BUILD/out" "$BUILD"/*.vsix "$BUILD/.sources-stamp"
(cd "$SRC" && tar cf - --exclude=./node_modules --exclude=./out --exclude='*.vsix' .) | (cd "$BUILD" && tar xf -)
cd "$BUILD"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
stamp=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -d node_modules ] || [ "$(cat .lock-stamp 2>/dev/null)" != "$stamp" ]; then
  npm ci --no-audit --no-fund >&2
  echo "$stamp" > .lock-stamp
fi
npm run build >&2
node --test test/ >&2
npx --no-install vsce package --allow-missing-repository -o engram.vsix >&2
echo "$sources" > .sources-stamp
echo "$BUILD/engram.vsix"
