//! Tests of the group membership: bounded commits.

use super::*;
use rdkafka::mocking::MockCluster;

// Proves a last commit, to a coordinator that cannot be reached, gives up within its bound (librdkafka alone waits for its coordinator, longer) and says why, and a commit started in the background returns at once without an answer.
#[test]
fn a_last_commit_to_an_unreachable_coordinator_gives_up_within_its_bound() {
    let mock = MockCluster::new(1).unwrap();
    let cfg = KafkaConfig::new(&mock.bootstrap_servers(), "gc");
    for t in [crate::log::Topic::Events, crate::log::Topic::Effects] {
        mock.create_topic(&cfg.name(t), 2, 1).unwrap();
    }
    let settings = MemberSettings {
        member: "m0".into(),
        instance_id: None,
        cooperative: false,
        session_timeout: Duration::from_secs(6),
    };
    let group = GroupMember::join(&cfg, &settings).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut assigned = false;
    while !assigned {
        assert!(Instant::now() < deadline, "never assigned");
        for r in group.poll(Duration::from_millis(100)) {
            assigned |= matches!(r.event, GroupEvent::Assigned(_));
            group.complete(&r).unwrap();
        }
    }
    let at = |events| [(Partition(0), Positions::new(events, 0), Epoch(7))];
    group.commit_within(&at(1), Duration::from_secs(5)).unwrap();
    mock.broker_down(1).unwrap();
    let t = Instant::now();
    let err = group
        .commit_within(&at(2), Duration::from_secs(2))
        .unwrap_err();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(4), "gave up after {took:?}");
    assert!(
        err.to_string().contains("did not answer within 2s"),
        "{err}"
    );
    // The renewal of a lease does not wait at all: started, it has no
    // answer yet, and the caller goes on.
    let t = Instant::now();
    let pending = group.start_commit(&at(3)).unwrap();
    assert!(pending.answer().is_none(), "answered at once");
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "started after {:?}",
        t.elapsed()
    );
}
