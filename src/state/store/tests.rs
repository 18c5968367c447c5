//! Tests of the store: layout checks and raw key scans.

use super::*;
use crate::core::event::UserId;
use crate::core::keys::TimelineKey;
use upgrade::LAYOUT_3_INDEX;

/// Why a read-only open of the store in `path` is refused.
fn read_only_refusal(path: &Path) -> String {
    let cache = BlockCache::new(1 << 20);
    match Store::open_read_only(path, Partition(0), 1, &cache, Kept::NONE) {
        Ok(_) => panic!("a read-only open of {} was not refused", path.display()),
        Err(e) => e.to_string(),
    }
}

/// A store of one partition in `path`, without fsyncs.
fn scratch(path: &Path) -> Store {
    let opts = StoreOptions {
        sync: false,
        ..StoreOptions::default()
    };
    Store::open(path, Partition(0), 1, &BlockCache::new(1 << 20), &opts).unwrap()
}

// Proves a store written with another layout version, or for another partition, is refused, not misread.
#[test]
fn other_layouts_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = BlockCache::new(1 << 20);
    let opts = StoreOptions {
        sync: false,
        ..StoreOptions::default()
    };
    {
        let s = Store::open(tmp.path(), Partition(1), 4, &cache, &opts).unwrap();
        s.commit(&Writes::default(), |b| {
            b.put(Cf::Meta, meta::LAYOUT, &(LAYOUT_VERSION + 1).to_be_bytes())
        })
        .unwrap();
    }
    let err = Store::open(tmp.path(), Partition(1), 4, &cache, &opts)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains(&format!(
            "written with state layout {}, this build reads layout {LAYOUT_VERSION}",
            LAYOUT_VERSION + 1
        )),
        "{err}"
    );
    {
        let s = Store::open(&tmp.path().join("b"), Partition(1), 4, &cache, &opts).unwrap();
        drop(s);
    }
    let err = Store::open(&tmp.path().join("b"), Partition(2), 4, &cache, &opts)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("holds partition 1 of 4, expected 2 of 4"),
        "{err}"
    );
}

// Proves `for_each_key` sees exactly the scan's keys in `[lo, hi)`, skips deleted ones, and stops when told.
#[test]
fn for_each_key_matches_the_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let s = scratch(tmp.path());
    let mut txn = crate::core::kv::Txn::new(&s);
    for k in 0u8..40 {
        txn.put(Cf::Inbox, vec![1, k], Vec::new());
    }
    s.commit(&txn.into_writes(), |_| {}).unwrap();
    let mut txn = crate::core::kv::Txn::new(&s);
    for k in (0u8..40).step_by(3) {
        txn.delete(Cf::Inbox, vec![1, k]);
    }
    s.commit(&txn.into_writes(), |_| {}).unwrap();
    for (lo, hi) in [
        (&[1u8, 5][..], Some(&[1u8, 30][..])),
        (&[0][..], None),
        (&[1, 9][..], Some(&[1, 9][..])),
    ] {
        let want: Vec<Vec<u8>> = s.scan(Cf::Inbox, lo, hi).map(|r| r.unwrap().0).collect();
        let mut got = Vec::new();
        s.for_each_key(Cf::Inbox, lo, hi, |k| {
            got.push(k.to_vec());
            true
        })
        .unwrap();
        assert_eq!(got, want);
        let mut first = Vec::new();
        s.for_each_key(Cf::Inbox, lo, hi, |k| {
            first.push(k.to_vec());
            first.len() < 3
        })
        .unwrap();
        assert_eq!(first, want.iter().take(3).cloned().collect::<Vec<_>>());
    }
}

// Proves a commit drops the kept pages of the users it writes before its write lands, and a raw write to the inbox or users column family drops them all.
#[test]
fn commits_drop_kept_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let s = scratch(tmp.path());
    let page = bytes::Bytes::from_static(b"{}");
    let keep = |user: u64| {
        assert!(s
            .pages()
            .keep(s.pages().epoch(), (user, 20, None), page.clone()))
    };
    let kept = |user: u64| s.pages().get(user, 20, None).is_some();
    keep(5);
    keep(6);
    let mut txn = crate::core::kv::Txn::new(&s);
    txn.put(Cf::Inbox, [5u64.to_be_bytes(), [0; 8]].concat(), Vec::new());
    s.commit(&txn.into_writes(), |_| {}).unwrap();
    assert!(!kept(5), "its inbox was written");
    assert!(kept(6), "not written");
    s.commit(&Writes::default(), |b| b.put(Cf::Meta, b"x", b"1"))
        .unwrap();
    assert!(kept(6), "a raw write elsewhere");
    s.commit(&Writes::default(), |b| {
        b.put(Cf::Users, &7u64.to_be_bytes(), b"")
    })
    .unwrap();
    assert!(
        !kept(6),
        "a raw write to the users column family drops every page"
    );
}

