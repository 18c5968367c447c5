//! A processor's running figures ([`Figures`]), added to as batches commit,
//! and the listeners woken after each commit.

use crate::core::metrics::{Figures, StepStats};
use std::sync::{Mutex, MutexGuard};

/// A function called after each committed step.
type Listener = Box<dyn Fn() + Send + Sync>;

/// Progress figures, updated as batches commit.
#[derive(Default)]
pub struct Progress {
    figures: Mutex<Figures>,
    /// Called after each non-empty step ([`Progress::on_commit`]).
    listeners: Mutex<Vec<Listener>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("totals", &self.totals())
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// Adds one non-empty step, then wakes the listeners.
    pub fn record(&self, stats: &StepStats) {
        self.lock().record(stats);
        for f in self
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            f();
        }
    }

    /// Calls `f` after every non-empty step from now on, on the thread that
    /// committed it: readers that wait for new state (the timeline stream)
    /// are woken so instead of polling. `f` must be quick.
    pub fn on_commit(&self, f: impl Fn() + Send + Sync + 'static) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
    }

    /// The totals so far.
    pub fn totals(&self) -> StepStats {
        self.lock().totals
    }

    /// Every figure so far.
    pub fn figures(&self) -> Figures {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Figures> {
        // A panic while adding figures leaves them usable.
        self.figures.lock().unwrap_or_else(|e| e.into_inner())
    }
}
