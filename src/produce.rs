//! Writing events into the embedded `events` log, each in the partition that
//! owns its actor; records that are not events go to the dead-letter log with
//! their reason and source position.

use crate::codec::{self, Format};
use crate::datadir::DataDir;
use crate::event::Event;
use crate::log::{LogError, Logs, NewRecord, Topic};
use crate::partition::partition_for;
use crate::task::now_ms;
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

/// What a produce run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProduceSummary {
    /// Events appended to `events`.
    pub accepted: u64,
    /// Records sent to `dead-letter`.
    pub dead_lettered: u64,
}

struct Buffered {
    format: u8,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// A buffered writer of events into a data directory's `events` log.
pub struct Producer {
    logs: Logs,
    partitions: u32,
    buffers: Vec<Vec<Buffered>>,
    dead: Vec<Buffered>,
    buffered: usize,
    summary: ProduceSummary,
}

const FLUSH_AT: usize = 8192;

impl Producer {
    /// A producer for `dir` (takes the `events` partitions' writer locks as it
    /// first writes to each).
    pub fn new(dir: &DataDir) -> Producer {
        Producer {
            logs: dir.logs(),
            partitions: dir.partitions(),
            buffers: (0..dir.partitions()).map(|_| Vec::new()).collect(),
            dead: Vec::new(),
            buffered: 0,
            summary: ProduceSummary::default(),
        }
    }

    /// Queues one valid event in the given event format.
    pub fn event(&mut self, event: &Event, format: Format) -> Result<(), ProduceError> {
        let value = match format {
            Format::Bincode => codec::event_to_bincode(event),
            _ => codec::event_to_json(event).into_bytes(),
        };
        self.raw(
            partition_for(event.actor(), self.partitions),
            format.as_u8(),
            event.actor().to_string().into_bytes(),
            value,
        )
    }

    /// Queues a raw record into `events[partition]`, unchecked (how a foreign
    /// producer can write anything; the processor validates it).
    pub fn raw(
        &mut self,
        partition: u32,
        format: u8,
        key: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<(), ProduceError> {
        self.buffers[partition as usize].push(Buffered { format, key, value });
        self.summary.accepted += 1;
        self.queued()
    }

    /// Queues one JSON line: valid events go to their partition, anything
    /// else to the dead-letter log with `source` (e.g. `file:line`).
    pub fn json_line(&mut self, line: &[u8], source: &str) -> Result<(), ProduceError> {
        match codec::decode_event(Format::Json.as_u8(), line) {
            Ok(ev) => self.raw(
                partition_for(ev.actor(), self.partitions),
                Format::Json.as_u8(),
                ev.actor().to_string().into_bytes(),
                line.to_vec(),
            ),
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
            format: Format::DeadLetter.as_u8(),
            key: source.as_bytes().to_vec(),
            value: codec::dead_letter_value(reason, source_json, format, raw),
        });
        self.summary.dead_lettered += 1;
        self.queued()
    }

    /// Reads JSON lines until EOF. Blank lines are skipped; `\r\n` is accepted.
    pub fn json_lines(
        &mut self,
        input: impl BufRead,
        source_name: &str,
    ) -> Result<(), ProduceError> {
        for (i, line) in input.split(b'\n').enumerate() {
            let line = line.map_err(|source| ProduceError::Input {
                source_name: source_name.to_string(),
                source,
            })?;
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            self.json_line(line, &format!("{source_name}:{}", i + 1))?;
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

    fn flush(&mut self, sync: bool) -> Result<(), ProduceError> {
        let ts = now_ms();
        for (p, buf) in self.buffers.iter_mut().enumerate() {
            if !buf.is_empty() {
                self.logs
                    .append(Topic::Events, p as u32, &to_records(buf, ts), sync)?;
                buf.clear();
            }
        }
        if !self.dead.is_empty() {
            self.logs
                .append(Topic::DeadLetter, 0, &to_records(&self.dead, ts), sync)?;
            self.dead.clear();
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
