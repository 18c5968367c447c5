#!/usr/bin/env bash
# feedlog's main job on its embedded default, end to end on one machine:
# load a real social network (or a generated one), process it into the
# views, and read some of them back. Usage: ./run.sh [DATA_DIR]
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
data="${1:-feedlog-data}"
echo "building feedlog (release; the first build compiles RocksDB and takes a while)" >&2
cargo build --release --locked --quiet
feedlog=(target/release/feedlog)
[ -n "${CARGO_TARGET_DIR:-}" ] && feedlog=("$CARGO_TARGET_DIR/release/feedlog")
src=../shared/data/CollegeMsg.txt
if [ -e "$data/feedlog.json" ]; then
  echo "$data already exists: processing what is in its log" >&2
elif [ -r "$src" ]; then
  echo "loading $src (SNAP CollegeMsg; ids shifted by +1: SNAP starts at 0, feedlog at 1)" >&2
  ./scripts/snap-temporal.sh "$src" | "${feedlog[@]}" --data "$data" produce -
else
  echo "no $src: generating a network instead" >&2
  ./scripts/generate.sh 3000 60000 | "${feedlog[@]}" --data "$data" produce -
fi
"${feedlog[@]}" --data "$data" run --until-idle
echo "--- counters of user 1"
"${feedlog[@]}" --data "$data" query counters 1
echo "--- recent followers of user 1 (3 newest)"
"${feedlog[@]}" --data "$data" query recent-followers 1 --limit 3
echo "--- first timeline page of user 2 (5 posts)"
"${feedlog[@]}" --data "$data" query timeline 2 --limit 5
echo "--- more: $0 leaves $data in place; try"
echo "    ${feedlog[*]} --data $data query timeline 2 --limit 20 --cursor <next_cursor>"
