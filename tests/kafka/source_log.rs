//! What the source log does under strait: retention deleting records strait has not
//! copied yet, and a topic deleted and re-created with the same name. Each must not skip
//! records the source still holds.

use std::time::Duration;

use crate::common::kafka::{self, Cluster, DumpedRecord};
use crate::common::strait::{mm2_properties, wait_for_records, Strait};

/// (timestamp, value) of each record: what the target must hold, offsets aside.
fn contents(records: &[DumpedRecord]) -> Vec<(i64, Option<Vec<u8>>)> {
    records
        .iter()
        .map(|r| (r.timestamp, r.value.clone()))
        .collect()
}

/// The target's records of `remote` (read_uncommitted: all strait wrote).
fn target_records(target: &Cluster, remote: &str) -> Vec<DumpedRecord> {
    kafka::dump_with(target, remote, &["--isolation", "read_uncommitted"])
}

/// Deletes the records of `topic`-0 below `offset` (DeleteRecords, as retention would).
fn delete_records_before(c: &Cluster, topic: &str, offset: i64) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("offsets.json");
    let json = format!(
        r#"{{"partitions":[{{"topic":"{topic}","partition":0,"offset":{offset}}}],"version":1}}"#
    );
    std::fs::write(&file, json).unwrap();
    kafka::tool(
        "org.apache.kafka.tools.DeleteRecordsCommand",
        &[
            "--bootstrap-server",
            &c.bootstrap,
            "--offset-json-file",
            file.to_str().unwrap(),
        ],
    );
}

#[test]
fn retention_below_the_position_resumes_at_the_log_start_even_with_latest() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("retained");
    let remote = format!("src.{topic}");
    kafka::create_topic(source, &topic, 1, &[]);
    kafka::produce(source, &["--topic", &topic, "--count", "100"]);
    let mut strait =
        Strait::start(&mm2_properties("src", "dst", &topic, &[]), "properties").allow(&[
            // What this test does: retention (DeleteRecords) below strait's position.
            "deleted (retention) before they were copied",
        ]);
    wait_for_records(
        &mut strait,
        target,
        &remote,
        1,
        100,
        Duration::from_secs(60),
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
    // From now on the policy for positions out of range used to be `latest`.
    let latest = mm2_properties("src", "dst", &topic, &["offset.reset = latest"]);
    std::fs::write(&strait.config, latest).unwrap();

    // While strait is down: 200 more records, of which retention takes the first 100.
    // Two batches, so that the new log start is a batch boundary, as with time or size
    // retention (whole segments); a batch is forwarded whole, so one cut in its middle
    // would arrive whole.
    for _ in 0..2 {
        kafka::produce(source, &["--topic", &topic, "--count", "100"]);
    }
    delete_records_before(source, &topic, 200);
    strait.restart();
    // The 100 records still retained arrive; `latest` would have skipped them.
    wait_for_records(
        &mut strait,
        target,
        &remote,
        1,
        200,
        Duration::from_secs(60),
    );
    let line = strait.wait_for_log_line(Duration::from_secs(5), |l| {
        l.contains("deleted (retention) before they were copied")
    });
    assert!(line.contains("\"lost\":100"), "{line}");
    assert!(strait.terminate().success(), "{}", strait.log_text());
    let have = target_records(target, &remote);
    assert_eq!(have.len(), 200);
    assert_eq!(
        contents(&have[100..]),
        contents(&kafka::dump(source, &topic))
    );
}

#[test]
fn a_recreated_source_topic_is_copied_from_its_start() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("recreated");
    let remote = format!("src.{topic}");
    kafka::create_topic(source, &topic, 1, &[]);
    kafka::produce(source, &["--topic", &topic, "--count", "50"]);
    let config = mm2_properties("src", "dst", &topic, &[]);
    let mut strait = Strait::start(&config, "properties").allow(&[
        // What this test does: the topic is deleted and re-created.
        "deleted and re-created",
    ]);
    wait_for_records(&mut strait, target, &remote, 1, 50, Duration::from_secs(60));

    // Frozen, strait sees none of it happen: the topic deleted, re-created, and given more
    // records than strait's position in the old one.
    strait.pause();
    let topic_args = ["--bootstrap-server", &source.bootstrap, "--topic", &topic];
    kafka::tool(
        "org.apache.kafka.tools.TopicCommand",
        &[&topic_args[..], &["--delete"]].concat(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while kafka::list_topics(source).contains(&topic) {
        assert!(std::time::Instant::now() < deadline, "{topic} not deleted");
        std::thread::sleep(Duration::from_millis(200));
    }
    kafka::create_topic(source, &topic, 1, &[]);
    kafka::produce(source, &["--topic", &topic, "--count", "80"]);
    strait.resume();

    wait_for_records(
        &mut strait,
        target,
        &remote,
        1,
        130,
        Duration::from_secs(60),
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
    let have = target_records(target, &remote);
    assert_eq!(have.len(), 130);
    assert_eq!(
        contents(&have[50..]),
        contents(&kafka::dump(source, &topic))
    );
}
