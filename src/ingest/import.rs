//! Importers for real network data (SNAP formats) into the `events` log.
//!
//! SNAP node ids start at 0 and feedlog's user ids at 1: every id is shifted
//! by +1. A line that cannot be read as the format says goes to the
//! dead-letter log with its line number; nothing is dropped silently.
//!
//! - `snap-edges`: a directed edge list `SRC DST` (tab or space separated,
//!   `#` comments, CRLF tolerated, gzip detected by its magic bytes). Every
//!   edge is a follow of DST by SRC, at `start_ms` plus its edge number (ms),
//!   so the file order is the follow order.
//! - `snap-temporal`: `SRC DST UNIXTS` (seconds). A user's first line to
//!   another is a follow at that time; every line is a post by SRC, with the
//!   line's data-line number as post id.
//! - `snap-activity`: `SRC DST UNIXTS KIND`, SNAP's interaction logs
//!   (Higgs Twitter: `RT` a retweet of DST by SRC, `MT` a mention, `RE` a
//!   reply). A user's first line to another is a follow, as in
//!   `snap-temporal`. `RT` is a repost by SRC of DST's newest post so far
//!   (when DST has posted nothing yet, a post by DST at the same time comes
//!   first: the data names the retweeted user, not the tweet); every other
//!   kind is a post by SRC (so is a self-retweet before one's first post).
//!   Each line's posts and reposts take its
//!   data-line number as id, in their author's id space.

use crate::core::codec::Format;
use crate::core::event::{Event, PostId, Ts, UserId};
use crate::core::Disposition;
use crate::ingest::produce::{ProduceError, Producer};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapFormat {
    /// `SRC DST`: a static follow graph.
    Edges,
    /// `SRC DST UNIXTS`: messages over time.
    Temporal,
    /// `SRC DST UNIXTS KIND`: interactions over time, `RT` a repost.
    Activity,
}

/// What an import did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Lines read (all of them).
    pub lines: u64,
    /// Comment and blank lines.
    pub comments: u64,
    /// Events written to `events`.
    pub events: u64,
    /// Lines sent to the dead-letter log.
    pub dead_lettered: u64,
}

/// Errors that stop an import (bad lines never do).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Opening or reading the input.
    #[error("reading {path}: {source}")]
    Input {
        /// The input.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Writing the log.
    #[error(transparent)]
    Produce(#[from] ProduceError),
}

impl ImportError {
    /// Skip, retry or stop: an input that cannot be read needs its user; a
    /// log that cannot be written answers for itself.
    pub fn disposition(&self) -> Disposition {
        match self {
            ImportError::Input { source, .. } => Disposition::of_io(source.kind()),
            ImportError::Produce(e) => e.disposition(),
        }
    }
}

/// An input file, gunzipped if it starts with the gzip magic bytes, with a
/// counter of the (compressed) bytes consumed for progress.
pub struct Input {
    /// The decoded lines.
    pub reader: Box<dyn BufRead + Send>,
    /// File size in bytes.
    pub size: u64,
    /// Bytes of the file consumed so far.
    pub consumed: Arc<AtomicU64>,
}

struct Counting<R> {
    inner: R,
    n: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }
}

/// Opens `path` for an import.
pub fn open(path: &Path) -> Result<Input, ImportError> {
    let err = |source| ImportError::Input {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(err)?;
    let size = file.metadata().map_err(err)?.len();
    let consumed = Arc::new(AtomicU64::new(0));
    let mut raw = BufReader::with_capacity(
        1 << 16,
        Counting {
            inner: file,
            n: consumed.clone(),
        },
    );
    let gz = raw.fill_buf().map_err(err)?.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn BufRead + Send> = if gz {
        Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(raw),
        ))
    } else {
        Box::new(raw)
    };
    Ok(Input {
        reader,
        size,
        consumed,
    })
}

/// Why a SNAP line is no data line: it goes to the dead-letter log with
/// this reason, and the import goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadLine {
    /// Fewer fields than the format has.
    #[error("expected {want} fields, found {found}")]
    Fields {
        /// The format's field count.
        want: usize,
        /// The line's.
        found: usize,
    },
    /// A node id that is no whole number from 0.
    #[error("{0:?} is not a node id (a whole number from 0)")]
    NodeId(String),
    /// A node id with no user id after it (ids shift by one).
    #[error("node id {0} is too large")]
    NodeIdTooLarge(u64),
    /// A time that is no number of seconds.
    #[error("{0:?} is not a unix time in seconds")]
    Time(String),
    /// A time too far from now to be one.
    #[error("{0:?} is not a plausible unix time in seconds")]
    ImplausibleTime(String),
    /// An interaction kind the activity format does not have.
    #[error("{0:?} is not an interaction kind (RT, MT or RE)")]
    Kind(String),
}

