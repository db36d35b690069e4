//! Writes strait's own small record batches (heartbeats, checkpoints, offset syncs) to one
//! partition of a cluster: a plain `acks=all` Produce, retried through leader changes until
//! the cluster's request timeout. The replicated data never takes this path.

use kafka_protocol::messages::ProduceRequest;

use crate::batch::{ProducerStamp, RawBatch, Stamped};
use crate::kafka::backoff::retry;
use crate::kafka::produce_request::{self, TopicData};
use crate::kafka::{Cluster, KafkaError, TopicPartition};

/// Appends `batch` (built by `batch::encode_batch`) to `tp` and returns its base offset.
pub async fn append(
    cluster: &Cluster,
    tp: &TopicPartition,
    batch: &RawBatch,
) -> Result<i64, KafkaError> {
    let stamped = batch.stamp(&ProducerStamp::NONE);
    retry(cluster.timeout(), || append_once(cluster, tp, &stamped)).await
}

async fn append_once(
    cluster: &Cluster,
    tp: &TopicPartition,
    stamped: &Stamped,
) -> Result<i64, KafkaError> {
    let meta = cluster.metadata(Some(&[tp.topic.to_string()])).await?;
    let topic = meta
        .iter()
        .find(|t| *t.name == *tp.topic)
        .ok_or_else(|| KafkaError::Other(format!("{tp}: topic missing from metadata")))?;
    KafkaError::check("Metadata", || tp.to_string(), topic.error_code)?;
    let leader = topic
        .partitions
        .iter()
        .find(|p| p.partition == tp.partition && p.leader >= 0)
        .map(|p| p.leader)
        .ok_or_else(|| KafkaError::Broker {
            api: "Metadata",
            context: tp.to_string(),
            code: kafka_protocol::error::ResponseError::LeaderNotAvailable,
        })?;
    let conn = cluster.broker(leader).await?;
    let topics = [TopicData {
        name: tp.topic.clone(),
        topic_id: topic.id,
        partitions: vec![(tp.partition, stamped.clone())],
    }];
    let response = conn
        .start_encoded::<ProduceRequest>(i16::MAX, |version| {
            produce_request::encode(version, None, -1, cluster.timeout_ms(), &topics)
        })?
        .response()
        .await?;
    let partition = response
        .responses
        .into_iter()
        .flat_map(|t| t.partition_responses)
        .find(|p| p.index == tp.partition)
        .ok_or_else(|| {
            KafkaError::Other(format!("{tp}: Produce response without the partition"))
        })?;
    KafkaError::check("Produce", || tp.to_string(), partition.error_code)?;
    Ok(partition.base_offset)
}
