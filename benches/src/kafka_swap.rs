//! `feedlog-bench kafka-swap`: what swapping generations costs readers in
//! Kafka mode. Two generation-0 processors and one generation-1 processor
//! run the log of a processed data directory (the demo's); `wrk` reads
//! timeline pages through one generation-0 processor before the swap, while
//! `--generation 1 swap` runs (with posts arriving), after it (every read
//! forwarded to generation 1) and from generation 1 directly.

use crate::common::Cleanup;
use crate::http::{paths_script, readers_sample, wrk_at, wrk_field, wrk_ms};
use crate::procs::{feedlog, free_addr, workload, Procs, Workload};
use crate::say::say;
use anyhow::{bail, Context, Result};
use feedlog::core::event::{Event, PostId, Ts, UserId};
use feedlog::core::Generation;
use feedlog::ingest::generate::Rng;
use feedlog::log::kafka::{produce_events, KafkaConfig, PartitionState};
use feedlog::ops::status::Status;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Posts produced at the start of each phase that processes (the baseline
/// and the swap), so both carry the same processing.
const POSTS_PER_PHASE: usize = 20_000;

/// One `wrk` run's figures.
struct Phase {
    per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// Non-2xx answers, and reads, writes and timeouts that failed on an
    /// open connection.
    unanswered: u64,
    /// Connections `wrk` could not open (it retries them).
    connect_errors: u64,
    /// Requests completed.
    requests: u64,
}

impl Phase {
    fn of(text: &str) -> Option<Phase> {
        let load = crate::http::parse_wrk(text)?;
        // "Latency  avg  stdev  max  +/- stdev" (the thread stats).
        let max_ms = wrk_field(text, "Latency")?.split_whitespace().nth(2)?;
        let non_2xx = wrk_field(text, "Non-2xx or 3xx responses:").map_or(Ok(0), str::parse);
        // "Socket errors: connect 0, read 0, write 0, timeout 0".
        let socket = |kind: &str| -> u64 {
            wrk_field(text, "Socket errors:").map_or(0, |errs| {
                (errs.split(','))
                    .filter_map(|e| e.trim().strip_prefix(kind)?.trim().parse::<u64>().ok())
                    .sum()
            })
        };
        Some(Phase {
            per_sec: load.per_sec,
            p50_ms: load.p50_ms,
            p99_ms: load.p99_ms,
            max_ms: wrk_ms(max_ms)?,
            unanswered: non_2xx.ok()? + socket("read") + socket("write") + socket("timeout"),
            connect_errors: socket("connect"),
            // "  12345 requests in 20.00s, 18.33MB read"
            requests: (text.lines())
                .find_map(|l| l.trim().split_once(" requests in ")?.0.parse().ok())?,
        })
    }

    fn line(&self, what: &str) -> String {
        format!(
            "  {what:<46} {:>7.0} pages/s  p50 {:>6.2} ms  p99 {:>6.2} ms  max {:>7.2} ms  unanswered {}  (wrk connect errors {})",
            self.per_sec, self.p50_ms, self.p99_ms, self.max_ms, self.unanswered, self.connect_errors
        )
    }
}

/// The bench's load settings.
pub struct SwapLoad {
    pub threads: usize,
    pub connections: usize,
    pub secs: u64,
}

/// Runs the swap bench on the events of the processed directory `data`;
/// `base`: brokers, else an in-process mock.
// Long: the bench's scenario from start to finish, each phase measured in the order it runs.
pub fn kafka_swap(
    base: Option<KafkaConfig>,
    data: &std::path::Path,
    load: &SwapLoad,
) -> Result<()> {
    let wrk = crate::http::need_wrk()?;
    let w = workload(base, data, "swap")?;
    let g0 = w.deployment("live")?;
    let g1 = g0.generation(Generation(1));
    w.make_topics(&g1)?;
    let tmp = std::env::temp_dir().join(&w.tag);
    let _cleanup = Cleanup(tmp.clone());
    let logs = std::env::temp_dir().join(format!("{}-logs", w.tag));
    let mut procs = Procs::new(logs.clone());
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect::<Result<_>>()?;
    for (i, (generation, name)) in [(0, "p0"), (0, "p1"), (1, "r0")]
        .map(|(g, n)| (Generation(g), n))
        .into_iter()
        .enumerate()
    {
        let listen = addrs[i].to_string();
        procs.run(
            &g0,
            &tmp.join(name),
            generation,
            name,
            &["--listen", &listen],
        )?;
    }
    let start = Instant::now();
    let serving = |s: &Status, owners: &[&str]| {
        s.idle
            && owners
                .iter()
                .all(|o| s.partitions.iter().any(|p| p.owner.as_deref() == Some(o)))
            && (s.partitions.iter()).all(|p| p.state == Some(PartitionState::Serving))
    };
    procs.wait(&g0, "generation 0 processed the log", |s| {
        serving(s, &["p0", "p1"])
    })?;
    procs.wait(&g1, "generation 1 processed the log", |s| {
        serving(s, &["r0"])
    })?;
    say!(
        "both generations processed the log in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    let paths = timeline_paths(&w.events);
    let script = paths_script(&paths);
    let probe = paths.first().context("the workload has no readers")?;
    let run = |addr| -> Result<Phase> {
        let text = wrk_at(
            &wrk,
            addr,
            &script,
            load.threads,
            load.connections,
            load.secs,
        )?;
        let phase = Phase::of(&text).with_context(|| format!("reading wrk's report:\n{text}"))?;
        if phase.unanswered + phase.connect_errors > 0 {
            let lines = text
                .lines()
                .filter(|l| l.contains("errors") || l.contains("Non-2xx"));
            say!("wrk: {}", lines.collect::<Vec<_>>().join("; "));
        }
        Ok(phase)
    };
    let mut posts = Posts::after(&w.events);
    posts.produce(&w)?;
    let before = run(addrs[0])?;
    posts.produce(&w)?;
    let swap_cmd = feedlog(&g0, &["--generation", "1", "swap", "--timeout", "120"])?;
    let (during, swap) = std::thread::scope(|s| {
        let reads = s.spawn(|| run(addrs[0]));
        let swap = swap_while_read(swap_cmd, (addrs[0], addrs[2]), probe, load.secs);
        (reads.join().expect("the reads' thread"), swap)
    });
    let (during, swap) = (during?, swap?);
    let by_g1 = timeline_requests(addrs[2])?;
    let after = run(addrs[0])?;
    let by_g1 = timeline_requests(addrs[2])? - by_g1;
    let direct = run(addrs[2])?;
    println!(
        "timeline pages of 20 through generation 0's processor p0 (wrk -t{} -c{}, {} s each; {} readers):",
        load.threads,
        load.connections,
        load.secs,
        paths.len()
    );
    println!("{}", before.line("before the swap (generation 0 answers)"));
    println!("{}", during.line("the swap in the middle, posts arriving"));
    println!("{}", after.line("after (p0 forwards to generation 1)"));
    println!(
        "    of those, {by_g1} reached generation 1's processor (its metrics), of {} wrk counted",
        after.requests
    );
    println!("{}", direct.line("generation 1's processor asked directly"));
    println!(
        "swap: the command returned in {:.0} ms; the first read through p0 reached generation 1 {:.0} ms after it returned",
        swap.command_ms, swap.reached_ms
    );
    say!("the processors' logs: {}", logs.display());
    Ok(())
}

/// The timeline pages of up to 20,000 users who follow someone in
/// `events`, in a fixed shuffled order.
fn timeline_paths(events: &[Event]) -> Vec<String> {
    let mut users: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Follow { follower, .. } => Some(follower.0),
            _ => None,
        })
        .collect();
    users.sort_unstable();
    users.dedup();
    (readers_sample(users).iter())
        .map(|u| format!("/v1/users/{u}/timeline?limit=20"))
        .collect()
}

