//! `/metrics`: every figure as Prometheus text.

use super::prometheus as metrics;
use super::{Api, ROUTES};
use crate::core::Partition;
use std::sync::atomic::Ordering;

const ROCKS_PROPERTIES: &[(&str, &str, &str)] = &[
    (
        "rocksdb.estimate-num-keys",
        "feedlog_rocksdb_estimated_keys",
        "Estimated keys in the partition's store.",
    ),
    (
        "rocksdb.total-sst-files-size",
        "feedlog_rocksdb_sst_bytes",
        "Bytes of SST files.",
    ),
    (
        "rocksdb.cur-size-all-mem-tables",
        "feedlog_rocksdb_memtable_bytes",
        "Bytes in memtables.",
    ),
    (
        "rocksdb.estimate-pending-compaction-bytes",
        "feedlog_rocksdb_pending_compaction_bytes",
        "Estimated bytes compaction still has to rewrite.",
    ),
    (
        "rocksdb.num-running-compactions",
        "feedlog_rocksdb_running_compactions",
        "Compactions running now.",
    ),
];

// Long: one metric family after another, in the order /metrics prints them;
// each is a few lines and reads best in that order.
/// The Prometheus text of every metric. A log that cannot be read (a
/// corrupt segment) never fails the whole scrape: it is reported by
/// `feedlog_log_readable` and `feedlog_dead_letter_log_readable`, and the
/// figures read from it are left out.
pub fn render_metrics(api: &Api) -> String {
    let mut out = String::new();
    let o = &mut out;
    metrics::header(
        o,
        "feedlog_uptime_seconds",
        "gauge",
        "Seconds since the API started.",
    );
    metrics::sample(
        o,
        "feedlog_uptime_seconds",
        "",
        api.started.elapsed().as_secs_f64(),
    );
    if let Some(f) = api.node.figures() {
        let t = f.totals;
        let name = "feedlog_events_applied_total";
        metrics::header(o, name, "counter", "Input events applied, by kind.");
        for kind in crate::core::event::EventKind::all() {
            let label = format!("kind=\"{}\"", kind.as_str());
            metrics::sample(o, name, &label, t.events.get(kind));
        }
        for (name, help, v) in [
            (
                "feedlog_effects_applied_total",
                "Internal messages applied.",
                t.effects,
            ),
            (
                "feedlog_effects_emitted_total",
                "Internal messages emitted.",
                t.emitted,
            ),
            (
                "feedlog_deliveries_total",
                "Inbox entries written (fan-out deliveries and backfills).",
                t.delivered,
            ),
            (
                "feedlog_inbox_removed_total",
                "Inbox entries removed (trims, unfollows, deletes).",
                t.removed,
            ),
            (
                "feedlog_dead_letters_total",
                "Records this processor sent to the dead-letter log.",
                t.dead_letters,
            ),
            (
                "feedlog_events_forwarded_total",
                "Events that arrived in a partition that does not own their actor, forwarded to the owner.",
                t.forwarded,
            ),
            (
                "feedlog_forwarded_duplicates_total",
                "Copies of forwarded events already applied, skipped.",
                t.duplicates,
            ),
        ] {
            metrics::header(o, name, "counter", help);
            metrics::sample(o, name, "", v);
        }
        let name = "feedlog_batch_records";
        metrics::header(
            o,
            name,
            "histogram",
            "Messages read per non-empty batch (events and effects, each effect counted).",
        );
        metrics::histogram(o, name, "", &f.batch_records);
        let name = "feedlog_commit_seconds";
        metrics::header(
            o,
            name,
            "histogram",
            "Time to commit one batch's state, positions and outbox.",
        );
        metrics::histogram(o, name, "", &f.commit_seconds);
    }
    render_logs(o, api);
    for (prop, name, help) in ROCKS_PROPERTIES {
        metrics::header(o, name, "gauge", help);
        for (p, s) in api.reader.stores() {
            if let Some(v) = s.property(prop).and_then(|v| v.parse::<u64>().ok()) {
                metrics::sample(o, name, &format!("partition=\"{p}\""), v);
            }
        }
    }
    render_memory(o, api);
    render_page_cache(o, api);
    render_fences(o, api);
    render_gauges(o, api);
    let name = "feedlog_http_request_duration_seconds";
    metrics::header(o, name, "histogram", "Request latency, by route.");
    for (i, h) in api.requests.iter().enumerate() {
        // `:id`, not `{id}`: some scrapers end a label set at the first `}`.
        let route = ROUTES
            .get(i)
            .map_or("unmatched".into(), |r| r.replace("{id}", ":id"));
        metrics::histogram(o, name, &format!("route=\"{route}\""), &h.snapshot());
    }
    let name = "feedlog_http_responses_total";
    metrics::header(o, name, "counter", "Responses, by status code.");
    for (i, c) in api.statuses.iter().enumerate() {
        let n = c.load(Ordering::Relaxed);
        if n > 0 {
            metrics::sample(o, name, &format!("code=\"{}\"", i + 100), n);
        }
    }
    render_process(o);
    out
}

