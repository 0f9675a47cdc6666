#!/usr/bin/env bash
# The PostgreSQL sink's tests and example start a throwaway server with initdb / pg_ctl:
# install Debian's postgresql package when they are missing (the service is not started).
set -euo pipefail
if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
  exit 0
fi
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  exit 0
fi
echo "eventtime: installing PostgreSQL (Debian's postgresql package, for the PostgreSQL sink's tests)" >&2
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
ls /usr/lib/postgresql/*/bin/initdb
