//! `feedlog demo`: the tour. On a fresh data directory it loads a real
//! network (SNAP soc-Epinions1 from the shared data directory, when present)
//! or a generated one, adds activity (bursts of posts, follows, unfollows,
//! deletes), processes it with live progress while serving the read API,
//! and shows what the API answers.

use super::api_args::ApiArgs;
use super::ingest::import_file;
use super::run::process;
use super::shell::{shutdown_on_signal, ApiServer};
use crate::cli::say::say;
use anyhow::{Context, Result};
use feedlog::api::query::{Reader, Rewind};
use feedlog::core::codec::Format;
use feedlog::core::event::{EventKind, Ts};
use feedlog::core::metrics::StepStats;
use feedlog::ingest::generate::{self, Activity, Graph, Rng};
use feedlog::ingest::import::SnapFormat;
use feedlog::ingest::produce::Producer;
use feedlog::ops::asof::LogRewind;
use feedlog::ops::serve::processor_api_rewinding;
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::{Processor, ProcessorConfig};
use feedlog::{Event, UserId};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

mod markers;

/// The demo's sizes and source.
#[derive(clap::Args, Clone)]
pub struct DemoArgs {
    /// `auto` (the real network in --shared-data if present, else generated),
    /// `generated`, or a SNAP edge-list file (`SRC DST`, gzip allowed).
    #[arg(long, default_value = "auto")]
    source: String,
    /// Where the real networks are.
    #[arg(long, env = "FEEDLOG_SHARED_DATA", default_value = "../shared/data")]
    shared_data: PathBuf,
    /// Users of a generated network.
    #[arg(long, default_value_t = 50_000)]
    users: u64,
    /// Follows per user of a generated network (power-law followees).
    #[arg(long, default_value_t = 10)]
    follows: u64,
    /// Posts to write over the network (in bursts). The default takes
    /// about a minute on two cores.
    #[arg(long, default_value_t = 750_000)]
    posts: u64,
    /// Share of posts by the most followed accounts.
    #[arg(long, default_value_t = 0.002)]
    celebrity_share: f64,
    /// Partitions of a new data directory.
    #[arg(long, default_value_t = 8)]
    partitions: u32,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// Live followers from which the demo pulls an author: the busiest
/// accounts of its networks (a few thousand followers at most) are pulled,
/// everyone else pushed. A later `run` uses its own `--pull-threshold`;
/// authors switch at their next new or lost follower.
const DEMO_PULL_THRESHOLD: u64 = 1_000;

/// Log time without an event of their own after which the demo skips a
/// reader: an hour, against about five hours of activity in which an active
/// user acts every ten minutes or so (half the users never come back).
const DEMO_INACTIVE_AFTER_MS: u64 = 3_600_000;

/// Share of the demo's users who never act after following (they are the
/// readers put asleep), and `seen` events per post.
const DEMO_DORMANT_SHARE: f64 = 0.5;
const DEMO_SEEN_RATE: f64 = 0.5;
/// Reposts per post in the demo (a tenth: mostly of the most followed
/// accounts' posts).
const DEMO_REPOST_RATE: f64 = 0.1;
/// Filter events per post in the demo (mutes, hidden reposts and blocks of
/// followees, and undos of some).
const DEMO_FILTER_RATE: f64 = 0.02;
/// Likes per post in the demo (likes outnumber posts on every network; a
/// tenth of them are undone).
const DEMO_LIKE_RATE: f64 = 3.0;
/// Share of the demo's posts that reply to another post (replies are a
/// large share of what people post on every network).
const DEMO_REPLY_SHARE: f64 = 0.3;
/// Share of the demo's posts that mention one to three users.
const DEMO_MENTION_SHARE: f64 = 0.1;

/// Start of the generated timeline (2023-11-14T22:13:20Z), fixed so that a
/// demo directory is the same log every time.
const START_MS: u64 = 1_700_000_000_000;

/// Loads the network and its activity into a new data directory.
// Long: the network, then its activity, written and summed up in one pass (each count in the summary line is of what was written).
fn load(data: &Path, a: &DemoArgs) -> Result<()> {
    let dir = DataDir::create_or_open(data, Some(a.partitions))?;
    let mut producer = Producer::new(&dir)?;
    let mut rng = Rng(a.seed);
    let real = a.shared_data.join("soc-Epinions1.txt.gz");
    let file = match a.source.as_str() {
        "generated" => None,
        "auto" if real.is_file() => Some(real),
        "auto" => {
            say!(
                "no {} (set --shared-data): generating a network instead",
                real.display()
            );
            None
        }
        path => Some(PathBuf::from(path)),
    };
    let start = Instant::now();
    let mut edges = Vec::new();
    match &file {
        Some(f) => {
            say!(
                "loading {} as a follow graph (SNAP ids start at 0, feedlog's at 1: every id is shifted by +1)",
                f.display()
            );
            let s = import_file(&mut producer, SnapFormat::Edges, f, START_MS, &mut |e| {
                if let Event::Follow {
                    follower, followee, ..
                } = e
                {
                    edges.push((follower.0, followee.0));
                }
            })?;
            say!(
                "  {} follows; {} lines to the dead-letter log",
                s.events,
                s.dead_lettered
            );
        }
        None => {
            say!(
                "generating {} users following {} accounts each (power-law)",
                a.users,
                a.follows
            );
            for e in generate::follows(a.users, a.follows, START_MS, &mut rng) {
                if let Event::Follow {
                    follower, followee, ..
                } = e
                {
                    edges.push((follower.0, followee.0));
                }
                producer.event(&e, Format::Postcard)?;
            }
            say!("  {} follows", edges.len());
        }
    }
    let follows = edges.len() as u64;
    let mut graph = Graph::from_edges(edges);
    let activity = Activity {
        posts: a.posts,
        celebrity_share: a.celebrity_share,
        dormant_share: DEMO_DORMANT_SHARE,
        seen_rate: DEMO_SEEN_RATE,
        repost_rate: DEMO_REPOST_RATE,
        filter_rate: DEMO_FILTER_RATE,
        like_rate: DEMO_LIKE_RATE,
        reply_share: DEMO_REPLY_SHARE,
        mention_share: DEMO_MENTION_SHARE,
        ..Activity::default()
    };
    let events = generate::activity(&mut graph, activity, START_MS + follows + 1000, 1, &mut rng);
    let mut counted = feedlog::core::metrics::StepStats::default();
    let (mut replies, mut mentioning) = (0, 0);
    for e in &events {
        counted.count_event(e.kind());
        if let Some((_, _, reply_to, mentions)) = e.as_post() {
            replies += u64::from(reply_to.is_some());
            mentioning += u64::from(!mentions.is_empty());
        }
        producer.event(e, Format::Postcard)?;
    }
    let n = |kind| counted.events.get(kind);
    let s = producer.finish()?;
    say!(
        "  then {} posts in bursts ({replies} of them replies, {mentioning} mentioning users), {} reposts (mostly of the most followed accounts), {} likes ({} undone), {} new follows, {} unfollows, {} deletes, {} app opens (`seen`; half the users never come back), {} mutes, {} blocks and {} hidden reposts (and {} undone): {} events in the log ({:.1}s)",
        n(EventKind::Post),
        n(EventKind::Repost),
        n(EventKind::Like),
        n(EventKind::Unlike),
        n(EventKind::Follow),
        n(EventKind::Unfollow),
        n(EventKind::DeletePost),
        n(EventKind::Seen),
        n(EventKind::Mute),
        n(EventKind::Block),
        n(EventKind::HideReposts),
        n(EventKind::Unmute) + n(EventKind::Unblock) + n(EventKind::ShowReposts),
        s.accepted,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs the demo.
pub fn run(data: &Path, a: &DemoArgs, listen: &str, exit: bool, api: &ApiArgs) -> Result<i32> {
    if data.join("feedlog.json").exists() {
        say!(
            "{} already exists: processing what is in its log (remove it for a fresh demo)",
            data.display()
        );
    } else {
        load(data, a).context("loading the demo network")?;
    }
    let dir = DataDir::open(data)?;
    let cfg = ProcessorConfig {
        pull_threshold: Some(DEMO_PULL_THRESHOLD),
        inactive_after: Some(DEMO_INACTIVE_AFTER_MS),
        ..ProcessorConfig::default()
    };
    let processor = Processor::open(&dir, cfg)?;
    let shutdown = shutdown_on_signal();
    // One rewind for the API and the tour: the tour's page as of an earlier
    // time is then kept for the same request over HTTP.
    let rewind = Arc::new(LogRewind::of(&dir, api.history_retention));
    let server = ApiServer::start(listen, api.config(), |cfg| {
        processor_api_rewinding(&processor, rewind.clone(), cfg)
    })?;
    let start = Instant::now();
    let mode = super::shell::RunMode {
        until_idle: true,
        progress: Some(super::shell::PROGRESS_EVERY),
    };
    let totals = process(&dir, &processor, &shutdown, mode)?;
    if shutdown.is_requested() {
        server.stop();
        return Ok(130);
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let fan = tour(&processor, &*rewind, server.addr, (totals, secs))?;
    let base = format!("http://{}", server.addr);
    muted_author(&dir, &processor, &base)?;
    if let Some(fan) = fan {
        markers::unread_falls(&dir, &processor, &base, UserId(fan))?;
    }
    let ui = format!(
        "look at it in a browser: http://{}/ui{}",
        server.addr,
        fan.map(|f| format!("?user={f}")).unwrap_or_default()
    );
    if exit {
        println!("\n{ui}");
        server.stop();
        processor.flush();
        return Ok(0);
    }
    println!(
        "\nserving on http://{} (processing new events as they arrive); Ctrl-C to stop\n{ui}",
        server.addr
    );
    // Keep processing what arrives (e.g. `feedlog produce` from another
    // shell) while serving.
    processor.run(&shutdown, false)?;
    server.stop();
    processor.flush();
    Ok(0)
}

fn tour(
    processor: &Processor,
    rewind: &dyn Rewind,
    addr: std::net::SocketAddr,
    (totals, secs): (StepStats, f64),
) -> Result<Option<u64>> {
    let reader = Reader::over(processor.store_set().clone(), None);
    let base = format!("http://{addr}");
    let Some(star) = reader.most_followed(1)?.into_iter().next() else {
        println!("the log holds no users yet");
        return Ok(None);
    };
    let events: u64 = totals.events.total();
    println!("\n=== feedlog tour ===");
    println!(
        "processed {events} events and {} internal messages in {secs:.1}s: {:.0} events/s, {} inbox deliveries ({:.0}/s)",
        totals.effects,
        events as f64 / secs,
        totals.delivered,
        totals.delivered as f64 / secs
    );
    println!("\nthe most followed account, user {}:", star.user);
    println!("  $ curl -s '{base}/v1/users/{}/counters'", star.user);
    println!("  {}", serde_json::to_string(&star)?);
    if star.followers >= DEMO_PULL_THRESHOLD {
        println!(
            "with {} followers (the demo pulls from {DEMO_PULL_THRESHOLD}) its posts are pulled: one message \
             per partition instead of {} inbox writes, merged into its followers' pages as they read",
            star.followers, star.followers
        );
    }
    let recent = reader.recent_followers(UserId(star.user), 3)?;
    println!("its 3 newest followers:");
    println!(
        "  $ curl -s '{base}/v1/users/{}/followers/recent?limit=3'",
        star.user
    );
    println!("  {}", serde_json::to_string(&recent)?);
    // A follower whose timeline has something in it.
    let mut fan = recent.items.first().map(|f| f.user);
    for f in &recent.items {
        if !reader.timeline(UserId(f.user), 1, None)?.items.is_empty() {
            fan = Some(f.user);
            break;
        }
    }
    if let Some(fan) = fan {
        let mut page = reader.timeline(UserId(fan), 5, None)?;
        reader.decorate(&mut page.items, Some(UserId(fan)))?;
        println!("\nthe home timeline of user {fan}, one of them (5 newest posts):");
        println!("  $ curl -s '{base}/v1/users/{fan}/timeline?limit=5'");
        println!("  {}", serde_json::to_string(&page)?);
        if let Some(c) = page.next_cursor {
            println!("the next page:");
            println!("  $ curl -s '{base}/v1/users/{fan}/timeline?limit=5&cursor={c}'");
        }
        println!("new entries as they arrive (server-sent events):");
        println!("  $ curl -sN '{base}/v1/users/{fan}/timeline/stream'");
        explained(&reader, &base, UserId(fan))?;
        if let Some(newest) = page.items.first() {
            let t = newest.ts.saturating_sub(3_600_000);
            say!("replaying the log up to {t} for the views an hour of log time earlier (as long as a rebuild of that much)");
            match rewind.at(Ts(t)) {
                Ok(then) => {
                    println!("an hour of log time earlier (replayed from the log once, then kept): that timeline, and the most followed account's counters");
                    println!("  $ curl -s '{base}/v1/users/{fan}/timeline?limit=5&as_of={t}'");
                    let mut page = then.timeline(UserId(fan), 5, None)?;
                    then.decorate(&mut page.items, Some(UserId(fan)))?;
                    println!("  {}", serde_json::to_string(&page)?);
                    println!(
                        "  $ curl -s '{base}/v1/users/{}/counters?as_of={t}'",
                        star.user
                    );
                    println!(
                        "  {}",
                        serde_json::to_string(&then.counters(UserId(star.user))?)?
                    );
                }
                // A retention of 0 (or shorter than an hour) answers none.
                Err(e) => println!("views an hour of log time earlier: {e}"),
            }
        }
    }
    reposted_entry(&reader, &base)?;
    inactive_readers(&reader, &base)?;
    println!("\nmore: {base}/openapi.json, {base}/metrics, {base}/readyz");
    Ok(fan)
}

/// The tour's explain: why the newest entry of `fan`'s timeline is there,
/// and why the newest post of a popular account is not (the first of the
/// 50 most followed whose newest post is not in it).
fn explained(reader: &Reader, base: &str, fan: UserId) -> Result<()> {
    let mut page = reader.timeline(fan, 1, None)?;
    reader.explain_page(fan, Default::default(), &mut page)?;
    println!("why that entry is there: the follow and the post, with their places in the log:");
    println!("  $ curl -s '{base}/v1/users/{fan}/timeline?limit=1&explain=1&counts=0'");
    println!("  {}", serde_json::to_string(&page)?);
    for c in reader.most_followed(50)? {
        let Some(post) = reader
            .posts(UserId(c.user), 1, None)?
            .items
            .into_iter()
            .next()
        else {
            continue;
        };
        let post = (
            UserId(post.author),
            feedlog::core::event::PostId(post.post_id),
        );
        let answer = reader.why(fan, post)?;
        if !answer.in_timeline {
            println!("and why a post is not there:");
            println!(
                "  $ curl -s '{base}/v1/users/{fan}/timeline/why?author={}&post_id={}'",
                post.0, post.1
            );
            println!("  {}", serde_json::to_string(&answer)?);
            break;
        }
    }
    Ok(())
}

/// The tour's reposts: a timeline entry that several followed accounts
/// reposted, shown once with who reposted it (found among the first pages
/// of up to 5,000 readers).
fn reposted_entry(reader: &Reader, base: &str) -> Result<()> {
    let mut best: Option<(u64, feedlog::api::query::PostItem)> = None;
    let mut looked = 0;
    'stores: for (_, store) in reader.stores() {
        for r in feedlog::core::views::users(&store.snapshot()) {
            let (user, rec) = r?;
            if rec.followees == 0 {
                continue;
            }
            looked += 1;
            if looked > 5_000 {
                break 'stores;
            }
            for item in reader.timeline(user, 20, None)?.items {
                let n = item.reposters.unwrap_or(0);
                if n >= 2
                    && best
                        .as_ref()
                        .is_none_or(|(_, b)| n > b.reposters.unwrap_or(0))
                {
                    best = Some((user.0, item));
                }
            }
        }
    }
    let Some((user, item)) = best else {
        return Ok(());
    };
    println!(
        "\nreposts: post {} of user {} is one entry in user {user}'s timeline, placed at its newest \
         appearance, though {} accounts they follow reposted it (`?reposts=first` places it at its \
         oldest, `?reposts=none` leaves reposts out):",
        item.post_id,
        item.author,
        item.reposters.unwrap_or(0)
    );
    println!("  $ curl -s '{base}/v1/users/{user}/timeline?limit=20'");
    let mut shown = [item.clone()];
    reader.decorate(&mut shown, Some(UserId(user)))?;
    println!("  {}", serde_json::to_string(&shown[0])?);
    let post = (
        UserId(item.author),
        feedlog::core::event::PostId(item.post_id),
    );
    let answer = reader.post(post, Some(UserId(user)))?;
    println!(
        "the post with its likes, replies and reposts, and whether user {user} liked or reposted it:"
    );
    println!(
        "  $ curl -s '{base}/v1/posts/{}/{}?viewer={user}'",
        item.author, item.post_id
    );
    println!("  {}", serde_json::to_string(&answer)?);
    let likers = reader.likers(post, 5, None)?;
    println!("who likes it, newest first:");
    println!(
        "  $ curl -s '{base}/v1/posts/{}/{}/likes?limit=5'",
        item.author, item.post_id
    );
    println!("  {}", serde_json::to_string(&likers)?);
    let replies = reader.replies(post, 3, None, Some(UserId(user)))?;
    println!("its replies, oldest first, each with its own counts and user {user}'s flags:");
    println!(
        "  $ curl -s '{base}/v1/posts/{}/{}/replies?limit=3&viewer={user}'",
        item.author, item.post_id
    );
    println!("  {}", serde_json::to_string(&replies)?);
    Ok(())
}

/// Appends `e` to the demo's log and processes it: the event as JSON.
fn append(dir: &DataDir, processor: &Processor, e: &Event) -> Result<String> {
    let mut producer = Producer::new(dir)?;
    producer.event(e, Format::Json)?;
    producer.finish()?;
    drop(producer);
    processor.run(&feedlog::task::Shutdown::new(), true)?;
    Ok(feedlog::core::codec::event_to_json(e))
}

/// The tour's mute, made live: a reader mutes the author of the newest
/// entry of their timeline (two events appended to the demo's log and
/// processed), and the page leaves every appearance of that author out;
/// the unmute brings the same page back.
fn muted_author(dir: &DataDir, processor: &Processor, base: &str) -> Result<()> {
    let reader = Reader::over(processor.store_set().clone(), None);
    // A reader with a full first page and no filter of their own.
    let mut found = None;
    'stores: for (_, store) in reader.stores() {
        let snap = store.snapshot();
        for r in feedlog::core::views::users(&snap) {
            let (user, rec) = r?;
            if rec.followees < 2 || feedlog::core::filter::any(&snap, user)? {
                continue;
            }
            let page = reader.timeline(user, 5, None)?;
            if page.items.len() == 5 {
                found = Some((user, page, feedlog::core::views::clock(&snap)?));
                break 'stores;
            }
        }
    }
    let Some((user, before, now)) = found else {
        return Ok(());
    };
    let author = UserId(before.items[0].author);
    let apply = |change, ts| -> Result<String> {
        let e = Event::Filter {
            user,
            target: author,
            change,
            ts: feedlog::core::event::Ts(ts),
        };
        append(dir, processor, &e)
    };
    let mute = apply(
        feedlog::core::event::FilterChange::Mute { until: None },
        now.0 + 1,
    )?;
    let muted = reader.timeline(user, 5, None)?;
    println!(
        "\nmutes: user {user} mutes user {author}, the author of their newest entry (appended to the log: \
         {mute}); the page leaves every post and repost of theirs out and is still 5 entries long:"
    );
    println!("  $ curl -s '{base}/v1/users/{user}/timeline?limit=5&counts=0'");
    println!("  {}", serde_json::to_string(&muted)?);
    println!("  $ curl -s '{base}/v1/users/{user}/mutes'");
    println!(
        "  {}",
        serde_json::to_string(&reader.mutes(user, 20, None)?)?
    );
    let unmute = apply(feedlog::core::event::FilterChange::Unmute, now.0 + 2)?;
    let after = reader.timeline(user, 5, None)?;
    let same = if after.items == before.items {
        "the same page as before the mute"
    } else {
        "a page that changed meanwhile"
    };
    println!("after {unmute}: {same}:");
    println!("  {}", serde_json::to_string(&after)?);
    Ok(())
}

/// The tour's inactive readers: how many are asleep, one of them whose
/// page the pull path reads, and one who came back.
fn inactive_readers(reader: &Reader, base: &str) -> Result<()> {
    let (mut asleep, mut users) = (0u64, 0u64);
    let (mut sleeper, mut returned) = (None, None);
    for (_, store) in reader.stores() {
        for r in feedlog::core::views::users(&store.snapshot()) {
            let (user, rec) = r?;
            users += 1;
            asleep += u64::from(rec.asleep);
            if rec.asleep && rec.followees > 0 && sleeper.is_none_or(|(_, f)| rec.followees > f) {
                sleeper = Some((user, rec.followees));
            }
            if !rec.asleep && rec.refills == 0 && rec.wakes > 0 && returned.is_none() {
                returned = Some((user, rec.wakes));
            }
        }
    }
    let hours = DEMO_INACTIVE_AFTER_MS as f64 / 3_600_000.0;
    println!(
        "\n{asleep} of {users} users are asleep: no event of their own for {hours} h of log time \
         when a post reached them, so pushes skip their inboxes"
    );
    if let Some((user, followees)) = sleeper {
        let page = reader.timeline(user, 3, None)?;
        println!(
            "user {user}, asleep, follows {followees}: their page is read from those followees' \
             outboxes (the same page an inbox would hold):"
        );
        println!("  $ curl -s '{base}/v1/users/{user}/timeline?limit=3&counts=0'");
        println!("  {}", serde_json::to_string(&page)?);
    }
    if let Some((user, wakes)) = returned {
        println!(
            "user {user} came back {wakes} time(s) (a post, a follow or an app open): each time their \
             followees refilled their inbox, which serves their pages again"
        );
    }
    Ok(())
}
