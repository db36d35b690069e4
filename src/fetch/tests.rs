//! The fetcher over the wire against the scripted fake broker, for the answers a real broker
//! gives only after an unclean leader election or a log truncation: a diverging epoch
//! (KIP-320) and a position past the log end. What each request carried and where the
//! partition went on are checked.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ListOffsetsResponse, RequestKind, ResponseKind,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Chunk, FetchConfig, FetchCounts, FetchEvent, Fetcher};
use crate::batch::split_batches;
use crate::config::OffsetReset;
use crate::kafka::codec::decode_response;
use crate::kafka::fake_broker::{FakeBroker, Received, Reply};
use crate::kafka::{Cluster, TopicPartition};
use crate::offset_map::Lineage;

const TOPIC: &str = "t";

/// Batches `range` of partition 0 of the captured `none-small` response (4 records each:
/// batch `i` holds offsets `4i..4i+4`), stamped as written by a leader of epoch `epoch`
/// (the epoch is outside the CRC, as brokers stamp it on append).
fn records(range: std::ops::Range<usize>, epoch: i32) -> Bytes {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/fetch/none-small.v18.bin"
    );
    let response =
        decode_response::<FetchRequest>(Bytes::from(std::fs::read(path).unwrap()), 18).unwrap();
    let data = response.responses[0]
        .partitions
        .iter()
        .find(|p| p.partition_index == 0)
        .unwrap();
    let mut out = BytesMut::new();
    for batch in &split_batches(data.records.clone().unwrap())
        .unwrap()
        .batches[range]
    {
        let start = out.len();
        out.extend_from_slice(batch.as_bytes());
        out[start + 12..start + 16].copy_from_slice(&epoch.to_be_bytes());
    }
    out.freeze()
}

/// The answer to `fetch` with partition 0 of its one topic as `data`.
fn answer(fetch: &FetchRequest, data: PartitionData) -> Reply {
    let topic = &fetch.topics[0];
    Reply::Answer(ResponseKind::Fetch(
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(topic.topic.clone())
            .with_topic_id(topic.topic_id)
            .with_partitions(vec![data.with_partition_index(0)])]),
    ))
}

/// Partition data with `records` up to a high watermark of `hw`.
fn fetched(records: Bytes, hw: i64) -> PartitionData {
    PartitionData::default()
        .with_high_watermark(hw)
        .with_last_stable_offset(hw)
        .with_records(Some(records))
}

/// A fetcher of partition `t-0` from `offset` on `broker` (reset policy `policy`), its
/// handle and its events.
fn fetcher(
    broker: &FakeBroker,
    offset: i64,
    policy: OffsetReset,
) -> (Fetcher, mpsc::Receiver<FetchEvent>) {
    fetcher_from(broker, offset, policy, None)
}

/// [`fetcher`] of a position taken from the log `origin` (a committed one, say).
fn fetcher_from(
    broker: &FakeBroker,
    offset: i64,
    policy: OffsetReset,
    origin: Option<Lineage>,
) -> (Fetcher, mpsc::Receiver<FetchEvent>) {
    let cluster = Cluster::new(
        "source",
        vec![broker.addr.clone()],
        "strait-test",
        Duration::from_secs(30),
    );
    let config = FetchConfig {
        max_wait_ms: 100,
        max_bytes: 1 << 20,
        partition_max_bytes: 1 << 20,
        offset_reset: policy,
        buffer_bytes: 8 << 20,
    };
    let (events_tx, events) = mpsc::channel(16);
    let (fetcher, _task) = Fetcher::spawn(&cluster, config, events_tx, CancellationToken::new());
    fetcher.assign(TopicPartition::new(TOPIC, 0), Some(offset), origin, 0);
    (fetcher, events)
}

async fn next_chunk(events: &mut mpsc::Receiver<FetchEvent>) -> Chunk {
    match tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
        Ok(Some(FetchEvent::Chunk(chunk))) => chunk,
        other => panic!("expected a chunk, got {other:?}"),
    }
}

