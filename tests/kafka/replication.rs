//! End-to-end replication against real Apache Kafka: records written by the Java producer
//! (every codec, idempotent, transactional with aborts, compacted, headers, nulls, ~1 MiB
//! batches) must arrive on the target exactly as a read_committed consumer sees them on the
//! source, batch records bytes unchanged (or, on request, small batches merged); and
//! SIGKILL/SIGTERM restarts lose nothing.

use std::collections::HashMap;
use std::time::Duration;

use crate::common::kafka::{self, Cluster, DumpedRecord};
use crate::common::strait::{mm2_properties, raw_batches, record_count, wait_for_records, Strait};
use strait::kafka::TopicPartition;

/// Records of one partition, without offsets (they differ between the clusters by design).
type Content = Vec<(
    i64,
    String,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
)>;

fn by_partition(records: &[DumpedRecord]) -> HashMap<i32, Content> {
    let mut out: HashMap<i32, Content> = HashMap::new();
    for r in records {
        out.entry(r.partition).or_default().push((
            r.timestamp,
            r.timestamp_type.clone(),
            r.key.clone(),
            r.value.clone(),
            r.headers.clone(),
        ));
    }
    out
}

/// The target topic holds exactly the committed source records, partition by partition and
/// in order (Java consumer on both sides), and every target batch carries the records bytes
/// of the matching source batch.
fn assert_replicated(
    source: &Cluster,
    target: &Cluster,
    topic: &str,
    remote: &str,
    partitions: i32,
) {
    assert_same_records(source, target, topic, remote, partitions);
    for p in 0..partitions {
        // Compaction can leave empty batches behind: they carry nothing to replicate.
        let src: Vec<_> = raw_batches(source, &TopicPartition::new(topic, p))
            .into_iter()
            .filter(|b| b.record_count() > 0)
            .collect();
        let dst = raw_batches(target, &TopicPartition::new(remote, p));
        assert_eq!(dst.len(), src.len(), "{remote}-{p}: batch count");
        for (i, (s, d)) in src.iter().zip(&dst).enumerate() {
            // A compacted batch with holes in its offsets is the one kind a broker refuses as
            // is: its records are renumbered (their content is compared above).
            if !s.has_holes() {
                assert_eq!(
                    d.records(),
                    s.records(),
                    "{remote}-{p}: batch #{i} records bytes"
                );
            }
            assert_eq!(d.record_count(), s.record_count());
            assert_eq!(
                d.attributes() & 0x0f,
                s.attributes() & 0x0f,
                "codec and timestamp type kept"
            );
            assert!(!d.is_transactional() && !d.is_control());
            d.verify_crc().unwrap();
        }
    }
}

/// The target topic holds exactly the committed source records, partition by partition and
/// in order (Java consumer on both sides): timestamps, keys, values and headers.
fn assert_same_records(
    source: &Cluster,
    target: &Cluster,
    topic: &str,
    remote: &str,
    partitions: i32,
) {
    let want = kafka::dump(source, topic);
    let have = kafka::dump_with(target, remote, &["--isolation", "read_uncommitted"]);
    assert_eq!(have.len(), want.len(), "{remote}: record count");
    let (want, have) = (by_partition(&want), by_partition(&have));
    for p in 0..partitions {
        let (w, h) = (
            want.get(&p).cloned().unwrap_or_default(),
            have.get(&p).cloned().unwrap_or_default(),
        );
        assert_eq!(h.len(), w.len(), "{remote}-{p}: record count");
        for (i, (a, b)) in w.iter().zip(&h).enumerate() {
            assert_eq!(a, b, "{remote}-{p}: record #{i} differs");
        }
    }
}

