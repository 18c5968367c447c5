//! The tour's read markers: a reader's unread count, a `seen` that marks
//! the home timeline read up to its newest entry, and the count at 0.

use super::append;
use anyhow::Result;
use feedlog::api::query::{Modes, Reader, DEFAULT_MAX_UNREAD};
use feedlog::core::event::{Feed, Place, PostId, Ts};
use feedlog::state::datadir::DataDir;
use feedlog::task::embedded::Processor;
use feedlog::{Event, UserId};

/// Shows `fan`'s markers, appends a `seen` of their home timeline up to
/// its newest entry (processed), and shows the markers again.
pub(super) fn unread_falls(
    dir: &DataDir,
    processor: &Processor,
    base: &str,
    fan: UserId,
) -> Result<()> {
    let reader = Reader::over(processor.store_set().clone(), None);
    let Some(top) = reader.timeline(fan, 1, None)?.items.first().cloned() else {
        return Ok(());
    };
    let before = reader.markers(fan, Modes::default(), DEFAULT_MAX_UNREAD)?;
    println!(
        "\nread markers: user {fan}'s unread count is the number of entries of the home timeline, \
         as it reads now, above the place their last `seen` of it named (all of them when none did):"
    );
    println!("  $ curl -s '{base}/v1/users/{fan}/markers'");
    println!("  {}", serde_json::to_string(&before)?);
    let now = feedlog::core::views::clock(&reader.store_of(fan)?.snapshot())?;
    let seen = Event::Mark {
        user: fan,
        ts: Ts(now.0 + 1),
        feed: Feed::Home,
        read_up_to: Place {
            ts: Ts(top.ts),
            post_id: PostId(top.post_id),
            author: UserId(top.author),
        },
        force: false,
    };
    let json = append(dir, processor, &seen)?;
    let after = reader.markers(fan, Modes::default(), DEFAULT_MAX_UNREAD)?;
    println!("after the app shows them their newest entry ({json}, appended to the log):");
    println!("  {}", serde_json::to_string(&after)?);
    Ok(())
}
