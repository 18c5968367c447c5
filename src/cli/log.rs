//! `feedlog log check`, `feedlog log repair` and `feedlog dead-letters`:
//! the operator's view of the embedded log and the dead-letter log.

use crate::cli::say::say;
use anyhow::{bail, Context, Result};
use feedlog::core::Partition;
use feedlog::log::embedded::{self, PartitionCheck};
use feedlog::log::kafka::{KafkaConfig, KafkaLog};
use feedlog::log::Offset;
use feedlog::log::{Log, Record, Topic};
use feedlog::state::datadir::DataDir;
use feedlog::state::Store;
use feedlog::task::Shutdown;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A topic of the embedded log, as the CLI names it.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LogTopic {
    /// Input events.
    Events,
    /// Internal messages.
    Effects,
    /// Records that could not be processed.
    DeadLetter,
}

impl LogTopic {
    fn topic(self) -> Topic {
        match self {
            LogTopic::Events => Topic::Events,
            LogTopic::Effects => Topic::Effects,
            LogTopic::DeadLetter => Topic::DeadLetter,
        }
    }
}

fn topic_name(t: Topic) -> &'static str {
    match t {
        Topic::Events => "events",
        Topic::Effects => "effects",
        Topic::DeadLetter => "dead-letter",
    }
}

/// Every state generation's committed position in `topic[partition]`:
/// (generation, position); the active generation first. Positions only
/// `events` and `effects` have.
fn consumers(dir: &DataDir, topic: Topic, partition: Partition) -> Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    if topic == Topic::DeadLetter || partition.0 >= dir.partitions() {
        return Ok(out);
    }
    let mut generations = dir.state_generations()?;
    generations.sort_by_key(|g| g != dir.state_name());
    for generation in generations {
        let path = dir.root().join(&generation).join(format!("{partition:05}"));
        let positions = Store::stored_positions(&path, partition, dir.partitions())
            .with_context(|| format!("reading the positions of {}", path.display()))?;
        if let Some(at) = positions {
            let pos = if topic == Topic::Events {
                at.events
            } else {
                at.effects
            };
            out.push((generation, pos.0));
        }
    }
    Ok(out)
}

/// `feedlog log dump`: the `events` log as JSON lines on stdout.
pub fn dump(data: &Path) -> Result<i32> {
    use std::io::Write;
    let dir = DataDir::open(data)?;
    let logs = dir.logs();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let (mut events, mut others) = (0u64, 0u64);
    for p in Partition::all(logs.partitions(Topic::Events)) {
        let mut reader = embedded::PartitionReader::open(&logs.dir(Topic::Events, p), 0)?;
        loop {
            let records = reader.read(4096, 16 << 20)?;
            if records.is_empty() {
                break;
            }
            for r in records {
                match feedlog::core::codec::decode_event(r.format, &r.value) {
                    Ok(e) => {
                        writeln!(out, "{}", feedlog::core::codec::event_to_json(&e))?;
                        events += 1;
                    }
                    Err(_) => others += 1,
                }
            }
        }
    }
    out.flush()?;
    say!("dumped {events} events; {others} records that are not events were left out (`run` sends them to the dead-letter log)");
    Ok(0)
}

/// `log show --partition P --offset O`: the event at that position of the
/// `events` log as a JSON line; a position the log does not hold is a
/// command line mistake (exit 2), a record there that is not an event is
/// said with the reason it would be dead-lettered (exit 1).
pub fn show(data: &Path, partition: Partition, offset: u64) -> Result<i32> {
    let dir = DataDir::open(data)?;
    let logs = dir.logs();
    let partitions = logs.partitions(Topic::Events);
    if partition.0 >= partitions {
        crate::cli::usage!(
            "the events log has partitions 0 to {}, not {partition}",
            partitions - 1
        );
    }
    let end = logs.end_offset(Topic::Events, partition)?;
    let pdir = logs.dir(Topic::Events, partition);
    if offset >= end {
        crate::cli::usage!(
            "partition {partition} of the events log ends before offset {offset} (its next record gets {end})"
        );
    }
    let mut reader = match embedded::PartitionReader::open(&pdir, offset) {
        Ok(r) => r,
        Err(feedlog::log::LogError::OffsetOutOfRange { .. }) => crate::cli::usage!(
            "partition {partition} of the events log no longer holds offset {offset} (the log's retention removed it)"
        ),
        Err(e) => return Err(e.into()),
    };
    let record = reader
        .read(1, 16 << 20)?
        .into_iter()
        .next()
        .with_context(|| format!("partition {partition} holds no record at offset {offset}"))?;
    match feedlog::core::codec::decode_event(record.format, &record.value) {
        Ok(e) => {
            println!("{}", feedlog::core::codec::event_to_json(&e));
            Ok(0)
        }
        Err(e) => bail!(
            "the record at partition {partition}, offset {offset} is not an event ({e}); \
             `run` sent it to the dead-letter log"
        ),
    }
}

