//! What an operator watches strait by, read as a monitoring system reads it: `/metrics`
//! parsed by the Prometheus project's own client while strait replicates between real
//! Kafka clusters, every MirrorMaker 2 series Strimzi's dashboard queries, a lag that is
//! exactly the source end offset minus the target position while the target is down, and
//! `/healthz` and `/readyz` telling the truth.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::kafka::{self, Cluster};
use common::scrape::{self, Sample};
use common::strait::Strait;
use strait::kafka::TopicPartition;

/// Every metric name Strimzi's `strimzi-kafka-mirror-maker-2.json` dashboard queries that a
/// MirrorMaker 2 process (not the JVM, not the container runtime) exports, with what the
/// dashboard selects it by.
const DASHBOARD: &[&str] = &[
    "kafka_connect_worker_connector_count",
    "kafka_connect_worker_task_count",
    "kafka_connect_mirror_mirrorsourceconnector_record_rate",
    "kafka_connect_mirror_mirrorsourceconnector_byte_rate",
    "kafka_connect_mirror_mirrorsourceconnector_record_age_ms",
    "kafka_connect_mirror_mirrorsourceconnector_record_age_ms_avg",
    "kafka_connect_mirror_mirrorsourceconnector_record_age_ms_min",
    "kafka_connect_mirror_mirrorsourceconnector_record_age_ms_max",
    "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms",
    "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_avg",
    "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_min",
    "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_max",
    "kafka_consumer_fetch_manager_records_lag",
    "kafka_consumer_incoming_byte_total",
    "kafka_producer_outgoing_byte_total",
    "kafka_connect_source_task_source_record_active_count",
    "kafka_producer_buffer_available_bytes",
    "kafka_connect_connector_task_offset_commit_avg_time_ms",
    "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms",
    "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms_avg",
    "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms_min",
    "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms_max",
];

fn config(source: &Cluster, target: &Cluster, topic: &str, extra: &str) -> String {
    config_as(("s", "t"), source, target, topic, extra)
}

/// [`config`] with the clusters named `s` and `t`: a flow no other test's heartbeats name.
fn config_as(
    (s, t): (&str, &str),
    source: &Cluster,
    target: &Cluster,
    topic: &str,
    extra: &str,
) -> String {
    format!(
        "clusters = {s}, {t}\n{s}.bootstrap.servers = {}\n{t}.bootstrap.servers = {}\n\
         {s}->{t}.enabled = true\n{s}->{t}.topics = {topic}\nreplication.factor = 1\n\
         internal.topic.replication.factor = 1\nprogress.commit.interval.ms = 500\n{extra}",
        source.bootstrap, target.bootstrap
    )
}

fn start(config: &str) -> (Strait, String) {
    let addr = format!("127.0.0.1:{}", kafka::free_port());
    let strait = Strait::start_with(config, "properties", &["--metrics-listen", &addr]);
    (strait, addr)
}

/// The samples named `name` whose `topic` label is `topic`, by partition.
fn by_partition(samples: &[Sample], name: &str, topic: &str) -> BTreeMap<i32, Option<f64>> {
    samples
        .iter()
        .filter(|s| s.name == name && s.label("topic") == topic)
        .map(|s| (s.label("partition").parse().unwrap(), s.value))
        .collect()
}

