#!/usr/bin/env bash
# Spark needs a JDK 17; install Debian's headless one when java is missing or older.
set -euo pipefail
if java -version 2>&1 | grep -Eq 'version "(17|18|19|2[0-9])'; then
  exit 0
fi
echo "eventtime: installing a headless JDK 17 (Spark needs Java 17+)" >&2
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
java -version
