//! Strait's raw reader of a whole partition: ListOffsets, then sessionless `read_committed`
//! Fetches from the log start to the last stable offset. It reads strait's own internal
//! topics (progress, offset syncs), lets tests check what a flow wrote, and reads back what
//! a target partition holds of strait's own batches (`read_from`, everything written);
//! replication goes through the fetch sessions of `crate::fetch` instead.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::batch::{decode_records, RawBatch, ReadCommitted};
use crate::kafka::{Cluster, Connection, KafkaError, TopicPartition};

/// The fetch size [`read_partition`] starts with: eight times a broker's default
/// `max.message.bytes`, a few round trips for a partition of tests' data.
const FIRST_FETCH_BYTES: i32 = 8 * 1024 * 1024;
/// The most it grows to when no complete batch came: half the frame limit
/// ([`crate::kafka::codec::MAX_FRAME_BYTES`]), so that the response still fits.
const MAX_FETCH_BYTES: i32 = 128 * 1024 * 1024;

/// ListOffsets (`read_committed`) for partitions led by the broker behind `conn`:
/// `timestamp` -2 gives the log start offset, -1 the last stable offset.
pub async fn list_offsets(
    conn: &Connection,
    partitions: &[(TopicPartition, i32)],
    timestamp: i64,
) -> Result<HashMap<TopicPartition, i64>, KafkaError> {
    list_offsets_as(conn, partitions, timestamp, Isolation::Committed).await
}

/// What a read sees: a `read_committed` consumer's view (to the last stable offset, aborted
/// transactions left out), or everything written (to the high watermark, open transactions
/// included; control batches are always left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    Committed,
    Uncommitted,
}

impl Isolation {
    fn level(self) -> i8 {
        match self {
            Isolation::Committed => 1,
            Isolation::Uncommitted => 0,
        }
    }
}

