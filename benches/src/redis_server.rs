//! The Redis side of `feedlog-bench redis` and `feedlog-bench mixed`: a
//! `redis-server` on loopback, the design's worker replaying events into
//! it, the checks that both sides hold the same pages, and page loads from
//! `redis-benchmark` (`ZREVRANGE`, or the design's page script when the
//! workload has reposts).

use crate::http::Load;
use crate::redis_worker::{Worker, COUNTS_SCRIPT, PAGE_SCRIPT};
use crate::resp::{number, Conn, Resp};
use anyhow::{bail, Context, Result};
use feedlog::api::query::Reader;
use feedlog::core::event::{Event, UserId};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// `redis-server` and `redis-benchmark`, when both are installed; else
/// says that `feedlog-bench bench` is skipped and why.
pub(super) fn tools(bench: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let tools = crate::http::which("redis-server").zip(crate::http::which("redis-benchmark"));
    if tools.is_none() {
        crate::say::say!(
            "feedlog-bench {bench}: skipped: redis-server and redis-benchmark are not installed \
             (Debian/Ubuntu: apt-get install redis-server redis-tools; scripts/setup.sh --bench installs them)"
        );
    }
    tools
}

/// A `redis-server` on a free loopback port, stopped on drop.
pub(super) struct RedisServer {
    child: std::process::Child,
    port: u16,
    /// The SHA1 of [`PAGE_SCRIPT`] once loaded: pages are then read
    /// through it (a workload with reposts), else with `ZREVRANGE`.
    page_script: Option<String>,
    /// The SHA1 of [`COUNTS_SCRIPT`] once loaded (pages with counts).
    counts_script: Option<String>,
}

