//! `feedlog rebuild`, `verify`, `checkpoint`, `swap`, `backfill`, `reset`,
//! `states` and `drop-state`.

use super::shell::{every, shutdown_on_signal, PROGRESS_EVERY};
use crate::cli::say::{say, Meter};
use anyhow::{bail, Context, Result};
use feedlog::core::position::Positions;
use feedlog::core::View;
use feedlog::ops::digest::{self, StateDigest};
use feedlog::ops::rebuild::{self, Rebuild};
use feedlog::ops::requests::{self, Request};
use feedlog::ops::reset::{self, ResetTo};
use feedlog::ops::swap::SwapReport;
use feedlog::state::checkpoint::DirCheckpoint;
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::ProcessorConfig;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// `feedlog --data DIR rebuild --into NEWDIR`.
pub fn rebuild(
    live: &Path,
    into: &Path,
    from_checkpoint: Option<&Path>,
    cfg: ProcessorConfig,
    progress_every: std::time::Duration,
) -> Result<i32> {
    let r = Rebuild::open(live, into, from_checkpoint, cfg).context("preparing the rebuild")?;
    let total = rebuild::behind(&r.started_at, &r.plan.target);
    say!(
        "rebuilding {} from its log into {}: {} partitions, {total} records to replay{}",
        live.display(),
        into.display(),
        r.plan.target.len(),
        match (
            &r.plan.from_checkpoint,
            r.started_at.iter().any(|s| *s != Positions::START)
        ) {
            (Some(c), _) => format!(" (from checkpoint {})", c.display()),
            (None, true) => " (resuming)".to_string(),
            (None, false) => String::new(),
        }
    );
    let start = Instant::now();
    let shutdown = shutdown_on_signal();
    let done_records = || -> u64 {
        r.progress
            .iter()
            .zip(&r.started_at)
            .map(|(p, s)| {
                p.events.load(Ordering::SeqCst).saturating_sub(s.events.0)
                    + p.effects.load(Ordering::SeqCst).saturating_sub(s.effects.0)
            })
            .sum()
    };
    let meter = Meter::new(total, "records");
    let stats = every(
        meter.every(progress_every),
        || {
            let done = done_records();
            let secs = start.elapsed().as_secs_f64();
            let rate = done as f64 / secs.max(1e-9);
            let eta = match total.saturating_sub(done) {
                0 => "finishing".to_string(),
                left if rate > 0.0 => format!("ETA {:.0}s", left as f64 / rate),
                _ => "ETA ?".into(),
            };
            let parts: Vec<String> = r
                .progress
                .iter()
                .zip(&r.plan.target)
                .enumerate()
                .map(|(i, (p, t))| {
                    let (e, f) = (
                        p.events.load(Ordering::SeqCst),
                        p.effects.load(Ordering::SeqCst),
                    );
                    let pct = 100.0 * (e + f) as f64 / (t.events.0 + t.effects.0).max(1) as f64;
                    format!("p{i} {pct:.0}%")
                })
                .collect();
            let parts = parts.join(" ");
            meter.show(done, format!("{rate:.0}/s  {parts}"), || {
                format!("{secs:>6.1}s  {done}/{total} records ({rate:.0}/s, {eta})  {parts}")
            });
        },
        || r.run(&shutdown),
    )?;
    meter.finish();
    let secs = start.elapsed().as_secs_f64();
    let events: u64 = stats.events.total();
    if !r.finished()? {
        say!(
            "stopped after {secs:.1}s; run the same command again to resume ({} keeps its progress)",
            into.display()
        );
        return Ok(130);
    }
    println!(
        "rebuilt {} partitions in {secs:.1}s: {events} events and {} effects replayed ({:.0} messages/s), {} inbox deliveries, {} dead letters skipped (already in the dead-letter log)",
        r.plan.target.len(),
        stats.effects,
        (events + stats.effects) as f64 / secs.max(1e-9),
        stats.delivered,
        stats.dead_letters
    );
    Ok(0)
}

