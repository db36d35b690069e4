//! The minimal MirrorMaker 2 config of `examples/mm2.properties` runs unchanged (only the
//! bootstrap addresses point at the test clusters, and the 60 s sync interval is shortened):
//! the target shows MM2's topics, and the Java console consumer reads heartbeats there.

mod common;

use std::time::Duration;

use common::kafka;
use common::strait::{wait_for_records, Strait};

#[test]
fn the_minimal_mm2_properties_runs_unchanged() {
    let [source, target] = kafka::clusters();
    kafka::create_topic(source, "orders", 3, &[]);
    kafka::create_topic(source, "payments", 2, &[]);
    kafka::produce(
        source,
        &[
            "--topic",
            "orders",
            "--count",
            "3000",
            "--compression",
            "lz4",
        ],
    );
    kafka::produce(
        source,
        &[
            "--topic",
            "payments",
            "--count",
            "1000",
            "--compression",
            "zstd",
        ],
    );
    let group = "orders-reader";
    kafka::consume(source, "orders", group, 1000);

    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/mm2.properties"
    ))
    .unwrap();
    let text = example
        .replace("source-broker:9092", &source.bootstrap)
        .replace("target-broker:9092", &target.bootstrap)
        .replace(
            "sync.group.offsets.interval.seconds = 60",
            "sync.group.offsets.interval.seconds = 1",
        )
        + "source->target.emit.checkpoints.interval.seconds = 1\n";
    // The example keeps MM2's default internal.topic.replication.factor (3); the test target
    // has one broker, so strait says it creates its internal topics with one replica.
    let mut strait = Strait::start(&text, "properties")
        .allow(&["fewer brokers than internal.topic.replication.factor"]);
    wait_for_records(
        &mut strait,
        target,
        "source.orders",
        3,
        3000,
        Duration::from_secs(90),
    );
    wait_for_records(
        &mut strait,
        target,
        "source.payments",
        2,
        1000,
        Duration::from_secs(90),
    );

    strait.wait_until(
        "MM2's topics on the target",
        Duration::from_secs(60),
        || {
            let topics = kafka::list_topics(target);
            [
                "source.orders",
                "source.payments",
                "heartbeats",
                "source.checkpoints.internal",
            ]
            .iter()
            .all(|t| topics.contains(*t))
            .then_some(())
        },
    );
    // The console consumer reads heartbeats, with their timestamps (not their binary values,
    // whose bytes may hold a line break).
    let out = kafka::tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server",
            &target.bootstrap,
            "--topic",
            "heartbeats",
            "--from-beginning",
            "--max-messages",
            "2",
            "--property",
            "print.timestamp=true",
            "--property",
            "print.value=false",
            "--timeout-ms",
            "30000",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for line in lines {
        let ts: i64 = line
            .strip_prefix("CreateTime:")
            .and_then(|l| l.split('\t').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(ts > 1_600_000_000_000, "{line}");
    }
    // The group that read on the source is checkpointed and synced.
    strait.wait_until("the group's checkpoints", Duration::from_secs(30), || {
        let translated = kafka::translate_offsets(target, "source", group);
        (translated.iter().map(|(_, _, o)| o).sum::<i64>() == 1000).then_some(())
    });
    assert!(strait.terminate().success(), "{}", strait.log_text());
}