#[test]
fn every_codec_headers_nulls_and_large_batches() {
    let [source, target] = kafka::clusters();
    let prefix = kafka::unique("codecs");
    let mut topics = Vec::new();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("{prefix}-{codec}");
        kafka::create_topic(source, &topic, 3, &[]);
        let mut args = vec![
            "--topic",
            &topic,
            "--count",
            "3000",
            "--compression",
            codec,
            "--headers",
        ];
        args.extend([
            "--null-key-every",
            "7",
            "--null-value-every",
            "11",
            "--value-size",
            "120",
            "--linger-ms",
            "20",
        ]);
        if codec == "lz4" {
            args.push("--idempotent");
        }
        kafka::produce(source, &args);
        topics.push((topic, 3, 3000));
    }
    // Batches near 1 MiB (the broker's default message.max.bytes is 1 MiB + 12).
    let big = format!("{prefix}-big");
    kafka::create_topic(source, &big, 1, &[]);
    kafka::produce(
        source,
        &[
            "--topic",
            &big,
            "--count",
            "60",
            "--value-size",
            "100000",
            "--batch-size",
            "1000000",
            "--linger-ms",
            "200",
        ],
    );
    topics.push((big.clone(), 1, 60));

    let mut strait = Strait::start(
        &mm2_properties("src", "dst", &format!("{prefix}-.*"), &[]),
        "properties",
    );
    for (topic, partitions, count) in &topics {
        wait_for_records(
            &mut strait,
            target,
            &format!("src.{topic}"),
            *partitions,
            *count,
            Duration::from_secs(120),
        );
    }
    let biggest = raw_batches(target, &TopicPartition::new(format!("src.{big}"), 0))
        .iter()
        .map(|b| b.len())
        .max()
        .unwrap();
    assert!(
        biggest > 900_000,
        "largest replicated batch is {biggest} bytes"
    );
    for (topic, partitions, _) in &topics {
        assert_replicated(source, target, topic, &format!("src.{topic}"), *partitions);
    }
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

#[test]
fn transactions_commit_and_abort() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("txn");
    kafka::create_topic(source, &topic, 2, &[]);
    let txn_id = kafka::unique("txn-id");
    let produced = kafka::produce(
        source,
        &[
            "--topic",
            &topic,
            "--count",
            "4000",
            "--transactional-id",
            &txn_id,
            "--txn-size",
            "100",
            "--abort-every",
            "3",
            "--compression",
            "zstd",
        ],
    );
    assert!(
        produced.aborted > 0 && produced.committed > 0,
        "{produced:?}"
    );

    let mut strait = Strait::start(&mm2_properties("src", "dst", &topic, &[]), "properties");
    let remote = format!("src.{topic}");
    wait_for_records(
        &mut strait,
        target,
        &remote,
        2,
        produced.committed as i64,
        Duration::from_secs(120),
    );
    // Read the target with read_uncommitted: aborted records must not be there at all.
    assert_replicated(source, target, &topic, &remote, 2);
    let uncommitted = kafka::dump_with(target, &remote, &["--isolation", "read_uncommitted"]);
    assert_eq!(uncommitted.len() as u64, produced.committed);
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

