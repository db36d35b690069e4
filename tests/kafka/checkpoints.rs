//! Checkpoints at scale: many group-partitions go in as many record batches as the
//! checkpoints topic accepts, not in one batch it refuses every interval.

use std::time::Duration;

use bytes::Bytes;

use crate::common::kafka;
use crate::common::strait::{block_on, client, mm2_properties, record_count, Strait};
use strait::kafka::appender::append;
use strait::kafka::groups::{self, Committed};
use strait::kafka::TopicPartition;
use strait::mm2::records::batch;

#[test]
fn checkpoints_fit_a_small_max_message_bytes() {
    let [source, target] = kafka::clusters();
    let alias = kafka::unique("ckpt");
    let topic = kafka::unique("ckpt-topic");
    let partitions = 60;
    kafka::create_topic(source, &topic, partitions, &[]);
    // The checkpoints of 60 partitions take some 5 KB: more than this topic takes in a batch.
    let checkpoints = format!("{alias}.checkpoints.internal");
    kafka::create_topic(
        target,
        &checkpoints,
        1,
        &[("cleanup.policy", "compact"), ("max.message.bytes", "2048")],
    );
    // One record per partition, and a group that has read it: offset 1 everywhere.
    let group = kafka::unique("ckpt-group");
    block_on(async {
        let src = client(source);
        let mut offsets = Vec::new();
        for p in 0..partitions {
            let tp = TopicPartition::new(topic.as_str(), p);
            let record = [(Bytes::from("key"), Bytes::from("value"))];
            append(&src, &tp, &batch(&record, 0))
                .await
                .expect("writing a record");
            let read = Committed {
                offset: 1,
                metadata: String::new(),
            };
            offsets.push((tp, read));
        }
        groups::commit(&src, &group, &offsets)
            .await
            .expect("committing offsets");
    });

    let extra = ["emit.checkpoints.interval.seconds = 1"];
    let mut strait = Strait::start(&mm2_properties(&alias, "tgt", &topic, &extra), "properties");
    let tp = TopicPartition::new(checkpoints.as_str(), 0);
    strait.wait_until(
        "a checkpoint for every partition",
        Duration::from_secs(60),
        || (record_count(target, &tp) >= partitions as i64).then_some(()),
    );
}
