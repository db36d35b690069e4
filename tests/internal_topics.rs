//! Topic creation and strait's internal topics on brokers that do not keep what strait
//! writes as it was written: both clusters here compress every topic with lz4 by default
//! (`compression.type=lz4`, so a topic created without the setting is recompressed), which
//! the shared clusters of other test binaries must not. Also the target refusing to create
//! one of the remote topics.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::kafka::{self, Cluster};
use common::strait::{block_on, client, raw_batches, record_count, wait_for_records, Strait};
use strait::batch::Compression;
use strait::kafka::TopicPartition;

/// The source and target clusters of this binary, both with lz4 as the default compression.
fn clusters() -> &'static [Cluster; 2] {
    static CLUSTERS: OnceLock<[Cluster; 2]> = OnceLock::new();
    CLUSTERS.get_or_init(|| {
        let lz4 = ["compression.type=lz4"];
        let source = std::thread::spawn(move || Cluster::start("lz4-source", &lz4));
        let target = Cluster::start("lz4-target", &lz4);
        [source.join().expect("starting the source cluster"), target]
    })
}

/// A flow `a->b` over this binary's clusters replicating `topics`, plus `extra` lines.
fn config(topics: &str, extra: &[&str]) -> String {
    let [source, target] = clusters();
    let mut text = format!(
        "clusters = a, b\na.bootstrap.servers = {}\nb.bootstrap.servers = {}\n\
         a->b.enabled = true\na->b.topics = {topics}\nreplication.factor = 1\n\
         internal.topic.replication.factor = 1\nprogress.commit.interval.ms = 500\n",
        source.bootstrap, target.bootstrap
    );
    for line in extra {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// The records of every partition of `topic`, in total.
fn records(cluster: &Cluster, topic: &str, partitions: i32) -> i64 {
    (0..partitions)
        .map(|p| record_count(cluster, &TopicPartition::new(topic, p)))
        .sum()
}

/// The progress and offset-syncs topics are written by strait and read back at every start;
/// on brokers that recompress them with lz4 a restart must still resume exactly where the
/// stop left off: nothing copied twice, nothing skipped.
#[test]
fn restarts_resume_exactly_when_the_brokers_compress_with_lz4() {
    let [source, target] = clusters();
    let topic = kafka::unique("lz4-resume");
    kafka::create_topic(source, &topic, 2, &[]);
    let remote = format!("a.{topic}");
    let produce = || {
        kafka::produce(
            source,
            &["--topic", &topic, "--count", "2000", "--value-size", "100"],
        )
    };
    produce();
    let mut strait = Strait::start(&config(&topic, &[]), "properties");
    wait_for_records(
        &mut strait,
        target,
        &remote,
        2,
        2000,
        Duration::from_secs(60),
    );
    // The syncs and progress written so far are what the next start reads.
    let syncs = TopicPartition::new("mm2-offset-syncs.b.internal", 0);
    let batches = block_on(strait::kafka::log_reader::read_partition(
        &client(source),
        &syncs,
    ))
    .unwrap()
    .unwrap_or_default();
    assert!(!batches.is_empty(), "no offset syncs written");
    assert!(strait.terminate().success(), "{}", strait.log_text());
    // Created with `compression.type=producer`, they keep what strait wrote: uncompressed
    // (which also lets MM2's tools, and older strait versions, read them).
    let progress = TopicPartition::new("strait-progress.a.internal", 0);
    for (cluster, tp) in [(source, &syncs), (target, &progress)] {
        for batch in raw_batches(cluster, tp) {
            assert_eq!(batch.compression().unwrap(), Compression::None, "{tp}");
        }
    }

    for round in 2..=3 {
        produce();
        strait.restart();
        wait_for_records(
            &mut strait,
            target,
            &remote,
            2,
            2000 * round,
            Duration::from_secs(60),
        );
        assert!(strait.terminate().success(), "{}", strait.log_text());
        assert_eq!(records(target, &remote, 2), 2000 * round, "round {round}");
    }
}

/// A source topic whose remote name the target refuses (250 characters, one more than Kafka
/// allows) is reported and left out; the topics next to it, and topics found later, are
/// created and replicated.
#[test]
fn a_topic_the_target_refuses_is_reported_and_the_others_replicate() {
    let [source, target] = clusters();
    let prefix = kafka::unique("refused");
    let long = format!("{prefix}-{}", "x".repeat(247 - prefix.len()));
    assert_eq!(long.len(), 248);
    let remote_long = format!("a.{long}");
    let first = format!("{prefix}-first");
    kafka::create_topic(source, &long, 1, &[]);
    kafka::create_topic(source, &first, 1, &[]);
    for topic in [&long, &first] {
        kafka::produce(source, &["--topic", topic, "--count", "100"]);
    }
    let config = config(
        &format!("{prefix}.*"),
        &["refresh.topics.interval.seconds = 2"],
    );
    let mut strait = Strait::start(&config, "properties").allow(&[&remote_long]);
    wait_for_records(
        &mut strait,
        target,
        &format!("a.{first}"),
        1,
        100,
        Duration::from_secs(60),
    );
    let line = strait.wait_for_log_line(Duration::from_secs(30), |l| {
        l.contains("\"ERROR\"") && l.contains(&remote_long)
    });
    assert!(line.contains("InvalidTopicException"), "{line}");

    // A topic found at a later discovery is not held up by the refused one.
    let later = format!("{prefix}-later");
    kafka::create_topic(source, &later, 1, &[]);
    kafka::produce(source, &["--topic", &later, "--count", "100"]);
    wait_for_records(
        &mut strait,
        target,
        &format!("a.{later}"),
        1,
        100,
        Duration::from_secs(60),
    );
    assert!(!kafka::list_topics(target).contains(&remote_long));
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// Remote topics are created with `compression.type=producer` whatever the target's default:
/// the broker stores the forwarded batches as they are (here uncompressed, as the source
/// holds them) instead of recompressing them with lz4.
#[test]
fn remote_topics_keep_the_batches_as_forwarded() {
    let [source, target] = clusters();
    let topic = kafka::unique("as-forwarded");
    kafka::create_topic(source, &topic, 1, &[("compression.type", "producer")]);
    kafka::produce(source, &["--topic", &topic, "--count", "500"]);
    let tp = TopicPartition::new(topic.as_str(), 0);
    assert!(raw_batches(source, &tp)
        .iter()
        .all(|b| b.compression() == Ok(Compression::None)));
    let mut strait = Strait::start(&config(&topic, &[]), "properties");
    let remote = format!("a.{topic}");
    wait_for_records(
        &mut strait,
        target,
        &remote,
        1,
        500,
        Duration::from_secs(60),
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
    for batch in raw_batches(target, &TopicPartition::new(remote.as_str(), 0)) {
        assert_eq!(batch.compression().unwrap(), Compression::None, "{remote}");
    }
}

/// A remote topic deleted on the target that the target then refuses to create again (here
/// a replication factor its one broker cannot give; a create policy or an ACL does the
/// same) is reported at ERROR naming it and the Kafka error; its partition stays paused and
/// is stopped at `produce.delivery.timeout.ms`, and the topic next to it replicates on all
/// along: nothing else stalls. Stopped partitions make the exit status 1.
#[test]
fn a_deleted_remote_topic_the_target_refuses_to_create_again_stalls_nothing_else() {
    let [source, target] = clusters();
    let prefix = kafka::unique("refused-again");
    let (gone, kept) = (format!("{prefix}-gone"), format!("{prefix}-kept"));
    let (remote_gone, remote_kept) = (format!("a.{gone}"), format!("a.{kept}"));
    for (topic, remote) in [(&gone, &remote_gone), (&kept, &remote_kept)] {
        kafka::create_topic(source, topic, 1, &[]);
        // Created ahead with one replica: strait, asking for 3, finds them there.
        kafka::create_topic(target, remote, 1, &[("compression.type", "producer")]);
        kafka::produce(source, &["--topic", topic, "--count", "100"]);
    }
    let [source_bootstrap, target_bootstrap] = [&source.bootstrap, &target.bootstrap];
    let config = format!(
        "clusters = a, b\na.bootstrap.servers = {source_bootstrap}\n\
         b.bootstrap.servers = {target_bootstrap}\na->b.enabled = true\na->b.topics = {prefix}-.*\n\
         replication.factor = 3\ninternal.topic.replication.factor = 1\n\
         progress.commit.interval.ms = 500\nproduce.delivery.timeout.ms = 15000\n"
    );
    // Every WARN and ERROR about the deleted topic (refused, paused, stopped), and the
    // stopped partition in the exit message.
    let mut strait =
        Strait::start(&config, "properties").allow(&[&remote_gone, "stopped on errors"]);
    let minute = Duration::from_secs(60);
    wait_for_records(&mut strait, target, &remote_gone, 1, 100, minute);
    wait_for_records(&mut strait, target, &remote_kept, 1, 100, minute);

    kafka::tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &target.bootstrap,
            "--delete",
            "--topic",
            &remote_gone,
        ],
    );
    for topic in [&gone, &kept] {
        kafka::produce(
            source,
            &["--topic", topic, "--first", "100", "--count", "100"],
        );
    }
    let refused = strait.wait_for_log_line(minute, |l| {
        l.contains("\"ERROR\"") && l.contains("refused to re-create") && l.contains(&remote_gone)
    });
    assert!(refused.contains("InvalidReplicationFactor"), "{refused}");
    wait_for_records(&mut strait, target, &remote_kept, 1, 200, minute);
    strait.wait_for_log_line(minute, |l| {
        l.contains("\"ERROR\"") && l.contains("partition stopped") && l.contains(&remote_gone)
    });
    kafka::produce(
        source,
        &["--topic", &kept, "--first", "200", "--count", "100"],
    );
    wait_for_records(&mut strait, target, &remote_kept, 1, 300, minute);
    assert!(!kafka::list_topics(target).contains(&remote_gone));
    assert_eq!(strait.terminate().code(), Some(1), "{}", strait.log_text());
}
