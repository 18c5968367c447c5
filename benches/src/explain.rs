//! `feedlog-bench explain`: what explaining costs a reader. On the state
//! `feedlog-bench filters` builds (readers following 200 authors; the
//! second group muting 100 of them), through HTTP without the page cache:
//! first timeline pages with `explain=1` against the same pages without,
//! and `timeline/why` answers — a post in the timeline, a muted author's
//! post, and a post nobody posted — against the plain page.

use crate::common::Cleanup;
use crate::filters::{events, processed, reader, AUTHORS, READERS};
use crate::http::{paths_script, with_wrk, Load};
use crate::say::say;
use anyhow::Result;
use feedlog::api::query::Reader;
use feedlog::state::Kept;

/// The measurements, as the module says.
pub fn explain(partitions: u32, threads: usize, connections: usize, secs: u64) -> Result<()> {
    let wrk = crate::http::need_wrk()?;
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-explain-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    say!("setup: the state of `feedlog-bench filters` ({partitions} partitions)");
    let (dir, _, _) = processed(&tmp.join("state"), partitions, &events(true))?;
    let paths = |g: u64, path: &dyn Fn(u64, u64) -> String| -> Vec<String> {
        (0..READERS)
            .map(|i| path(reader(g, i).0, i % AUTHORS + 1))
            .collect()
    };
    // Post `n * 1000 + a` is author a's (n < 10); authors 1-100 are muted
    // by group 1.
    let runs: [(&str, Vec<String>); 5] = [
        (
            "plain first pages (baseline)",
            paths(0, &|u, _| format!("/v1/users/{u}/timeline?limit=20")),
        ),
        (
            "first pages with explain=1",
            paths(0, &|u, _| {
                format!("/v1/users/{u}/timeline?limit=20&explain=1")
            }),
        ),
        (
            "why, a post in the timeline",
            paths(0, &|u, a| {
                format!("/v1/users/{u}/timeline/why?author={a}&post_id={}", 9000 + a)
            }),
        ),
        (
            "why not, a muted author's post",
            paths(1, &|u, a| {
                format!(
                    "/v1/users/{u}/timeline/why?author={}&post_id={}",
                    a % 100 + 1,
                    9000 + a % 100 + 1
                )
            }),
        ),
        (
            "why not, an unknown post",
            paths(0, &|u, a| {
                format!("/v1/users/{u}/timeline/why?author={a}&post_id=77")
            }),
        ),
    ];
    println!("through HTTP, page cache off ({threads} server threads, wrk -t{threads} -c{connections}, {secs}s):");
    let mut base: Option<Load> = None;
    for (what, p) in runs {
        let open = Reader::open_keeping(&dir, Kept::NONE)?;
        let load = with_wrk(
            &wrk,
            &dir,
            open,
            &paths_script(&p),
            threads,
            connections,
            secs,
        )?;
        match &base {
            None => println!("  {what}: {}", load.line()),
            Some(b) => println!(
                "  {what}: {} — requests/s {:.2}x, p99 {:.2}x of the baseline",
                load.line(),
                load.per_sec / b.per_sec,
                load.p99_ms / b.p99_ms
            ),
        }
        base.get_or_insert(load);
    }
    Ok(())
}