/// Scrapes until `pred` accepts the samples; panics with the last scrape after `timeout`.
fn scrape_until(
    strait: &mut Strait,
    addr: &str,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&[Sample]) -> bool,
) -> Vec<Sample> {
    let deadline = Instant::now() + timeout;
    loop {
        strait.assert_running();
        let samples = scrape::metrics(addr);
        if pred(&samples) {
            return samples;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {timeout:?}; last scrape: {samples:#?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Probes `path` until it answers `status`; its body then.
fn probe_until(addr: &str, path: &str, status: u64, what: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (got, body) = scrape::probe(addr, path);
        if got == status {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {path} answers {got} {body}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `strait_broker_connected` of the `side` cluster's brokers (one each here).
fn broker_links(samples: &[Sample], side: &str) -> Vec<Option<f64>> {
    samples
        .iter()
        .filter(|s| s.name == "strait_broker_connected" && s.label("side") == side)
        .map(|s| s.value)
        .collect()
}

fn lag(samples: &[Sample], remote: &str) -> BTreeMap<i32, Option<f64>> {
    by_partition(samples, "strait_lag_records", remote)
}

/// A topic strait replicated in full, and a source group that read part of it (its
/// checkpoints are measured).
struct Replicated {
    strait: Strait,
    /// Where strait serves `/metrics`.
    addr: String,
    topic: String,
    remote: String,
    group: String,
}

/// A new topic (`name`, `partitions`, `records`) and its group, replicated with checkpoints
/// every second and `extra`.
fn replicated(name: &str, partitions: i32, records: u32, extra: &str) -> Replicated {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique(name);
    let remote = format!("s.{topic}");
    kafka::create_topic(source, &topic, partitions, &[]);
    let count = records.to_string();
    let produced = kafka::produce(source, &["--topic", &topic, "--count", &count]);
    assert_eq!(produced.committed, u64::from(records));
    let group = kafka::unique("ops-group");
    assert_eq!(kafka::consume(source, &topic, &group, 100).len(), 100);
    let extra = format!("emit.checkpoints.interval.seconds = 1\n{extra}");
    let (mut strait, addr) = start(&config(source, target, &topic, &extra));
    common::strait::wait_for_records(
        &mut strait,
        target,
        &remote,
        partitions,
        i64::from(records),
        Duration::from_secs(60),
    );
    Replicated {
        strait,
        addr,
        topic,
        remote,
        group,
    }
}

#[test]
fn metrics_carry_every_series_of_mm2s_dashboard_and_count_what_was_replicated() {
    let [source, _] = kafka::clusters();
    let Replicated {
        mut strait,
        addr,
        topic,
        remote,
        group,
    } = replicated("ops.metrics", 3, 3000, "");

    let samples = scrape_until(
        &mut strait,
        &addr,
        "3000 records counted, lag 0",
        Duration::from_secs(30),
        |s| {
            let counted: f64 = by_partition(
                s,
                "kafka_connect_mirror_mirrorsourceconnector_record_count",
                &remote,
            )
            .values()
            .map(|v| v.unwrap_or(0.0))
            .sum();
            let lag = lag(s, &remote);
            let checkpointed = s.iter().any(|s| {
                s.name == "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms"
                    && s.label("group") == group
            });
            counted == 3000.0
                && lag.len() == 3
                && lag.values().all(|v| *v == Some(0.0))
                && checkpointed
        },
    );
    for name in DASHBOARD {
        assert!(
            samples.iter().any(|s| s.name == *name),
            "no series {name} (Strimzi's MM2 dashboard queries it)"
        );
    }
    // MM2's per-partition series: its tags, the remote topic name, every partition.
    for name in [
        "record_count",
        "record_rate",
        "byte_count",
        "byte_rate",
        "record_age_ms_max",
        "replication_latency_ms_avg",
    ] {
        let name = format!("kafka_connect_mirror_mirrorsourceconnector_{name}");
        let found: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.name == name && s.label("topic") == remote)
            .collect();
        assert_eq!(found.len(), 3, "{name}: {found:?}");
        for s in found {
            assert_eq!((s.label("source"), s.label("target")), ("s", "t"), "{s:?}");
            assert!(s.value.is_some_and(|v| v >= 0.0), "{s:?}");
        }
    }
    // The lag panel's series: the replication consumer's client id, the source topic's name
    // with `.` as `_` (as the Java consumer tags it).
    let consumer: Vec<&Sample> = samples
        .iter()
        .filter(|s| {
            s.name == "kafka_consumer_fetch_manager_records_lag"
                && s.label("topic") == topic.replace('.', "_")
        })
        .collect();
    assert_eq!(consumer.len(), 3, "{consumer:?}");
    assert!(consumer
        .iter()
        .all(|s| s.label("clientid").ends_with("replication-consumer") && s.value == Some(0.0)));
    // Record batch bytes, the batches being forwarded as they are (no coalescing by default).
    let name = "kafka_connect_mirror_mirrorsourceconnector_byte_count";
    let bytes = by_partition(&samples, name, &remote);
    let mut total = 0;
    for p in 0..3 {
        let batches = common::strait::raw_batches(source, &TopicPartition::new(topic.as_str(), p));
        let want: usize = batches.iter().map(|b| b.len()).sum();
        assert_eq!(bytes[&p], Some(want as f64), "byte_count of partition {p}");
        total += want;
    }
    // Fetched: every batch once (nothing rewound here).
    let fetched: Vec<Option<f64>> = samples
        .iter()
        .filter(|s| s.name == "strait_fetched_bytes_total")
        .map(|s| s.value)
        .collect();
    assert_eq!(fetched, [Some(total as f64)]);
    let states: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == "strait_partition_state" && s.label("topic") == remote)
        .collect();
    assert_eq!(states.len(), 9, "three states per partition: {states:?}");
    assert!(
        states
            .iter()
            .all(|s| s.value == Some(f64::from(u8::from(s.label("state") == "replicating")))),
        "{states:?}"
    );

    // The group's offsets were translated in full within the last rounds.
    let stamped: Vec<f64> = samples
        .iter()
        .filter(|s| s.name == "strait_checkpoint_timestamp_seconds" && s.label("group") == group)
        .filter_map(|s| s.value)
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        matches!(stamped[..], [t] if now - t < 30.0),
        "{stamped:?} at {now}"
    );
    for side in ["source", "target"] {
        assert_eq!(broker_links(&samples, side), [Some(1.0)], "{side}");
    }
    let (status, body) = scrape::probe(&addr, "/healthz");
    assert_eq!(status, 200, "{body}");
    let (status, body) = scrape::probe(&addr, "/readyz");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["flows"][0]["flow"], "s->t", "{body}");
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

#[test]
fn per_topic_aggregation_reports_one_series_per_topic_with_the_partitions_combined() {
    let [source, _] = kafka::clusters();
    let Replicated {
        mut strait,
        addr,
        topic,
        remote,
        group,
    } = replicated("ops.per-topic", 4, 2000, "metrics.aggregation = topic\n");
    let of_topic = |s: &[Sample], name: &str| -> Vec<Sample> {
        s.iter()
            .filter(|s| s.name == name && s.label("topic") == remote)
            .cloned()
            .collect()
    };
    let samples = scrape_until(
        &mut strait,
        &addr,
        "2000 records counted in one series, lag 0, the group checkpointed",
        Duration::from_secs(30),
        |s| {
            let count = of_topic(s, "kafka_connect_mirror_mirrorsourceconnector_record_count");
            let lag = of_topic(s, "strait_lag_records");
            let checkpointed = s.iter().any(|s| {
                s.name == "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms"
                    && s.label("group") == group
            });
            count.len() == 1
                && count[0].value == Some(2000.0)
                && lag.len() == 1
                && lag[0].value == Some(0.0)
                && checkpointed
        },
    );
    for name in DASHBOARD {
        assert!(samples.iter().any(|s| s.name == *name), "no series {name}");
    }
    // Every per-partition series: one, with no partition label.
    for name in [
        "kafka_connect_mirror_mirrorsourceconnector_record_rate",
        "kafka_connect_mirror_mirrorsourceconnector_byte_count",
        "kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_max",
        "strait_lag_seconds",
    ] {
        let found = of_topic(&samples, name);
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        assert_eq!(found[0].label("partition"), "", "{name}: {found:?}");
    }
    let bytes: usize = (0..4)
        .flat_map(|p| common::strait::raw_batches(source, &TopicPartition::new(topic.as_str(), p)))
        .map(|b| b.len())
        .sum();
    let counted = of_topic(
        &samples,
        "kafka_connect_mirror_mirrorsourceconnector_byte_count",
    );
    assert_eq!(counted[0].value, Some(bytes as f64));
    let states: BTreeMap<String, Option<f64>> = of_topic(&samples, "strait_partition_state")
        .into_iter()
        .map(|s| (s.label("state").to_string(), s.value))
        .collect();
    assert_eq!(states["replicating"], Some(4.0), "{states:?}");
    assert_eq!(states["stopped"], Some(0.0), "{states:?}");
    let checkpoints: Vec<Sample> = samples
        .into_iter()
        .filter(|s| {
            s.name == "kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms"
                && s.label("group") == group
        })
        .collect();
    assert_eq!(checkpoints.len(), 1, "{checkpoints:?}");
    assert_eq!(checkpoints[0].label("partition"), "");
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

#[test]
fn lag_is_the_source_end_minus_the_target_position_while_the_target_is_down() {
    let [source, _] = kafka::clusters();
    let target = Cluster::start("ops-target", &[]);
    let topic = kafka::unique("ops.lag");
    let remote = format!("s.{topic}");
    kafka::create_topic(source, &topic, 2, &[]);
    let produce = |first: &str, count: &str| {
        kafka::produce(
            source,
            &["--topic", &topic, "--first", first, "--count", count],
        );
    };
    produce("0", "1000");
    let extra = "t.request.timeout.ms = 3000\nemit.checkpoints.enabled = false\n";
    let (strait, addr) = start(&config(source, &target, &topic, extra));
    // While the target is down: strait redials it, its requests in flight fail, the
    // heartbeat and metadata refresh that fall due fail, the target's refusals pause fetching.
    let mut strait = strait.allow(&[
        "cannot reach target broker",
        "produce request failed; will resend",
        "its fetching paused",
        "target metadata refresh failed",
        "heartbeat not written",
        "the target keeps refusing the partition",
        "no bootstrap server reachable",
    ]);
    common::strait::wait_for_records(
        &mut strait,
        &target,
        &remote,
        2,
        1000,
        Duration::from_secs(60),
    );
    let caught_up = |s: &[Sample]| {
        let lag = lag(s, &remote);
        lag.len() == 2 && lag.values().all(|v| *v == Some(0.0))
    };
    scrape_until(
        &mut strait,
        &addr,
        "lag 0",
        Duration::from_secs(30),
        caught_up,
    );
    let written = kafka::end_offsets(&target, &remote);

    target.stop();
    produce("1000", "500");
    let source_end: BTreeMap<i32, f64> = kafka::end_offsets(source, &topic)
        .into_iter()
        .map(|(p, o)| (p, o as f64))
        .collect();
    let want: BTreeMap<i32, Option<f64>> = written
        .iter()
        .map(|(p, o)| (*p, Some(source_end[p] - *o as f64)))
        .collect();
    assert_eq!(want.values().map(|v| v.unwrap()).sum::<f64>(), 500.0);
    scrape_until(
        &mut strait,
        &addr,
        "lag = source end - target position",
        Duration::from_secs(30),
        |s| lag(s, &remote) == want,
    );
    // Not ready once nothing is acknowledged for longer than the request timeout; alive.
    let body = probe_until(&addr, "/readyz", 503, "not ready with the target down");
    let reason = body["flows"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(reason.starts_with("target:"), "{body}");
    let (status, body) = scrape::probe(&addr, "/healthz");
    assert_eq!(status, 200, "{body}");
    scrape_until(
        &mut strait,
        &addr,
        "the target broker shown unreachable",
        Duration::from_secs(30),
        |s| broker_links(s, "target") == [Some(0.0)] && broker_links(s, "source") == [Some(1.0)],
    );
    // Its lag in seconds is the age of the oldest record waiting.
    let seconds = by_partition(&scrape::metrics(&addr), "strait_lag_seconds", &remote);
    assert!(
        seconds.values().any(|v| v.is_some_and(|v| v > 0.0)),
        "{seconds:?}"
    );

    target.start_again();
    scrape_until(
        &mut strait,
        &addr,
        "lag 0 again",
        Duration::from_secs(90),
        caught_up,
    );
    probe_until(&addr, "/readyz", 200, "ready after the target came back");
    assert_eq!(broker_links(&scrape::metrics(&addr), "target"), [Some(1.0)]);
    common::strait::wait_for_records(
        &mut strait,
        &target,
        &remote,
        2,
        1500,
        Duration::from_secs(30),
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
    target.stop();
}

#[test]
fn a_reload_changes_the_log_level() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("ops.log-level");
    kafka::create_topic(source, &topic, 1, &[]);
    kafka::produce(source, &["--topic", &topic, "--count", "100"]);
    // The listener set in the file, too.
    let addr = format!("127.0.0.1:{}", kafka::free_port());
    let with_level = |level: &str| {
        let extra = format!(
            "log.level = {level}\nemit.checkpoints.interval.seconds = 1\nmetrics.listen = {addr}\n"
        );
        config(source, target, &topic, &extra)
    };
    let mut strait = Strait::start(&with_level("warn"), "properties");
    common::strait::wait_for_records(
        &mut strait,
        target,
        &format!("s.{topic}"),
        1,
        100,
        Duration::from_secs(60),
    );
    let levels = |strait: &Strait| -> Vec<String> {
        strait
            .log_text()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|l| l["level"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert!(levels(&strait).is_empty(), "{}", strait.log_text());
    probe_until(
        &addr,
        "/healthz",
        200,
        "served on the file's metrics.listen",
    );

    std::fs::write(&strait.config, with_level("info,strait=debug")).unwrap();
    strait.signal("HUP");
    strait.wait_for_log_line(Duration::from_secs(10), |l| {
        l.contains("log level changed") && l.contains("info,strait=debug")
    });
    // Debug lines follow: the checkpoint task's, once a group has offsets to translate
    // (others may come first, such as a retry while the group's coordinator loads).
    let group = kafka::unique("ops-log-group");
    assert_eq!(kafka::consume(source, &topic, &group, 50).len(), 50);
    strait.wait_for_log_line(Duration::from_secs(20), |l| {
        l.contains("\"DEBUG\"") && l.contains("checkpoints written")
    });

    std::fs::write(&strait.config, with_level("error")).unwrap();
    strait.signal("HUP");
    // The reload's own INFO line is written before the filter changes; nothing below ERROR
    // after it.
    std::thread::sleep(Duration::from_secs(3));
    let after = levels(&strait).len();
    // Longer than the status line's interval (5 s), an INFO line.
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(levels(&strait).len(), after, "{}", strait.log_text());
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

#[test]
fn a_reload_turns_checkpoints_on_and_the_group_translates() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("ops.reload-checkpoints");
    let group = kafka::unique("ops-reload-group");
    kafka::create_topic(source, &topic, 1, &[]);
    kafka::produce(source, &["--topic", &topic, "--count", "300"]);
    assert_eq!(kafka::consume(source, &topic, &group, 120).len(), 120);
    // Aliases of its own: no other test writes checkpoints of `sc`.
    let with = |extra: &str| config_as(("sc", "tc"), source, target, &topic, extra);
    let mut strait = Strait::start(&with("emit.checkpoints.enabled = false\n"), "properties");
    common::strait::wait_for_records(
        &mut strait,
        target,
        &format!("sc.{topic}"),
        1,
        300,
        Duration::from_secs(60),
    );
    let checkpoints = "sc.checkpoints.internal".to_string();
    assert!(!kafka::checkpoint_topics(target).contains(&checkpoints));

    std::fs::write(
        &strait.config,
        with("emit.checkpoints.interval.seconds = 1\n"),
    )
    .unwrap();
    strait.signal("HUP");
    let found = strait.wait_until("the group's checkpoint", Duration::from_secs(30), || {
        let found = kafka::translate_offsets(target, "sc", &group);
        (!found.is_empty()).then_some(found)
    });
    assert_eq!(found, [(format!("sc.{topic}"), 0, 120)]);
    assert!(strait.terminate().success(), "{}", strait.log_text());
}

/// `strait ARGS`' standard output; the command must succeed.
fn cli_stdout(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(args)
        .output()
        .expect("running strait");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "strait {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn status_and_translate_offsets_agree_with_kafkas_own_tools() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("ops.inspect");
    let remote = format!("si.{topic}");
    let group = kafka::unique("ops-inspect-group");
    kafka::create_topic(source, &topic, 2, &[]);
    kafka::produce(source, &["--topic", &topic, "--count", "2000"]);
    assert_eq!(kafka::consume(source, &topic, &group, 700).len(), 700);
    let text = config_as(
        ("si", "ti"),
        source,
        target,
        &topic,
        "emit.checkpoints.interval.seconds = 1\n",
    );
    let (mut strait, _) = start(&text);
    let path = strait.config.to_str().unwrap().to_string();
    // Wait for RemoteClusterUtils (the real connect-mirror-client) to see a checkpoint of
    // every partition the group committed on the source.
    let partitions = kafka::committed_offsets(source, &group).len();
    assert!(partitions > 0);
    let mm2 = strait.wait_until("checkpoints of the group", Duration::from_secs(60), || {
        let found = kafka::translate_offsets(target, "si", &group);
        (found.len() == partitions).then_some(found)
    });
    common::strait::wait_for_records(
        &mut strait,
        target,
        &remote,
        2,
        2000,
        Duration::from_secs(60),
    );

    // translate-offsets: RemoteClusterUtils' answer, as CSV and as JSON.
    let csv = cli_stdout(&["translate-offsets", &path, "--group", &group, "--csv"]);
    let mut ours: Vec<(String, i32, i64)> = csv
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect();
    ours.sort();
    let mut theirs = mm2.clone();
    theirs.sort();
    assert_eq!(
        ours, theirs,
        "strait translate-offsets vs RemoteClusterUtils.translateOffsets"
    );
    let json: serde_json::Value = serde_json::from_str(&cli_stdout(&[
        "translate-offsets",
        &path,
        "--group",
        &group,
        "--topic",
        &topic,
        "--json",
    ]))
    .unwrap();
    assert_eq!(json.as_array().unwrap().len(), partitions, "{json}");
    let table = cli_stdout(&["translate-offsets", &path, "--group", &group]);
    assert!(
        table.starts_with("FLOW") && table.contains(&remote),
        "{table}"
    );
    // The CSV is what kafka-consumer-groups --reset-offsets --from-file reads: the group
    // (inactive on the target) takes those offsets.
    let (_dir, file) = common::strait::config_file("offsets.csv", &csv);
    kafka::tool(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        &[
            "--bootstrap-server",
            &target.bootstrap,
            "--group",
            &group,
            "--reset-offsets",
            "--from-file",
            common::strait::arg(&file),
            "--execute",
        ],
    );
    let mut committed = kafka::committed_offsets(target, &group);
    committed.sort();
    assert_eq!(
        committed, theirs,
        "the group's offsets on the target after the reset"
    );

    // status: the source end offsets as GetOffsetShell gives them, the committed position
    // there once caught up, the target offsets as GetOffsetShell gives them.
    let source_end = kafka::end_offsets(source, &topic);
    let target_end = kafka::end_offsets(target, &remote);
    let deadline = Instant::now() + Duration::from_secs(30);
    let flow = loop {
        let all: serde_json::Value =
            serde_json::from_str(&cli_stdout(&["status", &path, "--json"])).unwrap();
        let flow = all[0].clone();
        let ours: Vec<&serde_json::Value> = flow["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["topic"] == topic.as_str())
            .collect();
        let caught_up = ours.len() == 2 && ours.iter().all(|p| p["lag"] == 0);
        if caught_up {
            break flow;
        }
        assert!(
            Instant::now() < deadline,
            "status never caught up: {flow:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for (p, end) in &source_end {
        let row = flow["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["topic"] == topic.as_str() && r["partition"] == *p)
            .unwrap();
        assert_eq!(row["source_end"], *end, "{row}");
        assert_eq!(row["committed"], *end, "{row}");
        assert_eq!(row["remote_topic"], remote.as_str(), "{row}");
        let want = target_end.iter().find(|(tp, _)| tp == p).unwrap().1;
        assert_eq!(row["target_committed"], want, "{row}");
    }
    assert!(flow["last_commit_age_ms"].as_i64().is_some(), "{flow}");
    // Its heartbeats (every second) say it runs...
    assert_eq!(flow["running"], true, "{flow}");
    assert!(
        flow["last_heartbeat_age_ms"].as_i64().unwrap() < 8_000,
        "{flow}"
    );
    let table = cli_stdout(&["status", &path]);
    assert!(
        table.starts_with("flow si->ti: running (last heartbeat"),
        "{table}"
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
    // ... and their silence, past three intervals and 5 s, that it does not.
    std::thread::sleep(Duration::from_secs(9));
    let all: serde_json::Value =
        serde_json::from_str(&cli_stdout(&["status", &path, "--json"])).unwrap();
    assert_eq!(all[0]["running"], false, "{all:#}");
    let table = cli_stdout(&["status", &path]);
    assert!(
        table.starts_with("flow si->ti: not running (last heartbeat"),
        "{table}"
    );
}

#[test]
fn a_reload_starts_and_stops_topics_and_a_broken_file_keeps_the_running_config() {
    let [source, target] = kafka::clusters();
    let a = kafka::unique("ops.reload-a");
    let b = kafka::unique("ops.reload-b");
    let (remote_a, remote_b) = (format!("s.{a}"), format!("s.{b}"));
    let produce = |topic: &str, first: u64, count: u64| {
        let (first, count) = (first.to_string(), count.to_string());
        kafka::produce(
            source,
            &["--topic", topic, "--first", &first, "--count", &count],
        );
    };
    for topic in [&a, &b] {
        kafka::create_topic(source, topic, 1, &[]);
        produce(topic, 0, 300);
    }
    let with_topics = |topics: &str| config(source, target, topics, "");
    let (strait, addr) = start(&with_topics(&a));
    let mut strait = strait.allow(&["config reload rejected"]);
    let count =
        |remote: &str| common::strait::record_count(target, &TopicPartition::new(remote, 0));
    let wait = |strait: &mut Strait, remote: &str, n: i64| {
        common::strait::wait_for_records(strait, target, remote, 1, n, Duration::from_secs(60))
    };
    let reload = |strait: &mut Strait, text: &str| {
        std::fs::write(&strait.config, text).unwrap();
        strait.signal("HUP");
    };
    wait(&mut strait, &remote_a, 300);

    // A topic added to the filter replicates.
    reload(&mut strait, &with_topics(&format!("{a}, {b}")));
    wait(&mut strait, &remote_b, 300);

    // A file that does not load is rejected; the running config goes on.
    reload(&mut strait, "clusters = s, t\ns->t.enabled = maybe\n");
    let line = strait.wait_for_log_line(Duration::from_secs(10), |l| {
        l.contains("config reload rejected")
    });
    assert!(
        line.contains("s->t.enabled"),
        "the error names the key: {line}"
    );
    produce(&a, 300, 100);
    produce(&b, 300, 100);
    wait(&mut strait, &remote_a, 400);
    wait(&mut strait, &remote_b, 400);

    // A topic the filter now leaves out stops: its new records stay on the source.
    reload(&mut strait, &with_topics(&b));
    strait.wait_for_log_line(Duration::from_secs(10), |l| {
        l.contains("no longer replicating")
    });
    produce(&a, 400, 100);
    produce(&b, 400, 100);
    wait(&mut strait, &remote_b, 500);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        count(&remote_a),
        400,
        "records of a topic left out were replicated"
    );
    // Its series are gone: no lag frozen at its last value.
    let samples = scrape::metrics(&addr);
    assert!(lag(&samples, &remote_a).is_empty(), "{samples:?}");
    assert_eq!(lag(&samples, &remote_b).len(), 1);

    // Back in the filter, it goes on from where it stopped: nothing copied twice.
    reload(&mut strait, &with_topics(&format!("{a}, {b}")));
    wait(&mut strait, &remote_a, 500);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(count(&remote_a), 500, "records copied twice");
    let back = |s: &[Sample]| lag(s, &remote_a).values().eq([&Some(0.0)]);
    scrape_until(
        &mut strait,
        &addr,
        "its lag back, at 0",
        Duration::from_secs(10),
        back,
    );
    assert_eq!(count(&remote_b), 500);
    assert!(strait.terminate().success(), "{}", strait.log_text());
}
