#!/bin/sh
# The swap pause under live traffic (see docs/benchmark-runs.md): on a processed data
# directory, runs the processor, rebuilds its state beside it, then swaps
# the rebuild in while posts keep arriving (CHUNKS chunks of 20,000 posts by
# random users 1..USERS, one every EVERY seconds). Prints the swap's report:
# how long processing paused, and what the pause was spent on.
#
#   scripts/bench-swap.sh bench-data
set -eu
F=${FEEDLOG:-target/release/feedlog}
DATA=${1:?usage: scripts/bench-swap.sh DATA_DIR}
NEW="$DATA-swap"
CHUNKS=${CHUNKS:-10}
EVERY=${EVERY:-4}
USERS=${USERS:-75879}
[ -x "$F" ] || { echo "no $F: cargo build --release first (or set FEEDLOG)" >&2; exit 2; }
"$F" --data "$DATA" run --no-sync >/dev/null 2>"$DATA-swap-run.log" &
RUN=$!
trap 'kill $RUN 2>/dev/null || true' EXIT
sleep 2
rm -rf "$NEW"
"$F" --data "$DATA" rebuild --into "$NEW" 2>/dev/null
BASE=$(date +%s)
(
    i=0
    while [ "$i" -lt "$CHUNKS" ]; do
        awk -v c="$i" -v base="$BASE" -v users="$USERS" 'BEGIN {
            srand(base + c)
            for (j = 0; j < 20000; j++)
                printf "{\"type\":\"post\",\"author\":%d,\"post_id\":%d,\"ts\":%d}\n",
                    1 + int(rand() * users), base * 1000000 + c * 20000 + j, base * 1000 + c * 20000 + j
        }' | "$F" --data "$DATA" produce - >/dev/null
        sleep "$EVERY"
        i=$((i + 1))
    done
) &
LOAD=$!
sleep 2
"$F" --data "$DATA" swap "$NEW" 2>/dev/null
wait "$LOAD"
kill -TERM "$RUN"
wait "$RUN" || true
grep "round" "$DATA-swap-run.log" || true
echo "the old state is kept: $F --data $DATA states / drop-state NAME"
