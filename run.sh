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
star=1  # in a generated network user 1 is the most followed
if [ -e "$data/feedlog.json" ]; then
  echo "$data already exists: processing what is in its log" >&2
elif [ -r "$src" ]; then
  echo "loading $src (SNAP CollegeMsg; ids shifted by +1: SNAP starts at 0, feedlog at 1)" >&2
  ./scripts/snap-temporal.sh "$src" | "${feedlog[@]}" --data "$data" produce -
  # The user who received messages from the most people (SNAP id + 1).
  star=$(awk '!/^#/ && !seen[$1, $2]++ { n[$2]++ } END { for (u in n) if (n[u] > best) { best = n[u]; top = u } print top + 1 }' "$src")
else
  echo "no $src: generating a network instead" >&2
  ./scripts/generate.sh 3000 60000 | "${feedlog[@]}" --data "$data" produce -
fi
"${feedlog[@]}" --data "$data" run --until-idle
fan=$("${feedlog[@]}" --data "$data" query recent-followers "$star" --limit 1 | sed -n 's/.*"user":\([0-9]*\).*/\1/p')
fan="${fan:-2}"
echo "--- counters of user $star (the most followed)"
"${feedlog[@]}" --data "$data" query counters "$star"
echo "--- recent followers of user $star (3 newest)"
"${feedlog[@]}" --data "$data" query recent-followers "$star" --limit 3
echo "--- first timeline page of user $fan, its newest follower (5 posts)"
"${feedlog[@]}" --data "$data" query timeline "$fan" --limit 5
echo "--- more: $0 leaves $data in place; try"
echo "    ${feedlog[*]} --data $data query timeline $fan --limit 20 --cursor <next_cursor>"
