//! Opaque page cursors: versioned, bound to a view and a user, checksummed.

use super::QueryError;
use crate::core::event::UserId;
use base64::Engine;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum CursorView {
    /// The timeline, newest appearance first (the default).
    Timeline = 1,
    Posts = 2,
    Followers = 3,
    Followees = 4,
    /// The timeline with posts at their oldest appearance.
    TimelineFirst = 5,
    /// The timeline without reposts.
    TimelineNone = 6,
    /// The users a user mutes.
    Mutes = 7,
    /// The users a user blocks.
    Blocks = 8,
    /// A post's likers (bound to the original's author).
    Likers = 9,
    /// A post's replies (bound to the original's author).
    Replies = 10,
    /// A user's notifications, grouped.
    Notifications = 11,
    /// A user's notifications, one per act.
    NotificationItems = 12,
    /// Catch-up of a user's notifications, grouped: a group's place and
    /// the floor (the marker) it started from.
    NotificationsAfter = 13,
    /// Catch-up of a user's notifications, one per act.
    NotificationItemsAfter = 14,
}

impl CursorView {
    /// The timeline's cursors in `mode`: a cursor of one mode is refused
    /// by another (entries sit elsewhere).
    pub(super) fn timeline(mode: crate::core::repost::Mode) -> CursorView {
        use crate::core::repost::Mode;
        match mode {
            Mode::Newest => CursorView::Timeline,
            Mode::First => CursorView::TimelineFirst,
            Mode::None => CursorView::TimelineNone,
        }
    }
}

const CURSOR_VERSION: u8 = 1;

pub(super) fn encode_cursor(view: CursorView, user: UserId, payload: &[u8]) -> String {
    let mut b = vec![CURSOR_VERSION, view as u8];
    b.extend_from_slice(&user.0.to_be_bytes());
    b.extend_from_slice(payload);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

pub(super) fn decode_cursor(
    cursor: &str,
    view: CursorView,
    user: UserId,
    len: usize,
) -> Result<Vec<u8>, QueryError> {
    let bad = |why: &str| QueryError::BadCursor(why.to_string());
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| bad(NOT_ISSUED))?;
    if b.len() != 2 + 8 + len + 4 {
        return Err(bad(NOT_ISSUED));
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32fast::hash(body).to_be_bytes() != crc {
        return Err(bad("checksum mismatch (garbled cursor)"));
    }
    if body[0] != CURSOR_VERSION {
        return Err(bad("cursor from another version"));
    }
    if body[1] != view as u8 {
        return Err(bad("cursor belongs to another view"));
    }
    if body[2..10] != user.0.to_be_bytes() {
        return Err(bad("cursor belongs to another user"));
    }
    Ok(body[10..].to_vec())
}

/// Why a cursor is refused that is not of the length (or the base64) of
/// the view's cursors.
pub(super) const NOT_ISSUED: &str = "not a cursor this server issued";

/// The big-endian u64 at `at` of a decoded cursor's bytes.
pub(super) fn cursor_u64(b: &[u8], at: usize) -> Result<u64, QueryError> {
    crate::core::keys::be(b, at).ok_or_else(|| QueryError::BadCursor("too short".into()))
}
