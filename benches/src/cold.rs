//! The cold pass of the page runs: each reader's first page once, from a
//! reader opened now, through a client built as `wrk` is.

use crate::http::{serving, Load};
use anyhow::{Context, Result};
use feedlog::api::query::Reader;
use feedlog::state::datadir::DataDir;
use feedlog::state::Kept;
use std::time::Instant;

/// A reader of `dir` opened now keeping `kept`, once the inbox heads it
/// reads in the background are read (at most a minute), and a line saying
/// how many, their bytes, and how long they took.
pub(super) fn opened_with_heads(dir: &DataDir, kept: Kept) -> Result<(Reader, String)> {
    let opened = Instant::now();
    let reader = Reader::open_keeping(dir, kept)?;
    while !reader.heads_read() && opened.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let (mut heads, mut bytes) = (0, 0);
    for (_, store) in reader.stores() {
        let (h, _, b) = store.heads().held();
        (heads, bytes) = (heads + h, bytes + b);
    }
    let line = format!(
        "inbox heads: {heads} readers, {:.1} MB, read {:.2} s after the open{}",
        bytes as f64 / 1e6,
        opened.elapsed().as_secs_f64(),
        if reader.heads_read() {
            ""
        } else {
            " (not all: stopped waiting)"
        }
    );
    Ok((reader, line))
}

/// Each of `paths` requested once through HTTP from `reader` served on
/// loopback, over `connections` keep-alive connections (connection `c`
/// asks for paths `c`, `c + connections`, …): the pages every reader's
/// first read costs, with no page read twice. Throughput over the whole
/// pass, latencies of every request.
///
/// The client is built as wrk is: `threads` threads, each driving its share
/// of the connections from one event loop. (A blocking thread per
/// connection capped the pass at about a third of what wrk drives, every
/// page a page-cache hit: the client measured itself.)
pub(super) fn once_each(
    dir: &DataDir,
    reader: Reader,
    paths: &[String],
    threads: usize,
    connections: usize,
) -> Result<Load> {
    let (load, cores) = serving(dir, reader, threads, |addr| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .enable_all()
            .build()?;
        let paths: std::sync::Arc<[String]> = paths.into();
        let start = Instant::now();
        let lat: Vec<Vec<u64>> = rt.block_on(async {
            let tasks: Vec<_> = (0..connections)
                .map(|c| {
                    let paths = paths.clone();
                    tokio::spawn(async move {
                        let mut conn = tokio::net::TcpStream::connect(addr).await?;
                        conn.set_nodelay(true)?;
                        let mut buf = Vec::new();
                        let mut lat = Vec::new();
                        for path in paths.iter().skip(c).step_by(connections) {
                            let t = Instant::now();
                            get(&mut conn, addr, path, &mut buf).await?;
                            lat.push(t.elapsed().as_nanos() as u64);
                        }
                        anyhow::Ok(lat)
                    })
                })
                .collect();
            let mut lat = Vec::with_capacity(tasks.len());
            for t in tasks {
                lat.push(t.await.context("a client task panicked")??);
            }
            anyhow::Ok(lat)
        })?;
        let secs = start.elapsed().as_secs_f64();
        Load::of(lat.into_iter().flatten().collect(), secs).context("no page was requested")
    })?;
    Ok(Load {
        server_cores: cores,
        ..load
    })
}

/// One `GET path` on the keep-alive connection `conn`, its body read
/// into `buf` (by its `content-length`); an error unless it answers 200.
async fn get(
    conn: &mut tokio::net::TcpStream,
    addr: std::net::SocketAddr,
    path: &str,
    buf: &mut Vec<u8>,
) -> Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    conn.write_all(format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes())
        .await?;
    buf.clear();
    let mut chunk = [0u8; 16 << 10];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = conn.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "the server closed the connection on {path}");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end])?.to_ascii_lowercase();
    anyhow::ensure!(
        head.starts_with("http/1.1 200"),
        "{path} answered {}",
        head.lines().next().unwrap_or_default()
    );
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .context("an answer without content-length")?
        .trim()
        .parse()?;
    while buf.len() < head_end + length {
        let n = conn.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "the server closed the connection on {path}");
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(())
}

/// Passes that the cold figure is the median of, at least: one pass is
/// each reader's page once, tens of milliseconds on a small network, where
/// a single pass moves with whatever else the machine does.
pub(super) const COLD_PASSES: usize = 3;

/// Pages the cold passes read together, at least (fewer readers make more
/// passes, up to [`MAX_COLD_PASSES`]): on CollegeMsg's 1,322 readers three
/// passes ranged over 2×.
const COLD_PAGES: usize = 20_000;

/// The most cold passes.
const MAX_COLD_PASSES: usize = 15;

/// The cold passes over `readers` pages: enough for [`COLD_PAGES`] within
/// [`COLD_PASSES`]..=[`MAX_COLD_PASSES`], an odd count (one median).
fn cold_pass_count(readers: usize) -> usize {
    let n = COLD_PAGES.div_ceil(readers.max(1));
    (n | 1).clamp(COLD_PASSES, MAX_COLD_PASSES)
}

/// Cold passes over `paths` ([`cold_pass_count`]) with `threads` and
/// `connections`, each from a reader of `dir` keeping `kept` opened for it
/// ([`opened_with_heads`]): the pass of median throughput, and a line with
/// the last reader's heads and every pass's pages/s.
pub(super) fn cold_passes(
    dir: &DataDir,
    kept: Kept,
    paths: &[String],
    (threads, connections): (usize, usize),
) -> Result<(Load, String)> {
    let count = cold_pass_count(paths.len());
    let (mut passes, mut heads) = (Vec::with_capacity(count), String::new());
    for _ in 0..count {
        let (reader, line) = opened_with_heads(dir, kept)?;
        passes.push(once_each(dir, reader, paths, threads, connections)?);
        heads = line;
    }
    passes.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
    let each: Vec<String> = passes.iter().map(|l| format!("{:.0}", l.per_sec)).collect();
    let line = format!(
        "{heads}; {count} cold passes: {} pages/s (the median shown)",
        each.join(" / ")
    );
    Ok((passes.swap_remove(count / 2), line))
}

#[cfg(test)]
mod tests {
    use super::cold_pass_count;

    // Proves the cold passes read at least 20,000 pages together in an odd count of 3 to 15 passes (three on the week's 20,000 readers, fifteen on CollegeMsg's 1,322).
    #[test]
    fn cold_passes_cover_twenty_thousand_pages_in_an_odd_count() {
        assert_eq!(cold_pass_count(20_000), 3);
        assert_eq!(cold_pass_count(1_322), 15);
        assert_eq!(cold_pass_count(5_000), 5);
        assert_eq!(cold_pass_count(4_000), 5);
        assert_eq!(cold_pass_count(2_500), 9);
        assert_eq!(cold_pass_count(0), 15);
    }
}
