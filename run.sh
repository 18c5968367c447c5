#!/usr/bin/env bash
# feedlog's main job on its embedded default, end to end on one machine:
# `feedlog demo` loads a real social network (SNAP soc-Epinions1 from
# ../shared/data when present, else a generated one), processes it with live
# progress, serves the HTTP read API and prints a tour with curl lines.
# Ctrl-C stops it.
#
# Usage: ./run.sh [DEMO FLAGS]   (see `feedlog demo --help`; the data
# directory is $FEEDLOG_DATA, default feedlog-data/)
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
echo "building feedlog (release; the first build compiles RocksDB and takes a while)" >&2
cargo build --release --locked --quiet
feedlog="${CARGO_TARGET_DIR:-target}/release/feedlog"
exec "$feedlog" --data "${FEEDLOG_DATA:-feedlog-data}" demo "$@"
