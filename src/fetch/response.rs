//! What a Fetch response means, decided without I/O: whether the session goes on or starts
//! over (its top-level error code), and, per partition, from its error code, records and
//! aborted transactions plus the partition's fetch position, what the session does next:
//! forward batches, reset the position by policy, hand the partition back to the
//! coordinator (its leader moved), or stop it. The session task carries the answers out.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::PartitionData;

use super::{FetchError, Fetched};
use crate::batch::Committed;
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
pub(super) struct Delivery {
    pub batches: Vec<Fetched>,
    /// The source position after these batches (past dropped batches too).
    pub next_offset: i64,
    pub high_watermark: i64,
}

/// What the session does with one partition of a Fetch response.
#[derive(Debug)]
pub(super) enum Action {
    /// Nothing new: the position stays.
    Idle,
    Deliver(Delivery),
    /// The position is out of the source log: look the policy's offset up.
    ResetOffset {
        log_start_offset: i64,
    },
    /// A retriable error (the leader moved, is not ready, ...): place the partition again.
    Rehome(KafkaError),
    /// Forward `before` (the batches ahead of a bad one), then stop the partition.
    Stop {
        before: Option<Delivery>,
        error: FetchError,
    },
}

/// Decides what to do with partition `tp`'s answer `data` to a fetch from `offset`.
pub(super) fn partition_action(tp: &TopicPartition, offset: i64, data: PartitionData) -> Action {
    match ResponseError::try_from_code(data.error_code) {
        None => {}
        Some(ResponseError::OffsetOutOfRange) => {
            return Action::ResetOffset {
                log_start_offset: data.log_start_offset,
            }
        }
        Some(code) => {
            let error = KafkaError::Broker {
                api: "Fetch",
                context: tp.to_string(),
                code,
            };
            return if error.is_retriable() {
                Action::Rehome(error)
            } else {
                Action::Stop {
                    before: None,
                    error: FetchError::Broker(error),
                }
            };
        }
    }
    let Some(records) = data.records.filter(|r| !r.is_empty()) else {
        return Action::Idle;
    };
    let aborted = data
        .aborted_transactions
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.producer_id.0, a.first_offset));
    let committed = match Committed::new(records, aborted, offset) {
        Ok(c) => c,
        Err(source) => {
            return Action::Stop {
                before: None,
                error: FetchError::Malformed { offset, source },
            }
        }
    };
    let delivery = |batches, next_offset| Delivery {
        batches,
        next_offset,
        high_watermark: data.high_watermark,
    };
    let mut next = offset;
    let mut kept = Vec::new();
    for (batch, visible) in committed {
        let batch_end = batch.next_offset();
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
                    before: (!kept.is_empty()).then(|| delivery(kept, next)),
                    error: FetchError::Refused(e),
                }
            }
        }
    }
    if next > offset {
        Action::Deliver(delivery(kept, next))
    } else {
        Action::Idle
    }
}

/// The ListOffsets timestamp that implements a reset policy.
pub(super) fn reset_timestamp(policy: OffsetReset) -> i64 {
    match policy {
        OffsetReset::Earliest => -2,
        OffsetReset::Latest => -1,
    }
}