impl RedisServer {
    pub(super) fn start(bin: &Path, dir: &Path) -> Result<RedisServer> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = std::process::Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut server = RedisServer {
            child,
            port,
            page_script: None,
            counts_script: None,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = server.connect() {
                if c.integer_or_status(&[b"PING"]).is_ok() {
                    return Ok(server);
                }
            }
            if let Some(status) = server.child.try_wait()? {
                bail!("redis-server exited at start-up ({status})");
            }
            if Instant::now() > deadline {
                bail!("redis-server did not answer on port {port} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn connect(&self) -> Result<Conn> {
        Conn::connect(self.port)
    }

    /// Replays `events` as the design's worker; inbox entries written,
    /// commands sent, and seconds until Redis acknowledged the last one.
    pub(super) fn replay(&self, events: &[&Event], cap: u64) -> Result<(u64, u64, f64)> {
        let mut conn = self.connect()?;
        let mut writer = conn.writer.get_ref().try_clone()?;
        let sent = AtomicU64::new(u64::MAX);
        let start = Instant::now();
        let (entries, commands) = std::thread::scope(|s| -> Result<(u64, u64)> {
            let worker = s.spawn(|| -> Result<(u64, u64)> {
                let mut w = Worker::new(cap);
                let mut out = Resp::default();
                for e in events {
                    w.apply(e, &mut out);
                    if out.buf.len() >= 1 << 16 {
                        writer.write_all(&out.buf)?;
                        out.buf.clear();
                    }
                }
                writer.write_all(&out.buf)?;
                sent.store(out.commands, Ordering::SeqCst);
                Ok((w.entries, out.commands))
            });
            let mut acknowledged = 0u64;
            let mut first_error = None;
            while acknowledged != sent.load(Ordering::SeqCst) {
                if worker.is_finished() && sent.load(Ordering::SeqCst) == u64::MAX {
                    break; // the worker failed; its error is below
                }
                if let Err(e) = conn.reply_line() {
                    first_error.get_or_insert(e);
                    if conn.line.is_empty() {
                        break; // the connection is gone
                    }
                }
                acknowledged += 1;
            }
            let done = worker
                .join()
                .map_err(|_| anyhow::anyhow!("the replay worker panicked"))??;
            if let Some(e) = first_error {
                return Err(e.context("redis refused a command of the replay"));
            }
            Ok(done)
        })?;
        Ok((entries, commands, start.elapsed().as_secs_f64()))
    }

    /// CPU seconds the server has used (Linux: /proc), if known.
    pub(super) fn cpu_secs(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        super::http::stat_cpu_secs(&stat)
    }

    pub(super) fn used_memory(&self) -> Result<String> {
        let mut c = self.connect()?;
        c.send(&[b"INFO", b"memory"])?;
        let info = c.bulk()?;
        let text = String::from_utf8_lossy(&info);
        let human = text
            .lines()
            .find_map(|l| l.strip_prefix("used_memory_human:"))
            .unwrap_or("?");
        Ok(format!("{} in memory", human.trim()))
    }

    /// For how many readers the first page (20 entries, newest first) is
    /// the same in both: a check that both did the same work.
    pub(super) fn first_pages_agree(&self, reader: &Reader, users: &[u64]) -> Result<usize> {
        self.pages_agree(users, 0, |u| Ok(reader.timeline(UserId(u), 20, None)?))
    }

    /// For how many readers the page of 20 from entry `from` on is the same
    /// in Redis as `ours` says it is in feedlog.
    pub(super) fn pages_agree(
        &self,
        users: &[u64],
        from: usize,
        ours: impl Fn(u64) -> Result<feedlog::api::query::Page<feedlog::api::query::PostItem>>,
    ) -> Result<usize> {
        let mut c = self.connect()?;
        let mut same = 0;
        let (start, stop) = (from.to_string(), (from + 19).to_string());
        for chunk in users.chunks(1000) {
            for u in chunk {
                let key = format!("i:{u:012}");
                c.queue(&[
                    b"ZREVRANGE",
                    key.as_bytes(),
                    start.as_bytes(),
                    stop.as_bytes(),
                    b"WITHSCORES",
                ]);
            }
            c.flush()?;
            for &u in chunk {
                let items = c.array()?;
                let mut theirs: Vec<(u64, u64)> = items
                    .chunks(2)
                    .map(|m| Ok((number(&m[1])?, number(&m[0])?)))
                    .collect::<Result<_>>()?;
                let mut ours: Vec<(u64, u64)> =
                    ours(u)?.items.iter().map(|i| (i.ts, i.post_id)).collect();
                theirs.sort_unstable();
                ours.sort_unstable();
                same += usize::from(theirs == ours);
            }
        }
        Ok(same)
    }

    /// Copies reader `i`'s inbox to `p:{i:012}`, the key redis-benchmark's
    /// `__rand_int__` names.
    pub(super) fn name_pages(&self, users: &[u64]) -> Result<()> {
        let mut c = self.connect()?;
        for (i, u) in users.iter().enumerate() {
            let (from, to) = (format!("i:{u:012}"), format!("p:{i:012}"));
            let reader = format!("{u:012}");
            c.queue(&[b"COPY", from.as_bytes(), to.as_bytes(), b"REPLACE"]);
            // Whose copy it is, for the page script's sources.
            c.queue(&[b"HSET", b"readers", to.as_bytes(), reader.as_bytes()]);
        }
        c.flush()?;
        for _ in users {
            c.reply_line()?;
            c.reply_line()?;
        }
        Ok(())
    }

    /// `ZREVRANGE p:<random reader> FROM FROM+19 WITHSCORES` from
    /// redis-benchmark for about `secs` seconds (a short run first sizes
    /// the long one).
    pub(super) fn pages_under_load(
        &self,
        bin: &Path,
        (readers, from): (usize, usize),
        threads: usize,
        connections: usize,
        secs: u64,
    ) -> Result<Load> {
        let run = |n| self.pages(bin, ("p", readers, from), threads, connections, n);
        let probe = run(20_000)?;
        run(((probe.per_sec * secs as f64) as u64).max(20_000))
    }

    /// [`RedisServer::pages_under_load`] through [`COUNTS_SCRIPT`]: each
    /// row with its counts and the reader's flags (and its sources when
    /// the page script is loaded).
    pub(super) fn counted_pages_under_load(
        &mut self,
        bin: &Path,
        readers: usize,
        threads: usize,
        connections: usize,
        secs: u64,
    ) -> Result<Load> {
        let mut c = self.connect()?;
        c.send(&[b"SCRIPT", b"LOAD", COUNTS_SCRIPT.as_bytes()])?;
        self.counts_script = Some(String::from_utf8(c.bulk()?)?);
        let run = |n| self.pages(bin, ("p", readers, 0), threads, connections, n);
        let probe = run(20_000);
        let load = probe.and_then(|p| run(((p.per_sec * secs as f64) as u64).max(20_000)));
        self.counts_script = None;
        load
    }

    /// `n` × `ZREVRANGE {prefix}:<random id below range> FROM FROM+19
    /// WITHSCORES` from redis-benchmark, or the same rows with their
    /// sources through [`PAGE_SCRIPT`] once it is loaded.
    pub(super) fn pages(
        &self,
        bin: &Path,
        (prefix, range, from): (&str, usize, usize),
        threads: usize,
        connections: usize,
        n: u64,
    ) -> Result<Load> {
        let key = format!("{prefix}:__rand_int__");
        let (start, stop) = (from.to_string(), (from + 19).to_string());
        let mut args: Vec<&str> = match (&self.counts_script, &self.page_script) {
            (Some(sha), _) | (None, Some(sha)) => vec!["EVALSHA", sha, "1", &key],
            (None, None) => vec!["ZREVRANGE", &key],
        };
        args.extend([start.as_str(), stop.as_str()]);
        args.extend(match (&self.counts_script, &self.page_script) {
            (Some(_), sources) => Some(if sources.is_some() { "1" } else { "0" }),
            (None, None) => Some("WITHSCORES"),
            (None, Some(_)) => None,
        });
        self.benchmark(bin, (range, &args), (threads, connections), n)
    }

    /// `ZCOUNT p:<random reader> (MIN +inf` from redis-benchmark for about
    /// `secs` seconds: the design's unread count above a marker at `min`.
    pub(super) fn counts_under_load(
        &self,
        bin: &Path,
        (readers, min): (usize, u64),
        (threads, connections): (usize, usize),
        secs: u64,
    ) -> Result<Load> {
        let min = format!("({min}");
        let args = ["ZCOUNT", "p:__rand_int__", &min, "+inf"];
        let run = |n| self.benchmark(bin, (readers, &args), (threads, connections), n);
        let probe = run(20_000)?;
        run(((probe.per_sec * secs as f64) as u64).max(20_000))
    }

    /// Loads `script`: its SHA1, for [`RedisServer::script_under_load`].
    pub(super) fn load_script(&self, script: &str) -> Result<String> {
        let mut c = self.connect()?;
        c.send(&[b"SCRIPT", b"LOAD", script.as_bytes()])?;
        Ok(String::from_utf8(c.bulk()?)?)
    }

    /// `EVALSHA sha 1 key args…`, its answer an array of strings.
    pub(super) fn eval(&self, sha: &str, key: &str, args: &[&str]) -> Result<Vec<Vec<u8>>> {
        let mut c = self.connect()?;
        let mut all: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), b"1", key.as_bytes()];
        all.extend(args.iter().map(|a| a.as_bytes()));
        c.send(&all)?;
        c.array()
    }

