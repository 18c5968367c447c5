//! `feedlog-bench http`: timeline pages through the HTTP API against raw
//! RocksDB seeks of the same inboxes.

use crate::common::Cleanup;
use crate::say::say;
use anyhow::{Context, Result};
use feedlog::api::query::Reader;
use feedlog::core::event::UserId;
use feedlog::core::Partition;
use feedlog::ingest::generate::Rng;
use feedlog::ops::serve::LogNode;
use feedlog::state::datadir::DataDir;
use feedlog::state::Cf;
use feedlog::state::Kept;
use rocksdb::{Options, DB};
use std::time::Instant;

/// One load's figures: latency percentiles and throughput.
pub(super) struct Load {
    pub(super) p50_ms: f64,
    pub(super) p99_ms: f64,
    /// The 99.9th percentile, where the load generator reports it.
    pub(super) p999_ms: Option<f64>,
    pub(super) per_sec: f64,
    /// The server's CPU during the run, in cores (CPU seconds per second),
    /// where it was measured: what a load generator on the same cores
    /// leaves out of `per_sec`.
    pub(super) server_cores: Option<f64>,
}

impl Load {
    /// The figures of `lat`, each request's latency in ns, made in `secs`
    /// seconds; `None` without any.
    pub(super) fn of(mut lat: Vec<u64>, secs: f64) -> Option<Load> {
        lat.sort_unstable();
        let pct = |q: f64| {
            Some(
                *lat.get(((lat.len() as f64 * q) as usize).min(lat.len().checked_sub(1)?))? as f64
                    / 1e6,
            )
        };
        Some(Load {
            p50_ms: pct(0.50)?,
            p99_ms: pct(0.99)?,
            p999_ms: pct(0.999),
            per_sec: lat.len() as f64 / secs,
            server_cores: None,
        })
    }

    pub(super) fn line(&self) -> String {
        let p999 = match self.p999_ms {
            Some(ms) => format!(", p99.9 {ms:.3} ms"),
            None => String::new(),
        };
        let cores = match self.server_cores {
            Some(c) => format!("; server on {c:.2} cores"),
            None => String::new(),
        };
        format!(
            "{:.0} pages/s, p50 {:.3} ms, p99 {:.3} ms{p999}{cores}",
            self.per_sec, self.p50_ms, self.p99_ms
        )
    }

    /// Pages per CPU second of the server, where its CPU was measured.
    pub(super) fn per_server_cpu_sec(&self) -> Option<f64> {
        self.server_cores
            .filter(|c| *c > 0.0)
            .map(|c| self.per_sec / c)
    }
}

/// CPU seconds used so far by this process's threads whose name starts
/// with `name` (Linux: /proc/self/task), by thread id.
fn threads_cpu_secs(name: &str) -> std::collections::HashMap<u64, f64> {
    let mut cpu = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return cpu;
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u64>().ok()) else {
            continue;
        };
        if !comm.trim_end().starts_with(name) {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        if let Some(secs) = stat_cpu_secs(&stat) {
            cpu.insert(tid, secs);
        }
    }
    cpu
}

