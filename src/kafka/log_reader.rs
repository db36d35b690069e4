//! Strait's raw reader of a whole partition: ListOffsets, then sessionless `read_committed`
//! Fetches from the log start to the last stable offset. It reads strait's own internal
//! topics (progress, offset syncs) and lets tests check what a flow wrote; replication goes
//! through the fetch sessions of `crate::fetch` instead.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::batch::{decode_records, RawBatch, ReadCommitted};
use crate::kafka::{Cluster, Connection, KafkaError, TopicPartition};

/// ListOffsets (`read_committed`) for partitions led by the broker behind `conn`:
/// `timestamp` -2 gives the log start offset, -1 the last stable offset.
pub async fn list_offsets(
    conn: &Connection,
    partitions: &[(TopicPartition, i32)],
    timestamp: i64,
) -> Result<HashMap<TopicPartition, i64>, KafkaError> {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for (tp, epoch) in partitions {
        let p = ListOffsetsPartition::default()
            .with_partition_index(tp.partition)
            .with_current_leader_epoch(*epoch)
            .with_timestamp(timestamp);
        match topics.iter_mut().find(|t| t.name.0.as_str() == &*tp.topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(tp.topic.to_string())))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_isolation_level(1)
        .with_topics(topics);
    let response = conn.send(&request).await?;
    let mut out = HashMap::new();
    for t in response.topics {
        for p in t.partitions {
            let tp = TopicPartition::new(t.name.0.as_str(), p.partition_index);
            if p.error_code == 0 {
                out.insert(tp, p.offset);
            } else {
                tracing::debug!(partition = %tp, code = p.error_code, "ListOffsets error");
            }
        }
    }
    Ok(out)
}

/// The keyed records (offset, key, value) of one of strait's own internal topic partitions,
/// read with [`read_partition`]; records without a key or value are left out. `None` if the
/// topic does not exist.
pub async fn read_keyed_records(
    cluster: &Cluster,
    tp: &TopicPartition,
) -> Result<Option<Vec<(i64, Bytes, Bytes)>>, KafkaError> {
    let Some(batches) = read_partition(cluster, tp).await? else {
        return Ok(None);
    };
    keyed_records(tp, &batches).map(Some)
}

/// The records of `batches` (read from `tp`) that have a key and a value. strait writes its
/// internal topics uncompressed, but a broker or topic with another `compression.type`
/// stores them recompressed: any codec is read.
fn keyed_records(
    tp: &TopicPartition,
    batches: &[RawBatch],
) -> Result<Vec<(i64, Bytes, Bytes)>, KafkaError> {
    let mut out = Vec::new();
    for batch in batches {
        let records = decode_records(batch).map_err(|e| KafkaError::Other(format!("{tp}: {e}")))?;
        out.extend(
            records
                .into_iter()
                .filter_map(|r| Some((r.offset, r.key?, r.value?))),
        );
    }
    Ok(out)
}

/// Reads one partition from its log start to its current last stable offset, as a
/// `read_committed` consumer sees it: the batches, with control batches and aborted
/// transactions dropped. `None` if the topic does not exist. For strait's own internal
/// topics and for checking what a flow wrote; not the replication path.
pub async fn read_partition(
    cluster: &Cluster,
    tp: &TopicPartition,
) -> Result<Option<Vec<RawBatch>>, KafkaError> {
    let meta = cluster.metadata(Some(&[tp.topic.to_string()])).await?;
    let Some(topic) = meta
        .into_iter()
        .find(|t| *t.name == *tp.topic && t.error_code == 0)
    else {
        return Ok(None);
    };
    let Some(p) = topic
        .partitions
        .iter()
        .find(|p| p.partition == tp.partition && p.leader >= 0)
    else {
        return Err(KafkaError::Other(format!("{tp} has no leader")));
    };
    let conn = cluster.broker(p.leader).await?;
    let here = [(tp.clone(), p.leader_epoch)];
    let (start, end) = (
        list_offsets(&conn, &here, -2).await?,
        list_offsets(&conn, &here, -1).await?,
    );
    let (Some(&start), Some(&end)) = (start.get(tp), end.get(tp)) else {
        return Err(KafkaError::Other(format!(
            "cannot list the offsets of {tp}"
        )));
    };
    let mut out = Vec::new();
    let mut offset = start;
    while offset < end {
        // A sessionless full fetch (session id 0, epoch -1; KIP-227).
        let request = FetchRequest::default()
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(16 * 1024 * 1024)
            .with_isolation_level(1)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(tp.topic.to_string())))
                .with_topic_id(topic.id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(tp.partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(8 * 1024 * 1024)])]);
        let response = conn.send(&request).await?;
        KafkaError::check("Fetch", || tp.to_string(), response.error_code)?;
        let data = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
            .ok_or_else(|| KafkaError::Other(format!("empty Fetch response for {tp}")))?;
        KafkaError::check("Fetch", || tp.to_string(), data.error_code)?;
        let aborted = data
            .aborted_transactions
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.producer_id.0, a.first_offset));
        let committed = ReadCommitted::new(data.records.unwrap_or_default(), aborted, offset)
            .map_err(|e| KafkaError::Other(format!("{tp}: {e}")))?;
        if committed.is_empty() {
            break;
        }
        for (batch, visible) in committed {
            offset = batch.next_offset();
            if visible {
                out.push(batch);
            }
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One batch of 12 records per codec, written by Kafka's Java producer (see
    /// testdata/batches/README.md): key `key-<i>`, null when i % 5 == 4; value null when
    /// i % 4 == 3.
    const JAVA_BATCHES: [&[u8]; 4] = [
        include_bytes!("../../testdata/batches/java-gzip.bin"),
        include_bytes!("../../testdata/batches/java-snappy.bin"),
        include_bytes!("../../testdata/batches/java-lz4.bin"),
        include_bytes!("../../testdata/batches/java-zstd.bin"),
    ];

    #[test]
    fn keyed_records_reads_every_codec() {
        let tp = TopicPartition::new("strait-progress.a.internal", 0);
        let expected: Vec<i64> = (0..12).filter(|i| i % 5 != 4 && i % 4 != 3).collect();
        for bytes in JAVA_BATCHES {
            let batch = RawBatch::new(Bytes::from_static(bytes)).unwrap();
            let codec = batch.compression().unwrap();
            let records = keyed_records(&tp, &[batch]).unwrap_or_else(|e| panic!("{codec:?}: {e}"));
            let offsets: Vec<i64> = records.iter().map(|r| r.0).collect();
            assert_eq!(offsets, expected, "{codec:?}");
            for (offset, key, _) in &records {
                assert_eq!(key, format!("key-{offset}").as_bytes(), "{codec:?}");
            }
        }
    }
}