#[test]
fn compacted_topic_with_offset_gaps() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("compacted");
    kafka::create_topic(
        source,
        &topic,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "100"),
        ],
    );
    // 500 distinct keys, then rounds that overwrite a few of them many times: compaction
    // leaves holes between batches and inside them.
    for key_space in ["500", "20", "7"] {
        let args = [
            "--topic",
            &topic,
            "--count",
            "500",
            "--key-space",
            key_space,
        ];
        kafka::produce(source, &args);
        std::thread::sleep(Duration::from_millis(300));
    }
    // Wait for the log cleaner to leave offset gaps.
    let records = kafka::wait_compacted(source, &topic, "20", Duration::from_secs(90), |r| {
        r.len() < 1000 && r.windows(2).any(|w| w[1].offset > w[0].offset + 1)
    });
    assert!(
        records.windows(2).any(|w| w[1].offset > w[0].offset + 1),
        "gaps expected"
    );

    let mut strait = Strait::start(&mm2_properties("src", "dst", &topic, &[]), "properties");
    let remote = format!("src.{topic}");
    let expected = kafka::dump(source, &topic).len() as i64;
    wait_for_records(
        &mut strait,
        target,
        &remote,
        1,
        expected,
        Duration::from_secs(60),
    );
    assert_replicated(source, target, &topic, &remote, 1);
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// `produce.coalesce.bytes`: the tiny uncompressed batches of an idempotent producer arrive
/// merged into few large ones, every record as the source has it (timestamps, keys, nulls,
/// headers, order), a compressed topic's batches as they were, and a group's committed
/// offsets translate exactly through the merged batches.
#[test]
fn small_batches_coalesced_on_request() {
    let [source, target] = kafka::clusters();
    let prefix = kafka::unique("coalesce");
    let (small, lz4) = (format!("{prefix}-small"), format!("{prefix}-lz4"));
    for (topic, codec) in [(&small, "none"), (&lz4, "lz4")] {
        kafka::create_topic(source, topic, 2, &[]);
        let args = [
            "--topic",
            topic,
            "--count",
            "4000",
            "--compression",
            codec,
            "--headers",
            "--null-key-every",
            "7",
            "--null-value-every",
            "11",
            "--value-size",
            "100",
            "--batch-size",
            "400",
            "--idempotent",
        ];
        kafka::produce(source, &args);
    }
    let group = kafka::unique("coalesce-group");
    assert_eq!(kafka::consume(source, &small, &group, 2500).len(), 2500);
    let committed = kafka::committed_offsets(source, &group);

    let extra = [
        "produce.coalesce.bytes = 65536",
        "emit.checkpoints.interval.seconds = 1",
    ];
    let mut strait = Strait::start(
        &mm2_properties("src", "dst", &format!("{prefix}-.*"), &extra),
        "properties",
    );
    for topic in [&small, &lz4] {
        let remote = format!("src.{topic}");
        wait_for_records(
            &mut strait,
            target,
            &remote,
            2,
            4000,
            Duration::from_secs(120),
        );
    }

    let remote = format!("src.{small}");
    assert_same_records(source, target, &small, &remote, 2);
    for p in 0..2 {
        let src = raw_batches(source, &TopicPartition::new(small.as_str(), p));
        let dst = raw_batches(target, &TopicPartition::new(remote.as_str(), p));
        println!(
            "{remote}-{p}: {} source batches became {} target batches",
            src.len(),
            dst.len()
        );
        assert!(
            dst.len() * 10 <= src.len(),
            "{remote}-{p}: {} batches from {}",
            dst.len(),
            src.len()
        );
        for d in &dst {
            d.verify_crc().unwrap();
            assert!(d.len() <= 65536, "a merged batch of {} bytes", d.len());
        }
    }
    assert_replicated(source, target, &lz4, &format!("src.{lz4}"), 2);

    // The group's offsets, translated through the merged batches, are its source offsets
    // (the remote partitions start at 0 like the source ones).
    let want: Vec<(String, i32, i64)> = committed
        .iter()
        .map(|(_, p, o)| (remote.clone(), *p, *o))
        .collect();
    strait.wait_until(
        &format!("translated offsets {want:?}"),
        Duration::from_secs(60),
        || (kafka::translate_offsets(target, "src", &group) == want).then_some(()),
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// Checks that `have` is `want` with some ranges sent again: a sequence of runs, each a
/// contiguous slice of `want` starting at or before where the previous run ended, the last
/// ending at the end. Returns the number of duplicates.
fn duplicates_by_rerun(want: &[Vec<u8>], have: &[Vec<u8>]) -> usize {
    let index: HashMap<&[u8], usize> = want
        .iter()
        .enumerate()
        .map(|(i, v)| (v.as_slice(), i))
        .collect();
    let mut next = 0usize; // the next record of `want` not seen yet
    let mut pos: Option<usize> = None;
    for v in have {
        let i = *index.get(v.as_slice()).unwrap_or_else(|| {
            panic!(
                "target has a record the source lacks: {:?}",
                String::from_utf8_lossy(v)
            )
        });
        match pos {
            Some(p) if i == p + 1 => {}
            _ => assert!(
                i <= next,
                "record {i} arrived before record {next}: a gap or reorder"
            ),
        }
        pos = Some(i);
        next = next.max(i + 1);
    }
    assert_eq!(next, want.len(), "records missing at the end");
    have.len() - want.len()
}

#[test]
fn sigkill_loses_nothing_and_sigterm_duplicates_nothing() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("restart");
    kafka::create_topic(source, &topic, 3, &[]);
    let config = mm2_properties(
        "src",
        "dst",
        &topic,
        &["progress.commit.interval.ms = 1000"],
    );
    let mut strait = Strait::start(&config, "properties");
    let remote = format!("src.{topic}");

    // A producer writes for ~12 s while strait is killed three times.
    let producer = {
        let topic = topic.clone();
        std::thread::spawn(move || {
            kafka::produce(
                &kafka::clusters()[0],
                &[
                    "--topic",
                    &topic,
                    "--count",
                    "24000",
                    "--rate",
                    "2000",
                    "--value-size",
                    "50",
                ],
            )
        })
    };
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(2500));
        strait.kill9();
        std::thread::sleep(Duration::from_millis(300));
        strait.restart();
    }
    let produced = producer.join().unwrap();
    assert_eq!(produced.produced, 24000);
    // Duplicates count towards the record total, so wait for distinct values.
    strait.wait_until("24000 distinct records", Duration::from_secs(120), || {
        let mut distinct = std::collections::HashSet::new();
        for p in 0..3 {
            for b in raw_batches(target, &TopicPartition::new(remote.as_str(), p)) {
                for r in strait::batch::decode_uncompressed(&b).unwrap() {
                    distinct.insert(r.value.unwrap());
                }
            }
        }
        (distinct.len() >= 24000).then_some(())
    });
    assert!(strait.terminate().success(), "{}", strait.log_text());

    let want = by_partition(&kafka::dump(source, &topic));
    let have = by_partition(&kafka::dump(target, &remote));
    let mut duplicates = 0;
    for p in 0..3 {
        let values = |c: &Content| c.iter().map(|r| r.3.clone().unwrap()).collect::<Vec<_>>();
        duplicates += duplicates_by_rerun(&values(&want[&p]), &values(&have[&p]));
    }
    // Each kill re-sends at most what was acknowledged since the last commit (1 s at
    // ~2000 records/s, plus what was in flight); allow one extra interval of slack.
    println!("duplicates after 3 SIGKILLs: {duplicates}");
    assert!(
        duplicates <= 3 * 2 * 2000 + 3 * 1000,
        "{duplicates} duplicates"
    );

    // After SIGTERM, a restart re-sends nothing.
    let before = kafka::dump(target, &remote).len();
    kafka::produce(
        source,
        &["--topic", &topic, "--count", "300", "--value-size", "50"],
    );
    let mut strait = Strait::start(&config, "properties");
    wait_for_records(
        &mut strait,
        target,
        &remote,
        3,
        before as i64 + 300,
        Duration::from_secs(60),
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(strait.terminate().success(), "{}", strait.log_text());
    assert_eq!(
        kafka::dump(target, &remote).len(),
        before + 300,
        "no duplicates after a clean stop"
    );
}

