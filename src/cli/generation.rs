//! Kafka-mode generations (docs/kafka.md, "Generations"): `rebuild` into a
//! new generation beside the live group, `verify` of one generation against
//! another at a consistent cut.

use super::api_args::ApiArgs;
use super::args::CutArgs;
use super::kafka::{run_watching, KafkaRunArgs, Settings};
use super::shell::RunMode;
use crate::cli::say::say;
use anyhow::{bail, Context, Result};
use feedlog::core::Generation;
use feedlog::ops::cut::{at_cut, CutError, CutSettings, CHECKPOINTS, DIGESTS};
use feedlog::ops::generation::{self, RebuildProgress};
use feedlog::task::embedded::ProcessorConfig;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a rebuild in Kafka mode reports and ends.
pub struct Rebuilding {
    /// Time between progress lines.
    pub progress: Duration,
    /// Exit once the new generation has caught up.
    pub until_caught_up: bool,
    /// Swap the new generation in for the readers once it has caught up,
    /// waiting at most this long for it to serve (a Kafka-mode backfill).
    pub swap: Option<Duration>,
}

/// `feedlog --kafka B --generation N rebuild`: checks that the log holds
/// everything from offset 0, then runs one processor of generation `N`'s
/// group with its state in `data`, printing per partition how far the
/// generation has replayed the `events` topic as it was when the rebuild
/// started. Several processes may run it at once (on several machines):
/// they share the generation's partitions as any group does.
pub fn rebuild(
    data: &Path,
    settings: &Settings,
    args: &KafkaRunArgs,
    processor: ProcessorConfig,
    api: (Option<String>, &ApiArgs),
    watch: Rebuilding,
) -> Result<i32> {
    let deployment = settings.require_kafka("rebuild")?;
    let deployment = settings.deployment.as_ref().unwrap_or(deployment);
    let shadow = settings.require_kafka("rebuild")?.clone();
    let target = generation::check_rebuild(deployment, settings.generation)
        .context("checking the log for a rebuild")?;
    if let Err(e) = generation::progress(&shadow, &target) {
        if let feedlog::log::LogError::NoTopic { topic } = &e {
            bail!(
                "generation {g}'s topic {topic} does not exist: create the generation's topics with \
                 `feedlog --kafka {} --group {} --generation {g} topics apply` first",
                deployment.brokers,
                deployment.group,
                g = settings.generation
            );
        }
        return Err(e).context("reading the new generation's group");
    }
    say!(
        "rebuilding generation {} of group {} beside it: group {}, topics {}*, from topic {} \
         (its end now: {} records over {} partitions)",
        settings.generation,
        deployment.group,
        shadow.group,
        shadow.topic_prefix,
        shadow.name(feedlog::log::Topic::Events),
        target.iter().sum::<u64>(),
        target.len()
    );
    let started = Instant::now();
    let swapping: Mutex<Option<Swapping>> = Mutex::new(None);
    let last: Mutex<Option<RebuildProgress>> = Mutex::new(None);
    let said = AtomicBool::new(false);
    let look = || -> Result<bool, feedlog::log::LogError> {
        let p = generation::progress(&shadow, &target)?;
        let done = p.caught_up();
        *last.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
        if done && !said.swap(true, Ordering::SeqCst) {
            if let Some(timeout) = watch.swap {
                *swapping.lock().unwrap_or_else(|e| e.into_inner()) =
                    swap_in(deployment.clone(), settings.generation, timeout);
            }
            say!(
                "caught up after {:.1}s: generation {} has replayed the log as it was when the \
                 rebuild started, and follows it{}",
                started.elapsed().as_secs_f64(),
                settings.generation,
                if watch.until_caught_up {
                    ""
                } else if watch.swap.is_some() {
                    " (swapping it in for the readers; this process goes on as one of its processors)"
                } else {
                    " (this process goes on as one of its processors; stop it with Ctrl-C)"
                }
            );
        }
        Ok(done)
    };
    let tick = || match look() {
        Ok(_) => {
            if let Some(p) = &*last.lock().unwrap_or_else(|e| e.into_inner()) {
                say!("generation {}: {}", settings.generation, p.line());
            }
        }
        Err(e) => say!("warning: reading the new generation's progress: {e}"),
    };
    let mode = RunMode {
        until_idle: false,
        progress: Some(watch.progress),
    };
    let finish = watch.until_caught_up.then_some(&look as _);
    let ran = run_watching(data, settings, args, processor, &mode, api, finish, &tick);
    let swap = swapping.lock().unwrap_or_else(|e| e.into_inner()).take();
    call_off(swap, settings.generation);
    let code = ran?;
    if watch.until_caught_up && said.load(Ordering::SeqCst) {
        println!(
            "generation {} caught up in {:.1}s; run its processors with \
             `feedlog --generation {} run` (on {} or a copy)",
            settings.generation,
            started.elapsed().as_secs_f64(),
            settings.generation,
            data.display()
        );
    }
    Ok(code)
}

