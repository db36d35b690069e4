//! The target forgets strait's producer: `producer.id.expiration.ms` after the records'
//! own timestamps, which a backfill of old data reaches at once. A broker that holds no
//! state for a producer accepts a batch at any sequence, so a batch behind one it refused
//! is written. The refused batch must still not count as delivered: once the cause is
//! fixed it is replicated, not skipped. (Own clusters: the target needs broker settings of
//! its own.)

mod common;

use std::time::Duration;

use common::kafka::{self, Cluster};
use common::strait::{record_count, wait_for_records, Strait};
use strait::kafka::TopicPartition;

#[test]
fn a_refused_batch_stays_undelivered_when_a_later_one_is_written() {
    let (source, target) = std::thread::scope(|s| {
        let source = s.spawn(|| Cluster::start("pstate-source", &[]));
        let target = Cluster::start(
            "pstate-target",
            &[
                "producer.id.expiration.ms=1000",
                "producer.id.expiration.check.interval.ms=200",
                // Refuses a 20 kB uncompressed batch; the same record gzipped fits.
                "message.max.bytes=10000",
            ],
        );
        (source.join().unwrap(), target)
    });
    let topic = kafka::unique("expired");
    kafka::create_topic(&source, &topic, 1, &[]);
    let remote = format!("a.{topic}");
    let tp = TopicPartition::new(remote.as_str(), 0);
    // Two days old: the target drops strait's producer state a second after each write.
    let old = (std::time::SystemTime::now() - Duration::from_secs(2 * 86_400))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    let produce = |args: &[&str]| {
        let mut all = vec!["--topic", &topic, "--timestamp", &old];
        all.extend_from_slice(args);
        kafka::produce(&source, &all)
    };
    let config = format!(
        "clusters = a, b\na.bootstrap.servers = {}\nb.bootstrap.servers = {}\na->b.enabled = true\n\
         a->b.topics = {topic}\nreplication.factor = 1\ninternal.topic.replication.factor = 1\n\
         progress.commit.interval.ms = 500\nemit.heartbeats.enabled = false\n",
        source.bootstrap, target.bootstrap
    );

    produce(&["--count", "20", "--value-size", "100"]);
    let mut strait = Strait::start(&config, "properties").allow(&[
        // the batch the target refuses, and the flow ending on it at shutdown
        "partition stopped",
        "MessageTooLarge",
        "flow failed",
        "partition(s) stopped",
        // E2 written behind the refused E1
        "wrote a batch behind one it refused",
    ]);
    wait_for_records(
        &mut strait,
        &target,
        &remote,
        1,
        20,
        Duration::from_secs(60),
    );
    // The target forgets strait's producer.
    std::thread::sleep(Duration::from_secs(3));
    // E1 (too large) and E2 (fits), one batch each, in one transaction: strait reads
    // committed records only, so both reach it in one fetch and go out back to back.
    produce(&[
        "--count",
        "2",
        "--first-value-size",
        "20000",
        "--value-size",
        "100",
        "--batch-size",
        "100",
        "--transactional-id",
        &kafka::unique("expired-txn"),
        "--txn-size",
        "2",
    ]);
    strait.wait_for_log_line(Duration::from_secs(60), |l| l.contains("partition stopped"));
    // Whether E2 went out before E1's refusal came back depends on timing; when it did, the
    // target wrote it (records out of source order there) and strait says so.
    let e2_first = record_count(&target, &tp) == 21;
    eprintln!("E2 written behind the refused E1: {e2_first}");
    let _ = strait.terminate();

    // The operator lifts the limit and restarts strait: E1 must arrive.
    kafka::tool(
        "kafka.admin.ConfigCommand",
        &[
            "--bootstrap-server",
            &target.bootstrap,
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "message.max.bytes=1048588",
        ],
    );
    strait.restart();
    strait.wait_until("E1 on the target", Duration::from_secs(60), || {
        kafka::dump(&target, &remote)
            .iter()
            .any(|r| r.value.as_ref().is_some_and(|v| v.len() == 20000))
            .then_some(())
    });
}
