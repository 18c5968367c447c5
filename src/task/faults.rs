//! Injected crashes, for the crash tests: a step stops where a [`Faults`]
//! says, as if the process had been killed there.

/// Where an injected crash stops a step (for crash tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// The batch is built, nothing written.
    BeforeCommit,
    /// The batch is committed, nothing shipped.
    AfterCommit,
    /// Some destinations shipped, others not.
    MidShip,
}

/// Decides whether to crash at a point; production uses [`NoFaults`].
pub trait Faults {
    /// `true` stops the step at `point` with [`crate::task::TaskError::Crashed`].
    fn crash_at(&mut self, point: CrashPoint) -> bool;
}

/// Never crashes: what production runs with.
pub struct NoFaults;

impl Faults for NoFaults {
    fn crash_at(&mut self, _: CrashPoint) -> bool {
        false
    }
}
