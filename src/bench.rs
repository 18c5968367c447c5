//! `feedlog bench`: end-to-end figures with a raw RocksDB baseline measured in
//! the same run, so the result is a ratio that survives a noisy machine.

use anyhow::{Context, Result};
use feedlog::codec::Format;
use feedlog::datadir::DataDir;
use feedlog::event::{Event, PostId, Ts, UserId};
use feedlog::generate::Rng;
use feedlog::processor::{Processor, ProcessorConfig};
use feedlog::produce::Producer;
use feedlog::state::{Cf, Kv};
use rocksdb::{BlockBasedOptions, Options, WriteBatch, WriteOptions, DB};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

fn run_until_idle(p: &Processor) -> Result<(u64, f64)> {
    let start = Instant::now();
    let totals = p.run(&AtomicBool::new(false), true)?;
    Ok((totals.delivered, start.elapsed().as_secs_f64()))
}

/// The generated workload: every user follows `follows` power-law-chosen
/// users (user 1 by nearly everyone), then `posts` posts by power-law-chosen
/// authors.
fn workload(users: u64, follows: u64, posts: u64, rng: &mut Rng) -> (Vec<Event>, Vec<Event>) {
    let mut ts = 1_700_000_000_000u64;
    let mut setup = Vec::new();
    for follower in 1..=users {
        for _ in 0..follows {
            let followee = rng.zipf(users);
            if followee != follower {
                ts += 1;
                setup.push(Event::Follow {
                    follower: UserId(follower),
                    followee: UserId(followee),
                    ts: Ts(ts),
                });
            }
        }
    }
    let posts = (1..=posts)
        .map(|post| {
            ts += 1;
            Event::Post {
                author: UserId(rng.zipf(users)),
                post_id: PostId(post),
                ts: Ts(ts),
            }
        })
        .collect();
    (setup, posts)
}

