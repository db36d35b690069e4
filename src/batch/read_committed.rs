//! The `read_committed` view of one Fetch partition's records: its complete batches past a
//! fetch position, each marked visible or not by the aborted-transaction filter (control
//! batches and aborted transactional batches are not). The one split-and-filter loop shared
//! by the fetch sessions and by strait's reader of its own internal topics.

use bytes::Bytes;

use super::{split_batches, AbortedFilter, BatchError, RawBatch};

/// The batches of one partition of one Fetch response, in offset order, from a position.
#[derive(Debug)]
pub struct ReadCommitted {
    batches: std::vec::IntoIter<RawBatch>,
    filter: AbortedFilter,
    from: i64,
}

impl ReadCommitted {
    /// Splits `records` into complete batches; `aborted` is the response's aborted
    /// transactions of that partition (producer id, first offset). Batches that end at or
    /// before `from` are skipped.
    pub fn new(
        records: Bytes,
        aborted: impl IntoIterator<Item = (i64, i64)>,
        from: i64,
    ) -> Result<ReadCommitted, BatchError> {
        Ok(ReadCommitted {
            batches: split_batches(records)?.batches.into_iter(),
            filter: AbortedFilter::new(aborted),
            from,
        })
    }

    /// Whether no complete batch is left (before iterating: the records held none).
    pub fn is_empty(&self) -> bool {
        self.batches.len() == 0
    }
}

impl Iterator for ReadCommitted {
    /// A batch past the position, and whether a `read_committed` consumer sees it.
    type Item = (RawBatch, bool);

    fn next(&mut self) -> Option<(RawBatch, bool)> {
        let batch = self.batches.find(|b| b.next_offset() > self.from)?;
        let visible = self.filter.keep(&batch);
        Some((batch, visible))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records of partition 0 of the captured `none-small` Fetch response: 38 batches,
    /// offsets 0..150, from one idempotent (not transactional) producer.
    fn captured() -> Bytes {
        use kafka_protocol::messages::FetchRequest;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/fetch/none-small.v18.bin"
        );
        let frame = Bytes::from(std::fs::read(path).unwrap());
        let response = crate::kafka::codec::decode_response::<FetchRequest>(frame, 18).unwrap();
        let topic = response.responses.into_iter().next().unwrap();
        let partition = topic
            .partitions
            .into_iter()
            .find(|p| p.partition_index == 0);
        partition.unwrap().records.unwrap()
    }

    #[test]
    fn empty_records_hold_no_batch() {
        assert!(ReadCommitted::new(Bytes::new(), [], 0).unwrap().is_empty());
        assert_eq!(ReadCommitted::new(Bytes::new(), [], 0).unwrap().count(), 0);
    }

    #[test]
    fn batches_behind_the_position_are_skipped_and_the_rest_visible() {
        let committed = ReadCommitted::new(captured(), [], 10).unwrap();
        assert!(!committed.is_empty());
        let seen: Vec<(i64, bool)> = committed.map(|(b, v)| (b.base_offset(), v)).collect();
        assert_eq!(seen.len(), 36);
        assert_eq!(seen[0], (8, true));
        assert!(seen.iter().all(|&(_, visible)| visible));
    }

    #[test]
    fn all_behind_the_position_is_not_empty_but_yields_nothing() {
        let committed = ReadCommitted::new(captured(), [], 150).unwrap();
        assert!(!committed.is_empty());
        assert_eq!(committed.count(), 0);
    }
}