/// Writes a layout-3 store of partition 0 of 1 at `path` with `layout`
/// recorded, holding layout 3's author index of two entries by author 9
/// and one by author 11 in user 5's inbox (and `inbox_authors` too when
/// `with_markers_cf`: a crash between the upgrade's batch and its drop).
fn layout_3_store(path: &Path, layout: u32, with_markers_cf: bool) {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    let names = Cf::ALL
        .iter()
        .filter(|&&cf| with_markers_cf || cf != Cf::InboxAuthors)
        .map(|cf| cf.name())
        .chain([LAYOUT_3_INDEX]);
    let db = DB::open_cf(&opts, path, names).unwrap();
    let put = |cf: &str, k: &[u8], v: &[u8]| db.put_cf(db.cf_handle(cf).unwrap(), k, v).unwrap();
    put("meta", meta::LAYOUT, &layout.to_be_bytes());
    put("meta", meta::PARTITION, &0u32.to_be_bytes());
    put("meta", meta::PARTITIONS, &1u32.to_be_bytes());
    for (author, ts) in [(9u64, 3u64), (9, 2), (11, 1)] {
        put(LAYOUT_3_INDEX, &keys::key([5, author, !ts, !ts]), &[]);
    }
}

// Proves a layout-3 store is refused by read-only opens with the way out, and upgraded in place by a writable open: a marker per (user, author) its index held, the index dropped, the current layout recorded.
#[test]
fn a_layout_3_store_is_upgraded_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = BlockCache::new(1 << 20);
    layout_3_store(tmp.path(), 3, false);
    let err = Store::open_read_only(tmp.path(), Partition(0), 1, &cache, Kept::NONE)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("run the processor (`feedlog run`) on it once"),
        "{err}"
    );
    let s = scratch(tmp.path());
    let markers: Vec<Vec<u8>> = s
        .scan(Cf::InboxAuthors, &[], None)
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(
        markers,
        vec![
            keys::inbox_author(UserId(5), UserId(9)),
            keys::inbox_author(UserId(5), UserId(11))
        ]
    );
    drop(s);
    let cfs = DB::list_cf(&Options::default(), tmp.path()).unwrap();
    assert!(!cfs.iter().any(|c| c == LAYOUT_3_INDEX), "{cfs:?}");
    let s = Store::open_read_only(tmp.path(), Partition(0), 1, &cache, Kept::NONE).unwrap();
    assert_eq!(
        s.get(Cf::Meta, meta::LAYOUT).unwrap(),
        Some(LAYOUT_VERSION.to_be_bytes().to_vec())
    );
}

// Proves a store left with the current layout recorded and layout 3's index still present (a crash mid-upgrade) opens, and the index is dropped.
#[test]
fn an_upgrade_cut_before_the_drop_finishes_at_the_next_open() {
    let tmp = tempfile::tempdir().unwrap();
    layout_3_store(tmp.path(), LAYOUT_VERSION, true);
    let cache = BlockCache::new(1 << 20);
    drop(Store::open_read_only(tmp.path(), Partition(0), 1, &cache, Kept::NONE).unwrap());
    drop(scratch(tmp.path()));
    let cfs = DB::list_cf(&Options::default(), tmp.path()).unwrap();
    assert!(!cfs.iter().any(|c| c == LAYOUT_3_INDEX), "{cfs:?}");
}

// Proves layout-4 (no sources), layout-5 (sources without values) and layout-6 (no engagement) stores are refused by read-only opens with the way out, and upgraded by a writable open: a source row valued its original's time for each inbox entry that is a live repost of a reader without a horizon, none for a plain post or a reader with one, the directory's entry by repost with the repost's time, each reposter's count of live reposts by original, the current layout recorded.
#[test]
fn layout_4_5_and_6_stores_get_their_sources_times_and_flags() {
    for layout in [4u32, 5, 6] {
        older_store_upgrades(layout);
    }
}

