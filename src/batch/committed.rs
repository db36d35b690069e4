//! The `read_committed` view of one Fetch partition's records: its complete batches past a
//! fetch position, each marked visible or not by the aborted-transaction filter (control
//! batches and aborted transactional batches are not). The one split-and-filter loop shared
//! by the fetch sessions and by strait's reader of its own internal topics.

use bytes::Bytes;

use super::{split_batches, AbortedFilter, BatchError, RawBatch};

/// The batches of one partition of one Fetch response, in offset order, from a position.
#[derive(Debug)]
pub struct Committed {
    batches: std::vec::IntoIter<RawBatch>,
    filter: AbortedFilter,
    from: i64,
}

impl Committed {
    /// Splits `records` into complete batches; `aborted` is the response's aborted
    /// transactions of that partition (producer id, first offset). Batches that end at or
    /// before `from` are skipped.
    pub fn new(
        records: Bytes,
        aborted: impl IntoIterator<Item = (i64, i64)>,
        from: i64,
    ) -> Result<Committed, BatchError> {
        Ok(Committed {
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

impl Iterator for Committed {
    /// A batch past the position, and whether a `read_committed` consumer sees it.
    type Item = (RawBatch, bool);

    fn next(&mut self) -> Option<(RawBatch, bool)> {
        let batch = self.batches.find(|b| b.next_offset() > self.from)?;
        let visible = self.filter.keep(&batch);
        Some((batch, visible))
    }
}
