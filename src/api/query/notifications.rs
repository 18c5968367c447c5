//! A user's notifications: follows of them, likes, reposts and replies of their posts, mentions of them, grouped by `core::notification`'s rule and filtered by their blocks and mutes.

use super::cursor::{decode_cursor, encode_cursor, CursorView, NOT_ISSUED};
use super::explain::EventAt;
use super::{check_limit, check_user, cursor_u64, Page, PlaceItem, QueryError, Reader, RepostOf};
use crate::core::event::{Feed, Place, PostId, Ts, UserId};
use crate::core::filter::ReadFilter;
use crate::core::keys::PostRef;
use crate::core::marker;
use crate::core::notification::items::{event_of, items_of};
use crate::core::notification::{self, Group, GroupKey, Item};
use crate::core::views;
use crate::state::Snapshot;
use serde::Serialize;

/// How many of a group's actors an answer names (the newest).
pub const GROUP_ACTORS: usize = 10;

/// What a notification is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A follow of the user.
    Follow,
    /// A like of the user's post.
    Like,
    /// A repost of the user's post.
    Repost,
    /// A reply to the user's post.
    Reply,
    /// A post that mentions the user.
    Mention,
}

impl Kind {
    /// Every kind, as `types=` names them.
    pub const ALL: [Kind; 5] = [
        Kind::Follow,
        Kind::Like,
        Kind::Repost,
        Kind::Reply,
        Kind::Mention,
    ];

    /// Its name in answers and in `types=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Follow => "follow",
            Kind::Like => "like",
            Kind::Repost => "repost",
            Kind::Reply => "reply",
            Kind::Mention => "mention",
        }
    }

    /// The kind `s` names.
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    fn of(key: GroupKey) -> Kind {
        match key {
            GroupKey::Follows => Kind::Follow,
            GroupKey::Likes(_) => Kind::Like,
            GroupKey::Reposts(_) => Kind::Repost,
            GroupKey::Reply(_) => Kind::Reply,
            GroupKey::Mention(_) => Kind::Mention,
        }
    }
}

/// One notification group (with `grouped=0`, one act).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct NotificationGroup {
    /// `follow`, `like`, `repost`, `reply` or `mention`.
    pub kind: &'static str,
    /// The post it is about: the user's post liked, reposted or replied
    /// to; a mention: the post that mentions the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post: Option<RepostOf>,
    /// A reply: the reply itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<RepostOf>,
    /// Who acted, newest first: at most 10.
    pub actors: Vec<u64>,
    /// How many acts the group holds.
    pub count: u64,
    /// The newest act's time, ms since the epoch (the group's place).
    pub newest_ts: u64,
    /// The oldest act's time.
    pub oldest_ts: u64,
    /// Where the group sits for read markers: `newest_ts`, and the post
    /// it is about (a reply: the reply; a mention: the post that
    /// mentions; follows: 0 and 0). A `seen` of
    /// the notifications feed names it as `read_up_to`.
    pub place: PlaceItem,
    /// With `explain=1`: every act of the group, newest first, with the
    /// event that made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<Vec<Act>>,
}

/// One act of a notification group, as `explain=1` answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Act {
    /// Who acted.
    pub actor: u64,
    /// The act's time, ms since the epoch.
    pub ts: u64,
    /// The event that made it: the follow that started the edge (absent
    /// for a follow revived after a block), the like that decided the
    /// like, the repost, or the post that replies or mentions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<EventAt>,
}

/// A group's place among the user's groups (newest first):
/// [`Group::place`].
type Order = (Ts, GroupKey, (Ts, UserId));

impl Reader {
    /// A page of `user`'s notifications, newest group first: `grouped`,
    /// the groups of `core::notification`'s rule; else one entry per act
    /// (newest first by time, then as groups are). `types`, when given,
    /// keeps only those kinds (before grouping). The acts of users the
    /// reader blocks, is blocked by or mutes (in force now) are left out
    /// before grouping, as on the home timeline.
    pub fn notifications(
        &self,
        user: UserId,
        page: (usize, Option<&str>),
        grouped: bool,
        types: Option<&[Kind]>,
    ) -> Result<Page<NotificationGroup>, QueryError> {
        self.notifications_with(user, page, (grouped, types), false)
    }