fn older_store_upgrades(layout: u32) {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    let names = Cf::ALL
        .iter()
        .filter(|&&cf| layout > 4 || cf != Cf::InboxReposts)
        .filter(|&&cf| cf != Cf::Engagement && cf != Cf::ReplyDir)
        .map(|cf| cf.name());
    let (reader, root) = (UserId(5), (UserId(9), crate::core::event::PostId(1)));
    let repost = keys::TimelineKey {
        ts: crate::core::event::Ts(7),
        post_id: crate::core::event::PostId(3),
        author: UserId(11),
    };
    let plain = keys::TimelineKey {
        ts: crate::core::event::Ts(6),
        post_id: crate::core::event::PostId(2),
        author: UserId(11),
    };
    let by_repost = keys::dir_by_repost(repost.author, repost.post_id);
    {
        let db = DB::open_cf(&opts, tmp.path(), names).unwrap();
        let put =
            |cf: Cf, k: &[u8], v: &[u8]| db.put_cf(db.cf_handle(cf.name()).unwrap(), k, v).unwrap();
        put(Cf::Meta, meta::LAYOUT, &layout.to_be_bytes());
        put(Cf::Meta, meta::PARTITION, &0u32.to_be_bytes());
        put(Cf::Meta, meta::PARTITIONS, &1u32.to_be_bytes());
        put(Cf::Inbox, &keys::inbox(reader, &repost), &[]);
        put(Cf::Inbox, &keys::inbox(reader, &plain), &[]);
        // User 6 has a horizon: their inbox is not their whole timeline,
        // and they keep no sources.
        put(Cf::Inbox, &keys::inbox(UserId(6), &repost), &[]);
        let cut = keys::UserVal {
            horizon: Some(plain),
            ..keys::UserVal::default()
        };
        put(Cf::Users, &keys::key([6]), &cut.encode());
        // The original (9, 1) was posted at 4; the repost at 7.
        match layout {
            6 => put(Cf::RepostDir, &by_repost, &keys::key([9, 1, 4, 7])),
            _ => put(Cf::RepostDir, &by_repost, &keys::key([9, 1, 4])),
        }
        let live = keys::RepostVal {
            ts: repost.ts,
            of: root,
            root: Some((root, crate::core::event::Ts(4))),
            state: keys::RepostState::Live,
            deleted: false,
            by: None,
        };
        let post_key = keys::key([repost.author.0, repost.post_id.0]);
        put(Cf::Posts, &post_key, &keys::PostVal::Repost(live).encode());
        let by_original = keys::dir_by_original(root, repost.author, repost.post_id);
        put(Cf::RepostDir, &by_original, &keys::key([7, 4]));
        let source = keys::inbox_repost(reader, root, &repost);
        match layout {
            5 => put(Cf::InboxReposts, &source, &[]),
            6 => put(Cf::InboxReposts, &source, &keys::key([4])),
            _ => {}
        }
    }
    let cache = BlockCache::new(1 << 20);
    let err = Store::open_read_only(tmp.path(), Partition(0), 1, &cache, Kept::NONE)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(&format!("state layout {layout}")), "{err}");
    assert!(err.contains("`feedlog run`) on it once"), "{err}");
    let s = scratch(tmp.path());
    let rows: Vec<(Vec<u8>, Vec<u8>)> = s
        .scan(Cf::InboxReposts, &[], None)
        .map(|r| r.unwrap())
        .collect();
    let row = keys::inbox_repost(reader, root, &repost);
    assert_eq!(rows, vec![(row, keys::key([4]))], "layout {layout}");
    assert_eq!(
        s.get(Cf::RepostDir, &by_repost).unwrap(),
        Some(keys::key([9, 1, 4, 7]))
    );
    let flags: Vec<(Vec<u8>, Vec<u8>)> = s
        .scan(Cf::Engagement, &[], None)
        .map(|r| r.unwrap())
        .collect();
    let reposted = keys::reposted(repost.author, root);
    assert_eq!(flags, vec![(reposted, keys::key([1]))], "layout {layout}");
    assert_eq!(
        s.get(Cf::Meta, meta::LAYOUT).unwrap(),
        Some(LAYOUT_VERSION.to_be_bytes().to_vec())
    );
}

