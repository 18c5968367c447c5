//! The tour's read markers and notifications: a reader's unread count, a
//! `seen` that marks the home timeline read up to its newest entry, and
//! the count at 0; then an author's grouped notifications, read the same
//! way.

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
    let seen = seen_now(&reader, fan, Feed::Home, (top.ts, top.post_id, top.author))?;
    let json = append(dir, processor, &seen)?;
    let after = reader.markers(fan, Modes::default(), DEFAULT_MAX_UNREAD)?;
    println!("after the app shows them their newest entry ({json}, appended to the log):");
    println!("  {}", serde_json::to_string(&after)?);
    notifications_read(dir, processor, base, UserId(top.author))
}

/// Shows the first groups of `author`'s notifications and their unread
/// count, appends a `seen` of the notifications feed at the top group's
/// place (processed), and shows the count again.
fn notifications_read(
    dir: &DataDir,
    processor: &Processor,
    base: &str,
    author: UserId,
) -> Result<()> {
    let reader = Reader::over(processor.store_set().clone(), None);
    let page = reader.notifications(author, (3, None), true, None)?;
    let Some(top) = page.items.first().map(|g| g.place) else {
        return Ok(());
    };
    let unread = |r: &Reader| -> Result<String> {
        let m = r.markers(author, Modes::default(), DEFAULT_MAX_UNREAD)?;
        Ok(serde_json::to_string(&m.feeds[1])?)
    };
    println!(
        "
notifications: user {author}'s follows, likes, reposts and replies, grouped by the acts' own times          (the same groups on every device and page size), newest first:"
    );
    println!("  $ curl -s '{base}/v1/users/{author}/notifications?limit=3'");
    for g in &page.items {
        println!("  {}", serde_json::to_string(g)?);
    }
    println!("  their notifications marker: {}", unread(&reader)?);
    let seen = seen_now(
        &reader,
        author,
        Feed::Notifications,
        (top.ts, top.post_id, top.author),
    )?;
    let json = append(dir, processor, &seen)?;
    println!(
        "after the app shows the newest group ({json}): {}",
        unread(&reader)?
    );
    Ok(())
}

/// `user`'s `seen` of `feed` up to (ts, post id, author), just after the
/// newest event their partition applied.
fn seen_now(
    reader: &Reader,
    user: UserId,
    feed: Feed,
    (ts, post_id, author): (u64, u64, u64),
) -> Result<Event> {
    let now = feedlog::core::views::clock(&reader.store_of(user)?.snapshot())?;
    Ok(Event::Mark {
        user,
        ts: Ts(now.0 + 1),
        feed,
        read_up_to: Place {
            ts: Ts(ts),
            post_id: PostId(post_id),
            author: UserId(author),
        },
        force: false,
    })
}
