//! What a Fetch response means, decided without I/O: whether the session goes on or starts
//! over (its top-level error code), and, per partition, from its error code, records and
//! aborted transactions plus the partition's fetch position, what the session does next:
//! forward batches, rewind to where the source log diverged (KIP-320), look the log's
//! bounds up (the position is out of range), hand the partition back to the coordinator
//! (its leader moved, or the broker failed), or stop it. The session task carries the
//! answers out.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::PartitionData;

use super::{FetchError, Fetched};
use crate::batch::{split_batches, RawBatch, ReadCommitted};
use crate::config::OffsetReset;
use crate::kafka::{KafkaError, TopicPartition};

/// What the top-level error code of a Fetch response means for the session.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum SessionVerdict {
    /// The partitions' answers stand.
    Proceed,
    /// The broker lost or refused the session: start over with a full fetch.
    Reset(ResponseError),
}

/// The session's reading of a response's top-level `code`; `Err` for a failed request.
pub(super) fn session_verdict(broker: i32, code: i16) -> Result<SessionVerdict, KafkaError> {
    match ResponseError::try_from_code(code) {
        Some(
            reset @ (ResponseError::FetchSessionIdNotFound
            | ResponseError::InvalidFetchSessionEpoch),
        ) => Ok(SessionVerdict::Reset(reset)),
        _ => KafkaError::check("Fetch", || format!("broker {broker}"), code)
            .map(|()| SessionVerdict::Proceed),
    }
}

/// Batches to forward for one partition and where its position goes.
#[derive(Debug)]
pub struct Delivery {
    pub batches: Vec<Fetched>,
    /// The source position after these batches (past dropped batches too).
    pub next_offset: i64,
    /// The partition leader epoch of the last batch passed (forwarded or dropped), the
    /// `last_fetched_epoch` of the next Fetch (KIP-320); `None` if these batches carry none.
    pub last_epoch: Option<i32>,
    /// The end of what strait can read of the partition: the last stable offset (it reads
    /// committed records only), or the high watermark from a broker that gives none.
    pub source_end: i64,
}

/// What the session does with one partition of a Fetch response.
#[derive(Debug)]
pub enum Action {
    /// Nothing new: the position stays.
    Idle,
    Deliver(Delivery),
    /// The leader's log diverged from what was fetched (an unclean leader election
    /// truncated it): it holds epoch `epoch` only up to `end_offset`, and the records from
    /// there on differ from those fetched before (KIP-320).
    Diverged {
        epoch: i32,
        end_offset: i64,
    },
    /// The position is out of the source log: look its bounds up to learn which way.
    OutOfRange,
    /// A retriable error (the leader moved, is not ready, failed unexpectedly, ...): place
    /// the partition again after a backoff.
    Rehome(KafkaError),
    /// Forward `before` (the batches ahead of a bad one), then stop the partition.
    Stop {
        before: Option<Delivery>,
        error: FetchError,
    },
}

