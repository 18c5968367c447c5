//! Consistent cuts of Kafka-mode generations (docs/kafka.md, "Consistent
//! cuts"): the views of every partition at the same `events` offsets, with
//! every internal record those offsets lead to applied — what two
//! generations must agree on, whatever their processors' pace.
//!
//! The coordinator ([`digests_at_cut`]) takes the `events` ends, asks each
//! partition's owner, in every generation, to hold its `events` there
//! (effects are still applied; a partition already past an end raises that
//! end for all), waits until every partition has applied both topics up to
//! the cut — the `effects` ends unchanged over two rounds, so nothing is in
//! flight — reads every partition's digests, and lets them all go on. The
//! processors keep answering reads meanwhile; their processing pauses for
//! as long as the cut takes.

use super::digest::{overall, partition_digest, PartitionDigest};
use crate::api::http::client;
use crate::api::http::cut::{CutAnswer, Cuts};
use crate::api::http::NodeError;
use crate::api::query::Reader;
use crate::core::position::Positions;
use crate::core::Generation;
use crate::core::{Disposition, Partition};
use crate::log::kafka::members::read_owners;
use crate::log::kafka::{high_watermarks, GroupClient, KafkaConfig, PartitionState};
use crate::log::{LogError, Topic};
use crate::state::checkpoint::{CheckpointDir, PartitionCheckpoint};
use crate::task::kafka::Ownership;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A processor's part in cuts: holds, digests and checkpoints of the
/// partitions it serves.
pub struct ClusterCuts {
    /// What it owns.
    pub owned: Arc<Ownership>,
    /// The group's checkpoint directory, if it has one.
    pub checkpoints: Option<Arc<CheckpointDir>>,
}

/// A checkpoint written at a cut: where, and its `checkpoint.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenCheckpoint {
    /// Its directory.
    pub path: PathBuf,
    /// What it holds.
    pub checkpoint: PartitionCheckpoint,
}

fn answer(s: crate::task::kafka::CutState) -> CutAnswer {
    CutAnswer {
        partition: s.partition,
        applied: s.applied,
        held_at: s.held_at,
    }
}

impl Cuts for ClusterCuts {
    fn hold(&self, p: Partition, at: u64, ttl: Duration) -> Option<CutAnswer> {
        self.owned.hold(p, at, ttl).map(answer)
    }

    fn state(&self, p: Partition) -> Option<CutAnswer> {
        self.owned.cut_state(p).map(answer)
    }

    fn release(&self, p: Partition) {
        self.owned.release(p);
    }

    fn digest(
        &self,
        reader: &Reader,
        p: Partition,
    ) -> Result<Option<serde_json::Value>, NodeError> {
        let Some((store, PartitionState::Serving)) = self.owned.partitions().remove(&p) else {
            return Ok(None);
        };
        let d =
            partition_digest(reader, p, &store).map_err(|e| NodeError::new(e.disposition(), e))?;
        serde_json::to_value(d)
            .map(Some)
            .map_err(|e| NodeError::new(Disposition::Stop, e))
    }

    fn checkpoint(
        &self,
        p: Partition,
        cut: Option<u64>,
    ) -> Result<Option<serde_json::Value>, NodeError> {
        let Some(dir) = &self.checkpoints else {
            return Err(NodeError::new(
                Disposition::Stop,
                std::io::Error::other(
                    "this processor runs without a checkpoint directory: run the group with --checkpoints DIR",
                ),
            ));
        };
        let Some((store, epoch)) = self.owned.serving_store(p) else {
            return Ok(None);
        };
        let checkpoint = dir
            .write_at(p, &store, epoch, false, cut)
            .map_err(|e| NodeError::new(e.disposition(), e))?;
        let written = WrittenCheckpoint {
            path: dir.path_of(&checkpoint),
            checkpoint,
        };
        serde_json::to_value(written)
            .map(Some)
            .map_err(|e| NodeError::new(Disposition::Stop, e))
    }
}

