//! Generated blocks, mutes and hidden reposts, shared by the property tests.

use feedlog::core::event::{FilterChange, Ts};
use proptest::prelude::*;

/// A filter change made at `ts`: block, unblock, mute (ending up to 30 of
/// log time later, or not), unmute, hide or show reposts.
pub fn filter_change(ts: u64) -> impl Strategy<Value = FilterChange> {
    prop_oneof![
        3 => Just(FilterChange::Block),
        2 => Just(FilterChange::Unblock),
        1 => Just(FilterChange::Mute { until: None }),
        1 => Just(FilterChange::MuteKeepingNotifications { until: None }),
        2 => (ts + 1..ts + 30).prop_map(|u| FilterChange::Mute { until: Some(Ts(u)) }),
        2 => Just(FilterChange::Unmute),
        2 => Just(FilterChange::HideReposts),
        1 => Just(FilterChange::ShowReposts),
    ]
}
