//! Tests of the store: layout checks and raw key scans.

use super::*;

/// A store of one partition in `path`, without fsyncs.
fn scratch(path: &Path) -> Store {
    let opts = StoreOptions {
        sync: false,
        ..StoreOptions::default()
    };
    Store::open(path, 0, 1, &BlockCache::new(1 << 20), &opts).unwrap()
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
        let s = Store::open(tmp.path(), 1, 4, &cache, &opts).unwrap();
        s.commit(&Writes::default(), |b| {
            b.put(Cf::Meta, meta::LAYOUT, &(LAYOUT_VERSION + 1).to_be_bytes())
        })
        .unwrap();
    }
    let err = Store::open(tmp.path(), 1, 4, &cache, &opts)
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
        let s = Store::open(&tmp.path().join("b"), 1, 4, &cache, &opts).unwrap();
        drop(s);
    }
    let err = Store::open(&tmp.path().join("b"), 2, 4, &cache, &opts)
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
