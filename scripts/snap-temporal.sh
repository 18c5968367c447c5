#!/usr/bin/env bash
# SNAP temporal edge list (`SRC DST UNIXTS`, ids from 0) -> feedlog JSON lines.
# A user's first message to another is a follow at that time; every message is
# a post by its sender. Ids are shifted by +1 (feedlog ids start at 1); post ids
# are line numbers; times become milliseconds.
set -euo pipefail
awk '
  /^#/ || NF < 3 { next }
  {
    src = $1 + 1; dst = $2 + 1; ts = $3 * 1000; n++
    if (src != dst && !((src, dst) in seen)) {
      seen[src, dst] = 1
      printf "{\"type\":\"follow\",\"follower\":%d,\"followee\":%d,\"ts\":%.0f}\n", src, dst, ts
    }
    printf "{\"type\":\"post\",\"author\":%d,\"post_id\":%d,\"ts\":%.0f}\n", src, n, ts
  }' "$1"
