//! Fault tests: the brokers go away under a running strait and come back. Nothing may be
//! lost, order per partition holds, and strait keeps running through it (its own clusters:
//! the shared ones of other test binaries are not disturbed).

mod common;

use std::time::Duration;

use common::kafka::{self, Cluster};
use common::strait::{wait_for_records, Strait};

#[test]
fn target_and_source_restarts_lose_nothing() {
    let (source, target) = std::thread::scope(|s| {
        let source = s.spawn(|| Cluster::start("fault-source", &[]));
        let target = Cluster::start("fault-target", &[]);
        (source.join().unwrap(), target)
    });
    let topic = kafka::unique("faults");
    kafka::create_topic(&source, &topic, 2, &[]);
    let config = format!(
        "clusters = a, b\na.bootstrap.servers = {}\nb.bootstrap.servers = {}\na->b.enabled = true\n\
         a->b.topics = {topic}\nreplication.factor = 1\ninternal.topic.replication.factor = 1\n\
         progress.commit.interval.ms = 1000\na.request.timeout.ms = 10000\nb.request.timeout.ms = 10000\n",
        source.bootstrap, target.bootstrap
    );
    // Each broker is down for a while: strait says so while it retries. Which of these appear
    // depends on what strait is doing when a broker stops (one run logged only the first).
    let mut strait = Strait::start(&config, "properties").allow(&[
        // the target is down (connecting to its broker, refused)
        "cannot reach target broker",
        // the target stops with produce requests in flight / its metadata unreachable
        "produce request failed; will resend",
        "target metadata refresh failed",
        // the source is down (a fetch in flight, or looking up partition leaders)
        "\"fetch failed\"",
        "cannot place partitions on source leaders yet",
    ]);
    let remote = format!("a.{topic}");
    kafka::produce(
        &source,
        &["--topic", &topic, "--count", "5000", "--value-size", "200"],
    );
    wait_for_records(
        &mut strait,
        &target,
        &remote,
        2,
        5000,
        Duration::from_secs(60),
    );

    // The target goes down while the source keeps receiving records.
    target.stop();
    kafka::produce(
        &source,
        &["--topic", &topic, "--count", "5000", "--value-size", "200"],
    );
    std::thread::sleep(Duration::from_secs(3));
    target.start_again();
    wait_for_records(
        &mut strait,
        &target,
        &remote,
        2,
        10000,
        Duration::from_secs(120),
    );

    // The source goes down and comes back with more records.
    source.stop();
    std::thread::sleep(Duration::from_secs(3));
    source.start_again();
    kafka::produce(
        &source,
        &["--topic", &topic, "--count", "5000", "--value-size", "200"],
    );
    wait_for_records(
        &mut strait,
        &target,
        &remote,
        2,
        15000,
        Duration::from_secs(120),
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());

    // Exactly the source records, in order (the producer is idempotent per session and
    // strait's retries keep their sequence numbers, so no duplicates either).
    let want = kafka::values_by_partition(&source, &topic);
    let have = kafka::values_by_partition(&target, &remote);
    for p in 0..2 {
        assert_eq!(
            have.get(&p).map(Vec::len),
            want.get(&p).map(Vec::len),
            "partition {p} record count"
        );
        assert!(
            have.get(&p) == want.get(&p),
            "partition {p}: content or order differs"
        );
    }
}