/// A batch the target refuses (here: larger than the remote topic's `max.message.bytes`)
/// stops its partition alone: the other partition goes on, the source stops reading the
/// stopped one, strait exits 1 naming the partition and the Kafka error, and once the cause
/// is fixed a restart replicates everything, without loss or duplicates.
#[test]
fn a_partition_the_target_refuses_stops_alone_and_resumes_without_loss() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("refused");
    let remote = format!("src.{topic}");
    kafka::create_topic(source, &topic, 2, &[]);
    kafka::create_topic(target, &remote, 2, &[("max.message.bytes", "3000")]);
    // Batches of at most ~1 KB (they fit), except one record of 10 KB on partition 1.
    let produce = |partition: &str, count: &str, value_size: &str| {
        kafka::produce(
            source,
            &[
                "--topic",
                &topic,
                "--partition",
                partition,
                "--count",
                count,
                "--value-size",
                value_size,
                "--batch-size",
                "1000",
            ],
        );
    };
    produce("0", "200", "100");
    produce("1", "50", "100");
    produce("1", "1", "10000");
    produce("1", "50", "100");
    let config = mm2_properties(
        "src",
        "dst",
        &topic,
        &[
            "sync.topic.configs.enabled = false",
            "progress.commit.interval.ms = 500",
        ],
    );
    // The refused batch is the point of the test: the partition stops with an ERROR, and so
    // does the flow when strait is stopped ("flow failed", then strait's exit message on
    // stderr, which is no JSON event).
    let mut strait = Strait::start(&config, "properties").allow(&[
        "partition stopped: the target refused a batch",
        "1 partition(s) stopped on errors",
    ]);
    let count = |p: i32| record_count(target, &TopicPartition::new(remote.as_str(), p));
    strait.wait_until("partition 0 replicated", Duration::from_secs(60), || {
        (count(0) == 200).then_some(())
    });
    let refused = "partition stopped: the target refused a batch";
    let line = strait.wait_for_log_line(Duration::from_secs(60), |l| l.contains(refused));
    assert!(
        line.contains(&format!("{remote}-1")) && line.contains("MessageTooLarge (10)"),
        "the error names the partition and the Kafka error: {line}"
    );
    // The session hears of it after the Fetch it is waiting on.
    let left = format!("\"partition\":\"{topic}-1\"");
    strait.wait_for_log_line(Duration::from_secs(10), |l| {
        l.contains("left the fetch session") && l.contains(&left)
    });
    // The other partition goes on.
    produce("0", "100", "100");
    strait.wait_until(
        "300 records in partition 0",
        Duration::from_secs(60),
        || (count(0) >= 300).then_some(()),
    );
    assert_eq!(
        count(1),
        50,
        "{remote}-1: only the records before the refused one"
    );
    let status = strait.terminate();
    assert_eq!(status.code(), Some(1), "{}", strait.log_text());

    // The cause fixed, a restart resumes partition 1 where the target stopped it.
    kafka::tool(
        "kafka.admin.ConfigCommand",
        &[
            "--bootstrap-server",
            &target.bootstrap,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &remote,
            "--delete-config",
            "max.message.bytes",
        ],
    );
    strait.restart();
    wait_for_records(
        &mut strait,
        target,
        &remote,
        2,
        401,
        Duration::from_secs(60),
    );
    assert_same_records(source, target, &topic, &remote, 2);
    assert!(strait.terminate().success(), "{}", strait.log_text());
}