/// (fetch offset, last fetched epoch) of partition 0 in each Fetch the broker received.
fn fetch_positions(broker: &FakeBroker) -> Vec<(i64, i32)> {
    broker
        .received_of(ApiKey::Fetch)
        .iter()
        .filter_map(|r| match &r.body {
            RequestKind::Fetch(f) => f
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| (p.fetch_offset, p.last_fetched_epoch)),
            _ => None,
        })
        .collect()
}

fn fetch_request(r: &Received) -> Option<&FetchRequest> {
    match &r.body {
        RequestKind::Fetch(f) => Some(f),
        _ => None,
    }
}

#[tokio::test]
async fn a_diverging_epoch_rewinds_to_its_end_offset_and_is_counted() {
    // Offsets 0..12 come from a leader of epoch 1. Then an unclean election: the new
    // leader (epoch 2) holds epoch 1 only up to offset 8 and wrote its own 8..12.
    let mut fetches = 0;
    let broker = FakeBroker::start(1, &[(TOPIC, 1)], move |r| {
        let Some(fetch) = fetch_request(r) else {
            return Reply::Default;
        };
        fetches += 1;
        match fetches {
            1 => answer(fetch, fetched(records(0..3, 1), 12)),
            2 => answer(
                fetch,
                PartitionData::default()
                    .with_high_watermark(12)
                    .with_diverging_epoch(
                        EpochEndOffset::default().with_epoch(1).with_end_offset(8),
                    ),
            ),
            3 => answer(fetch, fetched(records(2..3, 2), 12)),
            _ => Reply::Stall,
        }
    })
    .await;
    let (fetcher, mut events) = fetcher(&broker, 0, OffsetReset::Latest);

    let first = next_chunk(&mut events).await;
    assert_eq!(first.next_offset, 12);
    let again = next_chunk(&mut events).await;
    assert_eq!(again.batches[0].batch.base_offset(), 8);
    assert_eq!(again.next_offset, 12);

    // Each Fetch told the leader the epoch of the last batch before its offset.
    assert_eq!(fetch_positions(&broker)[..3], [(0, -1), (12, 1), (8, 1)]);
    let current_epochs: Vec<i32> = broker
        .received_of(ApiKey::Fetch)
        .iter()
        .filter_map(|r| fetch_request(r)?.topics.first()?.partitions.first())
        .map(|p| p.current_leader_epoch)
        .collect();
    assert!(current_epochs.iter().all(|e| *e == current_epochs[0]));
    assert_eq!(
        fetcher.stats(),
        FetchCounts {
            truncations: 1,
            truncated_offsets: 4,
            ..FetchCounts::default()
        }
    );
}

/// A ListOffsets answer for `t-0` at `offset`.
fn list_offsets_answer(offset: i64) -> Reply {
    Reply::Answer(ResponseKind::ListOffsets(
        ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
            .with_name(kafka_protocol::messages::TopicName(
                kafka_protocol::protocol::StrBytes::from_static_str(TOPIC),
            ))
            .with_partitions(vec![ListOffsetsPartitionResponse::default()
                .with_partition_index(0)
                .with_offset(offset)])]),
    ))
}

/// A broker whose log of `t-0` spans `start..end` and answers OFFSET_OUT_OF_RANGE to the
/// first Fetch, then the records from offset 40 on.
async fn out_of_range_broker(start: i64, end: i64) -> FakeBroker {
    let mut fetches = 0;
    FakeBroker::start(1, &[(TOPIC, 1)], move |r| match &r.body {
        RequestKind::ListOffsets(l) => match l.topics[0].partitions[0].timestamp {
            -2 => list_offsets_answer(start),
            _ => list_offsets_answer(end),
        },
        RequestKind::Fetch(fetch) => {
            fetches += 1;
            match fetches {
                1 => answer(fetch, PartitionData::default().with_error_code(1)),
                2 => answer(fetch, fetched(records(10..12, 0), 48)),
                _ => Reply::Stall,
            }
        }
        _ => Reply::Default,
    })
    .await
}

