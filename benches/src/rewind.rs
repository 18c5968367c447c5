//! `feedlog-bench rewind`: what a view as of an earlier time costs, on the
//! state in `--data`. The first request for a time replays the log up to
//! it: timed against a rebuild of the whole state from the same log (the
//! other replay from the log) in the same run. Later requests for it check
//! the log for anything new and read the kept state: timeline pages as of
//! the time against the same pages of the live state.

use crate::common::Cleanup;
use crate::say::say;
use anyhow::Result;
use feedlog::api::query::Reader;
use feedlog::core::event::{Ts, UserId};
use feedlog::core::Partition;
use feedlog::log::{Log, Offset, Topic};
use feedlog::ops::asof::{LogRewind, Retention};
use feedlog::ops::rebuild::Rebuild;
use feedlog::task::embedded::ProcessorConfig;
use feedlog::task::Shutdown;
use feedlog::Rewind;
use std::time::Instant;

/// Pages read per reader (live, then as of the time).
const PAGES: u64 = 2_000;

/// The measurements, as the module says.
pub fn rewind(data: &std::path::Path) -> Result<()> {
    let dir = crate::common::processed_dir(data)?;
    // The middle of the log's times.
    let logs = dir.logs();
    let mut times = Vec::new();
    for p in Partition::all(dir.partitions()) {
        let mut src = Log::source(&logs, Topic::Events, p, Offset(0))?;
        loop {
            let batch = src.read(4096, 4 << 20, None)?;
            if batch.is_empty() {
                break;
            }
            times.extend(batch.iter().filter_map(|r| {
                feedlog::core::codec::decode_event(r.format, &r.value)
                    .ok()
                    .map(|e| e.ts().0)
            }));
        }
    }
    anyhow::ensure!(
        !times.is_empty(),
        "the log in {} holds no events",
        data.display()
    );
    times.sort_unstable();
    let t = Ts(times[times.len() / 2]);
    say!(
        "{} events; as of the middle one's time, {}",
        times.len(),
        t.0
    );

    let tmp = std::env::temp_dir().join(format!("feedlog-bench-rewind-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    let cfg = ProcessorConfig {
        limits: feedlog::task::BatchLimits::replay(),
        ..ProcessorConfig::default()
    };
    let start = Instant::now();
    let r = Rebuild::open(data, &tmp.join("rebuilt"), None, cfg)?;
    r.run(&Shutdown::new())?;
    let rebuild_secs = start.elapsed().as_secs_f64();
    drop(r);

    let rewind = LogRewind::of(&dir, Retention::Forever);
    let start = Instant::now();
    let asof = rewind.at(t)?;
    let build_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for _ in 0..20 {
        rewind.at(t)?;
    }
    let again_ms = start.elapsed().as_secs_f64() * 1000.0 / 20.0;
    println!(
        "first request as of {}: {build_secs:.2}s (the whole state's rebuild from the same log: {rebuild_secs:.2}s, {:.2}x); \
         each later one {again_ms:.1} ms (the log checked for anything new)",
        t.0,
        build_secs / rebuild_secs
    );

    let live = Reader::open(&dir)?;
    let users: Vec<UserId> = live
        .most_followed(1)?
        .first()
        .map(|s| live.recent_followers(UserId(s.user), PAGES as usize))
        .transpose()?
        .map(|l| l.items.iter().map(|f| UserId(f.user)).collect())
        .unwrap_or_default();
    anyhow::ensure!(!users.is_empty(), "no reader to read pages of");
    let pages = |r: &Reader| -> Result<f64> {
        let start = Instant::now();
        for i in 0..PAGES {
            r.timeline(users[i as usize % users.len()], 20, None)?;
        }
        Ok(PAGES as f64 / start.elapsed().as_secs_f64())
    };
    let (now, then) = (pages(&live)?, pages(&asof)?);
    println!(
        "first timeline pages of 20, one thread, {} readers: live {now:.0}/s, as of {} {then:.0}/s ({:.2}x)",
        users.len(),
        t.0,
        then / now
    );
    Ok(())
}