    /// [`Reader::notifications`], with each group's acts and the events
    /// that made them (`why`) when `explain`.
    pub fn notifications_with(
        &self,
        user: UserId,
        (limit, cursor): (usize, Option<&str>),
        (grouped, types): (bool, Option<&[Kind]>),
        explain: bool,
    ) -> Result<Page<NotificationGroup>, QueryError> {
        check_user(user)?;
        check_limit(limit)?;
        let view = match grouped {
            true => CursorView::Notifications,
            false => CursorView::NotificationItems,
        };
        let after = match cursor {
            Some(c) => Some(place_of(&decode_cursor(c, view, user, 41)?)?),
            None => None,
        };
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let groups = groups_of(&snap, user, grouped, types)?;
        self.page_of(&snap, user, &groups, (view, after, limit), explain)
    }

    /// The first page of `limit` as [`Reader::notifications`] gives it
    /// (`grouped`, `types`) and the notifications feed's unread count as
    /// [`Reader::unread`] gives it (at most `max`), from one snapshot:
    /// what a notifications stream reads at each wake. The default page
    /// (grouped, every kind) and the count share one grouping of the acts.
    pub fn notifications_and_unread(
        &self,
        user: UserId,
        limit: usize,
        (grouped, types): (bool, Option<&[Kind]>),
        max: u64,
    ) -> Result<(Page<NotificationGroup>, (u64, bool)), QueryError> {
        check_user(user)?;
        check_limit(limit)?;
        let max = max.clamp(1, super::MAX_UNREAD);
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let marker = marker::get(&snap, user, Feed::Notifications)?.map(|m| m.read_up_to);
        let all = groups_of(&snap, user, true, None)?;
        let above = all
            .0
            .iter()
            .filter(|g| place(g) > marker.unwrap_or_default())
            .count() as u64;
        let view = match grouped {
            true => CursorView::Notifications,
            false => CursorView::NotificationItems,
        };
        let page = match (grouped, types) {
            (true, None) => self.page_of(&snap, user, &all, (view, None, limit), false)?,
            _ => {
                let groups = groups_of(&snap, user, grouped, types)?;
                self.page_of(&snap, user, &groups, (view, None, limit), false)?
            }
        };
        Ok((page, (above.min(max), above > max)))
    }

    /// The page of `limit` of `groups` (newest first, with each reply's
    /// parent) below `after` (from the top without one), its cursors of
    /// `view`.
    fn page_of(
        &self,
        snap: &Snapshot,
        user: UserId,
        (groups, parents): &(Vec<Group>, Parents),
        (view, after, limit): (CursorView, Option<Order>, usize),
        explain: bool,
    ) -> Result<Page<NotificationGroup>, QueryError> {
        let mut page: Vec<&Group> = groups
            .iter()
            .filter(|g| after.is_none_or(|a| g.place() < a))
            .take(limit + 1)
            .collect();
        let next_cursor = (page.len() > limit).then(|| {
            page.truncate(limit);
            encode_cursor(view, user, &cursor_of(page[limit - 1].place()))
        });
        Ok(Page {
            items: self.answers(snap, user, &page, (parents, explain))?,
            next_cursor,
            prev_cursor: None,
        })
    }