fn print_digest(name: &Path, d: &StateDigest) {
    println!("{}: overall {}", name.display(), d.overall);
    for p in &d.partitions {
        println!(
            "  partition {} at {}, {} users",
            p.partition, p.position, p.users
        );
        for (view, h) in &p.views {
            println!("    {:<17} {h}", view.as_str());
        }
    }
}

/// `feedlog verify A B`: exit 0 when every view digest matches, 1 on the
/// first difference (named), 2 when the states are not comparable.
pub fn verify(a: &Path, b: &Path) -> Result<i32> {
    let sa = digest::open_stores(a).with_context(|| format!("opening {}", a.display()))?;
    let sb = digest::open_stores(b).with_context(|| format!("opening {}", b.display()))?;
    if sa.len() != sb.len() {
        say!(
            "not comparable: {} has {} partitions, {} has {}",
            a.display(),
            sa.len(),
            b.display(),
            sb.len()
        );
        return Ok(2);
    }
    let (da, db) = (digest::digest(&sa)?, digest::digest(&sb)?);
    print_digest(a, &da);
    print_digest(b, &db);
    for (pa, pb) in da.partitions.iter().zip(&db.partitions) {
        if pa.position.events != pb.position.events {
            say!(
                "not comparable: partition {} is at {} in {} but at {} in {} \
                 (stop the processor, or rebuild to the same position)",
                pa.partition,
                pa.position,
                a.display(),
                pb.position,
                b.display()
            );
            return Ok(2);
        }
        if pa.position.effects != pb.position.effects {
            // The same input, but internal messages counted differently: a
            // processor that crashed re-ships a suffix of its outbox, so its
            // effects logs are longer. What readers see must still agree.
            say!(
                "warning: partition {} has read {} effects in {} but {} in {} (re-shipped after a crash?); \
                 both are at events {}: comparing the views",
                pa.partition, pa.position.effects, a.display(), pb.position.effects, b.display(), pa.position.events
            );
        }
    }
    if da.overall == db.overall {
        println!("identical: every view of every partition has the same digest");
        return Ok(0);
    }
    for (pa, pb) in da.partitions.iter().zip(&db.partitions) {
        for ((view, ha), (_, hb)) in pa.views.iter().zip(&pb.views) {
            if ha != hb {
                let user = digest::first_difference(&sa, &sb, pa.partition, *view)?;
                match user {
                    Some(u) => println!(
                        "DIFFERENT: partition {}, view {view}: first differing user {}",
                        pa.partition, u.0
                    ),
                    None => println!("DIFFERENT: partition {}, view {view}", pa.partition),
                }
                return Ok(1);
            }
        }
    }
    println!("DIFFERENT: overall digests differ");
    Ok(1)
}

/// Runs `request` on the data directory: in the processor running there
/// (through `DIR/control/`), or here when none runs.
fn to_processor(data: &Path, request: Request) -> Result<serde_json::Value> {
    let d = DataDir::open(data)?;
    let answer = match d.try_lock()? {
        Some(_lock) => {
            let say = |line: String| say!("{line}");
            requests::carry_out(&d, None, &request, &say)
        }
        None => {
            say!(
                "a processor is running on {}: asking it (see its output for progress)",
                data.display()
            );
            requests::request(&d, request, &|waited| {
                say!("  waiting for the processor ({:.0}s)", waited.as_secs_f64())
            })
        }
    };
    Ok(answer?)
}

fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(std::path::absolute(p)?)
}

/// `feedlog checkpoint --into C`.
pub fn checkpoint(data: &Path, into: &Path) -> Result<i32> {
    let into = absolute(into)?;
    let c = to_processor(data, Request::Checkpoint { into: into.clone() })?;
    let c: DirCheckpoint = serde_json::from_value(c)?;
    let records: u64 = c.positions.iter().map(|p| p.events.0 + p.effects.0).sum();
    println!(
        "checkpoint of {} partitions in {} ({records} records applied; inbox cap {}); `feedlog rebuild --into NEWDIR --from-checkpoint {}` replays only the log after it",
        c.positions.len(),
        into.display(),
        c.inbox_cap,
        into.display()
    );
    Ok(0)
}

