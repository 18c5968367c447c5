#!/usr/bin/env bash
# Installs `tansu`, an Apache-licensed Kafka-compatible broker from
# crates.io, into ~/.cargo/bin, with its SQLite storage engine. `.ci/run`
# starts it on loopback when it is installed and runs the Kafka tests
# against it (FEEDLOG_TEST_KAFKA) as well as against the in-process mock
# broker. A cold build takes 20–35 minutes on two cores.
#
# SQLite, not the in-memory engine: tansu 0.6's object-store engines
# (memory://, s3://) answer a fetch from an offset inside a record batch
# with the *next* batch, skipping the rest of the straddling one, and
# ListOffsets(latest) with the last batch's base offset + 1. A consumer
# that resumes from a committed position mid-batch would silently lose
# records; feedlog's real-broker tests catch it. The SQL engines store
# records one by one and answer both correctly. (tansu 0.6's SQLite engine
# has also been seen to panic in its group coordinator under repeated
# rebalances; the real-broker tests then fail with a group that never
# settles, and the broker's log shows the panic.)
#
# Usage: scripts/install-tansu.sh            (idempotent)
set -euo pipefail
version="${TANSU_VERSION:-}"
installed() {
  # cargo records the features of what it installed.
  [ -f "$HOME/.cargo/.crates2.json" ] &&
    grep -Eq '"tansu [^"]*":\{[^}]*"features":\[[^]]*"libsql"' "$HOME/.cargo/.crates2.json"
}
if installed; then
  echo "install-tansu: tansu (with SQLite storage) is already installed" >&2
  exit 0
fi
command -v cargo >/dev/null 2>&1 || { echo "install-tansu: cargo is missing" >&2; exit 1; }
echo "install-tansu: cargo install tansu --features libsql,dynostore (this takes a while)" >&2
cargo install --locked --force tansu --features libsql,dynostore ${version:+--version "$version"}
