#!/usr/bin/env python3
"""A week of Twitter-like activity in SNAP's `snap-activity` format
(`SRC DST UNIXTS KIND`, KIND one of RT, MT, RE), shaped as the Higgs
Twitter activity log: 304,691 users, 354,930 retweets, 171,237 mentions
and 36,902 replies over seven days, with a burst on the fourth. Whom a
line names follows a Zipf law (retweeted users steeper than mentioned
ones: the most retweeted user gets tens of thousands); who acts follows a
milder one, and a share of the actors (`--active-hot`) is drawn from the
retweeted users' own ranking, so popular accounts also post and repost
(that share sets how many inbox deliveries the week makes: 0.07 gives
about 14 M). Deterministic for a seed.

    scripts/activity-week.py --seed 7 --active-hot 0.07 > week.txt
    feedlog --data week import snap-activity week.txt
"""
import argparse
import bisect
import itertools
import random
import sys

USERS = 304_691
RETWEETS, MENTIONS, REPLIES = 354_930, 171_237, 36_902
START, SPAN = 1_341_100_972, 7 * 86_400


def zipf(n, s):
    """Cumulative weights of ranks 1..n under a Zipf law of exponent s."""
    return list(itertools.accumulate(1.0 / (i + 1) ** s for i in range(n)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--active-hot", type=float, default=0.07)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    actors = list(range(USERS))
    rng.shuffle(actors)
    named = list(range(USERS))
    rng.shuffle(named)
    act, rt, mt = zipf(USERS, 0.75), zipf(USERS, 1.05), zipf(USERS, 0.85)

    def pick(cum, order):
        return order[bisect.bisect_left(cum, rng.random() * cum[-1])]

    kinds = ["RT"] * RETWEETS + ["MT"] * MENTIONS + ["RE"] * REPLIES
    rng.shuffle(kinds)
    times = []
    for _ in kinds:
        if rng.random() < 0.45:
            offset = 3 * 86_400 + int(rng.expovariate(1 / 20_000.0)) % (2 * 86_400)
        else:
            offset = rng.randrange(SPAN)
        times.append(START + offset)
    times.sort()
    out = sys.stdout
    for kind, ts in zip(kinds, times):
        src = pick(act, named if rng.random() < args.active_hot else actors)
        dst = pick(rt if kind == "RT" else mt, named)
        if src != dst:
            out.write(f"{src} {dst} {ts} {kind}\n")


if __name__ == "__main__":
    main()