/// Decides what to do with partition `tp`'s answer `data` to a fetch from `offset`.
pub fn partition_action(tp: &TopicPartition, offset: i64, data: PartitionData) -> Action {
    match ResponseError::try_from_code(data.error_code) {
        None => {}
        Some(ResponseError::OffsetOutOfRange) => return Action::OutOfRange,
        Some(code) => {
            let error = KafkaError::Broker {
                api: "Fetch",
                context: tp.to_string(),
                code,
            };
            // UNKNOWN_SERVER_ERROR is what a broker answers for an exception it did not
            // expect (a disk hiccup, a bug): nothing says the next try fails too.
            return if error.is_retriable() || code == ResponseError::UnknownServerError {
                Action::Rehome(error)
            } else {
                Action::Stop {
                    before: None,
                    error: FetchError::Broker(error),
                }
            };
        }
    }
    // The broker checked `last_fetched_epoch` against its log before reading it.
    let diverging = &data.diverging_epoch;
    if diverging.epoch >= 0 && diverging.end_offset >= 0 {
        return Action::Diverged {
            epoch: diverging.epoch,
            end_offset: diverging.end_offset,
        };
    }
    let end = source_end(&data);
    let Some(records) = data.records.filter(|r| !r.is_empty()) else {
        return Action::Idle;
    };
    let aborted = data
        .aborted_transactions
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.producer_id.0, a.first_offset));
    let committed = match ReadCommitted::new(records, aborted, offset) {
        Ok(c) => c,
        Err(source) => {
            return Action::Stop {
                before: None,
                error: FetchError::Malformed { offset, source },
            }
        }
    };
    let delivery = |batches, next_offset, last_epoch| Delivery {
        batches,
        next_offset,
        last_epoch,
        source_end: end,
    };
    let mut next = offset;
    let mut epoch = None;
    let mut kept = Vec::new();
    for (batch, visible) in committed {
        let batch_end = batch.next_offset();
        let batch_epoch = batch.partition_leader_epoch();
        let forward = batch.verify_crc().and_then(|()| {
            let keep = visible && batch.record_count() > 0;
            keep.then(|| Fetched::new(batch)).transpose()
        });
        match forward {
            Ok(Some(fetched)) => {
                next = fetched.source_next;
                kept.push(fetched);
            }
            // Control, aborted or emptied by compaction: nothing to send, the position moves.
            Ok(None) => next = batch_end,
            Err(e) => {
                return Action::Stop {
                    before: (!kept.is_empty()).then(|| delivery(kept, next, epoch)),
                    error: FetchError::Refused(e),
                }
            }
        }
        // Batches of message formats before v2 carry -1: no epoch to validate against.
        epoch = (batch_epoch >= 0).then_some(batch_epoch).or(epoch);
    }
    if next > offset {
        Action::Deliver(delivery(kept, next, epoch))
    } else {
        Action::Idle
    }
}

/// [`Delivery::source_end`] of `data`.
pub(super) fn source_end(data: &PartitionData) -> i64 {
    match data.last_stable_offset {
        lso if lso >= 0 => lso,
        _ => data.high_watermark,
    }
}

/// Whether a complete batch of `data`'s records has holes in its offsets (compaction), so
/// that [`partition_action`] renumbers it: a decompression and a compression per batch, work
/// for a blocking thread. Reads batch headers only.
pub(super) fn needs_renumbering(data: &PartitionData) -> bool {
    data.records
        .as_ref()
        .and_then(|r| split_batches(r.clone()).ok())
        .is_some_and(|split| split.batches.iter().any(RawBatch::has_holes))
}