/// `log check`: reads every record of every partition of every topic and
/// reports damage, and state positions past a log's end. Exit 1 on any
/// problem (a torn tail alone is not one: the next writer cuts it).
pub fn check(data: &Path, json: bool) -> Result<i32> {
    let dir = DataDir::open(data)?;
    let logs = dir.logs();
    let mut problems = 0;
    let mut report = Vec::new();
    for topic in [Topic::Events, Topic::Effects, Topic::DeadLetter] {
        for p in Partition::all(logs.partitions(topic)) {
            let c: PartitionCheck = embedded::check(&logs.dir(topic, p))?;
            let mut notes = Vec::new();
            if let Some(d) = &c.corrupt {
                problems += 1;
                notes.push(format!(
                    "CORRUPT at byte {} of {} (the record that should have offset {}): {}; \
                     `feedlog log repair --topic {} --partition {p} --truncate-at {}` cuts from there",
                    d.position,
                    d.path.display(),
                    d.offset,
                    d.reason,
                    topic_name(topic),
                    d.offset
                ));
            }
            if let Some(d) = &c.torn {
                notes.push(format!(
                    "torn tail at byte {} of {} ({}): never synced; the next writer cuts it",
                    d.position,
                    d.path.display(),
                    d.reason
                ));
            }
            for (generation, pos) in consumers(&dir, topic, p)? {
                if pos <= c.end {
                    continue;
                }
                if generation == dir.state_name() {
                    problems += 1;
                    notes.push(format!(
                        "the state (generation {generation}) has applied up to offset {pos}, past the readable end {}",
                        c.end
                    ));
                } else {
                    notes.push(format!(
                        "note: inactive state generation {generation} has applied up to offset {pos}, past the end \
                         (`feedlog drop-state {generation}` removes it)"
                    ));
                }
            }
            if json {
                report.push(serde_json::json!({
                    "topic": topic_name(topic), "partition": p, "segments": c.segments,
                    "bytes": c.bytes, "start": c.start, "end": c.end,
                    "ok": notes.iter().all(|n| n.starts_with("torn") || n.starts_with("note:")), "notes": notes,
                }));
            } else {
                let status = if notes.is_empty() {
                    "ok".to_string()
                } else {
                    notes.join("; ")
                };
                println!(
                    "{}[{p}]: offsets {}..{}, {} segment(s), {} bytes: {status}",
                    topic_name(topic),
                    c.start,
                    c.end,
                    c.segments,
                    c.bytes
                );
            }
        }
    }
    if json {
        println!(
            "{}",
            serde_json::json!({ "partitions": report, "problems": problems })
        );
    } else if problems == 0 {
        println!("every partition reads cleanly");
    } else {
        println!("{problems} problem(s) found");
    }
    Ok(if problems == 0 { 0 } else { 1 })
}

/// `log repair --truncate-at`: cuts one partition so that its next record
/// gets OFFSET. Refuses while a processor runs on the directory, and when
/// a state generation has applied past OFFSET, unless `force`.
pub fn repair(
    data: &Path,
    topic: LogTopic,
    partition: Partition,
    offset: u64,
    force: bool,
) -> Result<i32> {
    let dir = DataDir::open(data)?;
    let Some(_lock) = dir.try_lock()? else {
        bail!(
            "a processor is running on {} (it holds {}): stop it before repairing its log",
            data.display(),
            data.join("run.lock").display()
        );
    };
    let topic = topic.topic();
    let logs = dir.logs();
    if partition.0 >= logs.partitions(topic) {
        bail!(
            "{} has partitions 0..{}, not {partition}",
            topic_name(topic),
            logs.partitions(topic)
        );
    }
    // The active state only: inactive generations are never resumed.
    let ahead: Vec<(String, u64)> = consumers(&dir, topic, partition)?
        .into_iter()
        .filter(|(g, pos)| g == dir.state_name() && *pos > offset)
        .collect();
    if !ahead.is_empty() && !force {
        let list: Vec<String> = ahead
            .iter()
            .map(|(g, pos)| format!("{g} has applied up to {pos}"))
            .collect();
        bail!(
            "refusing to cut {}[{partition}] at offset {offset}: {} — the state would be past the log's end. \
             Cut at or after those positions, or pass --force and then `feedlog reset --to-start` \
             (or --to-checkpoint) so the state is rebuilt from what remains",
            topic_name(topic),
            list.join(", ")
        );
    }
    let t = embedded::truncate_at(&logs.dir(topic, partition), offset)?;
    tracing::warn!(
        topic = topic_name(topic), partition = partition.0, offset, segment = %t.segment.display(),
        at_byte = t.at_byte, bytes_cut = t.bytes_cut, segments_removed = t.segments_removed,
        forced = force, "cut a log partition on the operator's request"
    );
    println!(
        "cut {}[{partition}] at offset {offset}: {} bytes removed ({} later segment(s)); {} now ends at byte {}",
        topic_name(topic),
        t.bytes_cut,
        t.segments_removed,
        t.segment.display(),
        t.at_byte
    );
    if topic != Topic::DeadLetter {
        println!(
            "the effects log and the state answer what was cut: `feedlog --data {} reset --to-start \
             --regenerate-effects` rebuilds every view from what the events log holds now",
            data.display()
        );
    }
    Ok(0)
}

