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

    /// Whether a stop was requested.
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
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
    /// for acknowledgements).
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
}
