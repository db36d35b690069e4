//! Dropping the batches of aborted transactions for `read_committed` fetches (KIP-98).
//!
//! [`AbortedFilter`] decides per batch from the header alone; the one record it reads is the
//! marker of a control batch, whose type (commit or abort) ends a producer's aborted range.

use std::collections::HashSet;

use super::{decode_uncompressed, i16_at, RawBatch, CONTROL_TYPE_ABORT, NO_PRODUCER_ID};

/// Aborted-transaction filter for `read_committed` fetches (KIP-98).
///
/// Given the Fetch response's `aborted_transactions` (producer id, first offset) for one
/// partition and then that partition's batches in order, decides per batch whether it is
/// kept. Semantics of the Java consumer (`CompletedFetch.nextFetchedRecord`): for a batch
/// with a producer id, every aborted transaction whose first offset is at or before the
/// batch's last offset makes its producer "aborted"; a transactional data batch from an
/// aborted producer is dropped; an ABORT control batch from that producer ends its aborted
/// range. Control batches are never kept (brokers reject them on Produce).
///
/// The aborted list of a response covers that response's offset range only: build one
/// filter per partition per Fetch response.
#[derive(Debug, Clone, Default)]
pub struct AbortedFilter {
    /// Aborted transactions not yet reached, sorted by first offset, largest first.
    pending: Vec<(i64, i64)>,
    /// Producers inside an aborted transaction.
    aborted: HashSet<i64>,
}

impl AbortedFilter {
    pub fn new(aborted: impl IntoIterator<Item = (i64, i64)>) -> Self {
        let mut pending: Vec<(i64, i64)> = aborted
            .into_iter()
            .map(|(producer_id, first_offset)| (first_offset, producer_id))
            .collect();
        pending.sort_unstable_by(|a, b| b.cmp(a));
        AbortedFilter {
            pending,
            aborted: HashSet::new(),
        }
    }

    /// Whether `batch` is forwarded. Call once per batch, in offset order.
    pub fn keep(&mut self, batch: &RawBatch) -> bool {
        let producer_id = batch.producer_id();
        if producer_id != NO_PRODUCER_ID {
            let last_offset = batch.last_offset();
            while let Some(&(first_offset, aborted_producer)) = self.pending.last() {
                if first_offset > last_offset {
                    break;
                }
                self.pending.pop();
                self.aborted.insert(aborted_producer);
            }
            if batch.is_control() {
                if control_type(batch) == Some(CONTROL_TYPE_ABORT) {
                    self.aborted.remove(&producer_id);
                }
                return false;
            }
            if batch.is_transactional() && self.aborted.contains(&producer_id) {
                return false;
            }
        }
        !batch.is_control()
    }
}

/// The type of a control batch's marker (`ControlRecordType`: key = version i16, type i16),
/// or `None` if its first record cannot be read. Control batches are written uncompressed.
fn control_type(batch: &RawBatch) -> Option<i16> {
    let records = decode_uncompressed(batch).ok()?;
    let key = records.first()?.key.as_ref()?;
    i16_at(key, 2)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{patched, with_base_offset};
    use super::super::{encode_batch, OwnRecord, ProducerStamp};
    use super::*;

    /// A data batch at `offset` from `producer_id` (-1: not idempotent).
    fn data(offset: i64, producer_id: i64, transactional: bool) -> RawBatch {
        let b = encode_batch(
            &[OwnRecord {
                key: None,
                value: Some(b"v"),
                timestamp: 0,
            }],
            &ProducerStamp {
                producer_id,
                producer_epoch: if producer_id < 0 { -1 } else { 0 },
                base_sequence: if producer_id < 0 { -1 } else { 0 },
                transactional,
            },
        );
        RawBatch::new(with_base_offset(b, offset)).unwrap()
    }

    /// A transaction marker (`EndTransactionMarker`): key = version 0, type; value =
    /// version 0, coordinator epoch.
    fn marker(offset: i64, producer_id: i64, control_type: i16) -> RawBatch {
        let mut key = vec![0, 0];
        key.extend_from_slice(&control_type.to_be_bytes());
        let b = encode_batch(
            &[OwnRecord {
                key: Some(&key),
                value: Some(&[0, 0, 0, 0, 0, 3]),
                timestamp: 0,
            }],
            &ProducerStamp {
                producer_id,
                producer_epoch: 0,
                base_sequence: -1,
                transactional: true,
            },
        );
        let b = patched(&b, |v| v[22] |= 0x20);
        let b = RawBatch::new(with_base_offset(b, offset)).unwrap();
        assert!(b.is_control());
        b
    }

    const ABORT: i16 = 0;
    const COMMIT: i16 = 1;

    fn kept(filter: &mut AbortedFilter, batches: &[RawBatch]) -> Vec<bool> {
        batches.iter().map(|b| filter.keep(b)).collect()
    }

    #[test]
    fn abort_filter_interleaved_transactions() {
        const P1: i64 = 100; // aborts, then commits a second transaction
        const P2: i64 = 200; // commits
        let batches = [
            data(0, P1, true),
            data(1, P2, true),
            data(2, P1, true),
            data(3, P2, true),
            marker(4, P1, ABORT),
            marker(5, P2, COMMIT),
            data(6, P1, true),
            marker(7, P1, COMMIT),
            data(8, NO_PRODUCER_ID, false),
            data(9, P1, false), // idempotent, not transactional
        ];
        let mut f = AbortedFilter::new([(P1, 0)]);
        assert_eq!(
            kept(&mut f, &batches),
            [false, true, false, true, false, false, true, false, true, true]
        );
    }

    #[test]
    fn abort_filter_activates_at_first_offset() {
        const P: i64 = 7;
        let batches = [
            data(0, P, true),
            marker(1, P, COMMIT),
            data(2, P, true),
            marker(3, P, ABORT),
            data(4, P, true),
            marker(5, P, COMMIT),
            data(6, P, true),
            marker(7, P, ABORT),
        ];
        // Listed out of order; both aborted transactions belong to the same producer.
        let mut f = AbortedFilter::new([(P, 6), (P, 2)]);
        assert_eq!(
            kept(&mut f, &batches),
            [true, false, false, false, true, false, false, false]
        );
    }

    #[test]
    fn abort_filter_without_aborted_transactions() {
        let batches = [
            data(0, NO_PRODUCER_ID, false),
            data(1, 5, true),
            marker(2, 5, COMMIT),
            marker(3, 6, ABORT),
            data(4, 5, false),
        ];
        let mut f = AbortedFilter::new([]);
        assert_eq!(kept(&mut f, &batches), [true, true, false, false, true]);
        // A control batch without a producer id (garbage) is still never kept.
        let b = patched(data(9, NO_PRODUCER_ID, false).as_bytes(), |v| v[22] |= 0x20);
        assert!(!AbortedFilter::new([(1, 0)]).keep(&RawBatch::new(b).unwrap()));
    }
}