/// Why a cut was not taken.
#[derive(Debug, thiserror::Error)]
pub enum CutError {
    /// A Kafka call failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A processor did not answer as a cut needs.
    #[error("generation {generation}, partition {partition}: {reason}")]
    Processor {
        /// The generation.
        generation: Generation,
        /// The partition.
        partition: Partition,
        /// What went wrong.
        reason: String,
    },
    /// The partitions did not all reach the cut in time.
    #[error("not settled within {waited:?}: {why}")]
    NotSettled {
        /// How long it waited.
        waited: Duration,
        /// The first partition that was not there, and where it was.
        why: String,
    },
}

impl CutError {
    /// Whether trying again can help.
    pub fn disposition(&self) -> Disposition {
        match self {
            CutError::Log(e) => e.disposition(),
            CutError::Processor { .. } | CutError::NotSettled { .. } => Disposition::Retry,
        }
    }
}

/// What was read of every partition of each generation at one cut.
#[derive(Debug, Clone)]
pub struct Taken<T> {
    /// The cut: per partition, the `events` offset every generation holds.
    pub events: Vec<u64>,
    /// Per generation (in the order asked), what each partition answered.
    pub generations: Vec<(Generation, Vec<T>)>,
    /// How long the processors were held, from the first hold to the last
    /// release.
    pub held: Duration,
}

/// The digests of every partition of each generation at one cut.
pub type CutDigests = Taken<PartitionDigest>;

impl CutDigests {
    /// The digest over every partition of generation number `i` (in the
    /// order asked).
    pub fn overall(&self, i: usize) -> String {
        overall(&self.generations[i].1)
    }
}

/// What to ask every partition's owner once the cut is reached.
pub struct CutRead<T> {
    method: &'static str,
    route: &'static str,
    noun: &'static str,
    /// The positions of the state the answer is of.
    position: fn(&T) -> Positions,
}

/// Every partition's digests ([`digest`](super::digest)).
pub const DIGESTS: CutRead<PartitionDigest> = CutRead {
    method: "GET",
    route: "/v1/internal/digest",
    noun: "digest",
    position: |d| d.position,
};

/// A checkpoint of every partition, in the group's checkpoint directory.
pub const CHECKPOINTS: CutRead<WrittenCheckpoint> = CutRead {
    method: "POST",
    route: "/v1/internal/checkpoint",
    noun: "checkpoint",
    position: |c| c.checkpoint.positions,
};

/// How a coordinator reaches the processors.
pub struct CutSettings {
    /// The group's API token, if its processors ask for one.
    pub token: Option<String>,
    /// How long to wait for the partitions to settle at the cut.
    pub timeout: Duration,
}

/// Each (generation, partition)'s answer to a hold.
type Answers = BTreeMap<(Generation, Partition), CutAnswer>;

/// One held partition of one generation: whom to ask.
struct Held {
    generation: Generation,
    partition: Partition,
    api: String,
}

/// The processors' APIs of `generation`'s partitions, or the first that
/// is not served.
fn serving_apis(cfg: &KafkaConfig, generation: Generation, n: u32) -> Result<Vec<Held>, CutError> {
    let owners = read_owners(cfg)?;
    Partition::all(n)
        .map(|p| match owners.partitions.get(&p) {
            Some((_, PartitionState::Serving, Some(api))) => Ok(Held {
                generation,
                partition: p,
                api: api.clone(),
            }),
            other => Err(CutError::Processor {
                generation,
                partition: p,
                reason: match other {
                    None => "no processor owns it".into(),
                    Some((m, PartitionState::Serving, None)) => {
                        format!("its owner {m} serves no read API (run it with --listen)")
                    }
                    Some((m, _, _)) => {
                        format!("its owner {m} is still replaying what previous owners did")
                    }
                },
            }),
        })
        .collect()
}

