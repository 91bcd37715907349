#!/usr/bin/env bash
# Installs what the test suite uses for real (no mocks), from Debian's packages and the npm
# registry only: bubblewrap (the local runtime's namespace backend), PostgreSQL (the session
# repository's second adapter; the tests start a private cluster), BusyBox and zstd (the tools
# of a small image, as in Alpine, for the one-file session transfers and searches), util-linux's
# script (the pty of a local sandbox's interactive terminal; Essential on Debian) and vi (the
# full-screen program the terminal tests run), Chromium and libkrb5-dev (a real VS Code —
# code-server from npm — driven headless), then code-server itself.
# Idempotent and quick when everything is present. `npm test` runs it first (pretest).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=()
[ "$(id -u)" -eq 0 ] || ! command -v sudo >/dev/null 2>&1 || SUDO=(sudo)

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
command -v busybox >/dev/null 2>&1 || missing+=(busybox)
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v script >/dev/null 2>&1 || missing+=(bsdutils)
command -v vi >/dev/null 2>&1 || missing+=(vim-tiny)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)

if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-deps: missing ${missing[*]} and no apt-get here; install them with your package manager" >&2
    exit 1
  fi
  if [ "$(id -u)" -ne 0 ] && [ ${#SUDO[@]} -eq 0 ]; then
    echo "install-test-deps: not root and no sudo; run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "install-test-deps: installing ${missing[*]} from Debian's packages…"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# kubectl, a client of the cluster simulator in test/unit/kruntimes/kubectl.test.ts: one on PATH, or
# Debian's kubernetes-client unpacked privately (no root, nothing installed system-wide).
if ! command -v kubectl >/dev/null 2>&1 && [ ! -x .test-tmp/kubectl/usr/bin/kubectl ]; then
  echo "install-test-deps: unpacking Debian's kubernetes-client into .test-tmp/kubectl…"
  deb_dir="$(mktemp -d)"
  # A machine whose package lists were never fetched finds nothing to download: fetch them once.
  (cd "$deb_dir" && { apt-get download -qq kubernetes-client 2>/dev/null || { "${SUDO[@]}" apt-get update -qq && apt-get download -qq kubernetes-client; }; })
  mkdir -p .test-tmp/kubectl
  dpkg -x "$deb_dir"/kubernetes-client_*.deb .test-tmp/kubectl
  rm -rf "$deb_dir"
fi

bash scripts/install-vscode-host.sh
echo "install-test-deps: bubblewrap, PostgreSQL, BusyBox, zstd, script, vi, Chromium, kubectl and code-server are ready"