/// Fan-out inbox writes/s through the real processor vs raw RocksDB
/// `WriteBatch` puts of the same inbox keys.
pub fn fanout(users: u64, follows: u64, posts: u64, partitions: u32) -> Result<()> {
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    let dir = DataDir::create_or_open(&tmp.join("data"), Some(partitions))?;
    let mut rng = Rng(42);
    eprintln!("setup: {users} users, {follows} follows each (power-law), {partitions} partitions");
    let (follow_events, post_events) = workload(users, follows, posts, &mut rng);
    let mut producer = Producer::new(&dir);
    for e in &follow_events {
        producer.event(e, Format::Bincode)?;
    }
    producer.finish()?;
    let cfg = ProcessorConfig::default();
    let processor = Processor::open(&dir, cfg.clone())?;
    run_until_idle(&processor)?;
    for e in &post_events {
        producer.event(e, Format::Bincode)?;
    }
    producer.finish()?;
    eprintln!("measuring: {posts} posts fanned out through the processor");
    let (delivered, secs) = run_until_idle(&processor)?;
    let feed_rate = delivered as f64 / secs;

    // The same inbox keys the processor wrote, in a random order.
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(delivered as usize);
    for p in 0..partitions {
        for r in processor.store(p).scan(Cf::Inbox, &[], &[0xff; 33]) {
            keys.push(r?.0);
        }
    }
    for i in (1..keys.len()).rev() {
        keys.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    drop(processor);
    let (raw_rate, raw_secs) = raw_puts(&tmp.join("raw"), &keys, 1, cfg.sync)?;
    let (raw2_rate, _) = raw_puts(&tmp.join("raw2"), &keys, 2, cfg.sync)?;
    println!("fan-out: {delivered} inbox writes in {secs:.2}s = {feed_rate:.0}/s through the processor ({partitions} partitions, sync={})", cfg.sync);
    println!("raw RocksDB: {} puts of the same inbox keys in {raw_secs:.2}s = {raw_rate:.0}/s (batches of 1000)", keys.len());
    println!("raw RocksDB, inbox + author-index key per delivery: {raw2_rate:.0} deliveries/s");
    println!(
        "ratio processor/raw inbox puts: {:.2}",
        feed_rate / raw_rate
    );
    println!(
        "ratio processor/raw inbox+index puts: {:.2}",
        feed_rate / raw2_rate
    );
    Ok(())
}

/// Writes `keys` (each `per_key` puts: the key, and a same-sized twin) into a
/// fresh RocksDB in batches of 1000 deliveries; returns deliveries/s.
fn raw_puts(
    path: &std::path::Path,
    keys: &[Vec<u8>],
    per_key: usize,
    sync: bool,
) -> Result<(f64, f64)> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    opts.set_block_based_table_factory(&table);
    opts.set_write_buffer_size(16 << 20);
    let db = DB::open(&opts, path).context("opening the baseline RocksDB")?;
    let mut wo = WriteOptions::default();
    wo.set_sync(sync);
    let start = Instant::now();
    for chunk in keys.chunks(1000) {
        let mut b = WriteBatch::default();
        for k in chunk {
            b.put(k, b"");
            if per_key == 2 {
                let mut twin = k.clone();
                twin[8..].reverse();
                b.put(&twin, b"");
            }
        }
        db.write_opt(b, &wo)?;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((keys.len() as f64 / secs, secs))
}

struct Cleanup(std::path::PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One load's figures: latency percentiles and throughput.
struct Load {
    p50_ms: f64,
    p99_ms: f64,
    per_sec: f64,
}

/// Timeline pages through the HTTP API (`wrk` as the load generator) vs raw
/// RocksDB seek + 20 reads of the same users' inbox keys, in one run.
pub fn http(data: &std::path::Path, threads: usize, connections: usize, secs: u64) -> Result<()> {
    use feedlog::http::{Api, ApiConfig};
    let dir = DataDir::open(data).with_context(|| {
        format!(
            "no loaded state at {} (make one: feedlog --data {} demo --exit)",
            data.display(),
            data.display()
        )
    })?;
    let wrk = which("wrk").context(
        "the load generator `wrk` is not installed (Debian/Ubuntu: apt-get install wrk)",
    )?;
    let reader = Processor::open_reader(&dir)?;
    // Readers: every user who follows someone, in a fixed shuffled order.
    let mut users = Vec::new();
    for (_, store) in reader.stores() {
        for r in feedlog::state::views::users(&store.snapshot()) {
            let (u, v) = r?;
            if v.followees > 0 {
                users.push(u.0);
            }
        }
    }
    anyhow::ensure!(
        !users.is_empty(),
        "{} has no users who follow anyone",
        data.display()
    );
    let mut rng = Rng(7);
    for i in (1..users.len()).rev() {
        users.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    users.truncate(20_000);
    let entries: usize = users
        .iter()
        .take(1000)
        .map(|&u| reader.timeline(UserId(u), 20, None).map(|p| p.items.len()))
        .sum::<Result<usize, _>>()?;
    eprintln!(
        "{} readers; their first pages hold {:.1} entries on average",
        users.len(),
        entries as f64 / users.len().min(1000) as f64
    );

    // Through HTTP.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    let api = Api::new(
        reader,
        std::sync::Arc::new(dir.logs()),
        None,
        ApiConfig::default(),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        rt.block_on(feedlog::http::serve(listener, api, async {
            let _ = rx.await;
        }))
    });
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-http-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let _cleanup = Cleanup(tmp.clone());
    let script = tmp.join("timeline.lua");
    let list = users
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    std::fs::write(
        &script,
        format!(
            "local users = {{{list}}}\nlocal i = 0\n\
             init = function(args) i = math.random(#users) end\n\
             request = function()\n  i = i % #users + 1\n  \
             return wrk.format(\"GET\", \"/v1/users/\" .. users[i] .. \"/timeline?limit=20\")\nend\n"
        ),
    )?;
    eprintln!("HTTP: wrk -t{threads} -c{connections} -d{secs}s against http://{addr}");
    let out = std::process::Command::new(&wrk)
        .args([
            format!("-t{threads}"),
            format!("-c{connections}"),
            format!("-d{secs}s"),
            "--latency".into(),
            "-s".into(),
            script.display().to_string(),
            format!("http://{addr}"),
        ])
        .output()
        .context("running wrk")?;
    let _ = tx.send(());
    let _ = server.join();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(
        out.status.success(),
        "wrk failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    anyhow::ensure!(
        !text.contains("Non-2xx"),
        "some requests did not answer 200:\n{text}"
    );
    let http = parse_wrk(&text).with_context(|| format!("reading wrk's report:\n{text}"))?;

    // Raw RocksDB: the same users, seek to their inbox and read 20 entries.
    let raw = raw_seeks(&dir, &users, threads, secs)?;
    println!("timeline pages of 20 through HTTP ({threads} server threads, wrk -t{threads} -c{connections}, {secs}s):");
    println!(
        "  {:.0} pages/s, p50 {:.3} ms, p99 {:.3} ms",
        http.per_sec, http.p50_ms, http.p99_ms
    );
    println!("raw RocksDB seek + 20 reads of the same inbox keys ({threads} threads, {secs}s):");
    println!(
        "  {:.0} pages/s, p50 {:.3} ms, p99 {:.3} ms",
        raw.per_sec, raw.p50_ms, raw.p99_ms
    );
    println!("ratio HTTP/raw pages/s: {:.3}", http.per_sec / raw.per_sec);
    Ok(())
}

fn which(cmd: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(cmd))
            .find(|p| p.is_file())
    })
}