/// `dead-letters` of the embedded log of `data`, or of Kafka.
pub fn dead_letters_of(
    data: &Path,
    kafka: Option<&KafkaConfig>,
    from: u64,
    follow: bool,
    json: bool,
) -> Result<i32> {
    let shutdown = super::shell::shutdown_on_signal();
    let log: Arc<dyn Log> = match kafka {
        Some(cfg) => Arc::new(KafkaLog::connect(cfg.clone(), shutdown.flag())?),
        None => Arc::new(DataDir::open(data)?.logs()),
    };
    dead_letters(&*log, from, follow, json, &shutdown)
}

/// `dead-letters`: prints every record of the dead-letter log from `from`
/// (reason, source, an excerpt of the payload), and with `follow` the new
/// ones as they arrive, until `cancel`. A reader that stops reading (`| head`)
/// ends the command quietly, with exit 0.
pub fn dead_letters(
    log: &dyn Log,
    from: u64,
    follow: bool,
    json: bool,
    shutdown: &Shutdown,
) -> Result<i32> {
    let stdout = std::io::stdout();
    let mut out = std::io::LineWriter::new(stdout.lock());
    let mut count = 0u64;
    for p in Partition::all(log.partitions(Topic::DeadLetter)) {
        let mut source = log.source(Topic::DeadLetter, p, Offset(from))?;
        // Every record up to the end the log has now: a read may come back
        // empty before that (a Kafka fetch still on its way).
        let end = log.end_offset(Topic::DeadLetter, p)?;
        loop {
            let batch = source.read(1000, 4 << 20, None)?;
            if batch.is_empty() {
                let last = p.0 + 1 == log.partitions(Topic::DeadLetter);
                let behind = source.position() < end;
                if (behind || (follow && last)) && !shutdown.wait(Duration::from_millis(50)) {
                    continue;
                }
                break;
            }
            for r in batch {
                count += 1;
                match print_dead_letter(&mut out, &r, json) {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(0),
                    other => other?,
                }
            }
        }
    }
    if !json {
        say!("{count} dead letter(s)");
    }
    Ok(0)
}

/// One dead letter: its stored JSON with the record's offset, key and time
/// (`json`), or a line with its source, reason and a payload excerpt.
fn print_dead_letter(out: &mut impl std::io::Write, r: &Record, json: bool) -> std::io::Result<()> {
    let value: serde_json::Value = serde_json::from_slice(&r.value)
        .unwrap_or_else(|_| serde_json::json!({ "payload": String::from_utf8_lossy(&r.value) }));
    if json {
        let mut v = value;
        v["offset"] = r.offset.0.into();
        v["key"] = String::from_utf8_lossy(&r.key).into();
        v["ts"] = r.timestamp_ms.into();
        return writeln!(out, "{v}");
    }
    let payload = value["payload"]
        .as_str()
        .map(str::to_string)
        .or_else(|| value["payload_hex"].as_str().map(|h| format!("hex {h}")))
        .unwrap_or_default();
    let excerpt: String = payload.chars().take(120).collect();
    let more = if payload.chars().count() > 120 || value["payload_truncated"] == true {
        format!(
            "… ({} bytes)",
            value["payload_bytes"]
                .as_u64()
                .unwrap_or(payload.len() as u64)
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "#{} {}  reason: {}  payload: {excerpt}{more}",
        r.offset,
        value["source"],
        value["reason"].as_str().unwrap_or("?")
    )
}