/// New posts by the workload's users, past its last post id and time.
struct Posts {
    next_id: u64,
    ts: u64,
    authors: Vec<UserId>,
    rng: Rng,
}

impl Posts {
    fn after(events: &[Event]) -> Posts {
        let (mut next_id, mut ts) = (1, 1);
        let mut authors = Vec::new();
        for e in events {
            ts = ts.max(e.ts().0 + 1);
            match e {
                Event::Post {
                    author, post_id, ..
                } => {
                    next_id = next_id.max(post_id.0 + 1);
                    authors.push(*author);
                }
                Event::Follow { followee, .. } => authors.push(*followee),
                _ => {}
            }
        }
        Posts {
            next_id,
            ts,
            authors,
            rng: Rng(11),
        }
    }

    /// Produces [`POSTS_PER_PHASE`] posts to the workload's `events`.
    fn produce(&mut self, w: &Workload) -> Result<()> {
        if self.authors.is_empty() {
            bail!("the workload has no authors to post");
        }
        let posts: Vec<Event> = (0..POSTS_PER_PHASE)
            .map(|_| {
                let author =
                    self.authors[(self.rng.next_u64() % self.authors.len() as u64) as usize];
                self.next_id += 1;
                self.ts += 1;
                Event::Post {
                    author,
                    post_id: PostId(self.next_id),
                    ts: Ts(self.ts),
                }
            })
            .collect();
        produce_events(&w.shared, &posts, w.partitions)?;
        Ok(())
    }
}

/// What the swap took.
struct Swapped {
    /// The `swap` command, start to return.
    command_ms: f64,
    /// From its return to the first read that reached generation 1's
    /// processor.
    reached_ms: f64,
}

/// A third of the way into a `secs`-second read phase, runs `swap`, then
/// reads `probe` through generation 0's processor at `g0` until one has
/// reached generation 1's processor (at `g1`).
fn swap_while_read(
    mut swap: std::process::Command,
    (g0, g1): (SocketAddr, SocketAddr),
    probe: &str,
    secs: u64,
) -> Result<Swapped> {
    let phase = Instant::now();
    std::thread::sleep(Duration::from_secs(secs) / 3);
    let reached_before = timeline_requests(g1)?;
    let start = Instant::now();
    let out = swap.output().context("running swap")?;
    let command_ms = start.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() {
        bail!(
            "swap failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if phase.elapsed() > Duration::from_secs(secs) {
        say!(
            "the swap outlasted the read phase ({:.1}s of {secs}s): give more --seconds for reads during the switch",
            phase.elapsed().as_secs_f64()
        );
    }
    let returned = Instant::now();
    while timeline_requests(g1)? <= reached_before {
        if returned.elapsed() > Duration::from_secs(30) {
            bail!("no read reached generation 1 within 30 s of the swap");
        }
        let base = format!("http://{g0}");
        feedlog::api::http::client::get(&base, probe, &[], Duration::from_secs(5))?;
    }
    Ok(Swapped {
        command_ms,
        reached_ms: returned.elapsed().as_secs_f64() * 1000.0,
    })
}

/// The timeline requests the processor at `addr` has had (its `/metrics`,
/// whatever their status).
fn timeline_requests(addr: SocketAddr) -> Result<u64> {
    let r = feedlog::api::http::client::get(
        &format!("http://{addr}"),
        "/metrics",
        &[],
        Duration::from_secs(5),
    )?;
    Ok(String::from_utf8_lossy(&r.body)
        .lines()
        .filter(|l| {
            l.starts_with("feedlog_http_request_duration_seconds_count")
                && l.contains("/timeline\"")
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}