/// Requests/s and the 50% and 99% latencies of `wrk --latency`.
fn parse_wrk(text: &str) -> Option<Load> {
    let ms = |v: &str| -> Option<f64> {
        let (num, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic())?);
        let n: f64 = num.parse().ok()?;
        Some(match unit {
            "us" => n / 1000.0,
            "ms" => n,
            "s" => n * 1000.0,
            "m" => n * 60_000.0,
            _ => return None,
        })
    };
    let field = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::trim)
    };
    Some(Load {
        p50_ms: ms(field("50%")?)?,
        p99_ms: ms(field("99%")?)?,
        per_sec: field("Requests/sec:")?.parse().ok()?,
    })
}

/// `threads` threads, each for `secs` seconds, seek to a user's inbox and
/// read up to 20 entries, users in turn; plain RocksDB, no feedlog code.
fn raw_seeks(dir: &DataDir, users: &[u64], threads: usize, secs: u64) -> Result<Load> {
    use rocksdb::{IteratorMode, ReadOptions};
    let names: Vec<&str> = Cf::ALL.iter().map(|c| c.name()).collect();
    let inbox = Cf::Inbox.name();
    let dbs = (0..dir.partitions())
        .map(|p| {
            DB::open_cf_for_read_only(&Options::default(), dir.state_dir(p), &names, false)
                .context("opening a state store with plain RocksDB")
        })
        .collect::<Result<Vec<_>>>()?;
    let partitions = dir.partitions();
    let until = Instant::now() + std::time::Duration::from_secs(secs);
    let results: Vec<(Vec<u64>, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let dbs = &dbs;
                s.spawn(move || {
                    let mut lat = Vec::new();
                    let mut i = t * users.len() / threads;
                    let mut entries = 0u64;
                    while Instant::now() < until {
                        let u = users[i % users.len()];
                        i += 1;
                        let db =
                            &dbs[feedlog::partition::partition_for(UserId(u), partitions) as usize];
                        let start = Instant::now();
                        let mut ro = ReadOptions::default();
                        ro.set_iterate_range(
                            u.to_be_bytes().to_vec()..(u + 1).to_be_bytes().to_vec(),
                        );
                        let cf = db.cf_handle(inbox).expect("inbox column family");
                        let it = db.iterator_cf_opt(&cf, ro, IteratorMode::Start);
                        for kv in it.take(20) {
                            let (k, _) = kv.expect("read");
                            entries += k.len() as u64;
                        }
                        lat.push(start.elapsed().as_nanos() as u64);
                    }
                    (lat, entries)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("reader thread"))
            .collect()
    });
    let mut lat: Vec<u64> = results
        .iter()
        .flat_map(|(l, _)| l.iter().copied())
        .collect();
    anyhow::ensure!(!lat.is_empty(), "no raw reads were made");
    lat.sort_unstable();
    let pct = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)] as f64 / 1e6;
    Ok(Load {
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        per_sec: lat.len() as f64 / secs as f64,
    })
}

/// One run's figures: input events and inbox deliveries per second.
struct Throughput {
    events: u64,
    delivered: u64,
    secs: f64,
}

impl Throughput {
    fn line(&self, what: &str) -> String {
        format!(
            "{what}: {} events, {} deliveries in {:.2}s = {:.0} events/s, {:.0} deliveries/s",
            self.events,
            self.delivered,
            self.secs,
            self.events as f64 / self.secs,
            self.delivered as f64 / self.secs
        )
    }
}

