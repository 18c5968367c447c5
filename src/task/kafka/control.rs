//! The control loop: group membership, handover on rebalance, restarts of failed tasks.

use super::ownership::{checkpoint_all, lock, Owned, Ownership};
use super::{Cluster, ClusterError, IdleCheck};
use crate::core::metrics::StepStats;
use crate::core::Disposition;
use crate::core::Partition;
use crate::log::kafka::{GroupEvent, GroupMember, MemberSettings, MembersWriter, PendingCommit};
use crate::task::Shutdown;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// Partitions started side by side (see [`Cluster::start_assigned`]).
const START_TOGETHER: usize = 8;

/// How long a stopping processor waits for its brokers to acknowledge
/// its last records before it gives up on them, and then for the
/// coordinator to take its last commit.
const STOP_GRACE: Duration = Duration::from_secs(10);
use std::time::{Duration, Instant};

impl Cluster {
    /// Takes part in the group until `shutdown` is requested — or, with
    /// `idle`, until it says the whole group is idle twice in a row — then
    /// finishes every task's batch, commits, announces it has left, and
    /// leaves the group.
    ///
    /// A partition that fails to start or stops with an error is started
    /// again from its store after a pause when the error's
    /// [`Disposition`] is `Retry` (a broker away, a full disk). One whose
    /// answer is `Stop` (a corrupt store, a position the topic no longer
    /// holds, a setup the cluster refuses) ends the run the same orderly
    /// way, and the error is returned: the group hands this processor's
    /// partitions to the others, and the operator reads what to fix.
    ///
    /// With `--standbys`, a thread of its own keeps this processor's warm
    /// standbys alongside (see [`super::standby`]).
    pub fn run(
        &self,
        shutdown: &Shutdown,
        idle: Option<IdleCheck<'_>>,
    ) -> Result<StepStats, ClusterError> {
        let done = AtomicBool::new(false);
        self.standbys.forget_claims();
        std::thread::scope(|scope| {
            scope.spawn(|| self.keep_standbys(&done));
            // Also on a panic: the scope waits for the standbys' thread.
            let _done = SetOnDrop(&done);
            self.take_part(shutdown, idle)
        })
    }

    fn take_part(
        &self,
        shutdown: &Shutdown,
        idle: Option<IdleCheck<'_>>,
    ) -> Result<StepStats, ClusterError> {
        let before = self.progress.totals();
        let group = GroupMember::join(
            &self.cfg.kafka,
            &MemberSettings {
                member: self.cfg.member.clone(),
                instance_id: self.cfg.instance_id.clone(),
                cooperative: self.cfg.cooperative,
                session_timeout: self.cfg.session_timeout,
            },
        )?;
        let members = MembersWriter::new(&self.cfg.kafka, &self.cfg.member, self.cfg.api.clone())?;
        let mut announced = u64::MAX;
        let mut last_commit = Instant::now();
        let (mut last_seen, mut last_committed) = (Vec::new(), Vec::new());
        let mut last_idle_check = Instant::now();
        let mut idle_seen = 0;
        let mut retry_at: BTreeMap<Partition, Instant> = BTreeMap::new();
        let mut last_checkpoint = Instant::now();
        let mut checkpointing: Option<JoinHandle<()>> = None;
        let mut renewal = Renewal::default();
        let mut failure = None;
        while !shutdown.is_requested() {
            for r in group.poll(Duration::from_millis(100)) {
                self.handover(&group, &r);
            }
            if let Some(fatal) = group.fatal_error().or_else(|| self.log.fatal_error()) {
                return Err(self.give_up(fatal, &members, group));
            }
            self.renew_lease(&group, &mut renewal);
            failure = self
                .start_assigned(&group, &mut retry_at)
                .or_else(|| self.restart_failed(&mut retry_at));
            if let Some(e) = &failure {
                tracing::error!(error = %e, "stopping this processor: an operator must act");
                break;
            }
            // Every interval while positions move; and at once when they
            // stop moving (unchanged since the last turn of this loop, about
            // 100 ms), so the group's lag and `status` see the end of a burst
            // promptly instead of up to an interval later.
            let positions = Ownership::commit_positions(&lock(&self.shared.owned));
            let settled = positions == last_seen && positions != last_committed;
            if settled || last_commit.elapsed() >= self.cfg.commit_interval {
                last_commit = Instant::now();
                match group.commit_async(&positions) {
                    Ok(()) => last_committed.clone_from(&positions),
                    Err(e) => tracing::debug!(error = %e, "committing positions"),
                }
            }
            last_seen = positions;
            if let (Some(cps), Some(every)) = (&self.checkpoints, self.cfg.checkpoint_every) {
                let busy = checkpointing.as_ref().is_some_and(|t| !t.is_finished());
                if !busy && last_checkpoint.elapsed() >= every {
                    last_checkpoint = Instant::now();
                    checkpointing = self.checkpoint_serving(cps);
                }
            }
            let version = self.shared.version();
            if version != announced {
                match members.announce(&self.shared.serving_states(), &self.standbys.positions()) {
                    Ok(()) => announced = version,
                    Err(e) => tracing::warn!(error = %e, "announcing ownership"),
                }
            }
            if let Some(idle) = idle {
                if last_idle_check.elapsed() >= Duration::from_millis(500) {
                    last_idle_check = Instant::now();
                    match idle() {
                        Ok(true) => idle_seen += 1,
                        Ok(false) => idle_seen = 0,
                        Err(e) => tracing::warn!(error = %e, "checking for idleness"),
                    }
                    if idle_seen >= 2 {
                        break;
                    }
                }
            }
        }
        if let Some(t) = checkpointing.take() {
            let _ = t.join();
        }
        self.leave(group, &members);
        match failure {
            Some(e) => Err(e),
            None => Ok(self.progress.totals().since(&before)),
        }
    }