/// The ListOffsets timestamp that implements a reset policy.
pub(super) fn reset_timestamp(policy: OffsetReset) -> i64 {
    match policy {
        OffsetReset::Earliest => -2,
        OffsetReset::Latest => -1,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::messages::fetch_response::{AbortedTransaction, EpochEndOffset};
    use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId};

    use super::*;
    use crate::batch::BatchError;
    use crate::kafka::codec::decode_response;

    /// A captured Fetch v18 response of `testdata/fetch/` (see its README).
    fn capture(name: &str) -> FetchResponse {
        let path = format!(
            "{}/testdata/fetch/{name}.v18.bin",
            env!("CARGO_MANIFEST_DIR")
        );
        let frame = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        decode_response::<FetchRequest>(Bytes::from(frame), 18).unwrap()
    }

    /// Partition 0 of `none-small`: 38 uncompressed batches (37 of 4 records, one of 2),
    /// offsets 0..150, no error, no aborted transaction.
    fn small() -> PartitionData {
        let response = capture("none-small");
        let mut p = response.responses.into_iter().next().unwrap().partitions;
        p.sort_by_key(|p| p.partition_index);
        p.into_iter().next().unwrap()
    }

    fn tp() -> TopicPartition {
        TopicPartition::new("fetch-none-small", 0)
    }

    fn batches(data: &PartitionData) -> Vec<RawBatch> {
        split_batches(data.records.clone().unwrap())
            .unwrap()
            .batches
    }

    /// `data` with batch `index` changed by `edit` (its CRC made right again if `fix_crc`).
    fn patched(
        data: &PartitionData,
        index: usize,
        fix_crc: bool,
        edit: impl FnOnce(&mut [u8]),
    ) -> PartitionData {
        let start: usize = batches(data)[..index].iter().map(|b| b.len()).sum();
        let len = batches(data)[index].len();
        let mut records = data.records.clone().unwrap().to_vec();
        let batch = &mut records[start..start + len];
        edit(batch);
        if fix_crc {
            let crc = crc32c::crc32c(&batch[21..]);
            batch[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        data.clone().with_records(Some(Bytes::from(records)))
    }

    /// Sets attribute bits of a batch (0x10 transactional, 0x20 control).
    fn set_attributes(bits: u8) -> impl FnOnce(&mut [u8]) {
        move |batch| batch[22] |= bits
    }

    fn with_code(code: ResponseError) -> PartitionData {
        small()
            .with_error_code(code.code())
            .with_log_start_offset(42)
    }

    fn delivered(action: Action) -> Delivery {
        match action {
            Action::Deliver(d) => d,
            other => panic!("expected a delivery, got {other:?}"),
        }
    }

    fn bases(d: &Delivery) -> Vec<i64> {
        d.batches.iter().map(|f| f.batch.base_offset()).collect()
    }

    #[test]
    fn session_goes_on_on_none_and_starts_over_on_session_errors() {
        let response = capture("none-small");
        assert_eq!(
            session_verdict(1, response.error_code).unwrap(),
            SessionVerdict::Proceed
        );
        for (number, code) in [
            (70, ResponseError::FetchSessionIdNotFound),
            (71, ResponseError::InvalidFetchSessionEpoch),
        ] {
            assert_eq!(
                session_verdict(1, number).unwrap(),
                SessionVerdict::Reset(code)
            );
        }
    }

    #[test]
    fn session_fails_on_other_top_level_errors() {
        for code in [-1, 29, 1000] {
            match session_verdict(3, code) {
                Err(KafkaError::Broker {
                    code: c, context, ..
                }) => {
                    assert_eq!(c.code(), code);
                    assert_eq!(context, "broker 3");
                }
                other => panic!("code {code}: {other:?}"),
            }
        }
    }

    #[test]
    fn none_forwards_every_batch_of_every_capture_unchanged() {
        for name in ["none-small", "none-large", "lz4", "zstd", "gzip", "snappy"] {
            let response = capture(name);
            let topic = &response.responses[0];
            assert_eq!(topic.partitions.len(), 8, "{name}");
            for data in &topic.partitions {
                let source = batches(data);
                let records: i32 = source.iter().map(|b| b.record_count()).sum();
                let d = delivered(partition_action(&tp(), 0, data.clone()));
                assert_eq!(d.batches.len(), source.len(), "{name}");
                assert_eq!(d.next_offset, i64::from(records), "{name}");
                assert_eq!(d.next_offset, data.high_watermark, "{name}");
                assert_eq!(d.source_end, data.high_watermark, "{name}");
                for (f, s) in d.batches.iter().zip(&source) {
                    assert_eq!(f.batch.as_bytes(), s.as_bytes());
                    assert_eq!(f.source_next, s.next_offset());
                    assert!(f.offset_deltas.is_none());
                }
            }
        }
    }

    #[test]
    fn none_from_inside_a_batch_forwards_that_batch_on() {
        let data = small();
        assert_eq!(batches(&data).len(), 38);
        let d = delivered(partition_action(&tp(), 9, data));
        // Batches 0..4 and 4..8 are behind the position; 8..12 holds offset 9.
        assert_eq!(d.batches.len(), 36);
        assert_eq!(bases(&d)[0], 8);
        assert_eq!(d.next_offset, 150);
    }

    #[test]
    fn none_with_nothing_new_is_idle() {
        assert!(matches!(
            partition_action(&tp(), 150, small()),
            Action::Idle
        ));
        let empty = small().with_records(Some(Bytes::new()));
        assert!(matches!(partition_action(&tp(), 0, empty), Action::Idle));
        let none = small().with_records(None);
        assert!(matches!(partition_action(&tp(), 0, none), Action::Idle));
    }

    #[test]
    fn offset_out_of_range_asks_for_the_log_bounds() {
        let data = with_code(ResponseError::OffsetOutOfRange);
        assert_eq!(data.error_code, 1);
        assert!(matches!(
            partition_action(&tp(), 7, data),
            Action::OutOfRange
        ));
    }

    /// `small()` as a leader answers a fetch whose `last_fetched_epoch` it does not hold up
    /// to the fetch offset: a diverging epoch, no records (KIP-320).
    fn diverged(epoch: i32, end_offset: i64) -> PartitionData {
        small().with_records(None).with_diverging_epoch(
            EpochEndOffset::default()
                .with_epoch(epoch)
                .with_end_offset(end_offset),
        )
    }

    #[test]
    fn a_diverging_epoch_rewinds_to_its_end_offset() {
        match partition_action(&tp(), 150, diverged(3, 96)) {
            Action::Diverged {
                epoch: 3,
                end_offset: 96,
            } => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_diverging_epoch_wins_over_records_in_the_same_answer() {
        // A broker sends no records with a diverging epoch; if one did, they would follow
        // the diverged history and must not be forwarded.
        let data = small()
            .with_diverging_epoch(EpochEndOffset::default().with_epoch(0).with_end_offset(40));
        assert!(matches!(
            partition_action(&tp(), 100, data),
            Action::Diverged {
                epoch: 0,
                end_offset: 40
            }
        ));
    }

    #[test]
    fn the_default_diverging_epoch_means_none() {
        let d = delivered(partition_action(&tp(), 0, small()));
        assert_eq!(d.next_offset, 150);
    }

    #[test]
    fn a_delivery_carries_the_last_batch_epoch() {
        let data = small();
        assert_eq!(batches(&data)[37].partition_leader_epoch(), 0);
        // The last batch written by a leader of epoch 5, the one before it by epoch 4.
        let data = patched(&data, 36, false, |b| {
            b[12..16].copy_from_slice(&4i32.to_be_bytes())
        });
        let data = patched(&data, 37, false, |b| {
            b[12..16].copy_from_slice(&5i32.to_be_bytes())
        });
        let d = delivered(partition_action(&tp(), 0, data.clone()));
        assert_eq!(d.last_epoch, Some(5));
        // The epoch is outside the CRC: a dropped batch (here a control one) still counts.
        let data = patched(&data, 37, true, set_attributes(0x20));
        let d = delivered(partition_action(&tp(), 0, data));
        assert_eq!(d.batches.len(), 37);
        assert_eq!(d.last_epoch, Some(5));
        assert_eq!(d.next_offset, 150);
    }

    #[test]
    fn batches_without_an_epoch_keep_the_last_one_known() {
        let data = small();
        let data = patched(&data, 37, false, |b| {
            b[12..16].copy_from_slice(&(-1i32).to_be_bytes())
        });
        let d = delivered(partition_action(&tp(), 0, data.clone()));
        assert_eq!(d.last_epoch, Some(0));
        let d = delivered(partition_action(&tp(), 148, data));
        assert_eq!(d.last_epoch, None);
    }

    #[test]
    fn only_batches_with_holes_need_renumbering() {
        assert!(!needs_renumbering(&small()));
        assert!(!needs_renumbering(&small().with_records(None)));
        // Compaction removed offsets from batch 5: its offset range is wider than its count.
        let compacted = patched(&small(), 5, false, |b| {
            b[23..27].copy_from_slice(&9i32.to_be_bytes())
        });
        assert!(needs_renumbering(&compacted));
        for name in ["none-large", "lz4", "zstd", "gzip", "snappy"] {
            let response = capture(name);
            assert!(!response.responses[0]
                .partitions
                .iter()
                .any(needs_renumbering));
        }
    }

    #[test]
    fn an_unknown_server_error_is_retried() {
        match partition_action(&tp(), 0, with_code(ResponseError::UnknownServerError)) {
            Action::Rehome(KafkaError::Broker { code, .. }) => {
                assert_eq!(code, ResponseError::UnknownServerError)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn leadership_and_other_retriable_errors_send_the_partition_home() {
        for code in [
            ResponseError::UnknownTopicOrPartition,
            ResponseError::NotLeaderOrFollower,
            ResponseError::KafkaStorageError,
            ResponseError::FencedLeaderEpoch,
            ResponseError::UnknownLeaderEpoch,
            ResponseError::OffsetNotAvailable,
            ResponseError::UnknownTopicId,
            ResponseError::CorruptMessage,
        ] {
            match partition_action(&tp(), 0, with_code(code)) {
                Action::Rehome(KafkaError::Broker {
                    code: c, context, ..
                }) => {
                    assert_eq!(c, code);
                    assert_eq!(context, "fetch-none-small-0");
                }
                other => panic!("{code:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn fatal_and_unknown_errors_stop_the_partition() {
        for code in [
            ResponseError::TopicAuthorizationFailed,
            ResponseError::Unknown(1000),
        ] {
            match partition_action(&tp(), 0, with_code(code)) {
                Action::Stop {
                    before: None,
                    error: FetchError::Broker(KafkaError::Broker { code: c, .. }),
                } => assert_eq!(c, code),
                other => panic!("{code:?}: {other:?}"),
            }
        }
        let Action::Stop { error, .. } =
            partition_action(&tp(), 0, with_code(ResponseError::TopicAuthorizationFailed))
        else {
            unreachable!()
        };
        assert_eq!(
            error.to_string(),
            format!(
                "Fetch for fetch-none-small-0: Kafka error {} (29): the broker's ACLs do not \
                 allow strait's principal READ on the topic",
                ResponseError::TopicAuthorizationFailed
            )
        );
    }

    #[test]
    fn crc_failure_forwards_what_came_before_then_stops() {
        let data = patched(&small(), 3, false, |b| b[100] ^= 1);
        match partition_action(&tp(), 0, data) {
            Action::Stop {
                before: Some(d),
                error: FetchError::Refused(BatchError::CrcMismatch { base_offset, .. }),
            } => {
                assert_eq!(base_offset, 12);
                assert_eq!(bases(&d), [0, 4, 8]);
                assert_eq!(d.next_offset, 12);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn crc_failure_of_the_first_batch_stops_with_nothing_to_forward() {
        let data = patched(&small(), 0, false, |b| b[70] ^= 0x80);
        assert!(matches!(
            partition_action(&tp(), 0, data),
            Action::Stop {
                before: None,
                error: FetchError::Refused(BatchError::CrcMismatch { base_offset: 0, .. }),
            }
        ));
    }

    #[test]
    fn malformed_records_stop_the_partition() {
        let data = patched(&small(), 5, true, |b| b[16] = 1);
        match partition_action(&tp(), 4, data) {
            Action::Stop {
                before: None,
                error: FetchError::Malformed { offset: 4, source },
            } => assert!(matches!(source, BatchError::BadMagic { magic: 1, .. })),
            other => panic!("{other:?}"),
        }
    }

    /// `small()` with batch `index` made transactional and listed as aborted.
    fn aborted_at(index: usize) -> PartitionData {
        let data = small();
        let batch = &batches(&data)[index];
        let aborted = AbortedTransaction::default()
            .with_producer_id(ProducerId(batch.producer_id()))
            .with_first_offset(batch.base_offset());
        patched(&data, index, true, set_attributes(0x10))
            .with_aborted_transactions(Some(vec![aborted]))
    }

    #[test]
    fn aborted_transactions_are_dropped() {
        let d = delivered(partition_action(&tp(), 0, aborted_at(2)));
        assert_eq!(d.batches.len(), 37);
        assert!(!bases(&d).contains(&8));
        assert_eq!(bases(&d)[..3], [0, 4, 12]);
        assert_eq!(d.next_offset, 150);
    }

    #[test]
    fn an_aborted_tail_still_moves_the_position() {
        let d = delivered(partition_action(&tp(), 148, aborted_at(37)));
        assert!(d.batches.is_empty());
        assert_eq!(d.next_offset, 150);
    }

    #[test]
    fn a_transactional_batch_not_listed_as_aborted_is_forwarded() {
        let data = patched(&small(), 2, true, set_attributes(0x10));
        let d = delivered(partition_action(&tp(), 0, data));
        assert_eq!(d.batches.len(), 38);
    }

    #[test]
    fn control_batches_are_dropped() {
        let data = patched(&small(), 0, true, set_attributes(0x20));
        let d = delivered(partition_action(&tp(), 0, data));
        assert_eq!(bases(&d)[..2], [4, 8]);
        assert_eq!(d.next_offset, 150);
    }
}