/// Events/s and deliveries/s through Kafka with one and with two processors
/// (one consumer group, each processor with its own state), beside the
/// embedded log's figures for the same workload in the same run. `base`
/// None: librdkafka's in-process mock broker; else its brokers and client
/// settings (topics and group get a fresh `bench-` prefix).
pub fn kafka(
    base: Option<feedlog::log::kafka::KafkaConfig>,
    users: u64,
    follows: u64,
    posts: u64,
    partitions: u32,
) -> Result<()> {
    use feedlog::cluster::{self, Cluster, ClusterConfig};
    use feedlog::log::kafka::{apply_topics, send_when_room, KafkaConfig, FORMAT_HEADER};
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
    use std::time::Duration;

    let tmp = std::env::temp_dir().join(format!("feedlog-bench-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    let mut rng = Rng(42);
    let (setup, post_events) = workload(users, follows, posts, &mut rng);
    let events: Vec<Event> = setup.into_iter().chain(post_events).collect();
    eprintln!(
        "workload: {} events ({users} users, {follows} follows each, {posts} posts), {partitions} partitions",
        events.len()
    );

    // The embedded log, same events, same processor settings.
    let dir = DataDir::create_or_open(&tmp.join("embedded"), Some(partitions))?;
    let mut producer = Producer::new(&dir);
    for e in &events {
        producer.event(e, Format::Bincode)?;
    }
    producer.finish()?;
    let processor = Processor::open(&dir, ProcessorConfig::default())?;
    let start = Instant::now();
    let t = processor.run(&AtomicBool::new(false), true)?;
    let embedded = Throughput {
        events: t.events.iter().sum(),
        delivered: t.delivered,
        secs: start.elapsed().as_secs_f64(),
    };
    drop(processor);
    println!("{}", embedded.line("embedded log, 1 process"));

    let mock = match &base {
        Some(_) => None,
        None => Some(MockCluster::new(1).context("starting the mock broker")?),
    };
    let base = base
        .unwrap_or_else(|| KafkaConfig::new(&mock.as_ref().expect("mock").bootstrap_servers(), ""));
    for members in [1usize, 2] {
        let mut kafka = base.clone();
        kafka.group = format!("bench-{}-{members}", std::process::id());
        kafka.topic_prefix = format!("bench-{}-{members}-", std::process::id());
        match &mock {
            Some(m) => {
                for (t, n) in [
                    ("events", partitions),
                    ("effects", partitions),
                    ("dead-letter", 1),
                    ("members", 1),
                ] {
                    m.create_topic(&format!("{}{t}", kafka.topic_prefix), n as i32, 1)
                        .with_context(|| format!("creating {t}"))?;
                }
            }
            None => {
                apply_topics(&kafka, partitions, 1)?;
            }
        }
        let cancel = AtomicBool::new(false);
        let (produced_in, idle_in, totals) = std::thread::scope(|s| -> Result<_> {
            let handles: Vec<_> = (0..members)
                .map(|i| {
                    let mut cfg = ClusterConfig::new(kafka.clone());
                    cfg.member = format!("bench-{i}");
                    cfg.session_timeout = Duration::from_secs(6);
                    let data = tmp.join(format!("kafka-{members}-{i}"));
                    let cancel = &cancel;
                    s.spawn(move || -> Result<feedlog::task::StepStats> {
                        Ok(Cluster::open(&data, cfg)?.run(cancel, false)?)
                    })
                })
                .collect();
            let measured = (|| -> Result<(f64, f64)> {
                // Not timed: the group forms and settles (every processor
                // owns partitions, all serving, nothing to do).
                let settle = Instant::now();
                loop {
                    std::thread::sleep(Duration::from_millis(250));
                    anyhow::ensure!(
                        !handles.iter().any(|h| h.is_finished()),
                        "a processor stopped"
                    );
                    anyhow::ensure!(
                        settle.elapsed() < Duration::from_secs(120),
                        "the group did not settle in 120 s"
                    );
                    let Ok(st) = cluster::status(&kafka) else {
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
                // partition that owns it, bincode with its header) while
                // the processors run, until the group is idle.
                let start = Instant::now();
                let producer: BaseProducer = kafka
                    .client_config()
                    .set("enable.idempotence", "true")
                    .set("linger.ms", "20")
                    .create()
                    .context("creating a producer")?;
                let topic = format!("{}events", kafka.topic_prefix);
                for e in &events {
                    let key = e.actor().to_string();
                    let payload = feedlog::codec::event_to_bincode(e);
                    let rec = BaseRecord::to(&topic)
                        .key(&key)
                        .payload(&payload)
                        .partition(feedlog::partition::partition_for(e.actor(), partitions) as i32)
                        .headers(OwnedHeaders::new().insert(Header {
                            key: FORMAT_HEADER,
                            value: Some("bincode"),
                        }));
                    send_when_room(&producer, rec).context("producing the workload")?;
                }
                producer
                    .flush(Duration::from_secs(120))
                    .context("producing the workload")?;
                let produced = start.elapsed().as_secs_f64();
                loop {
                    std::thread::sleep(Duration::from_millis(100));
                    anyhow::ensure!(
                        !handles.iter().any(|h| h.is_finished()),
                        "a processor stopped"
                    );
                    anyhow::ensure!(
                        start.elapsed() < Duration::from_secs(3600),
                        "not idle after an hour"
                    );
                    // Idle twice in a row: an outbox between its commit
                    // and its append is not mistaken for the end.
                    if cluster::status(&kafka).is_ok_and(|st| st.idle) {
                        let at = start.elapsed().as_secs_f64();
                        std::thread::sleep(Duration::from_millis(300));
                        if cluster::status(&kafka).is_ok_and(|st| st.idle) {
                            return Ok((produced, at));
                        }
                    }
                }
            })();
            cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            let mut totals = feedlog::task::StepStats::default();
            for h in handles {
                totals.add(&h.join().expect("processor thread")?);
            }
            let (produced, idle) = measured?;
            Ok((produced, idle, totals))
        })?;
        anyhow::ensure!(
            totals.events.iter().sum::<u64>() == embedded.events && totals.delivered == embedded.delivered,
            "the {members}-processor group applied {} events and {} deliveries, the embedded run {} and {}: not comparable",
            totals.events.iter().sum::<u64>(),
            totals.delivered,
            embedded.events,
            embedded.delivered
        );
        let k = Throughput {
            events: totals.events.iter().sum(),
            delivered: totals.delivered,
            secs: idle_in,
        };
        println!(
            "{} (timed from the first produce to idle; producing took {produced_in:.2}s)",
            k.line(&format!("kafka, {members} processor(s)"))
        );
        println!(
            "ratio kafka/embedded, {members} processor(s): events/s {:.2}, deliveries/s {:.2}",
            (k.events as f64 / k.secs) / (embedded.events as f64 / embedded.secs),
            (k.delivered as f64 / k.secs) / (embedded.delivered as f64 / embedded.secs)
        );
    }
    Ok(())
}

/// Rebuild of the state in `data` from its log vs, in the same run, the raw
/// rate of reading that log alone and of raw RocksDB puts of the rebuilt
/// state's records.
pub fn rebuild(data: &std::path::Path) -> Result<()> {
    use feedlog::log::{Log, Topic};
    use feedlog::replay::Rebuild;
    let dir = DataDir::open(data).with_context(|| {
        format!(
            "no processed data directory at {} (make one: feedlog --data {} demo --exit)",
            data.display(),
            data.display()
        )
    })?;
    let tmp = std::env::temp_dir().join(format!("feedlog-bench-{}", std::process::id()));
    let _cleanup = Cleanup(tmp.clone());
    let cfg = ProcessorConfig::default();

    // Raw: every record of both inputs of every partition, read and dropped.
    let logs = dir.logs();
    let start = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    for p in 0..dir.partitions() {
        for topic in [Topic::Events, Topic::Effects] {
            let mut src = Log::source(&logs, topic, p, 0)?;
            loop {
                let batch = src.read(4096, 4 << 20, None)?;
                if batch.is_empty() {
                    break;
                }
                records += batch.len() as u64;
                bytes += batch.iter().map(|r| r.value.len() as u64).sum::<u64>();
            }
        }
    }
    let read_secs = start.elapsed().as_secs_f64();
    eprintln!("raw log read: {records} records, {bytes} bytes in {read_secs:.2}s");

    // Timed: the rebuild itself.
    let into = tmp.join("rebuilt");
    let start = Instant::now();
    let r = Rebuild::open(data, &into, None, cfg.clone())?;
    let stats = r.run(&AtomicBool::new(false))?;
    let rebuild_secs = start.elapsed().as_secs_f64();
    anyhow::ensure!(r.finished()?, "the rebuild did not finish");
    let replayed = stats.input();
    drop(r);

    // Raw: the rebuilt state's records (every view column family), put in
    // key order into a fresh RocksDB in batches of 1000.
    let stores = feedlog::replay::open_stores(&into)?;
    let mut kvs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for s in &stores {
        for cf in Cf::ALL {
            if matches!(cf, Cf::Meta | Cf::Pending) {
                continue;
            }
            for kv in s.scan(cf, &[], &[0xff; 64]) {
                let (k, v) = kv?;
                let mut key = vec![cf as u8];
                key.extend_from_slice(&k);
                kvs.push((key, v));
            }
        }
    }
    drop(stores);
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let db = DB::open(&opts, tmp.join("raw")).context("opening the baseline RocksDB")?;
    let mut wo = WriteOptions::default();
    wo.set_sync(cfg.sync);
    let start = Instant::now();
    for chunk in kvs.chunks(1000) {
        let mut b = WriteBatch::default();
        for (k, v) in chunk {
            b.put(k, v);
        }
        db.write_opt(b, &wo)?;
    }
    let put_secs = start.elapsed().as_secs_f64();
    drop(db);

    // Checkpoint + tail: a rebuild stopped at 90 % of the records (timed
    // too, to tell how much of the full rebuild the tail was) is
    // checkpointed; then, timed, `rebuild --from-checkpoint`: the checkpoint
    // copied in and the rest replayed.
    let partial = tmp.join("partial");
    let start = Instant::now();
    let r = Rebuild::open(data, &partial, None, cfg.clone())?;
    let total = replayed;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| -> Result<()> {
        let run = s.spawn(|| r.run(&stop));
        while !run.is_finished() {
            let done: u64 = r
                .progress
                .iter()
                .map(|p| p.events.load(Ordering::SeqCst) + p.effects.load(Ordering::SeqCst))
                .sum();
            if done * 10 >= total * 9 {
                stop.store(true, Ordering::SeqCst);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        run.join().expect("rebuild thread")?;
        Ok(())
    })?;
    let head_secs = start.elapsed().as_secs_f64();
    drop(r);
    let stores = feedlog::processor::open_stores(
        &DataDir::open(&partial)?,
        &rocksdb::Cache::new_lru_cache(64 << 20),
        cfg.sync,
    )?;
    let checkpoint = tmp.join("checkpoint");
    let info = feedlog::replay::write_checkpoint(&stores, &dir, cfg.inbox_cap, &checkpoint)?;
    drop(stores);
    let at: u64 = info.positions.iter().map(|(e, f)| e + f).sum();
    let start = Instant::now();
    let r = Rebuild::open(
        data,
        &tmp.join("from-checkpoint"),
        Some(&checkpoint),
        cfg.clone(),
    )?;
    let tail = r.run(&AtomicBool::new(false))?;
    let tail_secs = start.elapsed().as_secs_f64();
    anyhow::ensure!(
        r.finished()?,
        "the rebuild from the checkpoint did not finish"
    );
    drop(r);

    println!(
        "rebuild: {replayed} records replayed ({} events, {} effects) in {rebuild_secs:.2}s = {:.0} records/s, {:.0} events/s",
        stats.events.iter().sum::<u64>(),
        stats.effects,
        replayed as f64 / rebuild_secs,
        stats.events.iter().sum::<u64>() as f64 / rebuild_secs
    );
    println!(
        "raw log read: {records} records in {read_secs:.2}s = {:.0} records/s",
        records as f64 / read_secs
    );
    println!(
        "raw RocksDB puts of the rebuilt state: {} records in {put_secs:.2}s = {:.0}/s (batches of 1000, sync={})",
        kvs.len(),
        kvs.len() as f64 / put_secs,
        cfg.sync
    );
    println!(
        "ratio rebuild/raw read (records/s): {:.3}; rebuild time / raw put time: {:.2}",
        (replayed as f64 / rebuild_secs) / (records as f64 / read_secs),
        rebuild_secs / put_secs
    );
    println!(
        "checkpoint at {at} of {total} records ({:.1} %) + tail: {} records replayed in {tail_secs:.2}s; \
         time / full rebuild time: {:.3} (a rebuild from the start took {head_secs:.2}s to reach the checkpoint, \
         so the same tail took about {:.2}s of the full rebuild)",
        100.0 * at as f64 / total.max(1) as f64,
        tail.input(),
        tail_secs / rebuild_secs,
        rebuild_secs - head_secs
    );
    Ok(())
}