/// utime + stime of a `/proc/…/stat` line, in seconds (clock ticks of
/// 1/100 s): the 14th and 15th fields, counted after the command name in
/// parentheses.
pub(super) fn stat_cpu_secs(stat: &str) -> Option<f64> {
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// What every `wrk` script here ends with: its `done` prints the 99.9th
/// percentile of the latencies (`wrk --latency` stops at the 99th).
const WRK_DONE: &str = "done = function(summary, latency, requests)\n  \
    io.write(string.format(\"p99.9: %dus\\n\", latency:percentile(99.9)))\nend\n";

/// Timeline pages through the HTTP API (`wrk` as the load generator) vs raw
/// RocksDB seek + 20 reads of the same users' inbox keys, in one run.
pub fn http(data: &std::path::Path, threads: usize, connections: usize, secs: u64) -> Result<()> {
    let dir = DataDir::open(data).with_context(|| {
        format!(
            "no loaded state at {} (make one: feedlog --data {} demo --exit)",
            data.display(),
            data.display()
        )
    })?;
    let wrk = need_wrk()?;
    let reader = Reader::open(&dir)?;
    let users = readers(&reader)?;
    anyhow::ensure!(
        !users.is_empty(),
        "{} has no users who follow anyone",
        data.display()
    );
    let load = |reader| through_http(&wrk, &dir, reader, (&users, ""), threads, connections, secs);
    let http = load(reader)?;
    // Without the page cache, once the heads are read after the open.
    let no_pages = Kept {
        pages: 0,
        ..Kept::default()
    };
    let cold = load(crate::cold::opened_with_heads(&dir, no_pages)?.0)?;
    let bare = load(Reader::open_keeping(&dir, Kept::NONE)?)?;
    // Raw RocksDB: the same users, seek to their inbox and read 20 entries.
    let raw = raw_seeks(&dir, &users, threads, secs)?;
    println!("timeline pages of 20 through HTTP ({threads} server threads, wrk -t{threads} -c{connections}, {secs}s):");
    println!("  {}", http.line());
    println!(
        "  without the page cache (pages from the inbox heads): {}",
        cold.line()
    );
    println!(
        "  with nothing kept (every page read from RocksDB): {}",
        bare.line()
    );
    println!("raw RocksDB seek + 20 reads of the same inbox keys ({threads} threads, {secs}s):");
    println!("  {}", raw.line());
    println!(
        "ratio HTTP/raw pages/s: {:.3}; without the page cache {:.3}; with nothing kept {:.3}",
        http.per_sec / raw.per_sec,
        cold.per_sec / raw.per_sec,
        bare.per_sec / raw.per_sec
    );
    Ok(())
}

/// Up to 20,000 readers: users who follow someone, in a fixed shuffled
/// order (the same for every run on the same state).
pub(super) fn readers(reader: &Reader) -> Result<Vec<u64>> {
    let mut users = Vec::new();
    for (_, store) in reader.stores() {
        for r in feedlog::core::views::users(&store.snapshot()) {
            let (u, v) = r?;
            if v.followees > 0 {
                users.push(u.0);
            }
        }
    }
    Ok(readers_sample(users))
}

/// Up to 20,000 of `users`, in a fixed shuffled order (the same every run).
pub(super) fn readers_sample(mut users: Vec<u64>) -> Vec<u64> {
    let mut rng = Rng(7);
    for i in (1..users.len()).rev() {
        users.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    users.truncate(20_000);
    users
}

/// The load generator `wrk`, or an error saying how to install it.
pub(super) fn need_wrk() -> Result<std::path::PathBuf> {
    which("wrk").context(
        "the load generator `wrk` is not installed (Debian/Ubuntu: apt-get install wrk; \
         scripts/setup.sh --bench installs it)",
    )
}

/// Serves `reader` on loopback and loads it with `wrk`: first pages of 20
/// of `users`' timelines, in turn from a random start per connection.
pub(super) fn through_http(
    wrk: &std::path::Path,
    dir: &DataDir,
    reader: Reader,
    (users, query): (&[u64], &str),
    threads: usize,
    connections: usize,
    secs: u64,
) -> Result<Load> {
    let entries: usize = users
        .iter()
        .take(1000)
        .map(|&u| reader.timeline(UserId(u), 20, None).map(|p| p.items.len()))
        .sum::<Result<usize, _>>()?;
    say!(
        "{} readers; their first pages hold {:.1} entries on average",
        users.len(),
        entries as f64 / users.len().min(1000) as f64
    );
    let paths: Vec<String> = users
        .iter()
        .map(|u| format!("/v1/users/{u}/timeline?limit=20{query}"))
        .collect();
    with_wrk(
        wrk,
        dir,
        reader,
        &paths_script(&paths),
        threads,
        connections,
        secs,
    )
}

/// The readers among `users` whose timeline has a second page of 20, with
/// the path of that page (the first page's `next_cursor`).
pub(super) fn second_pages(reader: &Reader, users: &[u64]) -> Result<Vec<(u64, String)>> {
    let mut out = Vec::new();
    for &u in users {
        let first = reader.timeline(UserId(u), 20, None)?;
        if let (20, Some(c)) = (first.items.len(), first.next_cursor) {
            if !reader.timeline(UserId(u), 20, Some(&c))?.items.is_empty() {
                out.push((
                    u,
                    format!("/v1/users/{u}/timeline?limit=20&counts=0&cursor={c}"),
                ));
            }
        }
    }
    Ok(out)
}

/// A `wrk` Lua script that requests `paths` in turn, from a random start
/// per connection.
pub(super) fn paths_script(paths: &[String]) -> String {
    let list = paths
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(",");
    format!(
        "local paths = {{{list}}}\nlocal i = 0\n\
         init = function(args) i = math.random(#paths) end\n\
         request = function()\n  i = i % #paths + 1\n  \
         return wrk.format(\"GET\", paths[i])\nend\n{WRK_DONE}"
    )
}

/// Serves `reader` on loopback and runs `wrk` with the Lua `script` (its
/// `request` names the pages) for `secs` seconds.
pub(super) fn with_wrk(
    wrk: &std::path::Path,
    dir: &DataDir,
    reader: Reader,
    script: &str,
    threads: usize,
    connections: usize,
    secs: u64,
) -> Result<Load> {
    let (text, cores) = serving(dir, reader, threads, |addr| {
        wrk_at(wrk, addr, script, threads, connections, secs)
    })?;
    anyhow::ensure!(
        !text.contains("Non-2xx"),
        "some requests did not answer 200:\n{text}"
    );
    let load = parse_wrk(&text).with_context(|| format!("reading wrk's report:\n{text}"))?;
    Ok(Load {
        server_cores: cores,
        ..load
    })
}

/// Serves `reader` on loopback (`threads` server threads) while `client`
/// runs against its address; with what the client returns, the server's
/// CPU over the client's run in cores (its threads', the blocking pool's
/// included), where /proc tells.
pub(super) fn serving<T>(
    dir: &DataDir,
    reader: Reader,
    threads: usize,
    client: impl FnOnce(std::net::SocketAddr) -> Result<T>,
) -> Result<(T, Option<f64>)> {
    use feedlog::api::http::{Api, ApiConfig};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(SERVER_THREADS)
        .enable_all()
        .build()?;
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    let node = std::sync::Arc::new(LogNode::new(std::sync::Arc::new(dir.logs()), None));
    let api = Api::new(reader, node, ApiConfig::default());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        rt.block_on(feedlog::api::http::serve(listener, api, async {
            let _ = rx.await;
        }))
    });
    let (before, start) = (threads_cpu_secs(SERVER_THREADS), Instant::now());
    let out = client(addr);
    let after = threads_cpu_secs(SERVER_THREADS);
    let wall = start.elapsed().as_secs_f64();
    let used: f64 = after
        .iter()
        .map(|(tid, secs)| secs - before.get(tid).copied().unwrap_or(0.0))
        .sum();
    // The kernel counts a thread's CPU in ticks of 10 ms: over a pass
    // shorter than a second the figure says nothing.
    let cores = (!after.is_empty() && wall >= 1.0).then(|| used / wall);
    let _ = tx.send(());
    let _ = server.join();
    Ok((out?, cores))
}

