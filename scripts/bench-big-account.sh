#!/bin/sh
# A big account and an idle start-up (see BENCHMARKS.md): FOLLOWERS users
# follow user 1 and are processed; then, each timed in the same run:
#   - `run --until-idle` on the idle state, twice (the start-up cost: opening
#     every store and log, noticing there is nothing to do);
#   - one post by user 1 until it is in every follower's inbox (push
#     fan-out: FOLLOWERS inbox writes);
#   - `run --until-idle` on the idle state again.
#
#   scripts/bench-big-account.sh /tmp/big-account        # FOLLOWERS=1000000
set -eu
F=${FEEDLOG:-target/release/feedlog}
DATA=${1:?usage: scripts/bench-big-account.sh DATA_DIR (created; must not exist)}
FOLLOWERS=${FOLLOWERS:-1000000}
[ -x "$F" ] || { echo "no $F: cargo build --release first (or set FEEDLOG)" >&2; exit 2; }
[ ! -e "$DATA" ] || { echo "$DATA exists: give a new directory" >&2; exit 2; }
secs() { # secs CMD...: runs CMD quietly, prints its wall time in seconds
    s=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    e=$(date +%s.%N)
    awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }'
}
awk -v n="$FOLLOWERS" 'BEGIN {
    for (i = 2; i <= n + 1; i++)
        printf "{\"type\":\"follow\",\"follower\":%d,\"followee\":1,\"ts\":%d}\n", i, 1700000000000 + i
}' | "$F" --data "$DATA" produce >/dev/null
echo "setup: $FOLLOWERS follows processed in $(secs "$F" --data "$DATA" run --until-idle) s"
echo "idle start-up: $(secs "$F" --data "$DATA" run --until-idle) s, again $(secs "$F" --data "$DATA" run --until-idle) s"
echo '{"type":"post","author":1,"post_id":1,"ts":1700100000000}' | "$F" --data "$DATA" produce >/dev/null
echo "one post to $FOLLOWERS followers: $(secs "$F" --data "$DATA" run --until-idle) s (run until idle, start-up included)"
echo "idle start-up after it: $(secs "$F" --data "$DATA" run --until-idle) s"