#[tokio::test]
async fn below_the_log_start_goes_to_the_log_start_whatever_the_policy() {
    // The policy is `latest`: the log end (48) would skip the retained 40..48.
    let broker = out_of_range_broker(40, 48).await;
    let (fetcher, mut events) = fetcher(&broker, 12, OffsetReset::Latest);
    let chunk = next_chunk(&mut events).await;
    assert_eq!(chunk.batches[0].batch.base_offset(), 40);
    assert_eq!(fetch_positions(&broker)[..2], [(12, -1), (40, -1)]);
    assert_eq!(
        fetcher.stats(),
        FetchCounts {
            retention_resets: 1,
            offsets_lost_to_retention: 28,
            ..FetchCounts::default()
        }
    );
}

#[tokio::test]
async fn past_the_log_end_rewinds_to_the_log_end() {
    // The log was truncated to 40 under a position of 44. The policy is `earliest`: the
    // log start (0) would copy the whole log again.
    let broker = out_of_range_broker(0, 40).await;
    let (fetcher, mut events) = fetcher(&broker, 44, OffsetReset::Earliest);
    let chunk = next_chunk(&mut events).await;
    assert_eq!(chunk.batches[0].batch.base_offset(), 40);
    assert_eq!(fetch_positions(&broker)[..2], [(44, -1), (40, -1)]);
    assert_eq!(
        fetcher.stats(),
        FetchCounts {
            truncations: 1,
            truncated_offsets: 4,
            ..FetchCounts::default()
        }
    );
}

#[tokio::test]
async fn an_unknown_server_error_is_retried_after_a_backoff_and_counted() {
    let mut fetches = 0;
    let broker = FakeBroker::start(1, &[(TOPIC, 1)], move |r| {
        let Some(fetch) = fetch_request(r) else {
            return Reply::Default;
        };
        fetches += 1;
        match fetches {
            1 => answer(fetch, PartitionData::default().with_error_code(-1)),
            2 => answer(fetch, fetched(records(0..3, 0), 12)),
            _ => Reply::Stall,
        }
    })
    .await;
    let (fetcher, mut events) = fetcher(&broker, 0, OffsetReset::Earliest);
    let chunk = next_chunk(&mut events).await;
    assert_eq!(chunk.next_offset, 12);
    assert_eq!(fetch_positions(&broker)[..2], [(0, -1), (0, -1)]);
    // Counted once, and taken once: the metrics add what each call returns.
    assert_eq!(fetcher.take_errors(), [(-1, 1)]);
    assert_eq!(fetcher.take_errors(), []);
    let links = fetcher.links();
    assert!(
        !links.is_empty() && links.iter().all(|(_, up)| *up),
        "{links:?}"
    );
}

/// A partition with nothing to fetch tells the engine each new source end (the last stable
/// offset), once (an empty chunk at its position), so its lag is known before its first
/// records.
#[tokio::test]
async fn an_idle_partition_reports_each_new_source_end_once() {
    let mut fetches = 0;
    let broker = FakeBroker::start(1, &[(TOPIC, 1)], move |r| {
        let Some(fetch) = fetch_request(r) else {
            return Reply::Default;
        };
        fetches += 1;
        let idle = |hw| PartitionData::default().with_high_watermark(hw);
        match fetches {
            1 | 2 => answer(fetch, idle(5)),
            // An open transaction: strait reads up to its last stable offset only.
            3 => answer(fetch, idle(9).with_last_stable_offset(7)),
            _ => Reply::Stall,
        }
    })
    .await;
    let (_fetcher, mut events) = fetcher(&broker, 2, OffsetReset::Earliest);
    let reported = |c: Chunk| (c.batches.len(), c.from, c.next_offset, c.source_end);
    assert_eq!(reported(next_chunk(&mut events).await), (0, 2, 2, 5));
    assert_eq!(reported(next_chunk(&mut events).await), (0, 2, 2, 7));
    assert_eq!(fetch_positions(&broker)[..3], [(2, -1), (2, -1), (2, -1)]);
}