/// The name of the server's threads (tokio's workers and blocking pool).
const SERVER_THREADS: &str = "page-server";

/// Runs `wrk` with the Lua `script` against `http://ADDR` for `secs`
/// seconds; its report.
pub(super) fn wrk_at(
    wrk: &std::path::Path,
    addr: std::net::SocketAddr,
    script: &str,
    threads: usize,
    connections: usize,
    secs: u64,
) -> Result<String> {
    let tmp = std::env::temp_dir().join(format!(
        "feedlog-bench-http-{}-{}",
        std::process::id(),
        addr.port()
    ));
    std::fs::create_dir_all(&tmp)?;
    let _cleanup = Cleanup(tmp.clone());
    let script_path = tmp.join("timeline.lua");
    std::fs::write(&script_path, script)?;
    say!("HTTP: wrk -t{threads} -c{connections} -d{secs}s against http://{addr}");
    let out = without_inherited_fds(wrk)
        .args([
            format!("-t{threads}"),
            format!("-c{connections}"),
            format!("-d{secs}s"),
            "--latency".into(),
            "-s".into(),
            script_path.display().to_string(),
            format!("http://{addr}"),
        ])
        .output()
        .context("running wrk")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(
        out.status.success(),
        "wrk failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(text)
}

/// Runs `program` with every descriptor above stderr closed first, when
/// bash is there to do it. librdkafka's mock broker (the Kafka benches run
/// it in this process) accepts its connections without close-on-exec, so
/// children inherit hundreds of sockets; wrk sizes its event loop by its
/// connection count and fails every connection whose descriptor lands
/// past it, counting each as a connect error.
fn without_inherited_fds(program: &std::path::Path) -> std::process::Command {
    const CLOSE_THEN_EXEC: &str = r#"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; exec "$0" "$@""#;
    match which("bash") {
        Some(bash) => {
            let mut c = std::process::Command::new(bash);
            c.args(["-c", CLOSE_THEN_EXEC]).arg(program);
            c
        }
        None => std::process::Command::new(program),
    }
}

pub(super) fn which(cmd: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(cmd))
            .find(|p| p.is_file())
    })
}

