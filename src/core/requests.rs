//! What a partition's owner asks for once it has caught up with what
//! earlier owners answered: the pull threshold it is configured with, and
//! every refill its state awaits.
//!
//! A quiet replay (inputs an earlier owner applied and answered) sends
//! nothing, so what it would have sent must be asked again: a reader it
//! woke awaits refills nobody asked for (another interleaving of the same
//! inputs), and a threshold another owner asked for may have come into
//! force. An owner replaying for the next owner, or a standby, never asks:
//! the owner that takes its state over does.

use crate::active::refill_requests;
use crate::effect::{Applied, Ctx, Out};
use crate::kv::{Kv, KvError};
use crate::pulled::threshold_request;
use crate::views;

/// What an owner has asked for since it opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    /// The threshold in force when last looked at.
    threshold_seen: Option<u64>,
    /// Whether the configured threshold was asked for (or found in force)
    /// since the threshold in force last changed.
    threshold_asked: bool,
    /// Whether the refills the state awaits were asked for again.
    refills_asked: bool,
}

impl Requests {
    /// A quiet input was applied (what it sent is dropped): a reader it
    /// woke awaits refills that must be asked for again.
    pub fn after_quiet(&mut self, applied: &Applied) {
        if applied.asked_refills {
            self.refills_asked = false;
        }
    }

    /// The requests to send now, from an owner caught up with the quiet
    /// replay, whose batch commits (`kv`: the batch's state): the
    /// configured threshold when the one in force changed since it last
    /// asked, and every awaited refill once after a quiet wake.
    pub fn once_caught_up(
        &mut self,
        kv: &(impl Kv + ?Sized),
        ctx: &Ctx,
    ) -> Result<Vec<Out>, KvError> {
        let mut out = Vec::new();
        if ctx.pull_threshold.is_some() {
            let in_force = views::pull_threshold(kv)?;
            if self.threshold_seen != Some(in_force) {
                self.threshold_seen = Some(in_force);
                self.threshold_asked = false;
            }
            if !self.threshold_asked {
                out.extend(threshold_request(kv, ctx)?);
                self.threshold_asked = true;
            }
        }
        if !self.refills_asked {
            out.extend(refill_requests(kv, ctx)?);
            self.refills_asked = true;
        }
        Ok(out)
    }
}