    /// The `limit` groups (`grouped` and `types` as
    /// [`Reader::notifications`] takes them) just above `after` — the
    /// user's notifications marker (`"marker"`; the bottom without one), a
    /// catch-up page's `prev_cursor` or a page's cursor — **oldest
    /// first**: catch-up with no gap. Above the marker is as the unread
    /// count has it (a group's place above the marker's); above a cursor,
    /// after its group in the page order. `prev_cursor` (the newest
    /// group's, or `after`'s own place when there is none yet) continues
    /// up as `after=`; `next_cursor` (the oldest group's) reads down as
    /// `cursor=`.
    pub fn notifications_catch_up(
        &self,
        user: UserId,
        (limit, after): (usize, &str),
        (grouped, types): (bool, Option<&[Kind]>),
        explain: bool,
    ) -> Result<Page<NotificationGroup>, QueryError> {
        check_user(user)?;
        check_limit(limit)?;
        let (view, up) = match grouped {
            true => (CursorView::Notifications, CursorView::NotificationsAfter),
            false => (
                CursorView::NotificationItems,
                CursorView::NotificationItemsAfter,
            ),
        };
        let store = self.store_of(user)?;
        let snap = store.snapshot();
        let (floor, from) = match after {
            "marker" => {
                let m = marker::get(&snap, user, Feed::Notifications)?;
                (m.map(|m| m.read_up_to).unwrap_or_default(), None)
            }
            c => match decode_cursor(c, up, user, 41 + 24) {
                Ok(b) => (floor_of(&b[41..])?, Some(place_of(&b[..41])?)),
                // A page's cursor: the groups after it, from the bottom.
                Err(up_error) => match decode_cursor(c, view, user, 41) {
                    Ok(b) => (Place::default(), Some(place_of(&b)?)),
                    // Each says why the cursor is not its kind: the one
                    // whose length fits says it best.
                    Err(QueryError::BadCursor(m)) if m == NOT_ISSUED => return Err(up_error),
                    Err(e) => return Err(e),
                },
            },
        };
        let (groups, parents) = groups_of(&snap, user, grouped, types)?;
        let page: Vec<&Group> = groups
            .iter()
            .rev()
            .filter(|g| place(g) > floor && from.is_none_or(|f| g.place() > f))
            .take(limit)
            .collect();
        let top = page.last().map(|g| g.place()).or(from).unwrap_or(BOTTOM);
        let mut up_cursor = cursor_of(top);
        up_cursor.extend_from_slice(&crate::core::keys::key([
            floor.ts.0,
            floor.post_id.0,
            floor.author.0,
        ]));
        Ok(Page {
            items: self.answers(&snap, user, &page, (&parents, explain))?,
            next_cursor: page
                .first()
                .map(|g| encode_cursor(view, user, &cursor_of(g.place()))),
            prev_cursor: Some(encode_cursor(up, user, &up_cursor)),
        })
    }

    /// `page`'s groups as answered, with their acts when `explain`.
    fn answers(
        &self,
        snap: &Snapshot,
        user: UserId,
        page: &[&Group],
        (parents, explain): (&Parents, bool),
    ) -> Result<Vec<NotificationGroup>, QueryError> {
        let mut items = Vec::with_capacity(page.len());
        for g in page {
            let mut a = answer(g, parents);
            if explain {
                a.why = Some(self.acts_of(snap, user, g, parents)?);
            }
            items.push(a);
        }
        Ok(items)
    }

    /// How many of `user`'s notification groups (all kinds) are placed
    /// above `marker` (without one: above the lowest place, 0s, as for
    /// home), at most `max`; and whether there are more.
    pub fn notifications_unread(
        &self,
        user: UserId,
        marker: Option<Place>,
        max: u64,
    ) -> Result<(u64, bool), QueryError> {
        let store = self.store_of(user)?;
        let (groups, _) = groups_of(&store.snapshot(), user, true, None)?;
        let above = groups
            .iter()
            .filter(|g| place(g) > marker.unwrap_or_default())
            .count() as u64;
        Ok((above.min(max), above > max))
    }

    /// A group's acts, newest first, each with the event that made it.
    fn acts_of(
        &self,
        snap: &Snapshot,
        user: UserId,
        g: &Group,
        parents: &Parents,
    ) -> Result<Vec<Act>, QueryError> {
        let parent = parents.get(&key_post(g.key)).copied();
        let mut acts = Vec::with_capacity(g.items.len());
        for &(ts, actor) in g.items.iter().rev() {
            let item = Item {
                key: g.key,
                ts,
                actor,
            };
            let at = event_of(snap, user, (&item, parent), self.partitions)?;
            acts.push(Act {
                actor: actor.0,
                ts: ts.0,
                event: at.map(|a| EventAt {
                    partition: a.partition,
                    offset: a.offset,
                }),
            });
        }
        Ok(acts)
    }
}

