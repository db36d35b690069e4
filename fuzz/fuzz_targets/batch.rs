//! Fuzzes the record batch layer with arbitrary Fetch `records` bytes: splitting, CRC,
//! decompression, the record decoders, the aborted-transaction filter, stamping, and the two
//! rewrites (`renumber` of a batch with holes, `coalesce` of contiguous small batches) must
//! return errors, never panic, and what they return must be a well-framed batch with the
//! records it was given.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strait::batch::compression::decompress_with_limit;
use strait::batch::{
    coalesce, decode_records, decode_uncompressed, renumber, split_batches, AbortedFilter,
    ProducerStamp, RawBatch,
};

const STAMP: ProducerStamp = ProducerStamp {
    producer_id: 1,
    producer_epoch: 0,
    base_sequence: 0,
    transactional: true,
};

/// Decompressed bytes per batch: enough to see every codec's framing, small enough to keep
/// the executions fast (the library's own limit is 64 MiB).
const DECOMPRESS_LIMIT: usize = 1024 * 1024;

fuzz_target!(|data: &[u8]| {
    let bytes = Bytes::copy_from_slice(data);
    let _ = RawBatch::new(bytes.clone());
    let Ok(split) = split_batches(bytes) else {
        return;
    };
    assert!(split.truncated_bytes <= data.len());
    // Every other batch's producer starts an aborted transaction at that batch.
    let mut filter = AbortedFilter::new(
        split
            .batches
            .iter()
            .step_by(2)
            .map(|b| (b.producer_id(), b.base_offset())),
    );
    for batch in &split.batches {
        let valid = batch.verify_crc().is_ok();
        if let Ok(codec) = batch.compression() {
            let _ = decompress_with_limit(codec, batch.records(), DECOMPRESS_LIMIT);
        }
        let _ = decode_uncompressed(batch);
        let _ = decode_records(batch);
        let _ = filter.keep(batch);
        let out = RawBatch::new(batch.stamp(&STAMP).to_bytes()).expect("rewrite keeps the framing");
        // The patched CRC matches exactly when the source's did.
        assert_eq!(out.verify_crc().is_ok(), valid);
        assert_eq!(out.records(), batch.records());
        assert_eq!(out.base_offset(), 0);
        assert_eq!(out.last_offset_delta(), batch.last_offset_delta());
        check_renumber(batch);
    }
    check_coalesce(&split.batches);
});

/// A renumbered batch keeps its base offset and record count, has no holes left and a
/// valid CRC.
fn check_renumber(batch: &RawBatch) {
    let Ok(renumbered) = renumber(batch) else {
        return;
    };
    let out = &renumbered.batch;
    assert!(out.verify_crc().is_ok(), "renumber wrote a bad CRC");
    assert_eq!(out.base_offset(), batch.base_offset());
    assert_eq!(out.record_count(), batch.record_count());
    assert!(!out.has_holes());
    if batch.record_count() > 0 {
        assert_eq!(
            renumbered.offset_deltas.len(),
            usize::try_from(batch.record_count()).unwrap()
        );
    }
}

/// Each run of batches that may follow one another coalesces into one batch holding all
/// their records, from the first one's base offset to the last one's last offset.
fn check_coalesce(batches: &[RawBatch]) {
    let mut start = 0;
    while start < batches.len() {
        let mut end = start + 1;
        while end < batches.len() && batches[end].can_follow(&batches[end - 1]) {
            end += 1;
        }
        let (first, rest) = (&batches[start], &batches[start + 1..end]);
        if let Ok(out) = coalesce(first, rest) {
            assert!(out.verify_crc().is_ok(), "coalesce wrote a bad CRC");
            let count: i64 = batches[start..end]
                .iter()
                .map(|b| i64::from(b.record_count()))
                .sum();
            assert_eq!(i64::from(out.record_count()), count);
            assert_eq!(out.base_offset(), first.base_offset());
            assert_eq!(out.last_offset(), batches[end - 1].last_offset());
        }
        start = end;
    }
}
