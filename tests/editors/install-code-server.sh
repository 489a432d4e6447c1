#!/usr/bin/env bash
# Install code-server (VS Code in the browser) and playwright-core for the VS Code end-to-end test.
#
#   tests/editors/install-code-server.sh [DEST]      (default: ~/.cache/engram-tests/code-server)
#
# Idempotent: a DEST that already holds a working install is left alone (a second run takes
# well under a second). Works with nothing but the npm registry and Debian packages:
#   apt-get install -y build-essential pkg-config python3 libkrb5-dev ripgrep chromium
# code-server 4.100.3 (VS Code 1.100.3) is the newest release that runs on Node 20. Its own
# postinstall downloads ripgrep from GitHub and prebuilt native modules; here ripgrep comes from
# Debian and the native modules are built from source with node-gyp.
set -euo pipefail
CODE_SERVER_VERSION=${CODE_SERVER_VERSION:-4.100.3}
PLAYWRIGHT_CORE_VERSION=${PLAYWRIGHT_CORE_VERSION:-1.65.1}
DEST=${1:-${ENGRAM_TEST_CACHE:-$HOME/.cache/engram-tests}/code-server}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
STAMP="$DEST/.installed-$CODE_SERVER_VERSION-$PLAYWRIGHT_CORE_VERSION"
if [ -f "$STAMP" ] && [ -x "$DEST/node_modules/.bin/code-server" ] && [ -d "$DEST/node_modules/playwright-core" ]; then
  echo "code-server $CODE_SERVER_VERSION already installed in $DEST"
  exit 0
fi
for tool in node npm rg make g++ python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "install-code-server: $tool is missing (apt-get install -y nodejs npm ripgrep build-essential python3)" >&2; exit 1; }
done
[ -e /usr/include/gssapi/gssapi.h ] || echo "install-code-server: warning: libkrb5-dev looks missing; the kerberos module may not build" >&2

cd "$DEST"
[ -f package.json ] || printf '{"name":"engram-editor-tests","private":true}\n' > package.json
export npm_config_yes=true npm_config_unsafe_perm=true npm_config_audit=false npm_config_fund=false
# node-gyp builds against the installed node's headers when they exist (Debian's nodejs has them).
if [ -d /usr/include/node ] && [ -z "${npm_config_nodedir:-}" ]; then export npm_config_nodedir=/usr; fi
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: playwright-core never downloads a browser, but be explicit.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
t0=$(date +%s)
# 1. code-server and playwright-core, without install scripts.
npm install --ignore-scripts "code-server@$CODE_SERVER_VERSION" "playwright-core@$PLAYWRIGHT_CORE_VERSION"
cd node_modules/code-server/lib/vscode
# 2. VS Code's server dependencies, no scripts yet.
npm install --omit=dev --ignore-scripts
# 3. ripgrep from Debian: @vscode/ripgrep's postinstall exits 0 when its bin/ exists.
mkdir -p node_modules/@vscode/ripgrep/bin && ln -sf "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
# 4. Native modules (node-pty, spdlog, kerberos, watcher, ...) from source.
npm rebuild --foreground-scripts
# 5. What code-server's own postinstall would also do.
(cd bin/remote-cli && ln -sf code-linux.sh code-server)
(cd bin/helpers && ln -sf browser-linux.sh browser.sh)
(cd extensions && npm install --omit=dev)
cd "$DEST"
# 6. argon2 (password auth) is a native module of code-server itself.
npm rebuild argon2
XDG_CONFIG_HOME="$DEST/.xdg-config" XDG_DATA_HOME="$DEST/.xdg-data" node_modules/.bin/code-server --version
touch "$STAMP"
echo "code-server $CODE_SERVER_VERSION installed in $DEST in $(( $(date +%s) - t0 )) s"
