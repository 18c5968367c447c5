//! `feedlog-bench rebuild`: a rebuild from the log against raw reads of the
//! log and raw RocksDB puts of the rebuilt state, and a checkpoint plus
//! tail.

use crate::common::Cleanup;
use crate::say::say;
use anyhow::{Context, Result};
use feedlog::core::Partition;
use feedlog::state::datadir::DataDir;
use feedlog::state::{Cf, Kv};
use feedlog::task::embedded::ProcessorConfig;
use feedlog::task::Shutdown;
use rocksdb::{Options, WriteBatch, WriteOptions, DB};
use std::time::Instant;

// Long: one benchmark read top to bottom (the two raw baselines, the
// rebuild, the report), sharing its locals throughout.
/// Rebuild of the state in `data` from its log vs, in the same run, the raw
/// rate of reading that log alone and of raw RocksDB puts of the rebuilt
/// state's records.
pub fn rebuild(data: &std::path::Path) -> Result<()> {
    use feedlog::log::{Log, Topic};
    use feedlog::ops::rebuild::Rebuild;
    let dir = crate::common::processed_dir(data)?;
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    // As `feedlog rebuild --into` runs it.
    let cfg = ProcessorConfig {
        limits: feedlog::task::BatchLimits::replay(),
        ..ProcessorConfig::default()
    };

    // Raw: every record of both inputs of every partition, read and dropped.
    let logs = dir.logs();
    let start = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    for p in Partition::all(dir.partitions()) {
        for topic in [Topic::Events, Topic::Effects] {
            let mut src = Log::source(&logs, topic, p, feedlog::log::Offset(0))?;
            loop {
                let batch = src.read(4096, 4 << 20, None)?;
                if batch.is_empty() {
                    break;
                }
                records += batch.len() as u64;
                bytes += batch.iter().map(|r| r.value.len() as u64).sum::<u64>();
            }
        }
    }
    let read_secs = start.elapsed().as_secs_f64();
    say!("raw log read: {records} records, {bytes} bytes in {read_secs:.2}s");

    // Timed: the rebuild itself.
    let into = tmp.join("rebuilt");
    let start = Instant::now();
    let r = Rebuild::open(data, &into, None, cfg.clone())?;
    let stats = r.run(&Shutdown::new())?;
    let rebuild_secs = start.elapsed().as_secs_f64();
    anyhow::ensure!(r.finished()?, "the rebuild did not finish");
    drop(r);

    // Raw: the rebuilt state's records (every view column family), put in
    // key order into a fresh RocksDB in batches of 1000.
    let stores = feedlog::ops::digest::open_stores(&into)?;
    let mut kvs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for s in &stores {
        for cf in Cf::ALL {
            if matches!(cf, Cf::Meta | Cf::Pending) {
                continue;
            }
            for kv in s.scan(cf, &[], None) {
                let (k, v) = kv?;
                let mut key = vec![cf as u8];
                key.extend_from_slice(&k);
                kvs.push((key, v));
            }
        }
    }
    drop(stores);
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let db = DB::open(&opts, tmp.join("raw")).context("opening the baseline RocksDB")?;
    let mut wo = WriteOptions::default();
    wo.set_sync(cfg.sync);
    let start = Instant::now();
    for chunk in kvs.chunks(1000) {
        let mut b = WriteBatch::default();
        for (k, v) in chunk {
            b.put(k, v);
        }
        db.write_opt(b, &wo)?;
    }
    let put_secs = start.elapsed().as_secs_f64();
    drop(db);

    // Checkpoint + tail: a rebuild stopped after 90 % of the full
    // rebuild's time (records are no measure of the work left: an effects
    // record carries up to 256 messages) is checkpointed; then, timed,
    // `rebuild --from-checkpoint`: the checkpoint copied in and the rest
    // replayed.
    let partial = tmp.join("partial");
    let start = Instant::now();
    let r = Rebuild::open(data, &partial, None, cfg.clone())?;
    let total = records;
    let stop = Shutdown::new();
    std::thread::scope(|s| -> Result<()> {
        let run = s.spawn(|| r.run(&stop));
        while !run.is_finished() {
            if start.elapsed().as_secs_f64() >= 0.9 * rebuild_secs {
                stop.request();
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        run.join()
            .map_err(|_| anyhow::anyhow!("the rebuild thread panicked"))??;
        Ok(())
    })?;
    let head_secs = start.elapsed().as_secs_f64();
    drop(r);
    let stores = feedlog::state::set::open_stores(
        &DataDir::open(&partial)?,
        &feedlog::state::BlockCache::new(64 << 20),
        &cfg.store_options(),
    )?;
    let checkpoint = tmp.join("checkpoint");
    let info = feedlog::state::checkpoint::write_dir_checkpoint(
        &stores,
        &dir,
        cfg.inbox_cap,
        &checkpoint,
    )?;
    drop(stores);
    let at: u64 = info
        .positions
        .iter()
        .map(|p| p.events.0 + p.effects.0)
        .sum();
    let start = Instant::now();
    let r = Rebuild::open(
        data,
        &tmp.join("from-checkpoint"),
        Some(&checkpoint),
        cfg.clone(),
    )?;
    let tail = r.run(&Shutdown::new())?;
    let tail_secs = start.elapsed().as_secs_f64();
    anyhow::ensure!(
        r.finished()?,
        "the rebuild from the checkpoint did not finish"
    );
    drop(r);

    println!(
        "rebuild: {records} records replayed ({} events, {} effects) in {rebuild_secs:.2}s = {:.0} records/s, {:.0} events/s",
        stats.events.total(),
        stats.effects,
        records as f64 / rebuild_secs,
        stats.events.total() as f64 / rebuild_secs
    );
    println!(
        "raw log read: {records} records in {read_secs:.2}s = {:.0} records/s",
        records as f64 / read_secs
    );
    println!(
        "raw RocksDB puts of the rebuilt state: {} records in {put_secs:.2}s = {:.0}/s (batches of 1000, sync={})",
        kvs.len(),
        kvs.len() as f64 / put_secs,
        cfg.sync
    );
    println!(
        "ratio rebuild/raw read (records/s): {:.3}; rebuild time / raw put time: {:.2}",
        read_secs / rebuild_secs,
        rebuild_secs / put_secs
    );
    println!(
        "checkpoint at {at} of {total} records ({:.1} %) + tail: {} events and {} effects replayed in {tail_secs:.2}s; \
         time / full rebuild time: {:.3} (a rebuild from the start took {head_secs:.2}s to reach the checkpoint, \
         so the same tail took about {:.2}s of the full rebuild)",
        100.0 * at as f64 / total.max(1) as f64,
        tail.events.total(),
        tail.effects,
        tail_secs / rebuild_secs,
        rebuild_secs - head_secs
    );
    Ok(())
}
