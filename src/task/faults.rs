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
    /// The batch is committed and has records to ship, none shipped yet
    /// (a step with nothing to ship does not get here).
    BeforeShip,
}

/// Decides whether to crash at a point; production uses [`NoFaults`].
pub trait Faults {
    /// `true` stops the step at `point` with [`crate::task::TaskError::Crashed`].
    fn crash_at(&mut self, point: CrashPoint) -> bool;
}

/// Stops the whole process with SIGSTOP in the `n`-th step of any of its
/// tasks that has records to ship, after its commit and before it ships
/// them ([`CrashPoint::BeforeShip`]); once sent
/// SIGCONT, the step waits two seconds (a thread descheduled there) and
/// ships. The test of an owner that pauses past its session timeout and
/// comes back: by the time its records go out, the process knows it lost
/// its partitions and dropped what its producer held, so they reach their
/// receivers after its successor's (`FEEDLOG_TEST_STOP_AFTER_COMMIT=n`).
/// It never crashes a step.
#[derive(Clone)]
pub struct StopAfterCommit {
    left: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl StopAfterCommit {
    /// Stops after the `n`-th commit from now (shared by clones).
    pub fn new(n: u64) -> StopAfterCommit {
        StopAfterCommit {
            left: std::sync::Arc::new(n.into()),
        }
    }
}

impl Faults for StopAfterCommit {
    fn crash_at(&mut self, point: CrashPoint) -> bool {
        use std::sync::atomic::Ordering;
        if point == CrashPoint::BeforeShip
            && self
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                == Ok(1)
        {
            tracing::warn!(
                "test hook: stopping this process (SIGSTOP) after a commit, before shipping"
            );
            let pid = std::process::id().to_string();
            let _ = std::process::Command::new("kill")
                .args(["-STOP", &pid])
                .status();
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        false
    }
}

/// Never crashes: what production runs with.
pub struct NoFaults;

impl Faults for NoFaults {
    fn crash_at(&mut self, _: CrashPoint) -> bool {
        false
    }
}
