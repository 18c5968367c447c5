//! What the read API needs from a running node, wired: the lag and the
//! dead-letter count from the node's log, the processing figures from its
//! runner, and in Kafka mode who serves which partition (from `members`).
//! The API owns the traits ([`Node`], [`Locator`]); this is where they meet
//! the log and the runners, so the API never touches either.

use super::asof::{LogRewind, Retention};
use super::cut::ClusterCuts;
use crate::api::http::cut::Cuts;
use crate::api::http::{Answers, Front};
use crate::api::http::{Api, ApiConfig, Locator, Node, NodeError};
use crate::api::query::{Reader, Rewind};
use crate::core::metrics::{Figures, PartitionLag};
use crate::core::Generation;
use crate::core::Partition;
use crate::log::kafka::members::LiveGeneration;
use crate::log::kafka::{KafkaConfig, MembersView};
use crate::log::{Log, LogError, Topic};
use crate::state::datadir::DataDir;
use crate::state::{Partitions, Store, StoreSet};
use crate::task::embedded::Processor;
use crate::task::kafka::Cluster;
use crate::task::progress::Progress;
use crate::task::Shutdown;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A node whose figures come from its log (embedded or Kafka) and, when
/// the processor runs in this process, its progress and commits.
pub struct LogNode {
    /// The node's log.
    pub log: Arc<dyn Log>,
    /// The in-process processor's figures, if any.
    pub progress: Option<Arc<Progress>>,
    /// Moves at each of its commits.
    commits: Option<tokio::sync::watch::Sender<u64>>,
    /// Views as of an earlier time, when answered.
    rewind: Option<Arc<dyn Rewind>>,
    /// Its part in consistent cuts (Kafka mode).
    cuts: Option<Arc<dyn Cuts>>,
}

impl LogNode {
    /// A node over `log`, with the figures and commits of the processor in
    /// this process when there is one.
    pub fn new(log: Arc<dyn Log>, progress: Option<Arc<Progress>>) -> LogNode {
        let commits = progress.as_ref().map(|p| {
            let tx = tokio::sync::watch::Sender::new(0u64);
            let moved = tx.clone();
            p.on_commit(move || moved.send_modify(|n| *n = n.wrapping_add(1)));
            tx
        });
        LogNode {
            log,
            progress,
            commits,
            rewind: None,
            cuts: None,
        }
    }

    /// This node, answering views as of an earlier time through `rewind`.
    pub fn rewinding(self, rewind: Arc<dyn Rewind>) -> LogNode {
        LogNode {
            rewind: Some(rewind),
            ..self
        }
    }
}

impl Node for LogNode {
    fn lag(&self, stores: &[(Partition, Arc<Store>)]) -> Result<Vec<PartitionLag>, NodeError> {
        crate::task::lag(&*self.log, stores).map_err(|e| NodeError::new(e.disposition(), e))
    }

    fn dead_letters(&self) -> Result<u64, NodeError> {
        let mut n = 0;
        for p in Partition::all(self.log.partitions(Topic::DeadLetter)) {
            n += self
                .log
                .end_offset(Topic::DeadLetter, p)
                .map_err(|e| NodeError::new(e.disposition(), e))?
                .0;
        }
        Ok(n)
    }

    fn figures(&self) -> Option<Figures> {
        self.progress.as_ref().map(|p| p.figures())
    }

    fn commits(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.commits.as_ref().map(|tx| tx.subscribe())
    }

    fn rewind(&self) -> Option<Arc<dyn Rewind>> {
        self.rewind.clone()
    }

    fn cuts(&self) -> Option<Arc<dyn Cuts>> {
        self.cuts.clone()
    }
}

/// Who serves which partition, from a live view of `members`.
pub struct MembersLocator(pub Arc<MembersView>);

impl Locator for MembersLocator {
    fn serving(&self, p: Partition) -> Option<String> {
        self.0.serving(p)
    }
}

/// A reader over an embedded processor's live stores (it follows a swap);
/// their inbox heads are read in the background from now on.
pub fn reader_of(processor: &Processor) -> Reader {
    processor.read_heads();
    let set: Arc<dyn Partitions> = processor.store_set().clone();
    Reader::over(set, None)
}

/// The read API of an embedded processor running in this process,
/// answering views as of an earlier time back `retention`.
pub fn processor_api(processor: &Processor, retention: Retention, cfg: ApiConfig) -> Arc<Api> {
    let rewind = Arc::new(LogRewind::of(processor.data_dir(), retention));
    processor_api_rewinding(processor, rewind, cfg)
}

/// [`processor_api`], answering views as of an earlier time through
/// `rewind` (which the caller may read through too: one state per time).
pub fn processor_api_rewinding(
    processor: &Processor,
    rewind: Arc<dyn Rewind>,
    cfg: ApiConfig,
) -> Arc<Api> {
    let node = LogNode::new(processor.logs().clone(), Some(processor.progress().clone()));
    Api::new(reader_of(processor), Arc::new(node.rewinding(rewind)), cfg)
}