// Proves a layout-7 or -9 store is refused by a read-only open, upgraded by a writable one when it keeps no reply (layout 7) and no post with mentions, and refused with the way out (a rebuild) when it does: one store cannot hold the other partitions' replies nor the registrations of the users its posts mention.
#[test]
fn older_stores_upgrade_unless_they_hold_what_other_partitions_need() {
    // (layout, a post replies, a post mentions): whether it upgrades.
    let cases = [
        (7, false, false, true),
        (7, true, false, false),
        (7, false, true, false),
        (9, true, false, true),
        (9, false, true, false),
    ];
    for (layout, reply, mention, upgrades) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let names = Cf::ALL
            .iter()
            .filter(|&&cf| layout > 7 || cf != Cf::ReplyDir);
        {
            let db = DB::open_cf(&opts, tmp.path(), names.map(|cf| cf.name())).unwrap();
            let put = |cf: Cf, k: &[u8], v: &[u8]| {
                db.put_cf(db.cf_handle(cf.name()).unwrap(), k, v).unwrap()
            };
            put(Cf::Meta, meta::LAYOUT, &(layout as u32).to_be_bytes());
            put(Cf::Meta, meta::PARTITION, &0u32.to_be_bytes());
            put(Cf::Meta, meta::PARTITIONS, &1u32.to_be_bytes());
            let post = |p| (UserId(3), crate::core::event::PostId(p));
            if reply {
                let mut v = vec![1];
                v.extend(keys::key([4, 2]));
                put(Cf::Engagement, &keys::addressed(post(2)), &v);
            }
            if mention {
                let v = [0, 0, 0, 0, 0, 0, 0, 0, 9];
                put(Cf::Engagement, &keys::addressed(post(1)), &v);
            }
        }
        let case = format!("layout {layout}, reply {reply}, mention {mention}");
        let err = read_only_refusal(tmp.path());
        assert!(
            err.contains(&format!("state layout {layout}")),
            "{case}: {err}"
        );
        let cache = BlockCache::new(1 << 20);
        let opts = StoreOptions {
            sync: false,
            ..StoreOptions::default()
        };
        let opened = Store::open(tmp.path(), Partition(0), 1, &cache, &opts);
        match (upgrades, opened) {
            (true, Ok(s)) => assert_eq!(
                s.get(Cf::Meta, meta::LAYOUT).unwrap(),
                Some(LAYOUT_VERSION.to_be_bytes().to_vec()),
                "{case}"
            ),
            (false, Err(e)) => assert!(e.to_string().contains("`feedlog rebuild`"), "{case}: {e}"),
            (_, other) => panic!("{case}: {:?}", other.map(|_| ())),
        }
    }
}

// Proves a layout-8 store is refused by a read-only open and upgraded by a writable one, which values each inbox row of a reply with its parent author from the store's own directory, and no other row.
#[test]
fn a_layout_8_store_upgrades_its_inbox_rows_of_replies() {
    let tmp = tempfile::tempdir().unwrap();
    let (reader, post) = (UserId(1), |ts, p| TimelineKey {
        ts: crate::core::event::Ts(ts),
        post_id: crate::core::event::PostId(p),
        author: UserId(3),
    });
    let (reply, plain) = (post(5, 2), post(6, 1));
    {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let db = DB::open_cf(&opts, tmp.path(), Cf::ALL.iter().map(|cf| cf.name())).unwrap();
        let put =
            |cf: Cf, k: &[u8], v: &[u8]| db.put_cf(db.cf_handle(cf.name()).unwrap(), k, v).unwrap();
        put(Cf::Meta, meta::LAYOUT, &8u32.to_be_bytes());
        put(Cf::Meta, meta::PARTITION, &0u32.to_be_bytes());
        put(Cf::Meta, meta::PARTITIONS, &1u32.to_be_bytes());
        put(
            Cf::ReplyDir,
            &keys::reply_dir((reply.author, reply.post_id)),
            &keys::key([4]),
        );
        put(Cf::Inbox, &keys::inbox(reader, &reply), &[]);
        put(Cf::Inbox, &keys::inbox(reader, &plain), &[]);
    }
    let err = read_only_refusal(tmp.path());
    assert!(err.contains("state layout 8"), "{err}");
    let s = scratch(tmp.path());
    let value = |k: &TimelineKey| s.get(Cf::Inbox, &keys::inbox(reader, k)).unwrap();
    assert_eq!(
        value(&reply),
        Some(keys::key([4])),
        "the reply's row names its parent"
    );
    assert_eq!(
        value(&plain),
        Some(Vec::new()),
        "a plain post's row stays empty"
    );
    assert_eq!(
        s.get(Cf::Meta, meta::LAYOUT).unwrap(),
        Some(LAYOUT_VERSION.to_be_bytes().to_vec())
    );
}

/// The store seen through the `Kv` trait's default range reads only: one
/// scan per range, the reference the store's one-iterator read must equal.
struct OneScanPerRange<'a>(&'a Store);

impl Kv for OneScanPerRange<'_> {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.0.get(cf, key)
    }

    fn scan<'b>(&'b self, cf: Cf, lo: &[u8], hi: Option<&[u8]>) -> Scan<'b> {
        self.0.scan(cf, lo, hi)
    }
}

