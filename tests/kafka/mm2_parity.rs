//! MirrorMaker 2 parity against real Apache Kafka, checked with MM2's own client library
//! (`RemoteClusterUtils` from the connect-mirror-client jar) and the Java consumer:
//! exact checkpoints on topics with offset gaps, failover of a consumer group with zero
//! re-reads, topic discovery, partition growth and config sync, and A<->B without cycles.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use crate::common::kafka::{self, Cluster};
use crate::common::strait::{block_on, client, raw_batches, wait_for_records, Strait};
use strait::kafka::TopicPartition;

/// Settings that make every periodic task of a flow quick enough for a test.
const FAST: &[&str] = &[
    "emit.checkpoints.interval.seconds = 1",
    "emit.heartbeats.interval.seconds = 1",
    "sync.group.offsets.enabled = true",
    "sync.group.offsets.interval.seconds = 1",
    "refresh.topics.interval.seconds = 2",
    "sync.topic.configs.interval.seconds = 2",
    "progress.commit.interval.ms = 1000",
];

fn config(source_alias: &str, target_alias: &str, topics: &str) -> String {
    crate::common::strait::mm2_properties(source_alias, target_alias, topics, FAST)
}

/// The target offset of the record a group that committed `committed` on the source reads
/// next: computed from the records themselves (the value identifies a record).
fn expected_target_offset(
    source: &Cluster,
    target: &Cluster,
    topic: &str,
    remote: &str,
    committed: i64,
) -> i64 {
    let src = kafka::dump(source, topic);
    let dst = kafka::dump(target, remote);
    match src.iter().find(|r| r.offset >= committed) {
        Some(next) => {
            dst.iter()
                .find(|r| r.value == next.value)
                .expect("record replicated")
                .offset
        }
        None => dst.last().map(|r| r.offset + 1).unwrap_or(0),
    }
}