/// [`list_offsets`] as `isolation` sees the log: `timestamp` -1 gives the high watermark
/// for [`Isolation::Uncommitted`].
async fn list_offsets_as(
    conn: &Connection,
    partitions: &[(TopicPartition, i32)],
    timestamp: i64,
    isolation: Isolation,
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
        .with_isolation_level(isolation.level())
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

/// The last stable offset of every partition of every topic of `cluster` that is not
/// internal and that `wanted` names (`None` for a partition whose leader did not answer).
pub async fn end_offsets(
    cluster: &Cluster,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<(TopicPartition, Option<i64>)>, KafkaError> {
    let mut by_leader: HashMap<i32, Vec<(TopicPartition, i32)>> = HashMap::new();
    for t in cluster.metadata(None).await? {
        if t.error_code != 0 || t.is_internal || !wanted(&t.name) {
            continue;
        }
        for p in &t.partitions {
            let tp = TopicPartition::new(t.name.as_str(), p.partition);
            by_leader
                .entry(p.leader)
                .or_default()
                .push((tp, p.leader_epoch));
        }
    }
    let mut out = Vec::new();
    for (leader, partitions) in by_leader {
        let ends = match cluster.broker(leader).await {
            Ok(conn) => list_offsets(&conn, &partitions, -1)
                .await
                .unwrap_or_default(),
            Err(_) => HashMap::new(),
        };
        out.extend(
            partitions
                .into_iter()
                .map(|(tp, _)| (tp.clone(), ends.get(&tp).copied())),
        );
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
    read_keyed_tail(cluster, tp, i64::MAX).await
}

/// [`read_keyed_records`] of the last `offsets` offsets (see [`read_tail`]).
pub async fn read_keyed_tail(
    cluster: &Cluster,
    tp: &TopicPartition,
    offsets: i64,
) -> Result<Option<Vec<(i64, Bytes, Bytes)>>, KafkaError> {
    let Some(batches) = read_tail(cluster, tp, offsets).await? else {
        return Ok(None);
    };
    keyed_records(tp, &batches).map(Some)
}

/// The records with a key of one partition of a compacted topic, in log order, read with
/// [`read_partition`]: a deletion (tombstone) has no value. `None` if the topic does not
/// exist.
pub async fn read_entries(
    cluster: &Cluster,
    tp: &TopicPartition,
) -> Result<Option<Vec<(Bytes, Option<Bytes>)>>, KafkaError> {
    let Some(batches) = read_partition(cluster, tp).await? else {
        return Ok(None);
    };
    let entries = records(tp, &batches)?
        .filter_map(|(_, key, value)| Some((key?, value)))
        .collect();
    Ok(Some(entries))
}

/// The records of `batches` (read from `tp`) that have a key and a value.
fn keyed_records(
    tp: &TopicPartition,
    batches: &[RawBatch],
) -> Result<Vec<(i64, Bytes, Bytes)>, KafkaError> {
    Ok(records(tp, batches)?
        .filter_map(|(offset, key, value)| Some((offset, key?, value?)))
        .collect())
}

/// Every record of `batches` (read from `tp`): offset, key, value. strait writes its
/// internal topics uncompressed, but a broker or topic with another `compression.type`
/// stores them recompressed (and other writers' topics are read too): any codec is read.
fn records(
    tp: &TopicPartition,
    batches: &[RawBatch],
) -> Result<impl Iterator<Item = (i64, Option<Bytes>, Option<Bytes>)>, KafkaError> {
    let mut out = Vec::new();
    for batch in batches {
        let records = decode_records(batch).map_err(|e| KafkaError::Other(format!("{tp}: {e}")))?;
        out.extend(records.into_iter().map(|r| (r.offset, r.key, r.value)));
    }
    Ok(out.into_iter())
}

/// Reads one partition from its log start to its current last stable offset, as a
/// `read_committed` consumer sees it: the batches, with control batches and aborted
/// transactions dropped, each CRC checked. `None` if the topic does not exist. A batch
/// larger than the fetch size is fetched with a larger one; answers that never move the
/// position are an error naming the partition and offset. For strait's own internal
/// topics and for checking what a flow wrote; not the replication path.
pub async fn read_partition(
    cluster: &Cluster,
    tp: &TopicPartition,
) -> Result<Option<Vec<RawBatch>>, KafkaError> {
    read_tail(cluster, tp, i64::MAX).await
}

/// [`read_partition`] from `offsets` before its last stable offset (or its log start, if
/// that is later): the batches holding those offsets, whole.
pub async fn read_tail(
    cluster: &Cluster,
    tp: &TopicPartition,
    offsets: i64,
) -> Result<Option<Vec<RawBatch>>, KafkaError> {
    let committed = Isolation::Committed;
    read_between(cluster, tp, committed, |end| end.saturating_sub(offsets)).await
}

/// The batches of one partition from the one holding offset `from` (or from its log start,
/// if that is later) to its end, whole, as `isolation` sees them: the produce engine reads
/// back what the target holds of its own batches.
pub async fn read_from(
    cluster: &Cluster,
    tp: &TopicPartition,
    from: i64,
    isolation: Isolation,
) -> Result<Option<Vec<RawBatch>>, KafkaError> {
    read_between(cluster, tp, isolation, |_| from).await
}

/// The topic id of `tp`, a connection to its leader, and the partition with the leader's
/// epoch as ListOffsets names it; `None` if the topic does not exist.
async fn leader(
    cluster: &Cluster,
    tp: &TopicPartition,
) -> Result<Option<(uuid::Uuid, Connection, [(TopicPartition, i32); 1])>, KafkaError> {
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
    Ok(Some((topic.id, conn, [(tp.clone(), p.leader_epoch)])))
}

/// Waits until every transaction open on `tp` now has ended: its last stable offset reached
/// today's high watermark, so that a `read_committed` read from then on sees every commit
/// made so far, whatever other transactions are open behind them. Transient errors (a
/// leader moving) are retried; an error after `within`, naming the offset a transaction
/// still holds open.
pub async fn await_stable(
    cluster: &Cluster,
    tp: &TopicPartition,
    within: std::time::Duration,
) -> Result<(), KafkaError> {
    let deadline = tokio::time::Instant::now() + within;
    let mut high = None;
    let mut stable = -1;
    loop {
        match stable_and_high(cluster, tp).await {
            Ok(None) => return Ok(()),
            Ok(Some((now_stable, now_high))) => {
                let high = *high.get_or_insert(now_high);
                stable = now_stable;
                if stable >= high {
                    return Ok(());
                }
            }
            Err(e) if e.is_retriable() && tokio::time::Instant::now() < deadline => {
                tracing::debug!(partition = %tp, error = %e, "waiting for open transactions to end; asking again");
            }
            Err(e) => return Err(e),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(KafkaError::Other(format!(
                "{tp}: a transaction open at offset {stable} did not end within {} s",
                within.as_secs()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The last stable offset and the high watermark of `tp`; `None` if the topic does not exist.
async fn stable_and_high(
    cluster: &Cluster,
    tp: &TopicPartition,
) -> Result<Option<(i64, i64)>, KafkaError> {
    let Some((_, conn, here)) = leader(cluster, tp).await? else {
        return Ok(None);
    };
    let end = |offsets: HashMap<TopicPartition, i64>| {
        offsets
            .get(tp)
            .copied()
            .ok_or_else(|| KafkaError::Other(format!("cannot list the offsets of {tp}")))
    };
    let high = end(list_offsets_as(&conn, &here, -1, Isolation::Uncommitted).await?)?;
    let stable = end(list_offsets_as(&conn, &here, -1, Isolation::Committed).await?)?;
    Ok(Some((stable, high)))
}

/// [`read_partition`] from `first(end)` (or the log start, if that is later) to the end
/// `isolation` sees (the last stable offset, or the high watermark).
async fn read_between(
    cluster: &Cluster,
    tp: &TopicPartition,
    isolation: Isolation,
    first: impl FnOnce(i64) -> i64,
) -> Result<Option<Vec<RawBatch>>, KafkaError> {
    let Some((topic_id, conn, here)) = leader(cluster, tp).await? else {
        return Ok(None);
    };
    let (start, end) = (
        list_offsets_as(&conn, &here, -2, isolation).await?,
        list_offsets_as(&conn, &here, -1, isolation).await?,
    );
    let (Some(&start), Some(&end)) = (start.get(tp), end.get(tp)) else {
        return Err(KafkaError::Other(format!(
            "cannot list the offsets of {tp}"
        )));
    };
    let mut out = Vec::new();
    let mut offset = start.max(first(end));
    let mut fetch_bytes = FIRST_FETCH_BYTES;
    while offset < end {
        // A sessionless full fetch (session id 0, epoch -1; KIP-227).
        let request = FetchRequest::default()
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(fetch_bytes)
            .with_isolation_level(isolation.level())
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(tp.topic.to_string())))
                .with_topic_id(topic_id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(tp.partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(fetch_bytes)])]);
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
            .map_err(|e| KafkaError::Other(format!("{tp} at offset {offset}: {e}")))?;
        let before = offset;
        // Only batches that end past the position come out, so each one moves it on.
        for (batch, visible) in committed {
            batch.verify_crc().map_err(|e| {
                KafkaError::Other(format!("{tp} at offset {}: {e}", batch.base_offset()))
            })?;
            offset = batch.next_offset();
            if visible {
                out.push(batch);
            }
        }
        if offset == before {
            // No complete batch past the position: one larger than the fetch size from a
            // broker that does not send the first batch whole (KIP-74), or a broken answer.
            // Ask for more, up to the cap; past it this is an error, never a loop.
            if fetch_bytes >= MAX_FETCH_BYTES {
                return Err(KafkaError::Other(format!(
                    "{tp}: no complete batch past offset {offset} (last stable offset {end}) in a Fetch of {fetch_bytes} bytes"
                )));
            }
            fetch_bytes = fetch_bytes.saturating_mul(2).min(MAX_FETCH_BYTES);
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{encode_batch, OwnRecord, ProducerStamp};
    use crate::kafka::fake_broker::{FakeBroker, Reply};
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    use kafka_protocol::messages::{
        ApiKey, FetchResponse, ListOffsetsResponse, RequestKind, ResponseKind,
    };
    use std::time::Duration;

    /// A fake broker leading `t` (one partition) whose log runs from `start` to `end` (the
    /// last stable offset) and whose Fetch answers hold `records(fetch offset, partition max
    /// bytes)`: error paths a real broker (KIP-74: the first batch always whole) never takes.
    async fn broker(
        start: i64,
        end: i64,
        records: impl Fn(i64, i32) -> Bytes + Send + 'static,
    ) -> (FakeBroker, Cluster) {
        let broker = FakeBroker::start(1, &[("t", 1)], move |r| match &r.body {
            RequestKind::ListOffsets(request) => {
                let topic = &request.topics[0];
                let offset = match topic.partitions[0].timestamp {
                    -2 => start,
                    _ => end,
                };
                Reply::Answer(ResponseKind::ListOffsets(
                    ListOffsetsResponse::default().with_topics(vec![
                        ListOffsetsTopicResponse::default()
                            .with_name(topic.name.clone())
                            .with_partitions(vec![ListOffsetsPartitionResponse::default()
                                .with_partition_index(0)
                                .with_offset(offset)]),
                    ]),
                ))
            }
            RequestKind::Fetch(request) => {
                let topic = &request.topics[0];
                let p = &topic.partitions[0];
                Reply::Answer(ResponseKind::Fetch(
                    FetchResponse::default().with_responses(vec![FetchableTopicResponse::default(
                    )
                    .with_topic(topic.topic.clone())
                    .with_topic_id(topic.topic_id)
                    .with_partitions(vec![PartitionData::default()
                        .with_partition_index(0)
                        .with_high_watermark(end)
                        .with_last_stable_offset(end)
                        .with_records(Some(records(p.fetch_offset, p.partition_max_bytes)))])]),
                ))
            }
            _ => Reply::Default,
        })
        .await;
        let cluster = Cluster::new(
            "fake",
            vec![broker.addr.clone()],
            "test",
            Duration::from_secs(2),
        );
        (broker, cluster)
    }

    /// One batch at offset 0 holding one record with a `value_len`-byte value.
    fn batch(value_len: usize) -> Bytes {
        let value = vec![7u8; value_len];
        let record = OwnRecord {
            key: Some(b"k"),
            value: Some(&value),
            timestamp: 1_700_000_000_000,
        };
        encode_batch(&[record], &ProducerStamp::NONE)
    }

    async fn read(cluster: &Cluster) -> Result<Option<Vec<RawBatch>>, KafkaError> {
        let tp = TopicPartition::new("t", 0);
        tokio::time::timeout(Duration::from_secs(20), read_partition(cluster, &tp))
            .await
            .expect("read_partition did not return within 20 s")
    }

    #[tokio::test]
    async fn a_corrupt_batch_is_an_error_naming_the_partition_and_offset() {
        let mut corrupt = batch(100).to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xFF;
        let corrupt = Bytes::from(corrupt);
        let (_broker, cluster) = broker(0, 1, move |_, _| corrupt.clone()).await;
        let err = read(&cluster).await.unwrap_err().to_string();
        assert!(err.contains("t-0") && err.contains("offset 0"), "{err}");
        assert!(err.contains("crc mismatch"), "{err}");
    }

    /// A batch larger than the first fetch size, from a broker that cuts it there: the
    /// reader asks again for more instead of stopping with what it has.
    #[tokio::test]
    async fn a_batch_larger_than_the_fetch_size_is_fetched_with_a_larger_one() {
        let big = batch(9 * 1024 * 1024);
        let whole = big.clone();
        let (broker, cluster) = broker(0, 1, move |_, max| {
            whole.slice(..whole.len().min(max.max(0) as usize))
        })
        .await;
        let batches = read(&cluster).await.unwrap().unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].as_bytes(), &big);
        let sizes: Vec<i32> = broker
            .received_of(ApiKey::Fetch)
            .iter()
            .map(|r| match &r.body {
                RequestKind::Fetch(f) => f.topics[0].partitions[0].partition_max_bytes,
                _ => unreachable!(),
            })
            .collect();
        assert!(
            sizes.len() > 1 && sizes.windows(2).all(|w| w[0] < w[1]),
            "{sizes:?}"
        );
    }

    /// Answers that never move the position (a cut batch however large the fetch, or only
    /// batches behind it) end in an error naming the partition and offset, not a loop or
    /// an early stop.
    #[tokio::test]
    async fn a_cut_batch_is_an_error_not_an_early_stop() {
        let cut = batch(100).slice(..80);
        let (_broker, cluster) = broker(0, 1, move |_, _| cut.clone()).await;
        let err = read(&cluster).await.unwrap_err().to_string();
        assert!(err.contains("t-0") && err.contains("offset 0"), "{err}");
    }

    #[tokio::test]
    async fn answers_behind_the_position_are_an_error_not_a_loop() {
        let behind = batch(100);
        let (_broker, cluster) = broker(5, 10, move |_, _| behind.clone()).await;
        let err = read(&cluster).await.unwrap_err().to_string();
        assert!(err.contains("t-0") && err.contains("offset 5"), "{err}");
    }

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
