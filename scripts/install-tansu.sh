#!/usr/bin/env bash
# Installs `tansu`, an Apache-licensed Kafka-compatible broker from
# crates.io, into ~/.cargo/bin. `.ci/run` starts it on loopback when it is
# installed and runs the Kafka tests against it (FEEDLOG_TEST_KAFKA) as well
# as against the in-process mock broker. A cold build takes 20–35 minutes on
# two cores.
#
# Usage: scripts/install-tansu.sh            (idempotent; reinstalls nothing)
set -euo pipefail
version="${TANSU_VERSION:-}"
if command -v tansu >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/tansu" ]; then
  echo "install-tansu: tansu is already installed" >&2
  exit 0
fi
command -v cargo >/dev/null 2>&1 || { echo "install-tansu: cargo is missing" >&2; exit 1; }
# The in-memory storage engine needs the `dynostore` feature.
echo "install-tansu: cargo install tansu --features dynostore (this takes a while)" >&2
cargo install --locked tansu --features dynostore ${version:+--version "$version"}
