#!/usr/bin/env bash
# Spark needs Java 17 and eventtime's engine is compiled with javac at install time: install
# Debian's headless JDK 17 when java or javac is missing or older (a JRE alone is not enough).
set -euo pipefail
if java -version 2>&1 | grep -Eq 'version "(17|18|19|2[0-9])' && javac -version 2>&1 | grep -Eq 'javac (17|18|19|2[0-9])'; then
  exit 0
fi
echo "eventtime: installing a headless JDK 17 (Spark needs Java 17+)" >&2
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
java -version
javac -version