/// `feedlog_build_info` and the standard `process_*` figures (Linux:
/// read from `/proc/self`; left out where it cannot be read).
fn render_process(o: &mut String) {
    let name = "feedlog_build_info";
    metrics::header(o, name, "gauge", "The running build: its version.");
    metrics::sample(
        o,
        name,
        &format!("version=\"{}\"", env!("CARGO_PKG_VERSION")),
        1,
    );
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name, from field 3 (state).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    // /proc counts in USER_HZ, 100 on Linux.
    const HZ: f64 = 100.0;
    if let (Some(user), Some(system)) = (field(11), field(12)) {
        let name = "process_cpu_seconds_total";
        metrics::header(o, name, "counter", "User and system CPU time, seconds.");
        metrics::sample(o, name, "", (user + system) as f64 / HZ);
    }
    let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())
    });
    if let (Some(boot), Some(start)) = (boot, field(19)) {
        let name = "process_start_time_seconds";
        metrics::header(o, name, "gauge", "Start time of the process, Unix seconds.");
        metrics::sample(o, name, "", boot as f64 + start as f64 / HZ);
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| {
        status.lines().find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    for (key, name, help) in [
        (
            "VmRSS:",
            "process_resident_memory_bytes",
            "Resident memory, bytes.",
        ),
        (
            "VmSize:",
            "process_virtual_memory_bytes",
            "Virtual memory, bytes.",
        ),
    ] {
        if let Some(v) = kb(key) {
            metrics::header(o, name, "gauge", help);
            metrics::sample(o, name, "", v * 1024);
        }
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        let name = "process_open_fds";
        metrics::header(o, name, "gauge", "Open file descriptors.");
        metrics::sample(o, name, "", fds.count() as u64);
    }
    let max_fds = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max open files"))?
                .split_whitespace()
                .nth(3)?
                .parse::<u64>()
                .ok()
        });
    if let Some(v) = max_fds {
        let name = "process_max_fds";
        metrics::header(o, name, "gauge", "Most open file descriptors allowed.");
        metrics::sample(o, name, "", v);
    }
}