#[test]
fn translate_offsets_is_exact_across_aborts_and_compaction() {
    let [source, target] = kafka::clusters();
    let txn = kafka::unique("gaps-txn");
    kafka::create_topic(source, &txn, 1, &[]);
    let id = kafka::unique("gaps-id");
    kafka::produce(
        source,
        &[
            "--topic",
            &txn,
            "--count",
            "2000",
            "--transactional-id",
            &id,
            "--txn-size",
            "50",
            "--abort-every",
            "3",
        ],
    );
    let compacted = kafka::unique("gaps-compacted");
    kafka::create_topic(
        source,
        &compacted,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    for key_space in ["400", "13"] {
        kafka::produce(
            source,
            &[
                "--topic",
                &compacted,
                "--count",
                "400",
                "--key-space",
                key_space,
            ],
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    kafka::wait_compacted(source, &compacted, "13", Duration::from_secs(90), |r| {
        r.len() < 800
    });

    // Groups that stopped in the middle of each topic, past gaps.
    let g_txn = kafka::unique("g-txn");
    let read = kafka::consume(source, &txn, &g_txn, 777);
    assert_eq!(read.len(), 777);
    let g_cmp = kafka::unique("g-cmp");
    kafka::consume(source, &compacted, &g_cmp, 300);

    let topics = format!("{txn}, {compacted}");
    let mut strait = Strait::start(&config("src", "dst", &topics), "properties");
    for (topic, group) in [(&txn, &g_txn), (&compacted, &g_cmp)] {
        let remote = format!("src.{topic}");
        let committed = kafka::committed_offsets(source, group)
            .into_iter()
            .find(|(t, p, _)| t == topic && *p == 0)
            .expect("the group committed on the source")
            .2;
        let translated = strait.wait_until("a checkpoint", Duration::from_secs(90), || {
            kafka::translate_offsets(target, "src", group)
                .into_iter()
                .find(|(t, p, _)| *t == remote && *p == 0)
        });
        let want = expected_target_offset(source, target, topic, &remote, committed);
        assert_eq!(
            translated.2, want,
            "{group}: source offset {committed} must translate to {want}"
        );
    }
    // MM2's client library sees strait's heartbeats.
    strait.wait_until("heartbeats", Duration::from_secs(30), || {
        (kafka::upstream_clusters(target).contains(&"src".to_string())).then_some(())
    });
    assert_eq!(kafka::replication_hops(target, "src"), 1);
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

#[test]
fn a_failed_over_group_reads_exactly_the_rest() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("failover");
    kafka::create_topic(source, &topic, 3, &[]);
    let id = kafka::unique("failover-id");
    kafka::produce(
        source,
        &[
            "--topic",
            &topic,
            "--count",
            "3000",
            "--transactional-id",
            &id,
            "--txn-size",
            "40",
            "--abort-every",
            "4",
        ],
    );
    let group = kafka::unique("failover-group");
    let first = kafka::consume(source, &topic, &group, 1234);
    assert_eq!(first.len(), 1234);

    let mut strait = Strait::start(&config("fo", "dst", &topic), "properties");
    let remote = format!("fo.{topic}");
    let total = kafka::dump(source, &topic).len();
    wait_for_records(
        &mut strait,
        target,
        &remote,
        3,
        total as i64,
        Duration::from_secs(90),
    );
    // Wait until the group's offsets reached the target through checkpoints and group sync,
    // for every partition it committed on the source.
    let on_source = kafka::committed_offsets(source, &group).len();
    strait.wait_until(
        "group offsets on the target",
        Duration::from_secs(60),
        || (kafka::committed_offsets(target, &group).len() == on_source).then_some(()),
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());

    let rest = kafka::consume(target, &remote, &group, total);
    let seen: HashSet<_> = first.iter().map(|r| r.value.clone()).collect();
    let again = rest.iter().filter(|r| seen.contains(&r.value)).count();
    let mut all: Vec<_> = first.iter().chain(&rest).map(|r| r.value.clone()).collect();
    all.sort();
    all.dedup();
    println!(
        "failover: {} read on the source, {} on the target, {again} read twice",
        first.len(),
        rest.len()
    );
    assert_eq!(again, 0, "records read again after failover");
    assert_eq!(all.len(), total, "records never read after failover");
}

#[test]
fn new_topics_partitions_and_configs_follow_the_source() {
    let [source, target] = kafka::clusters();
    let prefix = kafka::unique("follow");
    let first = format!("{prefix}-a");
    kafka::create_topic(source, &first, 1, &[("retention.ms", "3600000")]);
    kafka::produce(source, &["--topic", &first, "--count", "100"]);
    let mut strait = Strait::start(&config("fl", "dst", &format!("{prefix}-.*")), "properties");
    wait_for_records(
        &mut strait,
        target,
        &format!("fl.{first}"),
        1,
        100,
        Duration::from_secs(60),
    );

    // A topic created after start.
    let second = format!("{prefix}-b");
    kafka::create_topic(source, &second, 2, &[]);
    kafka::produce(source, &["--topic", &second, "--count", "200"]);
    wait_for_records(
        &mut strait,
        target,
        &format!("fl.{second}"),
        2,
        200,
        Duration::from_secs(60),
    );

    // A partition added.
    kafka::tool(
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &source.bootstrap,
            "--alter",
            "--topic",
            &first,
            "--partitions",
            "3",
        ],
    );
    kafka::produce(
        source,
        &["--topic", &first, "--count", "300", "--partition", "2"],
    );
    wait_for_records(
        &mut strait,
        target,
        &format!("fl.{first}"),
        3,
        400,
        Duration::from_secs(60),
    );

    // Config changes: synced, except an excluded property.
    let config_tool = |args: &[&str]| {
        let mut all = vec![
            "--bootstrap-server",
            &source.bootstrap,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &first,
        ];
        all.extend_from_slice(args);
        kafka::tool("kafka.admin.ConfigCommand", &all);
    };
    config_tool(&[
        "--add-config",
        "retention.ms=7200000,cleanup.policy=compact,min.insync.replicas=1",
    ]);
    let remote = format!("fl.{first}");
    let configs = strait.wait_until("synced configs", Duration::from_secs(60), || {
        let c = client(target);
        let all = block_on(strait::kafka::admin::topic_configs(
            &c,
            std::slice::from_ref(&remote),
        ))
        .ok()?;
        let configs: BTreeMap<String, String> = all.get(&remote)?.clone();
        (configs.get("retention.ms").map(String::as_str) == Some("7200000")
            && configs.get("cleanup.policy").map(String::as_str) == Some("compact"))
        .then_some(configs)
    });
    assert!(
        !configs.contains_key("min.insync.replicas"),
        "excluded property synced: {configs:?}"
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

#[test]
fn bidirectional_flows_replicate_each_topic_once_per_direction() {
    let [a, b] = kafka::clusters();
    let prefix = kafka::unique("bidi");
    let (on_a, on_b) = (format!("{prefix}-x"), format!("{prefix}-y"));
    kafka::create_topic(a, &on_a, 1, &[]);
    kafka::create_topic(b, &on_b, 1, &[]);
    kafka::produce(a, &["--topic", &on_a, "--count", "100"]);
    kafka::produce(b, &["--topic", &on_b, "--count", "150"]);
    let mut text = format!(
        "clusters = left, right\nleft.bootstrap.servers = {}\nright.bootstrap.servers = {}\n\
         left->right.enabled = true\nright->left.enabled = true\ntopics = .*{prefix}.*\nreplication.factor = 1\n\
         internal.topic.replication.factor = 1\n",
        a.bootstrap, b.bootstrap
    );
    for line in FAST {
        text.push_str(line);
        text.push('\n');
    }
    let mut strait = Strait::start(&text, "properties");
    wait_for_records(
        &mut strait,
        b,
        &format!("left.{on_a}"),
        1,
        100,
        Duration::from_secs(60),
    );
    wait_for_records(
        &mut strait,
        a,
        &format!("right.{on_b}"),
        1,
        150,
        Duration::from_secs(60),
    );
    // Several refresh intervals later, nothing went back.
    std::thread::sleep(Duration::from_secs(5));
    let (topics_a, topics_b) = (kafka::list_topics(a), kafka::list_topics(b));
    let chains: Vec<&String> = topics_a
        .iter()
        .chain(&topics_b)
        .filter(|t| t.contains("left.right.") || t.contains("right.left."))
        .collect();
    assert!(chains.is_empty(), "cycles: {chains:?}");
    assert!(!topics_a.contains(&format!("right.left.{on_a}")));
    assert_eq!(
        raw_batches(b, &TopicPartition::new(format!("left.{on_a}"), 0))
            .iter()
            .map(|x| x.record_count())
            .sum::<i32>(),
        100
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
}
