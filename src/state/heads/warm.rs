//! Heads read in the background after a store opens, so that a reader's
//! first page after a start is read from memory too.
//!
//! First every pushed reader's newest rows and record, and every sleeping
//! reader's record and followees (at most
//! [`super::followees::FOLLOWEES_MOST`]: the pull path reads their page);
//! then, while the budget is under three quarters spent, in partitions
//! with reposts each pushed reader's live followees and each whole
//! reader's sources (those with at most [`super::view::SOURCES_MOST`]),
//! so that an aggregated first page reads them from memory as well, and
//! last the newest keys of each followed author's outbox, which sleepers'
//! pages read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::followees::FOLLOWEES_MOST;
use super::view::{Source, Sources, SOURCES_MOST};
use super::{Head, Rows, HEAD_ROWS};
use crate::core::event::UserId;
use crate::core::keys::{self, EdgeVal, TimelineKey, UserVal};
use crate::core::kv::{Cf, Kv, KvError};
use crate::state::{Snapshot, Store};

/// Users read per snapshot: a chunk is kept only when no commit landed
/// while it was read, so it stays short (a few milliseconds).
const CHUNK: usize = 256;

/// Rows read per reader: a first page and the next of the default size.
const WARM_ROWS: usize = 41;

/// The thread of [`in_background`]; dropping it stops the thread and
/// waits for it (a chunk at most), so that the stores it reads close when
/// their owner drops them.
pub struct Warming {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Warming {
    /// Whether the thread is done: every store read (or left).
    pub fn is_done(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl Drop for Warming {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a thread, at the lowest priority, that reads the heads of every
/// reader of `stores` who has an inbox (awake, no pulled authors, no
/// filters), store after store, until each store's budget is spent (a
/// store that may hold a repost is left: its pages are aggregated, which
/// heads do not answer). It
/// holds the stores weakly (a store dropped meanwhile, by a swap, is left)
/// and ends when the [`Warming`] returned is dropped. `None`: nothing to
/// read (no store keeps heads), or no thread could start.
pub fn in_background(stores: &[Arc<Store>]) -> Option<Warming> {
    let stores: Vec<Weak<Store>> = stores
        .iter()
        .filter(|s| s.heads().is_on())
        .map(Arc::downgrade)
        .collect();
    if stores.is_empty() {
        return None;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let spawned = std::thread::Builder::new()
        .name("heads-warm".into())
        .spawn(move || {
            // The lowest priority: pages and processing come first.
            let _ = rustix::process::setpriority_process(None, 19);
            let (start, mut kept) = (std::time::Instant::now(), 0);
            let mut sleepers = 0;
            for store in &stores {
                let read = warm(store, &stopped, pushed, |s, r| read_heads(s, r));
                // Then the sleepers': their pages are the pull path's.
                let asleep = |n| warm(store, &stopped, asleep, |s, r| read_sleepers(s, r)).map(|m| (n, m));
                match read.and_then(asleep) {
                    Ok((n, m)) => (kept, sleepers) = (kept + n, sleepers + m),
                    Err(e) => {
                        tracing::warn!(error = %e, "reading inbox heads after the open stopped")
                    }
                }
            }
            // Then the readers' sources, in what the budget has left.
            let mut with_sources = 0;
            for store in &stores {
                // Followees first: a few ids a reader, asked about by
                // every aggregated page.
                let sources = |_| warm_sources(store, &stopped);
                match warm_followees(store, &stopped).and_then(sources) {
                    Ok(n) => with_sources += n,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading readers' sources after the open stopped")
                    }
                }
            }
            // Then the authors' outboxes, which sleepers' pages read.
            let mut outboxes = 0;
            for store in &stores {
                match warm_outboxes(store, &stopped) {
                    Ok(n) => outboxes += n,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading outbox heads after the open stopped")
                    }
                }
            }
            let secs = start.elapsed().as_secs_f64();
            tracing::info!(
                readers = kept,
                sleepers,
                with_sources,
                outboxes,
                secs,
                "inbox heads read"
            );
        });
    match spawned {
        Ok(thread) => Some(Warming {
            stop,
            thread: Some(thread),
        }),
        Err(e) => {
            tracing::warn!(error = %e, "could not start the thread that reads inbox heads");
            None
        }
    }
}

/// Reads the heads of `store`'s readers that `pick` picks, as `read`
/// reads a chunk of them, chunk by chunk while the store lives and `stop`
/// is not set; the heads kept.
fn warm(
    store: &Weak<Store>,
    stop: &AtomicBool,
    pick: fn(&UserVal) -> bool,
    read: impl Fn(&Snapshot<'_>, &[(UserId, UserVal)]) -> Result<Vec<(UserId, Head)>, KvError>,
) -> Result<usize, KvError> {
    by_chunks(
        store,
        stop,
        (pick, |_| false),
        read,
        |store, epoch, (user, head)| store.heads().keep(epoch, user.0, head, false),
    )
}

/// Keeps the newest keys of each followed author's outbox of `store`,
/// chunk by chunk, until every author is done, `stop` is set, or the
/// heads hold three quarters of their budget; how many were kept.
fn warm_outboxes(store: &Weak<Store>, stop: &AtomicBool) -> Result<usize, KvError> {
    by_chunks(
        store,
        stop,
        (followed, |store: &Store| store.heads().filled() > 0.75),
        |snap, authors| read_outboxes(snap, authors),
        |store, epoch, (author, rows)| store.heads().keep_outbox(epoch, author.0, rows, false),
    )
}

/// An author whose outbox the pull path may read: followed, with posts or
/// reposts.
fn followed(u: &UserVal) -> bool {
    u.followers > 0 && (u.posts > 0 || u.reposts > 0)
}

/// The first [`HEAD_ROWS`] outbox keys of each of `authors` (ascending),
/// as outbox heads.
fn read_outboxes(
    kv: &impl Kv,
    authors: &[(UserId, UserVal)],
) -> Result<Vec<(UserId, Rows)>, KvError> {
    let ids = authors.iter().map(|(a, _)| *a);
    // One past a head's rows: then whether they are all is known.
    let rows = per_user(
        kv,
        Cf::Outbox,
        ids,
        (Vec::new(), authors.len()),
        |rows, k, _| {
            let (ts, post_id) = crate::core::views::outbox_entry(k)?;
            let author = UserId(crate::core::kv::u64_at(Cf::Outbox, k, k, 0)?);
            rows.push(TimelineKey {
                ts,
                post_id,
                author,
            });
            Ok(rows.len() <= HEAD_ROWS)
        },
    )?;
    Ok(authors
        .iter()
        .zip(rows)
        .map(|(&(author, _), rows)| {
            let all = rows.len() <= HEAD_ROWS;
            (author, Rows::new(rows, all))
        })
        .collect())
}

/// A reader whose page the inbox holds: awake, no pulled authors, an inbox.
fn pushed(u: &UserVal) -> bool {
    u.marks == 0 && u.inbox_len > 0 && !u.asleep && u.refills == 0
}

/// A reader whose page the pull path reads whole, from every followee's
/// outbox (pulled or not).
fn asleep(u: &UserVal) -> bool {
    u.asleep
}

/// Goes through `store`'s readers that `pick` picks (without filters)
/// chunk by chunk while it lives,
/// `stop` is not set and `done` does not say so: `read` reads what to keep
/// of a chunk from a snapshot, and `keep` keeps each item read at the
/// snapshot's epoch; a refusal at that same epoch (the budget spent) ends
/// the walk, one after a commit landed reads the chunk again. How many
/// were kept.
fn by_chunks<T>(
    store: &Weak<Store>,
    stop: &AtomicBool,
    (pick, done): (fn(&UserVal) -> bool, impl Fn(&Store) -> bool),
    read: impl Fn(&Snapshot<'_>, &[(UserId, UserVal)]) -> Result<Vec<T>, KvError>,
    keep: impl Fn(&Store, u64, T) -> bool,
) -> Result<usize, KvError> {
    let (mut from, mut kept) = (Vec::new(), 0);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(kept);
        }
        let Some(store) = store.upgrade() else {
            return Ok(kept);
        };
        if done(&store) {
            return Ok(kept);
        }
        let Some(epoch) = store.heads().epoch() else {
            drop(store);
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        };
        let snap = store.snapshot();
        let (readers, next) = readers(&snap, &from, (pick, store.may_hold(Cf::Filters)))?;
        let Some(next) = next else {
            return Ok(kept);
        };
        let items = read(&snap, &readers)?;
        drop(snap);
        let mut refused = false;
        for item in items {
            if !keep(&store, epoch, item) {
                refused = true;
                break;
            }
            kept += 1;
        }
        match (refused, store.heads().epoch() == Some(epoch)) {
            // Refused at the same epoch: the budget is spent.
            (true, true) => return Ok(kept),
            (false, true) => from = next,
            // A commit landed while the chunk was read: again, a little later.
            (_, false) => {
                drop(store);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

/// Readers with their records, and the key to go on from.
type Chunk = (Vec<(UserId, UserVal)>, Option<Vec<u8>>);

/// The users that `pick` picks among up to [`CHUNK`] from key `from` on,
/// without filters (`filters`: the store may hold some), with their
/// records, and the key to go on from (`None`: no user left).
fn readers(
    kv: &impl Kv,
    from: &[u8],
    (pick, filters): (fn(&UserVal) -> bool, bool),
) -> Result<Chunk, KvError> {
    let (mut readers, mut last) = (Vec::new(), None);
    for r in kv.scan(Cf::Users, from, None).take(CHUNK) {
        let (k, v) = r?;
        let user = UserId(crate::core::kv::u64_at(Cf::Users, &k, &k, 0)?);
        let u = UserVal::decode(&v)
            .ok_or_else(|| KvError::corrupt(Cf::Users, &k, "the user record does not decode"))?;
        let mut next = k;
        next.push(0);
        last = Some(next);
        if pick(&u) && !(filters && crate::core::filter::any(kv, user)?) {
            readers.push((user, u));
        }
    }
    Ok((readers, last))
}

/// Whether what aggregated pages read is not to be read after the open:
/// without a live repost, no page is aggregated; past three quarters of
/// the budget, the rest is left to pages' own reads (a page that finds
/// the budget spent sweeps the heads not read).
fn aggregated_done(store: &Store) -> bool {
    !store.may_hold(Cf::RepostDir) || store.heads().filled() > 0.75
}

/// Adds each whole reader's sources (at most [`SOURCES_MOST`]) to the
/// head read for them, chunk by chunk, until every reader of the store is
/// done, `stop` is set, or the budget is spent (without a sweep: the
/// heads read after the open are all unread yet); how many got theirs.
fn warm_sources(store: &Weak<Store>, stop: &AtomicBool) -> Result<usize, KvError> {
    by_chunks(
        store,
        stop,
        (pushed, aggregated_done),
        |snap, readers| {
            let whole: Vec<UserId> = (readers.iter())
                .filter(|(_, u)| u.whole())
                .map(|(user, _)| *user)
                .collect();
            read_sources(snap, &whole)
        },
        |store, epoch, (user, sources)| store.heads().keep_sources(epoch, user.0, sources, false),
    )
}

/// Adds each pushed reader's live followees (at most [`FOLLOWEES_MOST`])
/// to the head read for them, in partitions with reposts (an aggregated
/// page asks whether its reader follows each post's author), chunk by
/// chunk, as [`warm_sources`] does; how many got theirs.
fn warm_followees(store: &Weak<Store>, stop: &AtomicBool) -> Result<usize, KvError> {
    by_chunks(
        store,
        stop,
        (pushed, aggregated_done),
        |snap, readers| {
            let lists = followee_lists(snap, readers)?;
            let ids = readers.iter().map(|(u, _)| *u);
            Ok(ids.zip(lists).filter_map(|(u, l)| Some((u, l?))).collect())
        },
        |store, epoch, (user, list)| store.heads().keep_followees(epoch, user.0, list),
    )
}

/// Each of `users`' rows of `cf` (ascending users) in one positioned
/// read: `step` folds a row (key, value) into its user's state, saying
/// whether to read on; the states, in `users`' order.
fn per_user<S: Clone>(
    kv: &impl Kv,
    cf: Cf,
    users: impl Iterator<Item = UserId>,
    (empty, n): (S, usize),
    mut step: impl FnMut(&mut S, &[u8], &[u8]) -> Result<bool, KvError>,
) -> Result<Vec<S>, KvError> {
    let ranges: Vec<(Vec<u8>, Vec<u8>)> = users
        .map(|u| (keys::key([u.0]), keys::key([u.0])))
        .collect();
    let (mut states, mut bad) = (vec![empty; n], None);
    kv.for_each_in_ranges(
        cf,
        &ranges,
        &mut |i, k, v| match step(&mut states[i], k, v) {
            Ok(on) => on,
            Err(e) => {
                bad = Some(e);
                false
            }
        },
    )?;
    match bad {
        Some(e) => Err(e),
        None => Ok(states),
    }
}

/// The sources of each of `users` (ascending) who has at most
/// [`SOURCES_MOST`], through one iterator.
fn read_sources(kv: &impl Kv, users: &[UserId]) -> Result<Vec<(UserId, Sources)>, KvError> {
    let empty: Option<Vec<Source>> = Some(Vec::new());
    let lists = per_user(
        kv,
        Cf::InboxReposts,
        users.iter().copied(),
        (empty, users.len()),
        |list, k, v| {
            match (list.as_mut(), Sources::source(k, v)) {
                (Some(l), Some(s)) if l.len() < SOURCES_MOST => l.push(s),
                // Too many, or not of this layout: none held.
                _ => *list = None,
            }
            Ok(list.is_some())
        },
    )?;
    Ok(users
        .iter()
        .zip(lists)
        .filter_map(|(&user, list)| Some((user, Sources(list?))))
        .collect())
}

/// The first [`WARM_ROWS`] inbox rows of each of `readers` (ascending
/// users), as heads.
fn read_heads(kv: &impl Kv, readers: &[(UserId, UserVal)]) -> Result<Vec<(UserId, Head)>, KvError> {
    let ids = readers.iter().map(|(u, _)| *u);
    let rows = per_user(
        kv,
        Cf::Inbox,
        ids,
        (Vec::new(), readers.len()),
        |rows, k, v| {
            let row = crate::core::kv::timeline_key_at(Cf::Inbox, k, 8)?;
            let parent = keys::inbox_parent(v).ok_or_else(|| {
                KvError::corrupt(Cf::Inbox, k, "an inbox value of another layout")
            })?;
            rows.push((row, parent));
            Ok(rows.len() <= WARM_ROWS.min(HEAD_ROWS))
        },
    )?;
    Ok(readers
        .iter()
        .zip(rows)
        .map(|(&(user, u), mut rows)| {
            let all = rows.len() <= WARM_ROWS;
            rows.truncate(WARM_ROWS);
            (user, Head::valued(rows, all, u))
        })
        .collect())
}

/// The live followees of each of `readers` (ascending users), when they
/// are at most [`FOLLOWEES_MOST`].
fn followee_lists(
    kv: &impl Kv,
    readers: &[(UserId, UserVal)],
) -> Result<Vec<Option<Vec<UserId>>>, KvError> {
    let ids = readers.iter().map(|(u, _)| *u);
    let empty: Option<Vec<UserId>> = Some(Vec::new());
    per_user(
        kv,
        Cf::Followees,
        ids,
        (empty, readers.len()),
        |list, k, v| {
            let bad = || KvError::corrupt(Cf::Followees, k, "bad edge value");
            let live = EdgeVal::decode(v).ok_or_else(bad)?.live;
            let other = UserId(crate::core::kv::u64_at(Cf::Followees, k, k, 8)?);
            match list.as_mut() {
                Some(l) if live && l.len() < FOLLOWEES_MOST => l.push(other),
                Some(_) if live => *list = None,
                _ => {}
            }
            Ok(list.is_some())
        },
    )
}

/// A head of each of `readers` (sleepers, ascending users): no rows, the
/// record, and the live followees when they are at most
/// [`FOLLOWEES_MOST`].
fn read_sleepers(
    kv: &impl Kv,
    readers: &[(UserId, UserVal)],
) -> Result<Vec<(UserId, Head)>, KvError> {
    let lists = followee_lists(kv, readers)?;
    Ok(readers
        .iter()
        .zip(lists)
        .map(|(&(user, u), followees)| {
            let mut head = Head::new(Vec::new(), false, u);
            head.followees = followees;
            (user, head)
        })
        .collect())
}