/// One data line's fields, or why it is not one.
fn fields(line: &str, want: usize) -> Result<Vec<&str>, BadLine> {
    let f: Vec<&str> = line.split([' ', '\t']).filter(|s| !s.is_empty()).collect();
    if f.len() < want {
        return Err(BadLine::Fields {
            want,
            found: f.len(),
        });
    }
    Ok(f)
}

fn snap_id(s: &str) -> Result<UserId, BadLine> {
    let id: u64 = s.parse().map_err(|_| BadLine::NodeId(s.to_string()))?;
    id.checked_add(1)
        .map(UserId)
        .ok_or(BadLine::NodeIdTooLarge(id))
}

fn unix_ms(s: &str) -> Result<Ts, BadLine> {
    let secs: f64 = s.parse().map_err(|_| BadLine::Time(s.to_string()))?;
    if !(0.0..1e13).contains(&secs) {
        return Err(BadLine::ImplausibleTime(s.to_string()));
    }
    Ok(Ts((secs * 1000.0).round() as u64))
}

/// Reads one SNAP file into the producer. `observe` sees every event
/// written; `progress` is called every 65,536 lines and at the end.
pub fn import(
    format: SnapFormat,
    input: impl BufRead,
    source_name: &str,
    start_ms: u64,
    producer: &mut Producer,
    observe: &mut dyn FnMut(&Event),
    mut progress: impl FnMut(&ImportSummary),
) -> Result<ImportSummary, ImportError> {
    let mut s = ImportSummary::default();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut newest: HashMap<UserId, PostId> = HashMap::new();
    let mut data_lines = 0u64;
    for line in input.split(b'\n') {
        let line = line.map_err(|source| ImportError::Input {
            path: source_name.to_string(),
            source,
        })?;
        s.lines += 1;
        if s.lines % 65_536 == 0 {
            progress(&s);
        }
        let raw = line.strip_suffix(b"\r").unwrap_or(&line);
        let where_ = format!("{source_name}:{}", s.lines);
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t.trim(),
            Err(_) => {
                producer.dead_letter("not UTF-8 text", &where_, "snap", raw)?;
                s.dead_lettered += 1;
                continue;
            }
        };
        if text.is_empty() || text.starts_with('#') || text.starts_with('%') {
            s.comments += 1;
            continue;
        }
        data_lines += 1;
        let parsed = match format {
            SnapFormat::Edges => edge(text, Ts(start_ms + data_lines)).map(|e| vec![e]),
            SnapFormat::Temporal => temporal(text, data_lines, &mut seen),
            SnapFormat::Activity => activity(text, data_lines, &mut seen, &mut newest),
        };
        match parsed {
            Ok(events) => {
                for e in events {
                    if let Err(why) = e.validate() {
                        producer.dead_letter(&why.to_string(), &where_, "snap", raw)?;
                        s.dead_lettered += 1;
                        continue;
                    }
                    observe(&e);
                    producer.event(&e, Format::Postcard)?;
                    s.events += 1;
                }
            }
            Err(why) => {
                producer.dead_letter(&why.to_string(), &where_, "snap", raw)?;
                s.dead_lettered += 1;
            }
        }
    }
    progress(&s);
    Ok(s)
}

fn edge(text: &str, ts: Ts) -> Result<Event, BadLine> {
    let f = fields(text, 2)?;
    Ok(Event::Follow {
        follower: snap_id(f[0])?,
        followee: snap_id(f[1])?,
        ts,
    })
}

fn temporal(text: &str, n: u64, seen: &mut HashSet<(u64, u64)>) -> Result<Vec<Event>, BadLine> {
    let f = fields(text, 3)?;
    let (src, dst, ts) = (snap_id(f[0])?, snap_id(f[1])?, unix_ms(f[2])?);
    let mut out = Vec::with_capacity(2);
    if src != dst && seen.insert((src.0, dst.0)) {
        out.push(Event::Follow {
            follower: src,
            followee: dst,
            ts,
        });
    }
    out.push(Event::Post {
        author: src,
        post_id: PostId(n),
        ts,
    });
    Ok(out)
}

