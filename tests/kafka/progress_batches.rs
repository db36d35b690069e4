//! Progress commits fit the progress topic: a commit with a position for many partitions is
//! split into batches within the topic's `max.message.bytes`, rather than sent as one batch
//! the target refuses (which stopped the progress partition: nothing was durable again).

use std::time::Duration;

use crate::common::kafka;
use crate::common::strait::{
    block_on, client, mm2_properties, wait_for_records, wait_for_topic, Strait,
};
use strait::kafka::TopicPartition;
use strait::progress;

#[test]
fn progress_fits_a_small_max_message_bytes() {
    let [source, target] = kafka::clusters();
    let source_alias = kafka::unique("psrc");
    let topic = kafka::unique("wide");
    let partitions = 64;
    let remote = format!("{source_alias}.{topic}");
    let progress_topic = progress::topic_name(&source_alias);
    kafka::create_topic(source, &topic, partitions, &[]);
    wait_for_topic(source, &topic);
    // A position record is ~50 bytes here: 64 of them do not fit in one 512-byte batch,
    // and with a 3 s commit interval one commit holds them all.
    kafka::create_topic(
        target,
        &progress_topic,
        1,
        &[("cleanup.policy", "compact"), ("max.message.bytes", "512")],
    );
    let count = 2_000;
    kafka::produce(source, &["--topic", &topic, "--count", &count.to_string()]);
    let ends: Vec<(i32, i64)> = kafka::end_offsets(source, &topic)
        .into_iter()
        .filter(|&(_, end)| end > 0)
        .collect();
    assert!(ends.len() > 40, "records in only {} partitions", ends.len());

    let config = mm2_properties(
        &source_alias,
        "ptgt",
        &topic,
        &["progress.commit.interval.ms = 3000"],
    );
    let mut strait = Strait::start(&config, "properties");
    wait_for_records(
        &mut strait,
        target,
        &remote,
        partitions,
        count,
        Duration::from_secs(60),
    );
    strait.wait_until(
        "progress at the end of every partition",
        Duration::from_secs(20),
        || {
            let committed = block_on(progress::load(&client(target), &progress_topic)).ok()?;
            ends.iter()
                .all(|&(p, end)| {
                    committed
                        .get(&TopicPartition::new(topic.as_str(), p))
                        .is_some_and(|(pos, _)| pos.source_next == end)
                })
                .then_some(())
        },
    );
    assert!(strait.terminate().success(), "{}", strait.log_text());
}
