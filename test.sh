#!/usr/bin/env bash
# The test command: checks the build prerequisites, then runs every test.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh --tests
cargo test --locked "$@"