#[tokio::test]
async fn a_partition_handed_back_keeps_its_last_fetched_epoch() {
    // FENCED_LEADER_EPOCH: the fetcher's metadata is behind; it looks the leader up again
    // and the next Fetch still lets the leader check the log against epoch 3.
    let mut fetches = 0;
    let broker = FakeBroker::start(1, &[(TOPIC, 1)], move |r| {
        let Some(fetch) = fetch_request(r) else {
            return Reply::Default;
        };
        fetches += 1;
        match fetches {
            1 => answer(fetch, fetched(records(0..3, 3), 12)),
            2 => answer(fetch, PartitionData::default().with_error_code(74)),
            3 => answer(fetch, fetched(records(3..4, 3), 16)),
            _ => Reply::Stall,
        }
    })
    .await;
    let (_fetcher, mut events) = fetcher(&broker, 0, OffsetReset::Earliest);
    assert_eq!(next_chunk(&mut events).await.next_offset, 12);
    assert_eq!(next_chunk(&mut events).await.next_offset, 16);
    assert_eq!(fetch_positions(&broker)[..3], [(0, -1), (12, 3), (12, 3)]);
}

#[tokio::test]
async fn a_compacted_batch_is_renumbered_on_its_way_through_the_session() {
    // Batch 0 as compaction leaves it: records at deltas 0..4 of an offset range 0..10.
    let mut compacted = records(0..1, 0).to_vec();
    compacted[23..27].copy_from_slice(&9i32.to_be_bytes());
    let crc = crc32c::crc32c(&compacted[21..]);
    compacted[17..21].copy_from_slice(&crc.to_be_bytes());
    let compacted = Bytes::from(compacted);
    let mut fetches = 0;
    let broker = FakeBroker::start(1, &[(TOPIC, 1)], move |r| {
        let Some(fetch) = fetch_request(r) else {
            return Reply::Default;
        };
        fetches += 1;
        match fetches {
            1 => answer(fetch, fetched(compacted.clone(), 10)),
            _ => Reply::Stall,
        }
    })
    .await;
    let (_fetcher, mut events) = fetcher(&broker, 0, OffsetReset::Earliest);
    let chunk = next_chunk(&mut events).await;
    assert_eq!(chunk.next_offset, 10);
    let renumbered = &chunk.batches[0];
    assert!(!renumbered.batch.has_holes());
    assert_eq!(renumbered.offset_deltas.as_deref(), Some(&[0, 1, 2, 3][..]));
}

#[tokio::test]
async fn a_diverging_epoch_ending_past_the_position_keeps_it() {
    // The leader's epoch 0 ends at 20, after the position 12 fetched in epoch 1 (the
    // fetcher's batches were stamped 1 by a leader that did not survive, with nothing
    // past 12): nothing is lost, the position stays and the next Fetch sends epoch 0.
    let mut fetches = 0;
    let broker = FakeBroker::start(1, &[(TOPIC, 1)], move |r| {
        let Some(fetch) = fetch_request(r) else {
            return Reply::Default;
        };
        fetches += 1;
        let diverging = |epoch| {
            PartitionData::default()
                .with_high_watermark(20)
                .with_diverging_epoch(
                    EpochEndOffset::default()
                        .with_epoch(epoch)
                        .with_end_offset(20),
                )
        };
        match fetches {
            1 => answer(fetch, fetched(records(0..3, 1), 12)),
            2 => answer(fetch, diverging(0)),
            // A broker repeating itself is asked again after a backoff, not in a loop.
            3 => answer(fetch, diverging(0)),
            4 => answer(fetch, fetched(records(3..5, 0), 20)),
            _ => Reply::Stall,
        }
    })
    .await;
    let (fetcher, mut events) = fetcher(&broker, 0, OffsetReset::Earliest);
    assert_eq!(next_chunk(&mut events).await.next_offset, 12);
    assert_eq!(next_chunk(&mut events).await.next_offset, 20);
    assert_eq!(
        fetch_positions(&broker)[..4],
        [(0, -1), (12, 1), (12, 0), (12, 0)]
    );
    assert_eq!(fetcher.stats(), FetchCounts::default());
}