/// `feedlog --kafka B --generation N --data NEWDIR backfill --view V
/// --listen ADDR`: the steps of docs/kafka.md, "Generations", in one
/// command. It creates generation `N`'s topics (with the replication of
/// `events`), rebuilds `N` in this process with the new settings (more
/// processes may join with `--generation N run`), swaps it in for the
/// readers as soon as it has caught up, and goes on as one of its
/// processors. The replaced generation keeps processing until `swap
/// --confirm`; `swap --rollback` brings it back.
pub fn backfill(
    data: &Path,
    settings: &Settings,
    args: &KafkaRunArgs,
    processor: ProcessorConfig,
    api: (Option<String>, &ApiArgs),
    progress: Duration,
    timeout: Duration,
) -> Result<i32> {
    let kafka = settings.require_kafka("backfill")?;
    if settings.generation.is_first() {
        bail!(
            "in Kafka mode a backfill builds a new generation beside the live one and swaps it in: \
             give --generation N, a generation never used before (docs/kafka.md, \"Generations\")"
        );
    }
    if settings.listen(api.0.clone()).is_none() {
        bail!(
            "a backfill in Kafka mode swaps its generation in for the readers, so its processors \
             answer them: give --listen ADDR (and --advertise URL when other machines reach it \
             by another name)"
        );
    }
    // Every check a rebuild and a swap make, before anything is created.
    let deployment = settings.deployment.as_ref().unwrap_or(kafka);
    generation::check_rebuild(deployment, settings.generation)?;
    let live = generation::live_generation(deployment)?;
    if let Some(kept) = live.previous {
        bail!(generation::GenerationError::Kept {
            kept,
            live: live.live
        });
    }
    // The generation's topics, created when missing (as `topics apply`).
    let missing = feedlog::log::kafka::missing_topics(kafka)?;
    if !missing.is_empty() {
        let events = kafka.name(feedlog::log::Topic::Events);
        let replication = feedlog::log::kafka::replication_of(kafka, &events)
            .with_context(|| format!("reading topic {events}"))?;
        let n = kafka.topics.default_partitions();
        let outcomes = feedlog::log::kafka::apply_topics(kafka, n, replication)?;
        for t in outcomes.iter().filter(|t| t.outcome != "ok") {
            say!(
                "generation {}: topic {}: {}",
                settings.generation,
                t.topic,
                t.outcome
            );
        }
        if let Some(t) = outcomes.iter().find(|t| t.outcome == "differs") {
            bail!(
                "topic {} differs from topics/: {}",
                t.topic,
                t.problems.join("; ")
            );
        }
    }
    let watch = Rebuilding {
        progress,
        until_caught_up: false,
        swap: Some(timeout),
    };
    rebuild(data, settings, args, processor, api, watch)
}