/// Calls `method path` at `h`'s processor; the body when it answers 2xx.
fn call(h: &Held, method: &str, path: &str, s: &CutSettings) -> Result<client::Response, CutError> {
    let auth = s.token.as_ref().map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    let failed = |reason: String| CutError::Processor {
        generation: h.generation,
        partition: h.partition,
        reason,
    };
    let r = client::request(method, &h.api, path, &headers, Duration::from_secs(600))
        .map_err(|e| failed(e.to_string()))?;
    match r.status {
        200..=299 => Ok(r),
        st => Err(failed(format!(
            "{method} {path} at {} answered {st}: {}",
            h.api,
            String::from_utf8_lossy(&r.body)
        ))),
    }
}

/// Lets every partition it was asked to hold go on when dropped (also on
/// an error).
struct Releases<'a> {
    held: std::cell::RefCell<Vec<Held>>,
    settings: &'a CutSettings,
}

impl Releases<'_> {
    /// Remembers that `h` is held, once.
    fn add(&self, h: &Held) {
        let mut held = self.held.borrow_mut();
        if !held
            .iter()
            .any(|x| (x.generation, x.partition, &x.api) == (h.generation, h.partition, &h.api))
        {
            held.push(Held {
                generation: h.generation,
                partition: h.partition,
                api: h.api.clone(),
            });
        }
    }
}

impl Drop for Releases<'_> {
    fn drop(&mut self) {
        for h in self.held.borrow().iter() {
            let path = format!("/v1/internal/cut?partition={}", h.partition.0);
            if let Err(e) = call(h, "DELETE", &path, self.settings) {
                tracing::warn!(error = %e, "releasing a held partition (its hold lapses by itself)");
            }
        }
    }
}