    /// Leaves the group in order, each step bounded when the brokers are
    /// out of reach: finishes every task's batch, commits their positions
    /// and checkpoints them, announces the departure, leaves the group.
    fn leave(&self, group: GroupMember, members: &MembersWriter) {
        tracing::info!("leaving: finishing the partitions' batches");
        let (stopped, interrupted) = self.stop_all_within(STOP_GRACE);
        if !stopped.is_empty() && !group.assignment_lost() {
            tracing::info!(
                partitions = stopped.len(),
                "leaving: committing their positions"
            );
            if let Err(e) = group.commit_within(&Ownership::commit_positions(&stopped), STOP_GRACE)
            {
                tracing::warn!(error = %e, "committing positions on the way out");
            }
            // An interrupted store holds records its brokers never took:
            // no handover checkpoint of it.
            if !interrupted {
                checkpoint_all(self.checkpoints.as_deref(), &stopped);
            }
        }
        tracing::info!("leaving: announcing the departure, then leaving the group");
        if let Err(e) = members.leave() {
            tracing::warn!(error = %e, "announcing departure");
        }
        group.leave();
        tracing::info!("left the group");
    }

    /// Stops every task, each after its batch; when the brokers have not
    /// acknowledged their records `grace` later (unreachable), gives up
    /// waiting for them: those records stay in the stores' outboxes and
    /// their inputs uncommitted, so nothing is lost (whoever owns the
    /// partitions next processes those inputs again). Whether it gave up.
    fn stop_all_within(&self, grace: Duration) -> (BTreeMap<Partition, Owned>, bool) {
        let (finished, waiting) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let watchdog = scope.spawn(move || {
                let late = waiting.recv_timeout(grace).is_err_and(|e| {
                    matches!(e, std::sync::mpsc::RecvTimeoutError::Timeout)
                });
                if late {
                    tracing::error!(
                        "the brokers have not acknowledged this processor's last records {grace:?} after \
                         the stop: not waiting any longer; they stay in the stores' outboxes and their \
                         inputs uncommitted, so whoever owns the partitions next processes them again"
                    );
                    self.stopping.request();
                }
                late
            });
            let stopped = self.shared.stop_all();
            drop(finished);
            (stopped, watchdog.join().unwrap_or(true))
        })
    }

    /// Handles one rebalance, then completes it: a revoke stops the tasks
    /// (each finishes its batch), commits their positions synchronously
    /// unless the assignment was lost, and checkpoints them; an assignment
    /// queues the partitions to start.
    pub(super) fn handover(&self, group: &GroupMember, r: &crate::log::kafka::Rebalance) {
        match &r.event {
            GroupEvent::Revoked { partitions, lost } => {
                if *lost {
                    // Another member may own them already: what their tasks
                    // still hold for the brokers answers inputs the new
                    // owner decides anew. Drop it rather than wait for it
                    // (it is in their stores' outboxes, re-shipped only if
                    // nobody else owned the partitions since).
                    tracing::warn!(
                        ?partitions,
                        "assignment lost (session expired): dropping unsent records, not committing; \
                         another member owns these partitions now"
                    );
                } else {
                    tracing::info!(?partitions, "revoked: finishing their batches");
                }
                let stopped = match lost {
                    true => self.shared.stop_lost(partitions, &|| self.log.purge()),
                    false => self.shared.stop(partitions),
                };
                if *lost {
                    // Nothing to commit: see above.
                } else if !stopped.is_empty() {
                    let positions = Ownership::commit_positions(&stopped);
                    if let Err(e) = group.commit_within(&positions, STOP_GRACE) {
                        tracing::warn!(error = %e, "committing the positions of revoked partitions");
                    }
                    checkpoint_all(self.checkpoints.as_deref(), &stopped);
                }
                drop(stopped);
                // Their stores closed: standbys may keep them from here on.
                self.standbys.release(partitions);
            }
            GroupEvent::Assigned(_) => {}
            GroupEvent::Failed(e) => tracing::error!(error = %e, "rebalance failed"),
        }
        if let Err(e) = group.complete(r) {
            tracing::warn!(error = %e, "completing a rebalance");
        }
        if let GroupEvent::Assigned(partitions) = &r.event {
            tracing::info!(?partitions, "assigned");
            self.standbys.reserve(partitions);
            lock(&self.shared.to_start).extend(partitions.iter().copied());
            self.shared.changes.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Starts what was assigned and is due, up to [`START_TOGETHER`] at
    /// once (a start that failed is retried after a pause); a failure that
    /// needs an operator is returned.
    pub(super) fn start_assigned(
        &self,
        group: &GroupMember,
        retry_at: &mut BTreeMap<Partition, Instant>,
    ) -> Option<ClusterError> {
        let due: Vec<Partition> = lock(&self.shared.to_start)
            .iter()
            .copied()
            .filter(|p| retry_at.get(p).is_none_or(|t| Instant::now() >= *t))
            .collect();
        // Partitions start side by side, a few at a time: each start waits
        // on the coordinator (the committed positions, the ownership
        // commit), on a standby's last step, or on opening its store. Each
        // stays in `to_start` (readers are told it is moving) until its
        // task is owned.
        let mut stop = None;
        for wave in due.chunks(START_TOGETHER) {
            if stop.is_some() {
                // The run ends: the rest are not started.
                break;
            }
            let started: Vec<_> = std::thread::scope(|s| {
                let starts: Vec<_> = (wave.iter())
                    .map(|&p| (p, s.spawn(move || self.start(group, p))))
                    .collect();
                // A panic goes on up, as it did when starts ran one by one.
                (starts.into_iter())
                    .map(|(p, h)| (p, h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))))
                    .collect()
            });
            for (p, r) in started {
                match r {
                    Ok(()) => {
                        retry_at.remove(&p);
                        lock(&self.shared.to_start).remove(&p);
                    }
                    Err(e) if e.disposition() == Disposition::Stop => {
                        tracing::error!(partition = p.0, error = %e, "could not start: this needs an operator");
                        stop.get_or_insert(ClusterError::Start {
                            partition: p,
                            source: Box::new(e),
                        });
                    }
                    Err(e) => {
                        // Expected while the group forms or rebalances (a
                        // commit refused, a broker hiccup).
                        tracing::warn!(partition = p.0, error = %e, "could not start yet; retrying in 1s");
                        retry_at.insert(p, Instant::now() + Duration::from_secs(1));
                    }
                }
            }
        }
        stop
    }

    /// Renews the lease (see [`Lease`]) with a synchronous commit of the
    /// owned partitions' positions every third of its span: the coordinator
    /// accepts a commit only from a member of the current generation, so the
    /// lease runs at most its span past the last time the coordinator
    /// counted this process in — whether this process was paused (a stop, a
    /// VM freeze) or cut off from the brokers (the commit waits or fails,
    /// and the lease runs out). The span is three quarters of the session
    /// timeout, so the lease ends before the coordinator can hand the
    /// partitions to another member.
    ///
    /// The commit runs on a thread of its own and the loop goes on: with
    /// the coordinator out of reach its answer can take a minute or more,
    /// and the loop must still see a stop, a rebalance or a failed task.
    /// One commit at a time; the next is sent once the last one answered.
    fn renew_lease(&self, group: &GroupMember, renewal: &mut Renewal) {
        let turn = Instant::now();
        let span = self.shared.lease.span();
        let gap = turn.duration_since(renewal.last_turn);
        renewal.last_turn = turn;
        if gap > span {
            tracing::warn!(
                gap_ms = gap.as_millis() as u64,
                "this processor did not run for longer than its lease: confirming its membership before it steps or serves again"
            );
        }
        if let Some((sent, pending)) = &renewal.pending {
            let Some(answer) = pending.answer() else {
                return;
            };
            let was_valid = self.shared.lease.valid();
            match answer {
                Ok(()) => {
                    // The lease counts from before the commit was sent.
                    self.shared.lease.confirm(*sent);
                    if !was_valid {
                        tracing::info!("membership confirmed by the group coordinator");
                    }
                }
                Err(e) => tracing::warn!(
                    error = %e,
                    "membership not confirmed by the group coordinator: partitions stop stepping and \
                     serving when the lease runs out"
                ),
            }
            renewal.pending = None;
        }
        if turn.duration_since(renewal.last_sent) < span / 3 {
            return;
        }
        let positions = Ownership::commit_positions(&lock(&self.shared.owned));
        if positions.is_empty() {
            // Nothing owned, nothing to lease (and an empty commit would
            // not reach the coordinator).
            return;
        }
        renewal.last_sent = turn;
        match group.start_commit(&positions) {
            Ok(pending) => renewal.pending = Some((turn, pending)),
            Err(e) => tracing::warn!(error = %e, "renewing the lease"),
        }
    }

    /// A fatal Kafka error: stops every task without committing (the group
    /// has moved on without this process), says so and leaves.
    fn give_up(&self, reason: String, members: &MembersWriter, group: GroupMember) -> ClusterError {
        tracing::error!(error = %reason, "Kafka fatal error: giving up every partition");
        let all: Vec<Partition> = lock(&self.shared.owned).keys().copied().collect();
        self.shared.stop_lost(&all, &|| self.log.purge());
        if let Err(e) = members.leave() {
            tracing::warn!(error = %e, "announcing departure");
        }
        group.leave();
        ClusterError::Fatal(reason)
    }

    /// Restarts tasks that failed with an error that passes (a broker
    /// error, say) from their stores; returns the first failure that needs
    /// an operator instead.
    pub(super) fn restart_failed(
        &self,
        retry_at: &mut BTreeMap<Partition, Instant>,
    ) -> Option<ClusterError> {
        let mut ended = Vec::new();
        for (&p, o) in lock(&self.shared.owned).iter_mut() {
            if o.thread.as_ref().is_some_and(|t| t.is_finished()) {
                ended.push((p, o.thread.take()));
            }
        }
        if ended.is_empty() {
            return None;
        }
        let mut failed = Vec::new();
        let mut needs_operator = None;
        for (p, thread) in ended {
            failed.push(p);
            match thread.map(JoinHandle::join) {
                Some(Ok(Err(source))) if source.disposition() == Disposition::Stop => {
                    needs_operator.get_or_insert(ClusterError::Task {
                        partition: p,
                        source,
                    });
                }
                Some(Ok(Err(e))) => tracing::warn!(partition = p.0, error = %e, "task failed"),
                Some(Err(_)) => tracing::error!(partition = p.0, "task panicked"),
                Some(Ok(Ok(()))) | None => {}
            }
        }
        if needs_operator.is_some() {
            return needs_operator;
        }
        tracing::warn!(partitions = ?failed, "tasks stopped; restarting them from their stores");
        self.shared.stop(&failed);
        let mut to_start = lock(&self.shared.to_start);
        for p in failed {
            to_start.insert(p);
            retry_at.insert(p, Instant::now() + Duration::from_secs(1));
        }
        None
    }
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The control loop's renewals of the lease (see [`Cluster::renew_lease`]).
struct Renewal {
    /// When the loop last turned (a long gap: this process was paused).
    last_turn: Instant,
    /// When the last renewal was sent.
    last_sent: Instant,
    /// The renewal under way, and when it was sent.
    pending: Option<(Instant, PendingCommit)>,
}

impl Default for Renewal {
    fn default() -> Renewal {
        Renewal {
            last_turn: Instant::now(),
            last_sent: Instant::now(),
            pending: None,
        }
    }
}
