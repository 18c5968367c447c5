//! `feedlog-bench fanout`: inbox writes/s through the processor against raw
//! RocksDB puts of the same keys.

use crate::common::{run_until_idle, Cleanup, Generated};
use crate::say::say;
use anyhow::{Context, Result};
use feedlog::core::codec::Format;
use feedlog::core::Partition;
use feedlog::ingest::generate::Rng;
use feedlog::ingest::produce::Producer;
use feedlog::state::datadir::DataDir;
use feedlog::state::{Cf, Kv};
use feedlog::task::embedded::{Processor, ProcessorConfig};
use rocksdb::{BlockBasedOptions, Options, WriteBatch, WriteOptions, DB};
use std::time::Instant;

/// Fan-out inbox writes/s through the real processor vs raw RocksDB
/// `WriteBatch` puts of the same inbox keys.
pub fn fanout(
    generated: &Generated,
    partitions: u32,
    (pull_threshold, inactive_after): (u64, Option<u64>),
) -> Result<()> {
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    let dir = DataDir::create_or_open(&tmp.join("data"), Some(partitions))?;
    say!(
        "setup: {generated}, {partitions} partitions, \
         pull threshold {pull_threshold}, inactive after {} ms",
        inactive_after.unwrap_or(0)
    );
    let (follow_events, post_events) = generated.events();
    let mut producer = Producer::new(&dir)?;
    for e in &follow_events {
        producer.event(e, Format::Postcard)?;
    }
    producer.finish()?;
    let cfg = ProcessorConfig {
        pull_threshold: Some(pull_threshold),
        inactive_after,
        ..ProcessorConfig::default()
    };
    let processor = Processor::open(&dir, cfg.clone())?;
    run_until_idle(&processor)?;
    for e in &post_events {
        producer.event(e, Format::Postcard)?;
    }
    producer.finish()?;
    say!(
        "measuring: {} events fanned out through the processor",
        post_events.len()
    );
    let (delivered, secs) = run_until_idle(&processor)?;
    let feed_rate = delivered as f64 / secs;

    // The same inbox keys the processor wrote, in a random order.
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(delivered as usize);
    for p in Partition::all(partitions) {
        for r in processor.store(p).scan(Cf::Inbox, &[], None) {
            keys.push(r?.0);
        }
    }
    let mut rng = Rng(42);
    for i in (1..keys.len()).rev() {
        keys.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    processor.flush();
    let mut by_cf: Vec<(Cf, u64)> = Cf::ALL.iter().map(|&cf| (cf, 0)).collect();
    for p in Partition::all(partitions) {
        for (i, (_, n)) in processor.store(p).cf_bytes().into_iter().enumerate() {
            by_cf[i].1 += n;
        }
    }
    drop(processor);
    let all: Vec<&feedlog::core::event::Event> = follow_events.iter().chain(&post_events).collect();
    let bytes = crate::common::bytes_line(&dir, &all, keys.len() as u64);
    let (raw_rate, raw_secs) = raw_puts(&tmp.join("raw"), &keys, 1, cfg.sync)?;
    let (raw2_rate, _) = raw_puts(&tmp.join("raw2"), &keys, 2, cfg.sync)?;
    println!("fan-out: {delivered} inbox writes in {secs:.2}s = {feed_rate:.0}/s through the processor ({partitions} partitions, sync={})", cfg.sync);
    println!("raw RocksDB: {} puts of the same inbox keys in {raw_secs:.2}s = {raw_rate:.0}/s (batches of 1000)", keys.len());
    println!("raw RocksDB, two keys per delivery (state layout 3 wrote an author-index key beside each inbox key): {raw2_rate:.0} deliveries/s");
    let per_cf: Vec<String> = by_cf
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(cf, n)| format!("{} {:.1}", cf.name(), *n as f64 / keys.len() as f64))
        .collect();
    println!(
        "state per inbox entry, by column family: {}",
        per_cf.join(", ")
    );
    println!(
        "ratio processor/raw inbox puts: {:.2}",
        feed_rate / raw_rate
    );
    println!(
        "ratio processor/raw two-key puts: {:.2}",
        feed_rate / raw2_rate
    );
    println!("{bytes}");
    Ok(())
}

/// Writes `keys` (each `per_key` puts: the key, and a same-sized twin) into a
/// fresh RocksDB in batches of 1000 deliveries; returns deliveries/s.
fn raw_puts(
    path: &std::path::Path,
    keys: &[Vec<u8>],
    per_key: usize,
    sync: bool,
) -> Result<(f64, f64)> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    opts.set_block_based_table_factory(&table);
    opts.set_write_buffer_size(16 << 20);
    let db = DB::open(&opts, path).context("opening the baseline RocksDB")?;
    let mut wo = WriteOptions::default();
    wo.set_sync(sync);
    let start = Instant::now();
    for chunk in keys.chunks(1000) {
        let mut b = WriteBatch::default();
        for k in chunk {
            b.put(k, b"");
            if per_key == 2 {
                let mut twin = k.clone();
                twin[8..].reverse();
                b.put(&twin, b"");
            }
        }
        db.write_opt(b, &wo)?;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((keys.len() as f64 / secs, secs))
}