/// A position resumed from progress carries the epoch it was committed with: the first
/// Fetch lets the leader check its log against it (and answer with a divergence if the log
/// was truncated while strait was away).
#[tokio::test]
async fn a_resumed_position_is_fetched_with_its_committed_epoch() {
    let mut fetches = 0;
    let broker = FakeBroker::start(1, &[(TOPIC, 1)], move |r| {
        let Some(fetch) = fetch_request(r) else {
            return Reply::Default;
        };
        fetches += 1;
        match fetches {
            1 => answer(fetch, fetched(records(3..4, 4), 16)),
            _ => Reply::Stall,
        }
    })
    .await;
    let committed = Lineage {
        topic_id: uuid::Uuid::nil(),
        leader_epoch: 3,
        ..Lineage::UNKNOWN
    };
    let (_fetcher, mut events) = fetcher_from(&broker, 12, OffsetReset::Earliest, Some(committed));
    let chunk = next_chunk(&mut events).await;
    assert_eq!(chunk.next_offset, 16);
    assert_eq!(fetch_positions(&broker)[..1], [(12, 3)]);
}

/// A partition taken out of an incremental fetch session is named in the forgotten topics
/// of the next request, once; the partitions that stay are not sent again while unchanged.
#[tokio::test]
async fn a_partition_that_leaves_the_session_is_forgotten_once() {
    let broker = FakeBroker::start(1, &[(TOPIC, 2)], |r| {
        let Some(fetch) = fetch_request(r) else {
            return Reply::Default;
        };
        let idle = |p| {
            PartitionData::default()
                .with_partition_index(p)
                .with_high_watermark(5)
        };
        let responses = fetch
            .topics
            .iter()
            .map(|t| {
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(t.partitions.iter().map(|p| idle(p.partition)).collect())
            })
            .collect();
        Reply::Answer(ResponseKind::Fetch(
            FetchResponse::default()
                .with_session_id(7)
                .with_responses(responses),
        ))
    })
    .await;
    let (fetcher, mut events) = fetcher(&broker, 0, OffsetReset::Earliest);
    fetcher.assign(TopicPartition::new(TOPIC, 1), Some(0), None, 0);
    let mut reported = Vec::new();
    while reported.len() < 2 {
        let tp = next_chunk(&mut events).await.tp;
        if !reported.contains(&tp) {
            reported.push(tp);
        }
    }
    fetcher.forget(TopicPartition::new(TOPIC, 1));
    let forgotten = |broker: &FakeBroker| -> Vec<Vec<i32>> {
        broker
            .received_of(ApiKey::Fetch)
            .iter()
            .filter_map(fetch_request)
            .filter(|f| !f.forgotten_topics_data.is_empty())
            .map(|f| {
                f.forgotten_topics_data
                    .iter()
                    .flat_map(|t| t.partitions.clone())
                    .collect()
            })
            .collect()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while forgotten(&broker).is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A few more requests go by.
    let seen = broker.received_of(ApiKey::Fetch).len();
    while broker.received_of(ApiKey::Fetch).len() < seen + 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(forgotten(&broker), vec![vec![1]]);
    let last = broker.received_of(ApiKey::Fetch);
    let last = fetch_request(last.last().unwrap()).unwrap();
    assert!(last.topics.is_empty(), "nothing changed: {:?}", last.topics);
}
