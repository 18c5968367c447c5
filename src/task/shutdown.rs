//! A request to stop, shared by everything that runs: processors, the API
//! server, progress printers. Loops check it between batches, and waits
//! end early when it is requested.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A cancellation token: cheap to clone, requested once, never reset.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    requested: Arc<AtomicBool>,
    /// A linked token's parent: its request is this token's too.
    parent: Option<Arc<Shutdown>>,
    /// Shared along a chain of linked tokens, so a request anywhere in it
    /// wakes every wait.
    wake: Arc<(Mutex<()>, Condvar)>,
}

impl Shutdown {
    /// A token nobody has requested yet.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Asks everything holding a clone to stop (after its current batch).
    pub fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        let _guard = self.wake.0.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.1.notify_all();
    }

    /// A token of its own that is also requested when this one is (a
    /// run inside a longer one: stopping the run leaves this token alone).
    pub fn linked(&self) -> Shutdown {
        Shutdown {
            requested: Arc::default(),
            parent: Some(Arc::new(self.clone())),
            wake: self.wake.clone(),
        }
    }

    /// Whether a stop was requested (of this token or of the one it is
    /// linked to).
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
            || self.parent.as_ref().is_some_and(|p| p.is_requested())
    }

    /// Waits up to `d`, or until a stop is requested; returns whether it was.
    pub fn wait(&self, d: Duration) -> bool {
        let guard = self.wake.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self
            .wake
            .1
            .wait_timeout_while(guard, d, |_| !self.is_requested());
        self.is_requested()
    }

    /// The flag itself, for code that only polls (the Kafka log's waits
    /// for acknowledgements). A linked token's flag is its own only: the
    /// parent's request does not set it.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.requested.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    // Proves a wait ends as soon as a stop is requested from another thread, and a requested token stays requested.
    #[test]
    fn a_wait_ends_on_request() {
        let s = Shutdown::new();
        assert!(!s.wait(Duration::from_millis(1)));
        let t = s.clone();
        let start = Instant::now();
        let h = std::thread::spawn(move || t.wait(Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(20));
        s.request();
        assert!(h.join().unwrap());
        assert!(start.elapsed() < Duration::from_secs(30));
        assert!(s.is_requested() && s.wait(Duration::from_secs(60)));
    }

    // Proves a linked token is requested and woken by its parent's request, and that requesting it leaves the parent alone.
    #[test]
    fn a_linked_token_follows_its_parent_only() {
        let parent = Shutdown::new();
        let run = parent.linked();
        run.request();
        assert!(run.is_requested() && !parent.is_requested());
        let run = parent.linked();
        let waiting = run.clone();
        let start = Instant::now();
        let h = std::thread::spawn(move || waiting.wait(Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(20));
        parent.request();
        assert!(h.join().unwrap());
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the wait was not woken"
        );
        assert!(run.is_requested() && run.linked().is_requested());
    }
}