/// A swap running on a thread of its own, and how to call it off.
struct Swapping {
    /// Whether it swapped.
    thread: std::thread::JoinHandle<bool>,
    cancel: std::sync::Arc<AtomicBool>,
}

/// Swaps `generation` in on a thread of its own (it waits for every
/// partition to serve) and says how it went; on failure the generation
/// keeps running and the operator can swap it by hand.
fn swap_in(
    deployment: feedlog::log::kafka::KafkaConfig,
    generation: Generation,
    timeout: Duration,
) -> Option<Swapping> {
    let cancel = std::sync::Arc::new(AtomicBool::new(false));
    let called_off = cancel.clone();
    let spawned = std::thread::Builder::new()
        .name("feedlog-swap".into())
        .spawn(move || {
            let cancelled = || called_off.load(Ordering::SeqCst);
            match generation::swap_unless(&deployment, generation, timeout, &cancelled) {
                Ok(s) => {
                    say!(
                    "swapped: generation {} answers the readers in place of generation {} (after \
                     waiting {} ms for it to serve); `swap --confirm` retires generation {}, \
                     `swap --rollback` brings it back",
                    s.to,
                    s.from,
                    s.waited_ms,
                    s.from
                    );
                    return true;
                }
                Err(generation::GenerationError::Cancelled) => say!(
                    "not swapped: this processor stopped first; generation {generation} stays \
                     beside the live one: run `backfill` again on the same data directory (it \
                     resumes), or its processors with `--generation {generation} run` and then `swap`"
                ),
                Err(e) => say!(
                    "error: swapping generation {generation} in: {e}; it keeps running: swap it \
                     with `feedlog --generation {generation} swap` once the problem is fixed"
                ),
            }
            false
        });
    match spawned {
        Ok(thread) => Some(Swapping { thread, cancel }),
        Err(e) => {
            say!(
                "error: starting the swap: {e}; swap with `feedlog --generation {generation} swap`"
            );
            None
        }
    }
}

/// Calls off a swap still waiting as its processor stops, and waits for it.
fn call_off(swapping: Option<Swapping>, generation: Generation) {
    let Some(s) = swapping else { return };
    s.cancel.store(true, Ordering::SeqCst);
    if s.thread.join().unwrap_or(false) {
        say!(
            "this processor of generation {generation} stopped: keep the generation's processors \
             running (`feedlog --generation {generation} run`) while it answers the readers"
        );
    }
}

/// How a cut reaches the processors, from the command line.
fn cut_settings(cut: &CutArgs) -> CutSettings {
    CutSettings {
        token: cut.api_token.clone().filter(|t| !t.is_empty()),
        timeout: Duration::from_secs(cut.timeout),
    }
}

/// `feedlog --kafka B --generation N verify --against G`: the digests of
/// every view of both generations at one consistent cut; exit 0 when all
/// are equal, 1 naming the first differing partition and view, 2 when the
/// cut could not be taken in time (the states are not comparable).
pub fn verify(settings: &Settings, against: Generation, cut: &CutArgs) -> Result<i32> {
    let deployment = settings.require_kafka("verify")?;
    let deployment = settings.deployment.as_ref().unwrap_or(deployment);
    let g = settings.generation;
    if g == against {
        bail!("--generation {g} and --against {against} name the same generation: give two");
    }
    let s = cut_settings(cut);
    say!(
        "verifying generation {g} against generation {against} of group {}: holding both at one cut of {}",
        deployment.group,
        deployment.name(feedlog::log::Topic::Events)
    );
    let d = match at_cut(deployment, &[against, g], &s, &|l| say!("{l}"), &DIGESTS) {
        Ok(d) => d,
        Err(e @ CutError::NotSettled { .. }) => {
            say!("not comparable: {e}");
            return Ok(2);
        }
        Err(e) => return Err(e).context("taking a consistent cut"),
    };
    say!(
        "processing was held {:.1}s (reads were answered throughout)",
        d.held.as_secs_f64()
    );
    for (i, (gen, parts)) in d.generations.iter().enumerate() {
        println!("generation {gen}: overall {}", d.overall(i));
        for p in parts {
            println!(
                "  partition {} at {}, {} users",
                p.partition, p.position, p.users
            );
            for (view, h) in &p.views {
                println!("    {:<17} {h}", view.as_str());
            }
        }
    }
    let (a, b) = (&d.generations[0].1, &d.generations[1].1);
    for (pa, pb) in a.iter().zip(b) {
        for ((view, ha), (_, hb)) in pa.views.iter().zip(&pb.views) {
            if ha != hb {
                println!(
                    "DIFFERENT: partition {}, view {view}, at events {}",
                    pa.partition,
                    d.events[pa.partition.index()]
                );
                return Ok(1);
            }
        }
    }
    println!(
        "identical: every view of every partition has the same digest in generations {against} and {g} at events {:?}",
        d.events
    );
    Ok(0)
}

