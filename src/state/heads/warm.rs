//! Heads read in the background after a store opens, so that a reader's
//! first page after a start is read from memory too.
//!
//! First every pushed reader's newest rows and record, and every sleeping
//! reader's record and followees (at most
//! [`super::followees::FOLLOWEES_MOST`]: the pull path reads their page);
//! then, in partitions
//! with reposts and while the budget is under three quarters spent, each
//! whole reader's sources (those with at most
//! [`super::view::SOURCES_MOST`]), so that an aggregated first page reads
//! them from memory as well.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::followees::FOLLOWEES_MOST;
use super::view::{Source, Sources, SOURCES_MOST};
use super::{Head, HEAD_ROWS};
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
                match warm_sources(store, &stopped) {
                    Ok(n) => with_sources += n,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading readers' sources after the open stopped")
                    }
                }
            }
            let secs = start.elapsed().as_secs_f64();
            tracing::info!(readers = kept, sleepers, with_sources, secs, "inbox heads read");
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

/// Adds each whole reader's sources (at most [`SOURCES_MOST`]) to the
/// head read for them, chunk by chunk, until every reader of the store is
/// done, `stop` is set, or the budget is spent (without a sweep: the
/// heads read after the open are all unread yet); how many got theirs.
fn warm_sources(store: &Weak<Store>, stop: &AtomicBool) -> Result<usize, KvError> {
    by_chunks(
        store,
        stop,
        // Without a live repost, no reader has a source; past three
        // quarters of the budget, the rest is left to pages' own reads
        // (a page that finds the budget spent sweeps the heads not read).
        (pushed, |store: &Store| {
            !store.may_hold(Cf::RepostDir) || store.heads().filled() > 0.75
        }),
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

/// The key ranges of each of `users`' rows (a column family's keys that
/// start with the user), for one positioned read of them all.
fn of_users(users: impl Iterator<Item = UserId>) -> Vec<(Vec<u8>, Vec<u8>)> {
    users
        .map(|u| (keys::key([u.0]), keys::key([u.0])))
        .collect()
}

/// The sources of each of `users` (ascending) who has at most
/// [`SOURCES_MOST`], through one iterator.
fn read_sources(kv: &impl Kv, users: &[UserId]) -> Result<Vec<(UserId, Sources)>, KvError> {
    let ranges = of_users(users.iter().copied());
    let mut lists: Vec<Option<Vec<Source>>> = vec![Some(Vec::new()); users.len()];
    kv.for_each_in_ranges(Cf::InboxReposts, &ranges, &mut |i, k, v| {
        let list = &mut lists[i];
        match (list.as_mut(), Sources::source(k, v)) {
            (Some(l), Some(s)) if l.len() < SOURCES_MOST => l.push(s),
            // Too many, or not of this layout: none held.
            _ => *list = None,
        }
        list.is_some()
    })?;
    Ok(users
        .iter()
        .zip(lists)
        .filter_map(|(&user, list)| Some((user, Sources(list?))))
        .collect())
}

/// The first [`WARM_ROWS`] inbox rows of each of `readers` (ascending
/// users), as heads.
fn read_heads(kv: &impl Kv, readers: &[(UserId, UserVal)]) -> Result<Vec<(UserId, Head)>, KvError> {
    let ranges = of_users(readers.iter().map(|(u, _)| *u));
    let mut rows: Vec<Vec<TimelineKey>> = vec![Vec::new(); readers.len()];
    let mut bad = None;
    kv.for_each_in_ranges(Cf::Inbox, &ranges, &mut |i, k, _| {
        match crate::core::kv::timeline_key_at(Cf::Inbox, k, 8) {
            Ok(row) => rows[i].push(row),
            Err(e) => bad = Some(e),
        }
        bad.is_none() && rows[i].len() <= WARM_ROWS.min(HEAD_ROWS)
    })?;
    if let Some(e) = bad {
        return Err(e);
    }
    Ok(readers
        .iter()
        .zip(rows)
        .map(|(&(user, u), mut rows)| {
            let all = rows.len() <= WARM_ROWS;
            rows.truncate(WARM_ROWS);
            (user, Head::new(rows, all, u))
        })
        .collect())
}

/// A head of each of `readers` (sleepers, ascending users): no rows, the
/// record, and the live followees when they are at most
/// [`FOLLOWEES_MOST`].
fn read_sleepers(
    kv: &impl Kv,
    readers: &[(UserId, UserVal)],
) -> Result<Vec<(UserId, Head)>, KvError> {
    let ranges = of_users(readers.iter().map(|(u, _)| *u));
    let mut lists: Vec<Option<Vec<UserId>>> = vec![Some(Vec::new()); readers.len()];
    let mut bad = None;
    kv.for_each_in_ranges(Cf::Followees, &ranges, &mut |i, k, v| {
        let list = &mut lists[i];
        let edge =
            EdgeVal::decode(v).ok_or_else(|| KvError::corrupt(Cf::Followees, k, "bad edge value"));
        match (edge, crate::core::kv::u64_at(Cf::Followees, k, k, 8)) {
            (Ok(e), Ok(other)) => match list.as_mut() {
                Some(l) if e.live && l.len() < FOLLOWEES_MOST => l.push(UserId(other)),
                Some(_) if e.live => *list = None,
                _ => {}
            },
            (Err(e), _) | (_, Err(e)) => bad = Some(e),
        }
        bad.is_none() && list.is_some()
    })?;
    if let Some(e) = bad {
        return Err(e);
    }
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
