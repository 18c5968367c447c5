//! Topic specs, read from the declarative files in `topics/`.
//!
//! The files are compiled into the binary, so a deployed `feedlog` carries the
//! specs it was built with; nothing else names a topic.

use serde::Deserialize;

/// One topic's spec.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicSpec {
    /// Topic name.
    pub name: String,
    /// Fixed partition count (absent when co-partitioned).
    pub partitions: Option<u32>,
    /// Name of the topic whose partition count this one must share.
    pub co_partitioned_with: Option<String>,
    /// `forever` or a duration like `7d`.
    pub retention: String,
    /// Kafka `cleanup.policy`.
    pub cleanup_policy: String,
    /// Segment size of the embedded log, bytes.
    pub segment_bytes: u64,
    /// The largest record body (key + value + 21 bytes of fixed fields) a
    /// producer may write; on Kafka the topic's `max.message.bytes` must
    /// leave room for it (see `log::kafka`).
    pub max_record_bytes: usize,
    /// What the record key is.
    pub key: String,
    /// What the record value is.
    pub value: String,
}

impl TopicSpec {
    /// The partition count of this topic in a data directory of
    /// `dir_partitions` partitions: `events` (whose `partitions` is only the
    /// default for new directories) and topics co-partitioned with it have the
    /// directory's count; others have their own.
    pub fn partitions_in(&self, dir_partitions: u32) -> u32 {
        if self.name == "events" || self.co_partitioned_with.is_some() {
            dir_partitions
        } else {
            self.partitions.unwrap_or(1)
        }
    }
}

/// The topics: `events`, `effects` and `dead-letter` in both modes, and
/// `members` in Kafka mode.
#[derive(Debug, Clone)]
pub struct Topics {
    /// Input events.
    pub events: TopicSpec,
    /// Internal messages.
    pub effects: TopicSpec,
    /// Records that could not be processed.
    pub dead_letter: TopicSpec,
    /// Kafka mode: which processor owns which partition.
    pub members: TopicSpec,
}

fn parse(name: &str, text: &str) -> TopicSpec {
    let spec: TopicSpec = toml::from_str(text)
        .unwrap_or_else(|e| panic!("topics/{name}.toml is invalid (a build-time file): {e}"));
    assert_eq!(spec.name, name, "topics/{name}.toml names another topic");
    spec
}

impl Topics {
    /// The specs compiled in from `topics/`.
    pub fn builtin() -> Topics {
        Topics {
            events: parse("events", include_str!("../../topics/events.toml")),
            effects: parse("effects", include_str!("../../topics/effects.toml")),
            dead_letter: parse("dead-letter", include_str!("../../topics/dead-letter.toml")),
            members: parse("members", include_str!("../../topics/members.toml")),
        }
    }

    /// Default partition count of a new data directory.
    pub fn default_partitions(&self) -> u32 {
        self.events.partitions.unwrap_or(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the shipped specs parse and say what the processor relies on.
    #[test]
    fn builtin_specs() {
        let t = Topics::builtin();
        assert_eq!(t.default_partitions(), 8);
        assert_eq!(t.effects.co_partitioned_with.as_deref(), Some("events"));
        assert_eq!(t.effects.partitions_in(3), 3);
        assert_eq!(t.dead_letter.partitions_in(3), 1);
        assert_eq!(t.events.retention, "forever");
        assert_eq!(t.members.cleanup_policy, "compact");
        assert_eq!(t.members.partitions_in(8), 1);
        for spec in [&t.events, &t.effects, &t.dead_letter, &t.members] {
            assert!(
                spec.max_record_bytes <= crate::log::embedded::MAX_RECORD_BYTES,
                "{} allows more than the log format can hold",
                spec.name
            );
        }
    }
}