/// `feedlog --kafka B --generation N swap`, `swap --rollback`, `swap
/// --confirm` (see [`generation::swap`]).
pub fn swap(settings: &Settings, rollback: bool, confirm: bool, timeout: Duration) -> Result<i32> {
    let deployment = settings.require_kafka("swap")?;
    let deployment = settings.deployment.as_ref().unwrap_or(deployment);
    if confirm {
        let retired = generation::confirm(deployment)?;
        let live = generation::live_generation(deployment)?.live;
        println!(
            "generation {retired} retired: its processors stop; generation {live} answers readers \
             (delete generation {retired}'s topics and data directories when you like)"
        );
        return Ok(0);
    }
    let done = match rollback {
        true => generation::rollback(deployment)?,
        false => {
            say!(
                "waiting for generation {} to catch up with the live generation (up to {}s)",
                settings.generation,
                timeout.as_secs()
            );
            generation::swap(deployment, settings.generation, timeout)?
        }
    };
    println!(
        "generation {} answers readers now (was generation {}; caught up after {} ms): every processor \
         forwards its readers there within a second; `swap --rollback` goes back, `swap --confirm` \
         retires generation {}",
        done.to, done.from, done.waited_ms, done.from
    );
    Ok(0)
}

/// `feedlog --kafka B [--generation N] checkpoint`: a checkpoint of every
/// partition at one consistent cut, each written by its owner into the
/// group's checkpoint directory (`run --checkpoints DIR`).
pub fn checkpoint(settings: &Settings, cut: &CutArgs) -> Result<i32> {
    let deployment = settings.require_kafka("checkpoint")?;
    let deployment = settings.deployment.as_ref().unwrap_or(deployment);
    let g = settings.generation;
    let s = cut_settings(cut);
    let taken = match at_cut(deployment, &[g], &s, &|l| say!("{l}"), &CHECKPOINTS) {
        Ok(t) => t,
        Err(e @ CutError::NotSettled { .. }) => {
            say!("no checkpoint taken: {e}");
            return Ok(2);
        }
        Err(e) => return Err(e).context("taking a consistent cut"),
    };
    for c in &taken.generations[0].1 {
        println!(
            "partition {}: events {} effects {} in {}",
            c.checkpoint.partition,
            c.checkpoint.positions.events,
            c.checkpoint.positions.effects,
            c.path.display()
        );
    }
    let id = taken.generations[0]
        .1
        .first()
        .and_then(|c| c.checkpoint.cut);
    println!(
        "checkpointed generation {g} at one cut (events {:?}); processing was held {:.1}s",
        taken.events,
        taken.held.as_secs_f64()
    );
    if let Some(id) = id {
        println!(
            "cut {id}: a new generation N can start from it with `feedlog --generation N reset \
             --to-checkpoint DIR` (DIR: the processors' --checkpoints)"
        );
    }
    Ok(0)
}