    /// `EVALSHA sha 1 {prefix}:<random id below range> args…` from
    /// redis-benchmark for about `secs` seconds (a short run first sizes
    /// the long one).
    pub(super) fn script_under_load(
        &self,
        bin: &Path,
        (sha, prefix, args): (&str, &str, &[&str]),
        range: usize,
        (threads, connections): (usize, usize),
        secs: u64,
    ) -> Result<Load> {
        let key = format!("{prefix}:__rand_int__");
        let mut all = vec!["EVALSHA", sha, "1", &key];
        all.extend(args);
        let run = |n| self.benchmark(bin, (range, &all), (threads, connections), n);
        let probe = run(20_000)?;
        run(((probe.per_sec * secs as f64) as u64).max(20_000))
    }

    /// `n` × the command `args` (whose `__rand_int__` redis-benchmark
    /// draws below `range`) from redis-benchmark: its figures, with the
    /// server's CPU.
    fn benchmark(
        &self,
        bin: &Path,
        (range, args): (usize, &[&str]),
        (threads, connections): (usize, usize),
        n: u64,
    ) -> Result<Load> {
        let (cpu_before, start) = (self.cpu_secs(), std::time::Instant::now());
        let out = std::process::Command::new(bin)
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args([
                "-c",
                &connections.to_string(),
                "--threads",
                &threads.to_string(),
            ])
            .args(["-n", &n.to_string(), "-r", &range.to_string()])
            .args(args)
            .output()
            .context("running redis-benchmark")?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        anyhow::ensure!(
            out.status.success(),
            "redis-benchmark failed:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let wall = start.elapsed().as_secs_f64();
        let load = parse_benchmark(&text)
            .with_context(|| format!("reading redis-benchmark's report:\n{text}"))?;
        let cores = match (cpu_before, self.cpu_secs()) {
            (Some(a), Some(b)) if wall > 0.0 => Some((b - a) / wall),
            _ => None,
        };
        Ok(Load {
            server_cores: cores,
            ..load
        })
    }

    /// Reads pages through [`PAGE_SCRIPT`] from now on: each row with its
    /// sources, as the design answers a timeline with reposts.
    pub(super) fn load_page_script(&mut self) -> Result<()> {
        let mut c = self.connect()?;
        c.send(&[b"SCRIPT", b"LOAD", PAGE_SCRIPT.as_bytes()])?;
        self.page_script = Some(String::from_utf8(c.bulk()?)?);
        Ok(())
    }

    /// Removes every key.
    pub(super) fn flush_all(&self) -> Result<()> {
        self.connect()?.integer_or_status(&[b"FLUSHALL"])
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The throughput, p50 and p99 of a redis-benchmark report (its summary)
/// and its p99.9 (the first step of its percentile distribution at or
/// past 99.9 %: an upper bound within one step).
fn parse_benchmark(text: &str) -> Option<Load> {
    let lines: Vec<&str> = text.split(['\n', '\r']).map(str::trim).collect();
    let per_sec = lines
        .iter()
        .find_map(|l| l.strip_prefix("throughput summary:"))?
        .trim()
        .strip_suffix("requests per second")?
        .trim()
        .parse()
        .ok()?;
    let header = lines
        .iter()
        .position(|l| l.starts_with("avg") && l.contains("p99"))?;
    let names: Vec<&str> = lines[header].split_whitespace().collect();
    let values: Vec<&str> = lines.get(header + 1)?.split_whitespace().collect();
    let field = |name: &str| -> Option<f64> {
        values
            .get(names.iter().position(|n| *n == name)?)?
            .parse()
            .ok()
    };
    let p999_ms = lines.iter().find_map(|l| {
        let (pct, rest) = l.split_once("% <= ")?;
        (pct.parse::<f64>().ok()? >= 99.9)
            .then(|| rest.split_whitespace().next()?.parse().ok())
            .flatten()
    });
    Some(Load {
        per_sec,
        p50_ms: field("p50")?,
        p99_ms: field("p99")?,
        p999_ms,
        server_cores: None,
    })
}
