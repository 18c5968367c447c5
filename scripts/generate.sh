#!/usr/bin/env bash
# A generated network with a power-law shape: USERS users, EVENTS events
# (follows, posts, some unfollows and deletes), as feedlog JSON lines.
set -euo pipefail
users="${1:-3000}"; events="${2:-60000}"
awk -v users="$users" -v events="$events" 'BEGIN {
  srand(42); ts = 1700000000000
  for (i = 1; i <= events; i++) {
    ts += 1 + int(rand() * 1000)
    a = int(users ^ rand()); if (a < 1) a = 1
    b = int(users ^ rand()); if (b < 1) b = 1
    r = rand()
    if (r < 0.45 && a != b) {
      printf "{\"type\":\"follow\",\"follower\":%d,\"followee\":%d,\"ts\":%.0f}\n", b, a, ts
    } else if (r < 0.5 && a != b) {
      printf "{\"type\":\"unfollow\",\"follower\":%d,\"followee\":%d,\"ts\":%.0f}\n", b, a, ts
    } else if (r < 0.97) {
      posts++; author[posts] = a
      printf "{\"type\":\"post\",\"author\":%d,\"post_id\":%d,\"ts\":%.0f}\n", a, posts, ts
    } else if (posts > 0) {
      p = 1 + int(rand() * posts)
      printf "{\"type\":\"delete_post\",\"author\":%d,\"post_id\":%d,\"ts\":%.0f}\n", author[p], p, ts
    }
  }
}'