/// Per receiving partition and sender, the `effects` records the fence
/// skipped and the owner epoch in force, as the partition's state holds them
/// (a function of the log, like every view; a partition whose state cannot
/// be read is left out).
fn render_fences(o: &mut String, api: &Api) {
    let figures: Vec<(Partition, Vec<(Partition, crate::core::fence::FenceVal)>)> = api
        .reader
        .stores()
        .iter()
        .filter_map(|(p, s)| crate::core::fence::fences(&**s).ok().map(|f| (*p, f)))
        .collect();
    for (name, kind, help, value) in [
        (
            "feedlog_effects_fenced_total",
            "counter",
            "Internal records skipped by the fence: sent by an owner of partition `from` older than one whose records this partition had applied (an owner that lost the partition shipped them late; see the dead-letter log).",
            (|f: &crate::core::fence::FenceVal| f.fenced) as fn(&_) -> u64,
        ),
        (
            "feedlog_effects_fence_epoch",
            "gauge",
            "The newest owner epoch of partition `from` whose records this partition has applied.",
            |f: &crate::core::fence::FenceVal| f.epoch.0,
        ),
    ] {
        metrics::header(o, name, kind, help);
        for (p, fences) in &figures {
            for (from, f) in fences {
                let labels = format!("partition=\"{p}\",from=\"{from}\"");
                metrics::sample(o, name, &labels, value(f));
            }
        }
    }
}

/// Per partition, the hybrid machinery's gauges as its state keeps them
/// (`core::gauges`; a partition whose state cannot be read, or keeps none,
/// is left out).
fn render_gauges(o: &mut String, api: &Api) {
    use crate::core::gauges::Gauges;
    let figures: Vec<(Partition, Gauges)> = api
        .reader
        .stores()
        .iter()
        .filter_map(|(p, s)| Gauges::of(&**s).ok().flatten().map(|g| (*p, g)))
        .collect();
    for (name, help, value) in [
        (
            "feedlog_pulled_authors",
            "Authors owned by the partition who are pulled (their posts are read from every partition's copy instead of pushed to inboxes).",
            (|g: &Gauges| g.pulled) as fn(&Gauges) -> u64,
        ),
        (
            "feedlog_sleeping_readers",
            "Readers owned by the partition who are asleep (no event of their own for the inactivity span; read by the pull path).",
            |g: &Gauges| g.asleep,
        ),
        (
            "feedlog_pulled_copies",
            "Pulled authors (of any partition) whose newest posts the partition holds a copy of.",
            |g: &Gauges| g.copies,
        ),
        (
            "feedlog_refills_awaited",
            "Refills the partition's waking readers still await from their followees' partitions.",
            |g: &Gauges| g.refills,
        ),
    ] {
        metrics::header(o, name, "gauge", help);
        for (p, g) in &figures {
            metrics::sample(o, name, &format!("partition=\"{p}\""), value(g));
        }
    }
}

/// The block cache (shared by every store of the process: one sample) and
/// the threads answering requests.
fn render_memory(o: &mut String, api: &Api) {
    let cache = api.reader.stores().first().map(|(_, s)| s.block_cache());
    for (i, (name, help)) in [
        (
            "feedlog_block_cache_capacity_bytes",
            "Capacity of RocksDB's block cache, shared by the process's stores.",
        ),
        (
            "feedlog_block_cache_bytes",
            "Bytes held in RocksDB's block cache.",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        metrics::header(o, name, "gauge", help);
        if let Some((capacity, held)) = cache {
            metrics::sample(o, name, "", [capacity, held][i]);
        }
    }
    let name = "feedlog_http_threads";
    metrics::header(o, name, "gauge", "Threads answering HTTP requests.");
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        metrics::sample(o, name, "", rt.metrics().num_workers() as u64);
    }
}