/// One interaction line: the first contact's follow, then a post by SRC or,
/// for `RT`, a repost by SRC of DST's newest post (made first when DST has
/// none). `newest` holds each user's newest post made so far.
fn activity(
    text: &str,
    n: u64,
    seen: &mut HashSet<(u64, u64)>,
    newest: &mut HashMap<UserId, PostId>,
) -> Result<Vec<Event>, BadLine> {
    let f = fields(text, 4)?;
    let (src, dst, ts) = (snap_id(f[0])?, snap_id(f[1])?, unix_ms(f[2])?);
    let repost = match f[3] {
        "RT" => true,
        "MT" | "RE" => false,
        other => return Err(BadLine::Kind(other.to_string())),
    };
    let mut out = Vec::with_capacity(3);
    if src != dst && seen.insert((src.0, dst.0)) {
        out.push(Event::Follow {
            follower: src,
            followee: dst,
            ts,
        });
    }
    // A self-retweet before any post of one's own has nothing to repost.
    if !repost || (src == dst && !newest.contains_key(&src)) {
        newest.insert(src, PostId(n));
        out.push(Event::Post {
            author: src,
            post_id: PostId(n),
            ts,
        });
        return Ok(out);
    }
    let of = match newest.get(&dst) {
        Some(&p) => p,
        None => {
            newest.insert(dst, PostId(n));
            out.push(Event::Post {
                author: dst,
                post_id: PostId(n),
                ts,
            });
            PostId(n)
        }
    };
    out.push(Event::Repost {
        author: src,
        post_id: PostId(n),
        of_author: dst,
        of_post_id: of,
        ts,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids shift by one, the first contact is a follow, every line is a post.
    #[test]
    fn temporal_lines_become_follow_then_posts() {
        let mut seen = HashSet::new();
        let a = temporal("0 1 1082040961", 1, &mut seen).unwrap();
        let b = temporal("0\t1\t1082040962", 2, &mut seen).unwrap();
        assert_eq!(
            a,
            vec![
                Event::Follow {
                    follower: UserId(1),
                    followee: UserId(2),
                    ts: Ts(1_082_040_961_000)
                },
                Event::Post {
                    author: UserId(1),
                    post_id: PostId(1),
                    ts: Ts(1_082_040_961_000)
                }
            ]
        );
        assert_eq!(b.len(), 1, "second contact is only a post");
    }

    /// A retweet reposts the retweeted user's newest post, made first when
    /// there is none; mentions and replies are posts; first contacts follow.
    #[test]
    fn activity_lines_become_follows_posts_and_reposts() {
        let (mut seen, mut newest) = (HashSet::new(), HashMap::new());
        let mut line = |text: &str, n| activity(text, n, &mut seen, &mut newest).unwrap();
        let (u, p, t) = (UserId, PostId, |s: u64| Ts(s * 1000));
        let follow = |a, b, s| Event::Follow {
            follower: u(a),
            followee: u(b),
            ts: t(s),
        };
        let post = |a, n, s| Event::Post {
            author: u(a),
            post_id: p(n),
            ts: t(s),
        };
        let repost = |a, n, of: (u64, u64), s| Event::Repost {
            author: u(a),
            post_id: p(n),
            of_author: u(of.0),
            of_post_id: p(of.1),
            ts: t(s),
        };
        // 0 retweets 1, who has not posted: 1's post first, then the repost.
        assert_eq!(
            line("0 1 10 RT", 1),
            vec![follow(1, 2, 10), post(2, 1, 10), repost(1, 1, (2, 1), 10)]
        );
        // 1 replies to 0: a post of 1's, its newest.
        assert_eq!(line("1 0 11 RE", 2), vec![follow(2, 1, 11), post(2, 2, 11)]);
        // 2 retweets 1: the newest post of 1's, no new post; 0 again: no follow.
        assert_eq!(
            line("2\t1\t12\tRT", 3),
            vec![follow(3, 2, 12), repost(3, 3, (2, 2), 12)]
        );
        assert_eq!(line("0 1 13 MT", 4), vec![post(1, 4, 13)]);
        assert_eq!(
            activity("0 1 14 XX", 5, &mut seen, &mut newest),
            Err(BadLine::Kind("XX".into()))
        );
        assert!(activity("0 1 14", 5, &mut seen, &mut newest).is_err());
        // A self-retweet with nothing to repost is a post.
        assert_eq!(
            activity("7 7 15 RT", 6, &mut seen, &mut newest),
            Ok(vec![post(8, 6, 15)])
        );
    }

    /// Malformed fields are reported, not guessed at.
    #[test]
    fn bad_fields_are_errors() {
        assert!(edge("12", Ts(1)).is_err());
        assert!(edge("a 2", Ts(1)).is_err());
        assert!(edge("-1 2", Ts(1)).is_err());
        assert!(temporal("1 2 yesterday", 1, &mut HashSet::new()).is_err());
        assert_eq!(
            edge("3 4 extra", Ts(9)).unwrap(),
            Event::Follow {
                follower: UserId(4),
                followee: UserId(5),
                ts: Ts(9)
            }
        );
    }
}
