//! Heads read in the background after a store opens, so that a reader's
//! first page after a start is read from memory too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::{Head, HEAD_ROWS};
use crate::core::event::UserId;
use crate::core::keys::{self, TimelineKey, UserVal};
use crate::core::kv::{Cf, Kv, KvError};
use crate::state::Store;

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
            for store in stores {
                match warm(&store, &stopped) {
                    Ok(n) => kept += n,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading inbox heads after the open stopped")
                    }
                }
            }
            let secs = start.elapsed().as_secs_f64();
            tracing::info!(readers = kept, secs, "inbox heads read");
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

/// Reads `store`'s heads chunk by chunk while it lives and `stop` is not
/// set; the heads kept.
fn warm(store: &Weak<Store>, stop: &AtomicBool) -> Result<usize, KvError> {
    let (mut from, mut kept) = (Vec::new(), 0);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(kept);
        }
        let Some(store) = store.upgrade() else {
            return Ok(kept);
        };
        let Some(epoch) = store.heads().epoch() else {
            drop(store);
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        };
        let snap = store.snapshot();
        let (readers, next) = readers(&snap, &from, store.may_hold(Cf::Filters))?;
        let Some(next) = next else {
            return Ok(kept);
        };
        let heads = read_heads(&snap, &readers)?;
        drop(snap);
        let mut full = false;
        for (user, head) in heads {
            match store.heads().keep(epoch, user.0, head, false) {
                true => kept += 1,
                // Refused: a commit landed (read the chunk again) or the
                // budget is spent (stop).
                false => {
                    full = store.heads().epoch() == Some(epoch);
                    break;
                }
            }
        }
        if full {
            return Ok(kept);
        }
        match store.heads().epoch() == Some(epoch) {
            true => from = next,
            // A commit landed while the chunk was read: again, a little later.
            false => {
                drop(store);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

/// Readers with their records, and the key to go on from.
type Chunk = (Vec<(UserId, UserVal)>, Option<Vec<u8>>);

/// Up to [`CHUNK`] users from key `from` on whose head can be kept, with
/// their records, and the key to go on from (`None`: no user left).
fn readers(kv: &impl Kv, from: &[u8], filters: bool) -> Result<Chunk, KvError> {
    let (mut readers, mut last) = (Vec::new(), None);
    for r in kv.scan(Cf::Users, from, None).take(CHUNK) {
        let (k, v) = r?;
        let user = UserId(crate::core::kv::u64_at(Cf::Users, &k, &k, 0)?);
        let u = UserVal::decode(&v)
            .ok_or_else(|| KvError::corrupt(Cf::Users, &k, "the user record does not decode"))?;
        let mut next = k;
        next.push(0);
        last = Some(next);
        let pushed = u.marks == 0 && u.inbox_len > 0 && !u.asleep && u.refills == 0;
        if pushed && !(filters && crate::core::filter::any(kv, user)?) {
            readers.push((user, u));
        }
    }
    Ok((readers, last))
}

/// The first [`WARM_ROWS`] inbox rows of each of `readers` (ascending
/// users), as heads.
fn read_heads(kv: &impl Kv, readers: &[(UserId, UserVal)]) -> Result<Vec<(UserId, Head)>, KvError> {
    let ranges: Vec<(Vec<u8>, Vec<u8>)> = readers
        .iter()
        .map(|(u, _)| (keys::key([u.0]), keys::key([u.0])))
        .collect();
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
