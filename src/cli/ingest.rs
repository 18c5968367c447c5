//! `produce` and `import`: data into the embedded `events` log.

use super::args::ImportFormat;
use super::shell::per_sec;
use crate::cli::say::Meter;
use anyhow::{bail, Context, Result};
use feedlog::ingest::import::{ImportSummary, SnapFormat};
use feedlog::ingest::produce::Producer;
use feedlog::state::datadir::DataDir;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub fn produce(
    data: &Path,
    partitions: Option<u32>,
    max_record_bytes: Option<usize>,
    file: Option<PathBuf>,
) -> Result<i32> {
    // The input first: a command that fails on its arguments creates nothing.
    let input: Box<dyn BufRead> = match &file {
        Some(path) if path.as_os_str() != "-" => Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        )),
        _ => Box::new(std::io::stdin().lock()),
    };
    let name = match &file {
        Some(path) if path.as_os_str() != "-" => path.display().to_string(),
        _ => "stdin".to_string(),
    };
    if let Some(max) = max_record_bytes {
        let limit = feedlog::log::embedded::MAX_RECORD_BYTES;
        if max == 0 || max > limit {
            bail!("--max-record-bytes must be between 1 and {limit} (the log format's limit), got {max}");
        }
    }
    let dir = DataDir::create_or_open(data, partitions)?;
    let mut producer = Producer::new(&dir)?;
    if let Some(max) = max_record_bytes {
        producer = producer.with_max_record_bytes(max);
    }
    producer.json_lines(input, &name)?;
    let s = producer.finish()?;
    println!(
        "accepted {} events into {} partitions; {} records went to the dead-letter log{}",
        s.accepted,
        dir.partitions(),
        s.dead_lettered,
        super::run::dead_letter_hint(&dir, data)
    );
    Ok(0)
}

pub fn import(
    data: &Path,
    format: ImportFormat,
    file: &Path,
    partitions: Option<u32>,
    start_ms: Option<u64>,
) -> Result<i32> {
    // The input first: a command that fails on its arguments creates nothing.
    std::fs::metadata(file).with_context(|| format!("opening {}", file.display()))?;
    let dir = DataDir::create_or_open(data, partitions)?;
    let mut producer = Producer::new(&dir)?;
    let format = match format {
        ImportFormat::SnapEdges => SnapFormat::Edges,
        ImportFormat::SnapTemporal => SnapFormat::Temporal,
        ImportFormat::SnapActivity => SnapFormat::Activity,
    };
    let s = import_file(
        &mut producer,
        format,
        file,
        start_ms.unwrap_or_else(feedlog::log::now_ms),
        &mut |_| {},
    )?;
    producer.finish()?;
    println!(
        "imported {}: {} lines, {} comment or blank, {} events into {} partitions, {} lines to the dead-letter log \
         (SNAP ids start at 0, feedlog's at 1: every id was shifted by +1){}",
        file.display(), s.lines, s.comments, s.events, dir.partitions(), s.dead_lettered,
        super::run::dead_letter_hint(&dir, data)
    );
    Ok(0)
}

/// Imports one file with a progress line (percent of the file, lines/s).
pub fn import_file(
    producer: &mut Producer,
    format: SnapFormat,
    file: &Path,
    start_ms: u64,
    observe: &mut dyn FnMut(&feedlog::Event),
) -> Result<ImportSummary> {
    let input = feedlog::ingest::import::open(file)?;
    let start = Instant::now();
    let mut last = Instant::now();
    let (size, consumed) = (input.size.max(1), input.consumed.clone());
    let meter = Meter::new(size, "bytes");
    let every = meter.every(Duration::from_secs(1));
    let name = file.display().to_string();
    let s = feedlog::ingest::import::import(
        format,
        input.reader,
        &name,
        start_ms,
        producer,
        observe,
        |s| {
            if last.elapsed() >= every {
                last = Instant::now();
                let read = consumed.load(Ordering::Relaxed);
                let msg = format!(
                    "{} lines ({:.0}/s), {} events",
                    s.lines,
                    per_sec(s.lines, start),
                    s.events
                );
                meter.show(read, msg, || {
                    let pct = 100.0 * read as f64 / size as f64;
                    format!(
                        "importing {name}: {pct:>5.1}%  {} lines ({:.0}/s)  {} events",
                        s.lines,
                        per_sec(s.lines, start),
                        s.events
                    )
                })
            }
        },
    )?;
    meter.finish();
    Ok(s)
}
