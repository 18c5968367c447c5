//! `run` on the embedded log and `serve` beside it: processing with live
//! progress, and the read API.

use super::api_args::{ApiArgs, CacheArgs};
use super::shell::{per_sec, shutdown_on_signal, tempfile_dir, ApiServer, RunMode};
use crate::cli::say::say;
use anyhow::Result;
use feedlog::api::http::Api;
use feedlog::api::query::Reader;
use feedlog::core::metrics::{PartitionLag, StepStats};
use feedlog::ops::asof::LogRewind;
use feedlog::ops::serve::{processor_api, LogNode};
use feedlog::state::datadir::DataDir;
use feedlog::state::{Partitions, StoreSet};
use feedlog::task::embedded::{Processor, ProcessorConfig};
use feedlog::task::{lag, Shutdown};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// `run` on the embedded log: processes until Ctrl-C (or idle), taking
/// `checkpoint` and `swap` requests, serving the API with `listen`; `cfg`
/// with the inbox cap the state was built with (`inbox_cap`, if asked,
/// must match it).
pub fn run_embedded(
    data: &Path,
    mode: RunMode,
    inbox_cap: Option<u64>,
    cfg: ProcessorConfig,
    listen: Option<String>,
    api: &ApiArgs,
) -> Result<i32> {
    let dir = DataDir::open(data)?;
    let Some(_lock) = dir.try_lock()? else {
        return Err(crate::cli::Busy(format!(
            "another process is running on {} (it holds {}): one processor per data directory",
            data.display(),
            data.join("run.lock").display()
        ))
        .into());
    };
    let cfg = ProcessorConfig {
        inbox_cap: dir.inbox_cap_or_built(inbox_cap),
        ..cfg
    };
    let processor = Processor::open(&dir, cfg)?;
    let shutdown = shutdown_on_signal();
    let server = match listen {
        Some(addr) => Some(ApiServer::start(&addr, api.config(), |cfg| {
            processor_api(&processor, api.history_retention, cfg)
        })?),
        None => None,
    };
    let requests = Shutdown::new();
    let result = std::thread::scope(|s| {
        s.spawn(|| feedlog::ops::requests::serve_requests(&dir, &processor, &requests));
        let r = process(&dir, &processor, &shutdown, mode);
        requests.request();
        r
    });
    if let Some(s) = server {
        s.stop();
    }
    result?;
    processor.flush();
    Ok(0)
}

/// `serve`: the API, read-only, beside a running processor; follows its
/// commits (RocksDB secondaries) and its swaps, with a block cache of
/// `cache`'s size.
pub fn serve(data: &Path, listen: &str, api: &ApiArgs, cache: &CacheArgs) -> Result<i32> {
    let dir = DataDir::open(data)?;
    let scratch = tempfile_dir("serve")?;
    let cache = feedlog::state::BlockCache::new(cache.bytes());
    let set = Arc::new(StoreSet::new(feedlog::state::set::open_secondaries(
        &dir, &scratch.0, &cache,
    )?));
    let parts: Arc<dyn Partitions> = set.clone();
    let shutdown = shutdown_on_signal();
    let rewind = LogRewind::of(&dir, api.history_retention);
    let node = Arc::new(LogNode::new(Arc::new(dir.logs()), None).rewinding(Arc::new(rewind)));
    let server = ApiServer::start(listen, api.config(), |cfg| {
        Api::new(Reader::over(parts, None).following(), node, cfg)
    })?;
    feedlog::ops::serve::follow_swaps(&dir, &set, &scratch.0, &cache, &shutdown, &|line| {
        say!("{line}")
    });
    server.stop();
    Ok(0)
}

/// After a command that may have added to the dead-letter log: how many
/// records it holds and the command that lists them (`""` when it holds
/// none or cannot be read).
pub(crate) fn dead_letter_hint(dir: &DataDir, data: &Path) -> String {
    use feedlog::api::http::Node;
    // The count `/metrics` gives as feedlog_dead_letter_log_records.
    let held = LogNode::new(Arc::new(dir.logs()), None).dead_letters();
    match held.unwrap_or(0) {
        0 => String::new(),
        n => format!(
            " (the dead-letter log holds {n}, with their reasons: feedlog --data {} dead-letters)",
            data.display()
        ),
    }
}

/// Runs the processor with a live progress line as `mode` says (events/s,
/// deliveries/s, lag, ETA) and prints a summary.
pub fn process(
    dir: &DataDir,
    processor: &Processor,
    shutdown: &Shutdown,
    mode: RunMode,
) -> Result<StepStats> {
    let lags = || lag(&**processor.logs(), &processor.store_set().local());
    let lag_now = || -> Result<u64> { Ok(lags()?.iter().map(PartitionLag::total).sum()) };
    let backlog: u64 = lags()?
        .iter()
        .map(|l| l.at.events.records_to(l.end.events))
        .sum();
    say!(
        "{} partitions; {backlog} events to process",
        dir.partitions()
    );
    let progress = processor.progress().clone();
    let start = Instant::now();
    // What the last line said (events read, effects, deliveries) and
    // whether it said that everything was caught up: an idle processor
    // says so once, then stays quiet until more arrives.
    let said = std::sync::Mutex::new(((0u64, 0u64, 0u64), false));
    let totals = mode.with_progress(
        || {
            let t = progress.totals();
            let read = t.events.total() + t.dead_letters;
            let lag = lag_now().ok();
            let now = (read, t.effects, t.delivered);
            let mut said = said.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if lag == Some(0) && said.0 == now {
                if !said.1 {
                    said.1 = true;
                    say!(
                        "{:>6.1}s  caught up: events {read}, deliveries {}, lag 0, dead letters {}; \
                         quiet until more arrives",
                        start.elapsed().as_secs_f64(),
                        t.delivered,
                        t.dead_letters
                    );
                }
                return;
            }
            *said = (now, false);
            let rate = per_sec(read, start);
            let eta = match backlog.saturating_sub(read) {
                0 => "input read; settling internal messages".to_string(),
                left if rate > 0.0 => format!("ETA {:.0}s", left as f64 / rate),
                _ => "ETA ?".to_string(),
            };
            let lag = lag.map_or("?".into(), |l| l.to_string());
            say!(
            "{:>6.1}s  events {read}/{backlog} ({rate:.0}/s, {eta})  deliveries {} ({:.0}/s)  lag {lag}  dead letters {}",
            start.elapsed().as_secs_f64(),
            t.delivered,
            per_sec(t.delivered, start),
            t.dead_letters
        );
        },
        || processor.run(shutdown, mode.until_idle),
    )?;
    let secs = start.elapsed().as_secs_f64();
    let events: u64 = totals.events.total();
    println!(
        "processed {events} events ({}) and {} effects in {secs:.1}s \
         ({:.0} events/s); {} inbox deliveries ({:.0}/s); {} dead letters{}",
        totals.events_by_kind(),
        totals.effects,
        events as f64 / secs.max(1e-9),
        totals.delivered,
        totals.delivered as f64 / secs.max(1e-9),
        totals.dead_letters,
        dead_letter_hint(dir, dir.root())
    );
    Ok(totals)
}
