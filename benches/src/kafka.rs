//! `feedlog-bench kafka`: the same workload through a Kafka consumer group
//! of one and of two processors, against the embedded log.

use crate::common::{process_cpu_secs, Cleanup, Generated, Throughput};
use crate::say::say;
use anyhow::{Context, Result};
use feedlog::core::codec::Format;
use feedlog::core::event::Event;
use feedlog::core::metrics::StepStats;
use feedlog::ingest::produce::Producer;
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::{Processor, ProcessorConfig};
use feedlog::task::Shutdown;
use std::time::Instant;

// Long: one benchmark read top to bottom (brokers and topics, the
// embedded baseline, one processor, two, the report), sharing its locals.
/// Events/s and deliveries/s through Kafka with one and with two processors
/// (one consumer group, each processor with its own state), beside the
/// embedded log's figures for the same workload in the same run. `base`
/// None: librdkafka's in-process mock broker; else its brokers and client
/// settings (topics and group get a fresh `bench-` prefix).
pub fn kafka(
    base: Option<feedlog::log::kafka::KafkaConfig>,
    generated: &Generated,
    partitions: u32,
) -> Result<()> {
    use feedlog::log::kafka::mock::MockBroker;
    use feedlog::log::kafka::{apply_topics, produce_events, KafkaConfig};
    use feedlog::ops::status::status;
    use feedlog::task::kafka::{Cluster, ClusterConfig};
    use std::time::Duration;

    let tmp = std::env::temp_dir().join(format!("feedlog-bench-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    let (setup, post_events) = generated.events();
    let events: Vec<Event> = setup.into_iter().chain(post_events).collect();
    say!(
        "workload: {} events ({generated}), {partitions} partitions",
        events.len()
    );

    // The embedded log, same events, same processor settings.
    let dir = DataDir::create_or_open(&tmp.join("embedded"), Some(partitions))?;
    let mut producer = Producer::new(&dir)?;
    for e in &events {
        producer.event(e, Format::Postcard)?;
    }
    producer.finish()?;
    let processor = Processor::open(&dir, ProcessorConfig::default())?;
    let start = Instant::now();
    let cpu = process_cpu_secs();
    let t = processor.run(&Shutdown::new(), true)?;
    let embedded = Throughput {
        events: t.events.total(),
        delivered: t.delivered,
        secs: start.elapsed().as_secs_f64(),
        cpu_secs: process_cpu_secs() - cpu,
    };
    drop(processor);
    println!("{}", embedded.line("embedded log, 1 process"));
    let live = embedded_live(&tmp.join("embedded-live"), &events, partitions)?;
    differs(&live, &embedded);
    println!(
        "{} (timed as the Kafka runs are: from the first produce until the last change)",
        live.line("embedded log, 1 process, producing while it runs")
    );

    let mock = match &base {
        Some(_) => None,
        None => Some(MockBroker::start()?),
    };
    let base = match (base, &mock) {
        (Some(b), _) => b,
        (None, Some(m)) => KafkaConfig::new(&m.bootstrap(), ""),
        (None, None) => anyhow::bail!("neither brokers nor a mock broker"),
    };
    for members in [1usize, 2] {
        let mut kafka = base.clone();
        kafka.group = format!("bench-{}-{members}", std::process::id());
        kafka.topic_prefix = format!("bench-{}-{members}-", std::process::id());
        // Never a configured input topic: the bench's own, under its prefix.
        kafka.events_topic = None;
        match &mock {
            Some(m) => m.create_topics(&kafka, partitions)?,
            None => {
                apply_topics(&kafka, partitions, 1)?;
            }
        }
        let shutdown = Shutdown::new();
        let (produced_in, k, idle_in, totals) = std::thread::scope(|s| -> Result<_> {
            let mut progress = Vec::new();
            let mut handles = Vec::new();
            for i in 0..members {
                let mut cfg = ClusterConfig::new(kafka.clone());
                cfg.member = format!("bench-{i}");
                cfg.session_timeout = Duration::from_secs(6);
                let cluster = Cluster::open(&tmp.join(format!("kafka-{members}-{i}")), cfg)?;
                progress.push(cluster.progress().clone());
                let shutdown = &shutdown;
                handles.push(
                    s.spawn(move || -> Result<StepStats> { Ok(cluster.run(shutdown, None)?) }),
                );
            }
            // What the members have applied and committed to their states.
            let applied = || {
                let mut t = StepStats::default();
                for p in &progress {
                    t.add(&p.totals());
                }
                t
            };
            // Every processor still runs, and `since` is under `limit_secs` old.
            let running = |since: Instant, limit_secs: u64, what: &str| -> Result<()> {
                anyhow::ensure!(
                    !handles.iter().any(|h| h.is_finished()),
                    "a processor stopped"
                );
                anyhow::ensure!(
                    since.elapsed() < Duration::from_secs(limit_secs),
                    "the group was not {what} after {limit_secs} s"
                );
                Ok(())
            };
            let measured = (|| -> Result<(f64, Throughput, f64)> {
                // Not timed: the group forms and settles (every processor
                // owns partitions, all serving, nothing to do).
                let settle = Instant::now();
                loop {
                    std::thread::sleep(Duration::from_millis(250));
                    running(settle, 120, "settled")?;
                    let Ok(st) = status(&kafka) else {
                        continue;
                    };
                    let owners: std::collections::BTreeSet<_> = st
                        .partitions
                        .iter()
                        .filter_map(|p| p.owner.clone())
                        .collect();
                    if st.idle && owners.len() == members {
                        break;
                    }
                }
                // Timed: produce the workload (keyed by the actor, in the
                // partition that owns it, postcard with its header) while
                // the processors run, until the members have applied (and
                // committed to their states) every event and the group is
                // idle; the figure is the time of the last change.
                let before = applied();
                let start = Instant::now();
                let cpu = process_cpu_secs();
                produce_events(&kafka, &events, partitions).context("producing the workload")?;
                let produced = start.elapsed().as_secs_f64();
                // Idle twice in a row, 300 ms apart: an outbox between
                // its commit and its append is not mistaken for the end.
                let idle_twice = || {
                    status(&kafka).is_ok_and(|st| st.idle) && {
                        std::thread::sleep(Duration::from_millis(300));
                        status(&kafka).is_ok_and(|st| st.idle)
                    }
                };
                let (done, idle_at) = until_settled(
                    (start, cpu),
                    embedded.events,
                    || applied().since(&before),
                    idle_twice,
                    || running(start, 3600, "done"),
                )?;
                Ok((produced, done, idle_at))
            })();
            shutdown.request();
            let mut totals = StepStats::default();
            for h in handles {
                let r = h
                    .join()
                    .map_err(|_| anyhow::anyhow!("a processor thread panicked"))?;
                totals.add(&r?);
            }
            let (produced, done, idle) = measured?;
            Ok((produced, done, idle, totals))
        })?;
        anyhow::ensure!(
            totals.events.total() == embedded.events,
            "the {members}-processor group applied {} events, the embedded run {}",
            totals.events.total(),
            embedded.events
        );
        anyhow::ensure!(
            (k.events, k.delivered) == (totals.events.total(), totals.delivered),
            "the {members}-processor group's figures changed after it was found idle"
        );
        differs(&k, &embedded);
        println!(
            "{} (timed from the first produce until the last change; producing took {produced_in:.2}s; `status` saw the group idle at {idle_in:.2}s)",
            k.line(&format!("kafka, {members} processor(s)"))
        );
        for (against, e) in [("", &embedded), (" producing while it runs", &live)] {
            println!(
                "ratio kafka/embedded{against}, {members} processor(s): events/s {:.2}, deliveries/s {:.2}",
                (k.events as f64 / k.secs) / (e.events as f64 / e.secs),
                (k.delivered as f64 / k.secs) / (e.delivered as f64 / e.secs)
            );
        }
    }
    Ok(())
}

/// The embedded log timed as the Kafka runs are: the processor runs while
/// the workload is produced, and the clock stops at the last change once
/// every event is applied and nothing has changed for a second.
fn embedded_live(path: &std::path::Path, events: &[Event], partitions: u32) -> Result<Throughput> {
    let dir = DataDir::create_or_open(path, Some(partitions))?;
    let processor = Processor::open(&dir, ProcessorConfig::default())?;
    let shutdown = Shutdown::new();
    std::thread::scope(|s| -> Result<Throughput> {
        let run = s.spawn(|| processor.run(&shutdown, false));
        let measured = (|| -> Result<Throughput> {
            let start = Instant::now();
            let cpu = process_cpu_secs();
            let mut producer = Producer::new(&dir)?;
            for e in events {
                producer.event(e, Format::Postcard)?;
            }
            producer.finish()?;
            drop(producer);
            let (done, _) = until_settled(
                (start, cpu),
                events.len() as u64,
                || processor.progress().totals(),
                || true,
                || {
                    anyhow::ensure!(!run.is_finished(), "the embedded processor stopped");
                    Ok(())
                },
            )?;
            Ok(done)
        })();
        shutdown.request();
        run.join()
            .map_err(|_| anyhow::anyhow!("the embedded processor panicked"))??;
        measured
    })
}

/// Polls `applied` every 5 ms until it holds `events` input events, nothing
/// has changed for a second and `idle` agrees; the figures and the time of
/// its last change, and when it was found idle (seconds after `start`).
/// Not a count of deliveries to reach: the same log can do different inbox
/// work in two runs (see [`differs`]).
fn until_settled(
    (start, cpu): (Instant, f64),
    events: u64,
    applied: impl Fn() -> StepStats,
    idle: impl Fn() -> bool,
    running: impl Fn() -> Result<()>,
) -> Result<(Throughput, f64)> {
    let figures = |t: &StepStats| Throughput {
        events: t.events.total(),
        delivered: t.delivered,
        secs: start.elapsed().as_secs_f64(),
        cpu_secs: process_cpu_secs() - cpu,
    };
    let mut last = applied();
    let mut at = figures(&last);
    let mut changed = Instant::now();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(5));
        let t = applied();
        if t != last {
            last = t;
            at = figures(&last);
            changed = Instant::now();
            continue;
        }
        running()?;
        if at.events >= events && changed.elapsed().as_secs() >= 1 && idle() && applied() == last {
            return Ok((at, start.elapsed().as_secs_f64()));
        }
    }
}

/// Says when `run` did other inbox work than `embedded` for the same log.
/// The views agree (the contract), but deliveries depend on the order in
/// which a partition meets other partitions' messages: an author whose
/// follows reach their partition after one of their posts is pushed to for
/// that post, and promoted a little later.
fn differs(run: &Throughput, embedded: &Throughput) {
    if run.delivered != embedded.delivered {
        say!(
            "feedlog-bench kafka: this run wrote {} inbox entries, the embedded run {} (an author crossed the pull \
             threshold at another point among their posts): compare deliveries/s",
            run.delivered,
            embedded.delivered
        );
    }
}