/// What `read` asks of every partition of each of `generations` of
/// `deployment`, at one consistent cut (see the module's doc).
// Long: one retry loop whose rounds share the cut, the holds and the reason a timeout reports.
pub fn at_cut<T: serde::de::DeserializeOwned>(
    deployment: &KafkaConfig,
    generations: &[Generation],
    s: &CutSettings,
    say: &dyn Fn(String),
    read: &CutRead<T>,
) -> Result<Taken<T>, CutError> {
    let cfgs: Vec<(Generation, KafkaConfig)> = generations
        .iter()
        .map(|&g| (g, deployment.generation(g)))
        .collect();
    let n = GroupClient::new(deployment, "a cut")?.partitions()?;
    let all: Vec<Partition> = Partition::all(n).collect();
    let events = deployment.name(Topic::Events);
    let mut cut = high_watermarks(deployment, &events, &all)?;
    let started = Instant::now();
    let releases = Releases {
        held: Default::default(),
        settings: s,
    };
    // Hold for a while past the timeout: the digests are read after.
    let ttl_ms = (s.timeout + Duration::from_secs(120)).as_millis();
    let mut settled_with: Option<Vec<Vec<u64>>> = None;
    let mut last_why = String::from("nothing asked yet");
    let mut first_hold = None;
    let (held, settled) = loop {
        if started.elapsed() > s.timeout {
            return Err(CutError::NotSettled {
                waited: s.timeout,
                why: last_why,
            });
        }
        // The owners now (a partition may move, or not be served yet): a
        // round that finds one unserved, or whose hold is refused, is
        // tried again.
        let (held, answers) = match hold_round(&cfgs, n, &cut, ttl_ms, &releases, s) {
            Ok(r) => {
                first_hold.get_or_insert_with(Instant::now);
                r
            }
            Err(e @ CutError::Log(_)) => return Err(e),
            Err(e) => {
                last_why = e.to_string();
                settled_with = None;
                std::thread::sleep(Duration::from_millis(500));
                continue;
            }
        };
        // A partition already past the cut raises it for every generation.
        let mut raised = false;
        for a in answers.values() {
            let at = &mut cut[a.partition.index()];
            if a.applied.events.0 > *at {
                *at = a.applied.events.0;
                raised = true;
            }
        }
        if raised {
            settled_with = None;
            continue;
        }
        let mut ends = Vec::new();
        for (_, cfg) in &cfgs {
            ends.push(high_watermarks(cfg, &cfg.name(Topic::Effects), &all)?);
        }
        let behind = answers.iter().find(|((g, p), a)| {
            let gi = cfgs.iter().position(|(x, _)| x == g).unwrap_or(0);
            a.held_at != Some(cut[p.index()])
                || a.applied.events.0 < cut[p.index()]
                || a.applied.effects.0 < ends[gi][p.index()]
        });
        match behind {
            Some(((g, p), a)) => {
                last_why = format!(
                    "generation {g}, partition {p} at {}, held at {:?} (the cut: events {}, effects end {})",
                    a.applied,
                    a.held_at,
                    cut[p.index()],
                    ends[cfgs.iter().position(|(x, _)| x == g).unwrap_or(0)][p.index()]
                );
                settled_with = None;
            }
            None if settled_with.as_ref() == Some(&ends) => break (held, answers),
            None => settled_with = Some(ends),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    say(format!(
        "every partition of generations {generations:?} settled at events {cut:?} after {:.1}s; asking for its {}",
        started.elapsed().as_secs_f64(),
        read.noun
    ));
    // The cut's id, in what each partition answers (a checkpoint records
    // it): the time it was reached, in ms.
    let id = crate::log::now_ms();
    let answers = read_at(&held, generations, &settled, (s, id), read)?;
    drop(releases);
    Ok(Taken {
        events: cut,
        generations: answers,
        held: first_hold.map_or(Duration::ZERO, |t| t.elapsed()),
    })
}

/// Asks every partition's owner, in each of `cfgs`' generations, to hold
/// its `events` at `cut` (the owners as `members` names them now); their
/// answers.
fn hold_round(
    cfgs: &[(Generation, KafkaConfig)],
    n: u32,
    cut: &[u64],
    ttl_ms: u128,
    releases: &Releases<'_>,
    s: &CutSettings,
) -> Result<(Vec<Held>, Answers), CutError> {
    let mut held = Vec::new();
    for (g, cfg) in cfgs {
        held.extend(serving_apis(cfg, *g, n)?);
    }
    let mut answers = BTreeMap::new();
    for h in &held {
        let p = h.partition;
        let path = format!(
            "/v1/internal/cut?partition={}&events={}&ttl_ms={ttl_ms}",
            p.0,
            cut[p.index()]
        );
        releases.add(h);
        let r = call(h, "POST", &path, s)?;
        let a: CutAnswer = serde_json::from_slice(&r.body).map_err(|e| CutError::Processor {
            generation: h.generation,
            partition: p,
            reason: format!("an answer that is not a cut state: {e}"),
        })?;
        answers.insert((h.generation, p), a);
    }
    Ok((held, answers))
}

/// Every held partition's answer to `read`, per generation in
/// `generations`' order; each must be of the state it settled at.
fn read_at<T: serde::de::DeserializeOwned>(
    held: &[Held],
    generations: &[Generation],
    settled: &Answers,
    (s, id): (&CutSettings, u64),
    read: &CutRead<T>,
) -> Result<Vec<(Generation, Vec<T>)>, CutError> {
    let mut answers: Vec<(Generation, Vec<T>)> =
        generations.iter().map(|&g| (g, Vec::new())).collect();
    for h in held {
        let path = format!("{}?partition={}&cut={id}", read.route, h.partition.0);
        let r = call(h, read.method, &path, s)?;
        let failed = |reason: String| CutError::Processor {
            generation: h.generation,
            partition: h.partition,
            reason,
        };
        let d: T = serde_json::from_slice(&r.body)
            .map_err(|e| failed(format!("an answer that is not a {}: {e}", read.noun)))?;
        let at = (read.position)(&d);
        let want = settled.get(&(h.generation, h.partition)).map(|a| a.applied);
        if Some(at) != want {
            return Err(failed(format!(
                "its {} is of the state at {at}, but it settled at {}: it moved while held",
                read.noun,
                want.map_or("nothing".to_string(), |w| w.to_string())
            )));
        }
        let i = generations
            .iter()
            .position(|&g| g == h.generation)
            .unwrap_or(0);
        answers[i].1.push(d);
    }
    Ok(answers)
}
