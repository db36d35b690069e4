//! Fuzzes the record batch layer with arbitrary Fetch `records` bytes: splitting, CRC,
//! compression, rewrite, the minimal decoder and the aborted-transaction filter must
//! return errors, never panic.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strait::batch::{decode_uncompressed, split_batches, AbortedFilter, ProducerStamp, RawBatch};

const STAMP: ProducerStamp = ProducerStamp {
    producer_id: 1,
    producer_epoch: 0,
    base_sequence: 0,
    transactional: true,
};

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
        let _ = batch.compression();
        let _ = decode_uncompressed(batch);
        let _ = filter.keep(batch);
        let out = RawBatch::new(batch.stamp(&STAMP).to_bytes()).expect("rewrite keeps the framing");
        // The patched CRC matches exactly when the source's did.
        assert_eq!(out.verify_crc().is_ok(), valid);
        assert_eq!(out.records(), batch.records());
        assert_eq!(out.base_offset(), 0);
        assert_eq!(out.last_offset_delta(), batch.last_offset_delta());
    }
});
