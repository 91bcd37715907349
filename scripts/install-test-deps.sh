#!/bin/sh
# Installs the system packages the test suite uses for real (no mocks): Debian's
# `bubblewrap` for the local gateway's namespace backend. Idempotent; CI runs it as root on
# Debian. Elsewhere it says what to install instead of failing the build.
set -eu

need_bwrap=1
if command -v bwrap >/dev/null 2>&1; then need_bwrap=0; fi

if [ "$need_bwrap" -eq 0 ]; then
  echo "install-test-deps: bubblewrap already installed ($(bwrap --version))"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: no apt-get here; install bubblewrap with your package manager (the bubblewrap tests skip without bwrap)" >&2
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-test-deps: not root and no sudo; run: apt-get install -y bubblewrap" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends bubblewrap
echo "install-test-deps: installed $(bwrap --version)"
