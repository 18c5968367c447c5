//! The one step loop both runners use: step a partition's task until told
//! to stop, back off while there is nothing to read, and hand every step's
//! figures to the runner.

use super::faults::{Faults, NoFaults};
use super::partition::PartitionTask;
use super::TaskError;
use crate::core::metrics::StepStats;
use std::time::Duration;

/// The shortest and longest waits between steps that read nothing.
const BACKOFF: (Duration, Duration) = (Duration::from_micros(200), Duration::from_millis(20));

/// What a runner does around each step of one partition.
pub trait Hooks {
    /// Whether to stop before the next step.
    fn stop(&self) -> bool;
    /// Called before each step.
    fn before(&mut self) {}
    /// Whether to step now; `false` waits (as when there is nothing to
    /// read) and asks again.
    fn may_step(&mut self) -> bool {
        true
    }
    /// Faults to inject into each step (tests); `None`: none.
    fn faults(&mut self) -> Option<&mut dyn Faults> {
        None
    }
    /// Called after each step with what it did (`stats.input() == 0`: it
    /// found nothing); an error stops the loop.
    fn after(&mut self, task: &mut PartitionTask, stats: &StepStats) -> Result<(), TaskError>;
}

/// Steps `task` until `hooks` says stop or a step fails.
pub fn drive(task: &mut PartitionTask, hooks: &mut dyn Hooks) -> Result<(), TaskError> {
    let mut backoff = BACKOFF.0;
    while !hooks.stop() {
        if !hooks.may_step() {
            std::thread::sleep(BACKOFF.1);
            continue;
        }
        hooks.before();
        let stats = match hooks.faults() {
            Some(faults) => task.step(faults)?,
            None => task.step(&mut NoFaults)?,
        };
        hooks.after(task, &stats)?;
        if stats.input() == 0 {
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(BACKOFF.1);
        } else {
            backoff = BACKOFF.0;
        }
    }
    Ok(())
}
