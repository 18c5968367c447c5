#!/bin/sh
# A big account and an idle start-up (see docs/benchmark-runs.md), push only and
# hybrid: FOLLOWERS users follow user 1 and are processed; then, each timed
# in the same run:
#   - `run --until-idle` on the idle state, twice (the start-up cost: opening
#     every store and log, noticing there is nothing to do);
#   - one post by user 1 until every follower's timeline shows it (push,
#     `--pull-threshold 0`: FOLLOWERS inbox writes; hybrid, the default
#     threshold of 10,000: user 1 is pulled, one copy write per partition);
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
for mode in push hybrid; do
    D="$DATA/$mode"
    case $mode in push) T=0 ;; *) T=10000 ;; esac
    run() { "$F" --data "$D" run --until-idle --pull-threshold "$T"; }
    awk -v n="$FOLLOWERS" 'BEGIN {
        for (i = 2; i <= n + 1; i++)
            printf "{\"type\":\"follow\",\"follower\":%d,\"followee\":1,\"ts\":%d}\n", i, 1700000000000 + i
    }' | "$F" --data "$D" produce >/dev/null
    echo "$mode (--pull-threshold $T)"
    echo "  setup: $FOLLOWERS follows processed in $(secs run) s"
    echo "  idle start-up: $(secs run) s, again $(secs run) s"
    echo '{"type":"post","author":1,"post_id":1,"ts":1700100000000}' | "$F" --data "$D" produce >/dev/null
    echo "  one post to $FOLLOWERS followers: $(secs run) s (run until idle, start-up included)"
    echo "  idle start-up after it: $(secs run) s"
done