/// Requests/s and the 50% and 99% latencies of `wrk --latency`.
pub(super) fn parse_wrk(text: &str) -> Option<Load> {
    let ms = wrk_ms;
    let field = |prefix: &str| wrk_field(text, prefix);
    Some(Load {
        p50_ms: ms(field("50%")?)?,
        p99_ms: ms(field("99%")?)?,
        p999_ms: field("p99.9:").and_then(ms),
        per_sec: field("Requests/sec:")?.parse().ok()?,
        server_cores: None,
    })
}

/// A duration of a `wrk` report (`812.00us`, `1.20ms`, `2.01s`) in ms.
pub(super) fn wrk_ms(v: &str) -> Option<f64> {
    let (num, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic())?);
    let n: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => n / 1000.0,
        "ms" => n,
        "s" => n * 1000.0,
        "m" => n * 60_000.0,
        _ => return None,
    })
}

/// The rest of the first line of a `wrk` report that starts with `prefix`.
pub(super) fn wrk_field<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(prefix))
        .map(str::trim)
}

/// `threads` threads, each for `secs` seconds, seek to a user's inbox and
/// read up to 20 entries, users in turn; plain RocksDB, no feedlog code.
fn raw_seeks(dir: &DataDir, users: &[u64], threads: usize, secs: u64) -> Result<Load> {
    use rocksdb::{IteratorMode, ReadOptions};
    let names: Vec<&str> = Cf::ALL.iter().map(|c| c.name()).collect();
    let inbox = Cf::Inbox.name();
    let dbs = Partition::all(dir.partitions())
        .map(|p| {
            DB::open_cf_for_read_only(&Options::default(), dir.state_dir(p), &names, false)
                .context("opening a state store with plain RocksDB")
        })
        .collect::<Result<Vec<_>>>()?;
    let partitions = dir.partitions();
    let until = Instant::now() + std::time::Duration::from_secs(secs);
    let results: Vec<(Vec<u64>, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let dbs = &dbs;
                s.spawn(move || {
                    let mut lat = Vec::new();
                    let mut i = t * users.len() / threads;
                    let mut entries = 0u64;
                    while Instant::now() < until {
                        let u = users[i % users.len()];
                        i += 1;
                        let db =
                            &dbs[feedlog::core::partition::partition_for(UserId(u), partitions)
                                .index()];
                        let start = Instant::now();
                        let mut ro = ReadOptions::default();
                        ro.set_iterate_range(
                            u.to_be_bytes().to_vec()..(u + 1).to_be_bytes().to_vec(),
                        );
                        let cf = db.cf_handle(inbox).expect("inbox column family");
                        let it = db.iterator_cf_opt(&cf, ro, IteratorMode::Start);
                        for kv in it.take(20) {
                            let (k, _) = kv.expect("read");
                            entries += k.len() as u64;
                        }
                        lat.push(start.elapsed().as_nanos() as u64);
                    }
                    (lat, entries)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("reader thread"))
            .collect()
    });
    let lat: Vec<u64> = results
        .iter()
        .flat_map(|(l, _)| l.iter().copied())
        .collect();
    Load::of(lat, secs as f64).context("no raw reads were made")
}

#[cfg(test)]
mod tests {
    // Proves a /proc stat line's CPU is utime + stime in seconds, read after the command name even when that holds spaces and parentheses.
    #[test]
    fn stat_cpu_is_read_after_the_command_name() {
        let stat = "4242 (page (server) x) S 1 2 3 4 5 6 7 8 9 10 250 125 0 0 20 0 1";
        assert_eq!(super::stat_cpu_secs(stat), Some(3.75));
        assert_eq!(super::stat_cpu_secs("4242 (short) S 1"), None);
    }
}