/// `user`'s groups (`grouped`; else one per act) of `types` in `snap`,
/// newest first, with each reply's parent.
fn groups_of(
    snap: &Snapshot,
    user: UserId,
    grouped: bool,
    types: Option<&[Kind]>,
) -> Result<(Vec<Group>, Parents), QueryError> {
    let all = items_of(snap, user)?;
    let filter = ReadFilter::of(snap, user, views::clock(snap)?)?;
    let kept = all.items.into_iter().filter(|i| {
        let kind = Kind::of(i.key);
        !filter.hides_notifications_of(i.actor) && types.is_none_or(|t| t.contains(&kind))
    });
    let groups = match grouped {
        true => notification::group(kept),
        false => {
            let mut one: Vec<Group> = kept
                .map(|i| Group {
                    key: i.key,
                    items: vec![(i.ts, i.actor)],
                })
                .collect();
            one.sort_unstable_by_key(|g| std::cmp::Reverse(g.place()));
            one.dedup();
            one
        }
    };
    Ok((groups, all.parents))
}

/// The post a group's key names (follows: none, 0 and 0).
fn key_post(key: GroupKey) -> PostRef {
    match key {
        GroupKey::Follows => (UserId(0), PostId(0)),
        GroupKey::Likes(p) | GroupKey::Reposts(p) | GroupKey::Reply(p) | GroupKey::Mention(p) => p,
    }
}

/// Each reply's parent.
type Parents = std::collections::HashMap<PostRef, PostRef>;

/// A group's place for read markers: its newest time and the post it is
/// about (a reply: the reply itself; a mention: the post that mentions;
/// follows: none, 0 and 0).
fn place(g: &Group) -> Place {
    let (author, post_id) = key_post(g.key);
    Place {
        ts: g.newest(),
        post_id,
        author,
    }
}

/// A group as answered.
fn answer(g: &Group, parents: &Parents) -> NotificationGroup {
    let (post, reply) = match g.key {
        GroupKey::Follows => (None, None),
        GroupKey::Likes(p) | GroupKey::Reposts(p) => (Some(RepostOf::of(p)), None),
        GroupKey::Reply(r) => (
            parents.get(&r).copied().map(RepostOf::of),
            Some(RepostOf::of(r)),
        ),
        GroupKey::Mention(p) => (Some(RepostOf::of(p)), None),
    };
    NotificationGroup {
        kind: Kind::of(g.key).as_str(),
        post,
        reply,
        actors: g
            .items
            .iter()
            .rev()
            .take(GROUP_ACTORS)
            .map(|i| i.1 .0)
            .collect(),
        count: g.items.len() as u64,
        newest_ts: g.newest().0,
        oldest_ts: g.oldest().0,
        place: place(g).into(),
        why: None,
    }
}

/// A place as a cursor's payload: newest ts, kind, post (author, id),
/// oldest ts, oldest actor (41 bytes).
fn cursor_of((ts, key, (first_ts, first)): Order) -> Vec<u8> {
    let (tag, (a, p)) = match key {
        GroupKey::Follows => (0u8, (UserId(0), PostId(0))),
        GroupKey::Likes(r) => (1, r),
        GroupKey::Reposts(r) => (2, r),
        GroupKey::Reply(r) => (3, r),
        GroupKey::Mention(r) => (4, r),
    };
    let mut b = ts.0.to_be_bytes().to_vec();
    b.push(tag);
    b.extend_from_slice(&crate::core::keys::key([a.0, p.0, first_ts.0, first.0]));
    b
}

/// Below every group: where a catch-up from the bottom starts.
const BOTTOM: Order = (Ts(0), GroupKey::Follows, (Ts(0), UserId(0)));

/// The floor (a marker's place) a catch-up cursor's last 24 bytes name.
fn floor_of(b: &[u8]) -> Result<Place, QueryError> {
    let at = |i| cursor_u64(b, i);
    Ok(Place {
        ts: Ts(at(0)?),
        post_id: PostId(at(8)?),
        author: UserId(at(16)?),
    })
}

/// The place a cursor's payload names.
fn place_of(b: &[u8]) -> Result<Order, QueryError> {
    let at = |i| cursor_u64(b, i);
    let r = (UserId(at(9)?), PostId(at(17)?));
    let key = match b[8] {
        0 => GroupKey::Follows,
        1 => GroupKey::Likes(r),
        2 => GroupKey::Reposts(r),
        3 => GroupKey::Reply(r),
        4 => GroupKey::Mention(r),
        _ => {
            return Err(QueryError::BadCursor(
                "not a cursor this server issued".into(),
            ))
        }
    };
    Ok((Ts(at(0)?), key, (Ts(at(25)?), UserId(at(33)?))))
}
