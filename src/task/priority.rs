//! The scheduling priority of partition threads.
//!
//! A processor's partition threads (one per partition, each as busy as its
//! backlog lets it) outnumber the threads that answer reads. Left at the
//! same priority, a backlog takes the cores in proportion to thread count:
//! measured with `feedlog-bench mixed` on two cores, eight partition
//! threads took 85 % of the CPU and readers waited (p50 3.8 ms). Each
//! partition thread therefore lowers its own priority by
//! [`DEFAULT_WRITER_NICE`] (Linux nice values; `run --writer-nice`), so
//! that reads on the same machine, in the same process or another one
//! (`serve`), are scheduled first and the backlog takes what is left. With
//! nothing else to run, the backlog still gets every core.

/// How much a partition thread lowers its priority by default (nice
/// levels: each one is about 10 % less CPU against a thread at the
/// default level when both want it).
pub const DEFAULT_WRITER_NICE: i32 = 10;

/// The lowest priority a thread can have (the highest nice value).
const NICE_MAX: i32 = 19;

/// Lowers the calling thread's priority by `by` nice levels (`0`: leaves
/// it); on Linux the nice value is the thread's own. A refusal is logged,
/// not fatal: the thread runs on at its priority.
pub fn lower_priority(by: i32) {
    if by <= 0 {
        return;
    }
    let lowered = rustix::process::getpriority_process(None)
        .and_then(|now| rustix::process::setpriority_process(None, (now + by).min(NICE_MAX)));
    if let Err(e) = lowered {
        tracing::warn!(by, error = %e, "could not lower a partition thread's priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a thread that lowers its priority gets the nice value asked for, capped at 19, and leaves other threads' alone.
    #[test]
    fn a_thread_lowers_only_its_own_priority() {
        let nice = || rustix::process::getpriority_process(None).unwrap();
        let before = nice();
        let (lowered, capped) = std::thread::spawn(move || {
            lower_priority(3);
            let lowered = nice();
            lower_priority(NICE_MAX);
            (lowered, nice())
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + 3).min(NICE_MAX));
        assert_eq!(capped, NICE_MAX);
        assert_eq!(nice(), before, "the calling thread's priority did not move");
    }
}
