#!/usr/bin/env bash
# Installs Debian's PostgreSQL server (initdb, pg_ctl, postgres) for the session-repository tests,
# which start their own private cluster (temp data dir, private port). Idempotent: does nothing
# when /usr/lib/postgresql/*/bin/initdb is already there.
set -euo pipefail

if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  echo "postgresql: already installed ($(ls -d /usr/lib/postgresql/*/bin/initdb | tail -n 1))"
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  SUDO=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends postgresql

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  echo "postgresql: installed, but no /usr/lib/postgresql/*/bin/initdb was found" >&2
  exit 1
fi
echo "postgresql: installed ($(ls -d /usr/lib/postgresql/*/bin/initdb | tail -n 1))"