fn print_swap(data: &Path, r: &SwapReport) {
    println!(
        "swapped: {} now serves state generation {} (inbox cap {}); it replayed {} records to catch up, and processing paused {} ms ({} ms replaying the last records, {} ms moving and reopening the state; readers did not pause). The old state is kept as {}: `feedlog --data {} drop-state {}` removes it.",
        data.display(),
        r.generation,
        r.inbox_cap,
        r.caught_up,
        r.paused_ms,
        r.final_catch_up_ms,
        r.reopen_ms,
        data.join(&r.previous).display(),
        data.display(),
        r.previous
    );
}

/// `feedlog swap NEWDIR`.
pub fn swap_to(data: &Path, from: &Path) -> Result<i32> {
    let from = absolute(from)?;
    let r = to_processor(data, Request::Swap { from })?;
    print_swap(data, &serde_json::from_value(r)?);
    Ok(0)
}

/// `feedlog backfill --view VIEW`: a rebuild of the state with the view's
/// new settings beside the live one (resumable in `DIR/backfill`), then a
/// swap to it.
pub fn backfill(data: &Path, view: View, cfg: ProcessorConfig) -> Result<i32> {
    let into = data.join("backfill");
    say!(
        "backfill of {view} (inbox cap {}): rebuilding the state beside the live one in {}, then swapping it in",
        cfg.inbox_cap,
        into.display()
    );
    let code = rebuild(data, &into, None, cfg, PROGRESS_EVERY)?;
    if code != 0 {
        return Ok(code);
    }
    swap_to(data, &into)
}

/// `feedlog reset --to-start [--regenerate-effects] | --to-checkpoint C`.
pub fn reset(
    data: &Path,
    to_checkpoint: Option<PathBuf>,
    regenerate: bool,
    dry_run: bool,
) -> Result<i32> {
    let to = match to_checkpoint {
        Some(c) => ResetTo::Checkpoint(c),
        None if regenerate => ResetTo::Regenerate,
        None => ResetTo::Start,
    };
    let d = DataDir::open(data)?;
    let Some(_lock) = d.try_lock()? else {
        bail!(
            "a processor is running on {}: stop it first (a reset moves its state back)",
            data.display()
        );
    };
    let whither = match &to {
        ResetTo::Start => "the start of the log".to_string(),
        ResetTo::Regenerate => {
            "the start of the log, with a new effects log (the old one is kept as log/effects.before-*)"
                .to_string()
        }
        ResetTo::Checkpoint(c) => format!("checkpoint {}", c.display()),
    };
    if dry_run {
        let r = reset::preview(data, &to)?;
        for (p, at) in r.positions.iter().enumerate() {
            println!("partition {p}: events {} effects {}", at.events, at.effects);
        }
        println!(
            "dry run: nothing was changed. `feedlog reset` without --dry-run would move {} to {whither} as state \
             generation {}, and the next `feedlog run` would process {} records again; the current state would be \
             kept as {}.",
            data.display(),
            r.generation,
            r.to_process,
            data.join(&r.previous).display(),
        );
        return Ok(0);
    }
    let r = reset::reset(data, &to)?;
    println!(
        "reset: {} now uses state generation {}, at {}; the next `feedlog run` processes {} records again (their effects are emitted again, and readers dedupe them by version). The old state is kept as {}: `feedlog --data {} drop-state {}` removes it.",
        data.display(),
        r.generation,
        whither,
        r.to_process,
        data.join(&r.previous).display(),
        data.display(),
        r.previous
    );
    Ok(0)
}

/// `feedlog states`.
pub fn states(data: &Path) -> Result<i32> {
    let d = DataDir::open(data)?;
    for g in reset::generations(&d)? {
        println!(
            "{:<10} {:>12} bytes{}",
            g.name,
            g.bytes,
            if g.active { "  active" } else { "" }
        );
    }
    Ok(0)
}

/// `feedlog drop-state NAME`.
pub fn drop_state(data: &Path, name: &str) -> Result<i32> {
    let d = DataDir::open(data)?;
    let bytes = reset::drop_state(&d, name)?;
    println!("dropped {name} ({bytes} bytes)");
    Ok(0)
}
