//! Writing events into the embedded `events` log, each in the partition that
//! owns its actor; records that are not events go to the dead-letter log with
//! their reason and source position.

use crate::core::codec::{self, Format, Marker};
use crate::core::event::Event;
use crate::core::partition::partition_for;
use crate::core::Disposition;
use crate::core::Partition;
use crate::log::embedded::{BODY_FIXED, MAX_RECORD_BYTES};
use crate::log::now_ms;
use crate::log::{LogError, Logs, NewRecord, Topic};
use crate::state::datadir::DataDir;
use std::io::BufRead;

/// Errors that stop a produce run (bad records never do).
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    /// Appending to a log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Reading the input failed.
    #[error("reading {source_name}: {source}")]
    Input {
        /// The input's name.
        source_name: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl ProduceError {
    /// Skip, retry or stop: the answer of the log, or of reading the input.
    pub fn disposition(&self) -> Disposition {
        match self {
            ProduceError::Log(e) => e.disposition(),
            ProduceError::Input { source, .. } => Disposition::of_io(source.kind()),
        }
    }
}

/// What a produce run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProduceSummary {
    /// Events appended to `events`.
    pub accepted: u64,
    /// Records sent to `dead-letter`.
    pub dead_lettered: u64,
}

struct Buffered {
    format: Marker,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// A buffered writer of events into a data directory's `events` log.
pub struct Producer {
    logs: Logs,
    partitions: u32,
    /// The largest record body (fixed fields + key + value) accepted into
    /// `events`; larger input goes to the dead-letter log.
    max_record_bytes: usize,
    buffers: Vec<Vec<Buffered>>,
    dead: Vec<Buffered>,
    buffered: usize,
    summary: ProduceSummary,
}

const FLUSH_AT: usize = 8192;

impl Producer {
    /// A producer for `dir` (takes the `events` partitions' writer locks as it
    /// first writes to each). Opens the dead-letter log's writer first: a
    /// damaged dead-letter log refuses the whole produce before any event is
    /// written, rather than after the good records of a batch.
    pub fn new(dir: &DataDir) -> Result<Producer, ProduceError> {
        let logs = dir.logs();
        logs.open_dead_letter(Partition(0))?;
        Ok(Producer {
            max_record_bytes: logs.spec(Topic::Events).max_record_bytes,
            logs,
            partitions: dir.partitions(),
            buffers: (0..dir.partitions()).map(|_| Vec::new()).collect(),
            dead: Vec::new(),
            buffered: 0,
            summary: ProduceSummary::default(),
        })
    }

    /// Sets the record limit (see `topics/events.toml`), at most the log
    /// format's own limit.
    pub fn with_max_record_bytes(mut self, max: usize) -> Producer {
        self.max_record_bytes = max.min(MAX_RECORD_BYTES);
        self
    }

    /// The record limit in force.
    pub fn max_record_bytes(&self) -> usize {
        self.max_record_bytes
    }

    /// Queues one valid event in the given event format.
    pub fn event(&mut self, event: &Event, format: Format) -> Result<(), ProduceError> {
        let value = match format {
            Format::Postcard => codec::event_to_postcard(event),
            Format::Bincode => codec::event_to_bincode(event),
            _ => codec::event_to_json(event).into_bytes(),
        };
        self.raw(
            partition_for(event.actor(), self.partitions),
            format,
            event.actor().to_string().into_bytes(),
            value,
        )
    }

