//! Two strait processes started on one configuration must not both write: the second one's
//! InitProducerId with the flow's transactional id fences the first, which stops with an
//! error naming what happened instead of copying every record a second time.

use std::time::{Duration, Instant};

use crate::common::kafka;
use crate::common::strait::{mm2_properties, record_count, wait_for_records, Strait};
use strait::kafka::TopicPartition;

fn target_records(target: &kafka::Cluster, topic: &str, partitions: i32) -> i64 {
    (0..partitions)
        .map(|p| record_count(target, &TopicPartition::new(topic, p)))
        .sum()
}

#[test]
fn a_second_process_on_the_same_flow_fences_the_first() {
    let [source, target] = kafka::clusters();
    let topic = kafka::unique("fenced");
    let remote = format!("a.{topic}");
    kafka::create_topic(source, &topic, 2, &[]);
    let config = mm2_properties("a", "b", &topic, &["progress.commit.interval.ms = 500"]);
    let wave = || kafka::produce(source, &["--topic", &topic, "--count", "1000"]);

    wave();
    let mut first = Strait::start(&config, "properties").allow(&[
        // what the fenced process says when it stops
        "another strait process took over",
        "flow failed",
    ]);
    wait_for_records(
        &mut first,
        target,
        &remote,
        2,
        1000,
        Duration::from_secs(60),
    );
    // Let the first process commit what it copied: the second starts from there.
    std::thread::sleep(Duration::from_secs(2));

    let mut second = Strait::start(&config, "properties");
    second.wait_for_log_line(Duration::from_secs(60), |l| {
        l.contains("idempotent producer ready")
    });
    // Both read the new records; the first one's next batch on a partition the second one
    // wrote to is refused, and it stops. Until then some batches may land twice.
    wave();
    wait_for_records(
        &mut second,
        target,
        &remote,
        2,
        2000,
        Duration::from_secs(60),
    );
    wave();
    let status = first.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{}", first.log_text());
    assert!(
        first
            .log_text()
            .contains("another strait process took over"),
        "{}",
        first.log_text()
    );

    // From now on one writer: a wave arrives exactly once.
    wait_for_records(
        &mut second,
        target,
        &remote,
        2,
        3000,
        Duration::from_secs(60),
    );
    let before = target_records(target, &remote, 2);
    wave();
    let deadline = Instant::now() + Duration::from_secs(60);
    while target_records(target, &remote, 2) < before + 1000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    // Time for a second copy to show up, were anything still writing one.
    std::thread::sleep(Duration::from_secs(3));
    second.assert_running();
    assert_eq!(target_records(target, &remote, 2), before + 1000);
}