/// What is kept beside each store for readers: first pages (answered
/// from them, read, bytes, budget) and heads (pages answered from inbox
/// heads, inbox heads, bytes of all heads, outbox heads, budget).
fn render_page_cache(o: &mut String, api: &Api) {
    // Read once per store, so the families agree.
    let figures: Vec<(Partition, Vec<u64>)> = api
        .reader
        .stores()
        .iter()
        .map(|(p, s)| {
            let (hits, misses) = s.pages().hits_and_misses();
            let (heads, outboxes, bytes) = s.heads().held();
            let (pages, h) = (s.pages(), s.heads());
            let n = |x: usize| x as u64;
            let (kept, budgets) = (n(pages.bytes()), [n(pages.budget()), n(h.budget())]);
            let held = [h.pages(), n(heads), n(bytes), n(outboxes)];
            (*p, [&[hits, misses, kept][..], &held, &budgets].concat())
        })
        .collect();
    for (i, (name, kind, help)) in [
        (
            "feedlog_page_cache_hits_total",
            "counter",
            "First timeline pages answered from the page cache.",
        ),
        (
            "feedlog_page_cache_misses_total",
            "counter",
            "First timeline pages not in the page cache: read from the store, and kept when the inbox holds them and no commit landed meanwhile.",
        ),
        (
            "feedlog_page_cache_bytes",
            "gauge",
            "Bytes of first timeline pages kept.",
        ),
        (
            "feedlog_inbox_head_pages_total",
            "counter",
            "Timeline pages not in the page cache read from the inbox heads kept in memory.",
        ),
        (
            "feedlog_inbox_heads",
            "gauge",
            "Readers whose newest inbox rows are kept in memory.",
        ),
        (
            "feedlog_inbox_heads_bytes",
            "gauge",
            "Bytes of inbox and outbox heads kept.",
        ),
        (
            "feedlog_outbox_heads",
            "gauge",
            "Authors whose newest outbox rows are kept in memory for the pull path.",
        ),
        (
            "feedlog_page_cache_budget_bytes",
            "gauge",
            "Most bytes of first timeline pages kept (--page-cache-mb, shared among partitions).",
        ),
        (
            "feedlog_inbox_heads_budget_bytes",
            "gauge",
            "Most bytes of inbox and outbox heads kept (--heads-mb, shared among partitions).",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        metrics::header(o, name, kind, help);
        for (p, f) in &figures {
            metrics::sample(o, name, &format!("partition=\"{p}\""), f[i]);
        }
    }
}

/// The lag of each partition, whether its logs read, and the records in
/// the dead-letter log. A partition whose input logs (or stored positions)
/// cannot be read gets `feedlog_log_readable 0` and no lag samples.
fn render_logs(o: &mut String, api: &Api) {
    let stores = api.reader.stores();
    let lags: Vec<_> = stores
        .iter()
        .map(|s| (s.0, api.node.lag(std::slice::from_ref(s))))
        .collect();
    let name = "feedlog_lag_records";
    metrics::header(
        o,
        name,
        "gauge",
        "Records in the partition's input log not yet applied to its state.",
    );
    for lag in lags.iter().filter_map(|(_, l)| l.as_ref().ok()).flatten() {
        for (topic, v) in [
            ("events", lag.at.events.records_to(lag.end.events)),
            ("effects", lag.at.effects.records_to(lag.end.effects)),
        ] {
            let labels = format!("topic=\"{topic}\",partition=\"{}\"", lag.partition);
            metrics::sample(o, name, &labels, v);
        }
    }
    let name = "feedlog_log_readable";
    metrics::header(
        o,
        name,
        "gauge",
        "1 when the partition's input logs (events, effects) and its stored positions read, \
         0 when not (a corrupt segment: see /readyz and `feedlog log check`; its lag is left out).",
    );
    for (p, lag) in &lags {
        let readable = u64::from(lag.is_ok());
        metrics::sample(o, name, &format!("partition=\"{p}\""), readable);
    }
    let dead = api.node.dead_letters();
    let name = "feedlog_dead_letter_log_readable";
    metrics::header(
        o,
        name,
        "gauge",
        "1 when the dead-letter log reads, 0 when not (its record count is left out).",
    );
    metrics::sample(o, name, "", u64::from(dead.is_ok()));
    let name = "feedlog_dead_letter_log_records";
    metrics::header(
        o,
        name,
        "gauge",
        "Records in the dead-letter log (from produce and processing).",
    );
    if let Ok(n) = dead {
        metrics::sample(o, name, "", n);
    }
}
