use super::*;

// Proves a data directory keeps its partition count and refuses another layout.
#[test]
fn identity_is_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let d = DataDir::create_or_open(tmp.path(), Some(3)).unwrap();
    assert_eq!(d.partitions(), 3);
    assert_eq!(
        DataDir::create_or_open(tmp.path(), None)
            .unwrap()
            .partitions(),
        3
    );
    let err = DataDir::create_or_open(tmp.path(), Some(4))
        .unwrap_err()
        .to_string();
    assert!(err.contains("it has 3 partitions"), "{err}");
    std::fs::write(
        tmp.path().join("feedlog.json"),
        r#"{"layout":9,"partitions":3}"#,
    )
    .unwrap();
    let err = DataDir::open(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("layout 9"), "{err}");
    let err = DataDir::open(&tmp.path().join("nope"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a feedlog data directory"), "{err}");
}

// Proves a feedlog.json that counts fewer partitions than the logs hold is refused, and a lost one is not recreated next to existing logs.
#[test]
fn identity_must_match_the_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = DataDir::create_or_open(tmp.path(), Some(8)).unwrap();
    let logs = d.logs();
    logs.append(
        crate::log::Topic::Events,
        Partition(7),
        &[crate::log::NewRecord {
            timestamp_ms: 0,
            format: 1.into(),
            key: b"k",
            value: b"v",
        }],
        true,
    )
    .unwrap();
    drop(logs);
    std::fs::write(
        tmp.path().join("feedlog.json"),
        r#"{"layout":1,"partitions":4}"#,
    )
    .unwrap();
    let err = DataDir::open(tmp.path()).unwrap_err().to_string();
    assert!(
        err.contains("says 4 partitions") && err.contains("log/events/0000"),
        "{err}"
    );
    std::fs::remove_file(tmp.path().join("feedlog.json")).unwrap();
    let err = DataDir::create_or_open(tmp.path(), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("feedlog.json is missing"), "{err}");
    assert!(!tmp.path().join("feedlog.json").exists());
}

// Regression: a feedlog.json that counted more partitions than the logs hold was accepted and silently repartitioned the log. Now it is refused naming both counts; a directory without logs still opens.
#[test]
fn identity_must_not_count_more_partitions_than_the_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = DataDir::create_or_open(tmp.path(), Some(4)).unwrap();
    let count = |n: u32| {
        let json = format!(r#"{{"layout":{DIR_LAYOUT},"partitions":{n}}}"#);
        std::fs::write(tmp.path().join("feedlog.json"), json).unwrap();
    };
    // No logs yet: the count is not checked against anything.
    count(16);
    assert_eq!(DataDir::open(tmp.path()).unwrap().partitions(), 16);
    count(4);
    let logs = d.logs();
    let record = crate::log::NewRecord {
        timestamp_ms: 0,
        format: 1.into(),
        key: b"k",
        value: b"v",
    };
    logs.append(crate::log::Topic::Events, Partition(1), &[record], true)
        .unwrap();
    drop(logs);
    // The first append made every partition of the log.
    for p in crate::core::Partition::all(4) {
        assert!(d.logs().dir(crate::log::Topic::Events, p).is_dir(), "{p}");
    }
    count(8);
    let err = DataDir::open(tmp.path()).unwrap_err().to_string();
    assert!(
        err.contains("says 8 partitions") && err.contains("holds 4 partition logs"),
        "{err}"
    );
    let err = DataDir::create_or_open(tmp.path(), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds 4 partition logs"), "{err}");
    count(4);
    assert_eq!(DataDir::open(tmp.path()).unwrap().partitions(), 4);
}

// Proves a log made before the partitions marker (each partition's directory made on its first write) still opens with partitions it never wrote, while one with the marker does not.
#[test]
fn logs_without_the_marker_may_lack_unwritten_partitions() {
    let tmp = tempfile::tempdir().unwrap();
    let d = DataDir::create_or_open(tmp.path(), Some(4)).unwrap();
    let record = crate::log::NewRecord {
        timestamp_ms: 0,
        format: 1.into(),
        key: b"k",
        value: b"v",
    };
    d.logs()
        .append(crate::log::Topic::Events, Partition(2), &[record], true)
        .unwrap();
    let events = d.logs().dir(crate::log::Topic::Events, Partition(0));
    let events = events.parent().unwrap();
    assert!(events.join(crate::log::PARTITIONS_MARKER).exists());
    for p in [0, 1, 3] {
        std::fs::remove_dir(events.join(format!("{p:05}"))).unwrap();
    }
    assert!(DataDir::open(tmp.path()).is_err(), "the marker says 4");
    std::fs::remove_file(events.join(crate::log::PARTITIONS_MARKER)).unwrap();
    assert_eq!(DataDir::open(tmp.path()).unwrap().partitions(), 4);
}

// Proves a layout-1 directory keeps writing the fixed framing (earlier versions read it) and a new one writes the compact framing.
#[test]
fn a_layout_1_directory_keeps_the_fixed_framing() {
    let first_byte = |json: Option<&str>| {
        let tmp = tempfile::tempdir().unwrap();
        let d = DataDir::create_or_open(tmp.path(), Some(2)).unwrap();
        if let Some(json) = json {
            std::fs::write(tmp.path().join("feedlog.json"), json).unwrap();
        }
        let d = DataDir::open(d.root()).unwrap();
        let record = crate::log::NewRecord {
            timestamp_ms: 1,
            format: 1.into(),
            key: b"k",
            value: b"v",
        };
        d.logs()
            .append(crate::log::Topic::Events, Partition(0), &[record], true)
            .unwrap();
        let segment = tmp.path().join("log/events/00000/00000000000000000000.log");
        std::fs::read(segment).unwrap()[0]
    };
    assert_eq!(first_byte(Some(r#"{"layout":1,"partitions":2}"#)), 0x00);
    assert_eq!(first_byte(None), 0x82);
}