// Proves the one-iterator range read (store and snapshot) gives what a scan per range gives: ranges the iterator has passed, empty ones, ranges cut short by the caller, deleted keys, a last prefix with no end.
#[test]
fn ranges_through_one_iterator_match_a_scan_per_range() {
    let tmp = tempfile::tempdir().unwrap();
    let s = scratch(tmp.path());
    let mut txn = crate::core::kv::Txn::new(&s);
    for a in (0u8..30).chain([0xff]) {
        if a % 4 == 1 {
            continue; // prefixes with no keys
        }
        for b in 0u8..8 {
            txn.put(Cf::Outbox, vec![a, b], vec![a ^ b]);
        }
    }
    s.commit(&txn.into_writes(), |_| {}).unwrap();
    let mut txn = crate::core::kv::Txn::new(&s);
    for a in (0u8..30).step_by(3) {
        txn.delete(Cf::Outbox, vec![a, 0]);
        txn.delete(Cf::Outbox, vec![a, 5]);
    }
    s.commit(&txn.into_writes(), |_| {}).unwrap();
    let ranges = |prefixes: &[u8], from: u8| -> Vec<(Vec<u8>, Vec<u8>)> {
        prefixes.iter().map(|&a| (vec![a, from], vec![a])).collect()
    };
    // Every range read whole, and every odd one cut after three entries.
    let read = |kv: &dyn Kv, ranges: &[(Vec<u8>, Vec<u8>)], cut: bool| {
        let mut got: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
        let mut taken = vec![0; ranges.len()];
        kv.for_each_in_ranges(Cf::Outbox, ranges, &mut |i, k, v| {
            got.push((i, k.to_vec(), v.to_vec()));
            taken[i] += 1;
            !(cut && i % 2 == 1 && taken[i] == 3)
        })
        .unwrap();
        got
    };
    let cases = [
        ranges(&[0, 1, 2, 3, 7, 8, 9, 20, 29], 0),
        ranges(&[1, 5, 9, 13], 0),
        ranges(&[2, 3, 4, 6, 0xff], 3),
        ranges(&[0xff], 0),
        ranges(&[40, 50], 0),
        Vec::new(),
    ];
    let snap = s.snapshot();
    for r in &cases {
        for cut in [false, true] {
            let want = read(&OneScanPerRange(&s), r, cut);
            assert_eq!(read(&s, r, cut), want, "store, {r:?}, cut {cut}");
            assert_eq!(read(&snap, r, cut), want, "snapshot, {r:?}, cut {cut}");
        }
    }
    assert!(!read(&s, &cases[0], false).is_empty());
}

// Proves a store marks the reposts' directory and the filters as held when a commit writes them (written or raw) or one is there at the open, and not otherwise.
#[test]
fn held_column_families_are_marked_by_commits_and_at_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    let entry = keys::dir_by_repost(UserId(9), crate::core::event::PostId(4));
    let one = |cf: Cf, key: Vec<u8>| {
        let mem = crate::core::kv::MemKv::default();
        let mut t = crate::core::kv::Txn::new(&mem);
        t.put(cf, key, Vec::new());
        t.into_writes()
    };
    {
        let s = scratch(tmp.path());
        assert!(!s.may_hold(Cf::RepostDir) && !s.may_hold(Cf::Filters));
        assert!(s.may_hold(Cf::Inbox), "a column family not marked");
        s.commit(&one(Cf::Inbox, keys::key([1, 2, 3])), |_| {})
            .unwrap();
        assert!(!s.may_hold(Cf::RepostDir), "a commit without the directory");
        s.commit(&one(Cf::RepostDir, entry.clone()), |_| {})
            .unwrap();
        assert!(s.may_hold(Cf::RepostDir) && !s.may_hold(Cf::Filters));
    }
    assert!(scratch(tmp.path()).may_hold(Cf::RepostDir), "reopened");
    let cache = BlockCache::new(1 << 20);
    let ro = Store::open_read_only(tmp.path(), Partition(0), 1, &cache, Kept::NONE).unwrap();
    assert!(
        ro.may_hold(Cf::RepostDir) && !ro.may_hold(Cf::Filters),
        "read-only"
    );
    let raw = tempfile::tempdir().unwrap();
    let s = scratch(raw.path());
    s.commit(&Writes::default(), |b| {
        b.put(Cf::Filters, &keys::key([1, 2]), &[])
    })
    .unwrap();
    assert!(s.may_hold(Cf::Filters), "a raw write");
}