    /// Queues a raw record into `events[partition]`, unchecked (how a foreign
    /// producer can write anything; the processor validates it). A record
    /// over the limit goes to the dead-letter log instead, as an excerpt.
    pub fn raw(
        &mut self,
        partition: Partition,
        format: impl Into<Marker>,
        key: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<(), ProduceError> {
        let format = format.into();
        let size = BODY_FIXED + key.len() + value.len();
        if size > self.max_record_bytes {
            let source = format!("events[{partition}] record {}", self.summary.accepted + 1);
            return self.too_large(&source, format.name(), &value, size);
        }
        self.buffers[partition.index()].push(Buffered { format, key, value });
        self.summary.accepted += 1;
        self.queued()
    }

    fn too_large(
        &mut self,
        source: &str,
        format: &str,
        excerpt: &[u8],
        size: usize,
    ) -> Result<(), ProduceError> {
        let reason = format!(
            "record too large: {size} bytes (the limit is {} bytes: `max_record_bytes` in topics/events.toml, \
             or `produce --max-record-bytes`)",
            self.max_record_bytes
        );
        let source_json = serde_json::json!({ "input": source });
        self.dead.push(Buffered {
            format: Format::DeadLetter.into(),
            key: source.as_bytes().to_vec(),
            value: codec::dead_letter_excerpt(&reason, source_json, format, excerpt, size),
        });
        self.summary.dead_lettered += 1;
        self.queued()
    }

    /// Queues one JSON line: a valid event goes to its partition in the
    /// compact postcard form (the event the line decodes to, not the line's
    /// bytes: unknown fields, spacing and field order are not kept);
    /// anything else goes, byte for byte, to the dead-letter log with
    /// `source` (e.g. `file:line`).
    pub fn json_line(&mut self, line: &[u8], source: &str) -> Result<(), ProduceError> {
        match codec::decode_event(Format::Json.as_u8(), line) {
            Ok(ev) => self.event(&ev, Format::Postcard),
            Err(e) => self.dead_letter(&e.to_string(), source, "json", line),
        }
    }

    /// Queues an input record that is not an event into the dead-letter log,
    /// with why, where it came from (e.g. `file:line`) and its format name.
    pub fn dead_letter(
        &mut self,
        reason: &str,
        source: &str,
        format: &str,
        raw: &[u8],
    ) -> Result<(), ProduceError> {
        let source_json = serde_json::json!({ "input": source });
        self.dead.push(Buffered {
            format: Format::DeadLetter.into(),
            key: source.as_bytes().to_vec(),
            value: codec::dead_letter_value(reason, source_json, format, raw),
        });
        self.summary.dead_lettered += 1;
        self.queued()
    }

    /// Reads JSON lines until EOF. Blank lines are skipped; `\r\n` and a
    /// UTF-8 byte-order mark at the start are accepted. A line longer than the
    /// record limit is never held whole: it goes to the dead-letter log as an
    /// excerpt with its size and `file:line`, and the next line is read.
    pub fn json_lines(
        &mut self,
        mut input: impl BufRead,
        source_name: &str,
    ) -> Result<(), ProduceError> {
        let mut line = Vec::new();
        for number in 1.. {
            let keep = self.max_record_bytes;
            let read =
                read_line(&mut input, &mut line, keep).map_err(|source| ProduceError::Input {
                    source_name: source_name.to_string(),
                    source,
                })?;
            let Some(size) = read else { break };
            let mut text = line.strip_suffix(b"\r").unwrap_or(&line);
            if number == 1 {
                text = text.strip_prefix("\u{feff}".as_bytes()).unwrap_or(text);
            }
            let source = format!("{source_name}:{number}");
            if size > keep {
                let excerpt = &text[..text.len().min(codec::DEAD_LETTER_EXCERPT)];
                self.too_large(&source, "json", excerpt, size)?;
                continue;
            }
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let text = text.to_vec();
            self.json_line(&text, &source)?;
        }
        Ok(())
    }

    /// Counts one queued record, writing the queues out when they are full.
    fn queued(&mut self) -> Result<(), ProduceError> {
        self.buffered += 1;
        if self.buffered >= FLUSH_AT {
            self.flush(false)?;
        }
        Ok(())
    }

    /// Writes the queues out: the dead letters first, so that a failing
    /// dead-letter log stops the batch before its events are appended.
    fn flush(&mut self, sync: bool) -> Result<(), ProduceError> {
        let ts = now_ms();
        if !self.dead.is_empty() {
            self.logs.append(
                Topic::DeadLetter,
                Partition(0),
                &to_records(&self.dead, ts),
                sync,
            )?;
            self.dead.clear();
        }
        for (p, buf) in self.buffers.iter_mut().enumerate() {
            if !buf.is_empty() {
                self.logs.append(
                    Topic::Events,
                    Partition(p as u32),
                    &to_records(buf, ts),
                    sync,
                )?;
                buf.clear();
            }
        }
        if sync {
            self.logs.sync_all()?;
        }
        self.buffered = 0;
        Ok(())
    }

    /// Writes everything queued and fsyncs; returns the totals so far.
    pub fn finish(&mut self) -> Result<ProduceSummary, ProduceError> {
        self.flush(true)?;
        Ok(self.summary)
    }
}

/// Reads one line (without its `\n`) into `line`, keeping at most `keep + 1`
/// bytes of it; returns the line's full length, or `None` at the end of the
/// input. A line longer than `keep` is consumed to its end without being held.
fn read_line(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
    keep: usize,
) -> std::io::Result<Option<usize>> {
    line.clear();
    let mut size = 0;
    let mut any = false;
    loop {
        let buf = match input.fill_buf() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => other?,
        };
        if buf.is_empty() {
            return Ok(any.then_some(size));
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        let room = (keep + 1).saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        size += chunk.len();
        let used = chunk.len() + usize::from(done);
        input.consume(used);
        if done {
            return Ok(Some(size));
        }
    }
}

fn to_records(b: &[Buffered], ts: u64) -> Vec<NewRecord<'_>> {
    b.iter()
        .map(|r| NewRecord {
            timestamp_ms: ts,
            format: r.format,
            key: &r.key,
            value: &r.value,
        })
        .collect()
}