/// The read API of a Kafka-mode processor of a deployment's generation 0:
/// see [`generation_api`].
pub fn cluster_api(cluster: &Cluster, cfg: ApiConfig) -> Result<Arc<Api>, LogError> {
    let deployment = cluster.log().config().clone();
    generation_api(cluster, cfg, &deployment, Generation::FIRST)
}

/// Which generation answers readers, from the deployment's `members`, and
/// who serves each partition there (docs/kafka.md, "Swap").
pub struct GenerationFront {
    own: Generation,
    deployment: KafkaConfig,
    base: MembersView,
    /// Other generations' views: `None` while one is being started (on a
    /// thread of its own, never on a request's).
    others: Arc<std::sync::Mutex<BTreeMap<Generation, Option<Arc<MembersView>>>>>,
}

impl GenerationFront {
    /// The front of a processor of generation `own` of `deployment`.
    pub fn start(deployment: &KafkaConfig, own: Generation) -> Result<GenerationFront, LogError> {
        Ok(GenerationFront {
            own,
            deployment: deployment.clone(),
            base: MembersView::start(deployment)?,
            others: Default::default(),
        })
    }

    /// The deployment's live-generation record as last read.
    pub fn live(&self) -> LiveGeneration {
        self.base.live()
    }

    /// Generation `g`'s view once it has read its `members`; the first
    /// call starts it on a thread of its own (retried each second while
    /// the brokers refuse), and until then there is none.
    fn view(&self, g: Generation) -> Option<Arc<MembersView>> {
        let mut others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        match others.get(&g) {
            Some(v) => return v.clone().filter(|v| v.caught_up()),
            None => others.insert(g, None),
        };
        let (map, cfg) = (self.others.clone(), self.deployment.generation(g));
        let started = std::thread::Builder::new()
            .name("feedlog-generation".into())
            .spawn(move || loop {
                match MembersView::start(&cfg) {
                    Ok(v) => {
                        map.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(g, Some(Arc::new(v)));
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(generation = g.0, error = %e, "reading the live generation's members; retrying");
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
            });
        if let Err(e) = started {
            tracing::warn!(error = %e, "starting a reader of the live generation's members");
            others.remove(&g);
        }
        None
    }
}

impl Front for GenerationFront {
    fn answers(&self, p: Partition) -> Answers {
        if !self.base.caught_up() {
            // Which generation is live is not known yet: this one answers.
            return Answers::ThisGeneration;
        }
        let live = self.live().live;
        if live == self.own {
            return Answers::ThisGeneration;
        }
        let serving = match live {
            Generation::FIRST => self.base.serving(p),
            // Until the live generation's view is ready, this one answers.
            g => match self.view(g) {
                Some(v) => v.serving(p),
                None => return Answers::ThisGeneration,
            },
        };
        serving.map_or(Answers::LiveMoving, Answers::Live)
    }
}

/// The read API of a Kafka-mode processor of generation `own` of
/// `deployment`: its serving partitions here, the others through their
/// owners (found in its generation's `members` topic) — and every user
/// through the live generation's processors while another generation
/// answers readers.
pub fn generation_api(
    cluster: &Cluster,
    cfg: ApiConfig,
    deployment: &KafkaConfig,
    own: Generation,
) -> Result<Arc<Api>, LogError> {
    let front = Arc::new(GenerationFront::start(deployment, own)?);
    let members = Arc::new(MembersView::start(cluster.log().config())?);
    let reader = Reader::over(cluster.shared().clone(), None);
    let mut node = LogNode::new(cluster.log().clone(), Some(cluster.progress().clone()));
    node.cuts = Some(Arc::new(ClusterCuts {
        owned: cluster.shared().clone(),
        checkpoints: cluster.checkpoint_dir().cloned(),
    }));
    Ok(Api::clustered(
        reader,
        Arc::new(node),
        cfg,
        Some(Arc::new(MembersLocator(members))),
        Some(front),
    ))
}

/// Keeps `set` (read-only secondaries of `dir`'s stores, opened under
/// `scratch` with `cache` as their block cache) on the active state
/// generation until `shutdown`: a swap or a reset of the processor makes a
/// new generation active, and its stores replace the old ones all at once.
/// `say` gets a line at each change.
pub fn follow_swaps(
    dir: &DataDir,
    set: &StoreSet,
    scratch: &Path,
    cache: &crate::state::BlockCache,
    shutdown: &Shutdown,
    say: &dyn Fn(String),
) {
    let mut generation = dir.state_name().to_string();
    while !shutdown.wait(Duration::from_secs(1)) {
        let Ok(now) = DataDir::open(dir.root()) else {
            continue;
        };
        if now.state_name() == generation {
            continue;
        }
        match crate::state::set::open_secondaries(&now, scratch, cache) {
            Ok(stores) => {
                set.replace(stores);
                generation = now.state_name().to_string();
                say(format!("now serving state generation {generation}"));
            }
            Err(e) => say(format!(
                "warning: could not open state generation {}: {e}",
                now.state_name()
            )),
        }
    }
}
