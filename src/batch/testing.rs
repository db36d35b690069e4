//! Test helpers shared by the batch modules' tests: fixtures, batch patching and
//! generators of records.

use bytes::Bytes;
use proptest::prelude::*;

use super::{
    encode_batch, Compression, OwnRecord, ProducerStamp, RawBatch, ATTRIBUTES_AT, BATCH_LENGTH_AT,
    CRC_AT, CRC_COVERED_FROM, HEADER_LEN, LAST_OFFSET_DELTA_AT, LOG_OVERHEAD,
};

pub(super) const STAMP: ProducerStamp = ProducerStamp {
    producer_id: 4242,
    producer_epoch: 7,
    base_sequence: 1000,
    transactional: true,
};

/// Applies `f` to a copy of `batch` and recomputes the CRC.
pub(super) fn patched(batch: &Bytes, f: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut v = batch.to_vec();
    f(&mut v);
    let crc = crc32c::crc32c(&v[CRC_COVERED_FROM..]);
    v[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(v)
}

pub(super) fn with_base_offset(batch: Bytes, base_offset: i64) -> Bytes {
    // baseOffset is outside the CRC.
    let mut v = batch.to_vec();
    v[..8].copy_from_slice(&base_offset.to_be_bytes());
    Bytes::from(v)
}

pub(super) fn simple(value: &[u8]) -> Bytes {
    encode_batch(
        &[OwnRecord {
            key: None,
            value: Some(value),
            timestamp: 1_700_000_000_000,
        }],
        &ProducerStamp::NONE,
    )
}

/// Key, value, timestamp.
pub(super) type Rec = (Option<Vec<u8>>, Option<Vec<u8>>, i64);

pub(super) fn arb_records() -> impl Strategy<Value = Vec<Rec>> {
    prop::collection::vec(
        (
            prop::option::of(prop::collection::vec(any::<u8>(), 0..40)),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..300)),
            any::<i64>(),
        ),
        0..12,
    )
}

pub(super) fn arb_stamp() -> impl Strategy<Value = ProducerStamp> {
    (any::<i64>(), any::<i16>(), any::<i32>(), any::<bool>()).prop_map(
        |(producer_id, producer_epoch, base_sequence, transactional)| ProducerStamp {
            producer_id,
            producer_epoch,
            base_sequence,
            transactional,
        },
    )
}

pub(super) fn encode_owned(recs: &[Rec], s: &ProducerStamp) -> Bytes {
    let own: Vec<OwnRecord<'_>> = recs
        .iter()
        .map(|(k, v, t)| OwnRecord {
            key: k.as_deref(),
            value: v.as_deref(),
            timestamp: *t,
        })
        .collect();
    encode_batch(&own, s)
}

/// One small Java-produced batch per codec (see testdata/batches/README.md).
pub(super) const JAVA_BATCHES: [(Compression, &[u8]); 4] = [
    (
        Compression::Gzip,
        include_bytes!("../../testdata/batches/java-gzip.bin"),
    ),
    (
        Compression::Snappy,
        include_bytes!("../../testdata/batches/java-snappy.bin"),
    ),
    (
        Compression::Lz4,
        include_bytes!("../../testdata/batches/java-lz4.bin"),
    ),
    (
        Compression::Zstd,
        include_bytes!("../../testdata/batches/java-zstd.bin"),
    ),
];

/// Writes `records` (uncompressed record bytes) under `header`'s fields, with `codec`
/// bits, `last_offset_delta` and a fresh CRC.
pub(super) fn assemble(
    header: &[u8],
    records: &[u8],
    codec: Compression,
    last_offset_delta: i32,
) -> RawBatch {
    let mut v = header[..HEADER_LEN].to_vec();
    v.extend_from_slice(&crate::batch::compression::compress(codec, records).unwrap());
    let len = (v.len() - LOG_OVERHEAD) as i32;
    v[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&len.to_be_bytes());
    let id = match codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    };
    v[ATTRIBUTES_AT + 1] = (v[ATTRIBUTES_AT + 1] & !0x07) | id;
    v[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
        .copy_from_slice(&last_offset_delta.to_be_bytes());
    RawBatch::new(patched(&Bytes::from(v), |_| {})).unwrap()
}

/// The same batch uncompressed, for `decode_uncompressed`.
pub(super) fn plain_copy(batch: &RawBatch) -> RawBatch {
    let c = batch.compression().unwrap();
    let plain = crate::batch::compression::decompress(c, batch.records()).unwrap();
    assemble(
        batch.as_bytes(),
        &plain,
        Compression::None,
        batch.last_offset_delta(),
    )
}
