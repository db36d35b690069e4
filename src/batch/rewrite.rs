//! Rewriting the records of batches that cannot be forwarded as they are.
//!
//! The forwarding path sends a batch's records untouched. Two cases re-frame them: a batch
//! from a compacted topic with holes in its offset range, which brokers refuse on Produce
//! ([`renumber`]), and the opt-in merging of small consecutive batches ([`coalesce`]). Both
//! keep every record's attributes, key, value and headers byte for byte and rewrite only the
//! varints in front of them.

use bytes::Bytes;

use super::records::{
    len_i32, put_uvarint, unzigzag32, unzigzag64, uvarint_at, uvarint_len, zigzag32, zigzag64,
};
use super::{
    put, seal, BatchError, Compression, RawBatch, BATCH_LENGTH_AT, HEADER_LEN,
    LAST_OFFSET_DELTA_AT, LOG_OVERHEAD, MAX_TIMESTAMP_AT, RECORD_COUNT_AT,
};

impl RawBatch {
    /// A batch from a compacted topic with records removed from inside it: its offset range
    /// (`lastOffsetDelta + 1`) is wider than its record count. Brokers refuse such a batch on
    /// Produce (`LogValidator.validateBatch`: "Inconsistent batch offset range"), so it has to
    /// go through [`renumber`] first. Empty batches (record count 0) have no holes.
    pub fn has_holes(&self) -> bool {
        self.record_count() > 0
            && i64::from(self.last_offset_delta()) + 1 != i64::from(self.record_count())
    }

    /// Whether [`coalesce`] may merge this batch with its neighbours: uncompressed, neither
    /// transactional nor control, at least one record and one record per offset.
    pub fn is_coalescable(&self) -> bool {
        self.compression() == Ok(Compression::None)
            && !self.is_transactional()
            && !self.is_control()
            && self.record_count() > 0
            && !self.has_holes()
    }

    /// Whether [`coalesce`] may append this batch to a merged batch that ends with `last`:
    /// both coalescable, the same attributes (codec, timestamp type), and this one starting
    /// at the offset right after `last`.
    pub fn can_follow(&self, last: &RawBatch) -> bool {
        self.is_coalescable()
            && last.is_coalescable()
            && self.attributes() == last.attributes()
            && self.base_offset() == last.next_offset()
    }
}

/// A batch whose records were renumbered by [`renumber`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renumbered {
    /// The same records with offset deltas 0..n-1, `lastOffsetDelta` n-1.
    pub batch: RawBatch,
    /// The original offset delta of each record, in order: record `i` of the new batch was
    /// at source offset `base_offset + offset_deltas[i]`.
    pub offset_deltas: Vec<i32>,
}

/// Rewrites a batch with holes (see [`RawBatch::has_holes`]) into one a broker accepts: each
/// record's `offsetDelta` becomes its index, `lastOffsetDelta` becomes `recordCount - 1`.
///
/// With [`coalesce`], the only place strait re-frames records. A compressed batch is decompressed (bounded,
/// [`crate::batch::compression::DEFAULT_MAX_DECOMPRESSED`]) and compressed again with the same
/// codec. Every other byte of each record is kept: attributes, the timestampDelta varint as
/// it was written, key, value and headers; only the offsetDelta varint and the record
/// length in front of it change. The header keeps base offset, leader epoch, attributes,
/// timestamps and producer fields; batchLength, lastOffsetDelta and the CRC are new.
///
/// The CRC is checked first: the new one would otherwise vouch for corrupted bytes. The
/// original deltas must rise strictly from 0 up to at most `lastOffsetDelta`, as compaction
/// leaves them; anything else is a [`BatchError::MalformedRecord`]. An empty batch comes
/// back unchanged.
pub fn renumber(batch: &RawBatch) -> Result<Renumbered, BatchError> {
    batch.verify_crc()?;
    let base_offset = batch.base_offset();
    let compression = batch.compression()?;
    let codec_error = |source| BatchError::Codec {
        base_offset,
        source,
    };
    let malformed = |index: usize, what: &'static str| BatchError::MalformedRecord {
        base_offset,
        index,
        position: 0,
        what,
    };
    let count =
        usize::try_from(batch.record_count()).map_err(|_| malformed(0, "negative record count"))?;
    if count == 0 {
        return Ok(Renumbered {
            batch: batch.clone(),
            offset_deltas: Vec::new(),
        });
    }
    let decompressed;
    let plain: &[u8] = if compression == Compression::None {
        batch.records()
    } else {
        decompressed = crate::batch::compression::decompress(compression, batch.records())
            .map_err(codec_error)?;
        &decompressed
    };
    let mut records = Vec::new();
    let mut offset_deltas = Vec::with_capacity(count.min(plain.len() / 7));
    reframe_records(
        plain,
        count,
        base_offset,
        0,
        |index, old| {
            offset_deltas.push(old);
            Ok(len_i32(index))
        },
        &mut records,
    )?;
    let mut previous = -1;
    for (index, &delta) in offset_deltas.iter().enumerate() {
        if delta <= previous || delta > batch.last_offset_delta() {
            return Err(malformed(
                index,
                "offset deltas do not rise from 0 to at most lastOffsetDelta",
            ));
        }
        previous = delta;
    }

    let records =
        crate::batch::compression::compress(compression, &records).map_err(codec_error)?;
    let header = batch.as_bytes().get(..HEADER_LEN).unwrap_or(&[]);
    let mut out = Vec::with_capacity(HEADER_LEN + records.len());
    out.extend_from_slice(header);
    out.extend_from_slice(&records);
    let batch_length = i32::try_from(out.len() - LOG_OVERHEAD)
        .map_err(|_| malformed(count, "batch larger than 2 GiB"))?;
    put(&mut out, BATCH_LENGTH_AT, &batch_length.to_be_bytes());
    put(
        &mut out,
        LAST_OFFSET_DELTA_AT,
        &len_i32(count - 1).to_be_bytes(),
    );
    seal(&mut out);
    Ok(Renumbered {
        batch: RawBatch::new(Bytes::from(out))?,
        offset_deltas,
    })
}

/// Re-encodes the `count` records of `plain` (uncompressed record bytes) onto `out`: each
/// record's offsetDelta becomes `new_delta(index, old_delta)`, its timestampDelta moves by
/// `timestamp_shift` (the varint is kept as written when the shift is 0), its length in
/// front follows; attributes, key, value and headers are kept byte for byte.
fn reframe_records(
    plain: &[u8],
    count: usize,
    base_offset: i64,
    timestamp_shift: i64,
    mut new_delta: impl FnMut(usize, i32) -> Result<i32, &'static str>,
    out: &mut Vec<u8>,
) -> Result<(), BatchError> {
    // Every record takes at least 7 bytes: do not trust the count for the allocation. New
    // offsetDelta and length varints are at most 5 bytes each, a timestampDelta at most 10.
    let extra = if timestamp_shift == 0 { 8 } else { 18 };
    out.reserve(plain.len() + count.min(plain.len() / 7) * extra);
    let mut pos = 0usize;
    for index in 0..count {
        let malformed = |what| BatchError::MalformedRecord {
            base_offset,
            index,
            position: pos,
            what,
        };
        let rest = plain.get(pos..).unwrap_or(&[]);
        let (len, len_len) = uvarint_at(rest, 5).ok_or_else(|| malformed("bad record length"))?;
        let body_len =
            usize::try_from(unzigzag32(len)).map_err(|_| malformed("negative length"))?;
        let body = len_len
            .checked_add(body_len)
            .and_then(|end| rest.get(len_len..end))
            .ok_or_else(|| malformed("length past the end of the batch"))?;
        // attributes (1 byte), timestampDelta (varlong), offsetDelta (varint), the rest.
        let attributes = *body.first().ok_or_else(|| malformed("record ends early"))?;
        let (timestamp, ts_len) = body
            .get(1..)
            .and_then(|b| uvarint_at(b, 10))
            .ok_or_else(|| malformed("record ends early"))?;
        let delta_at = 1 + ts_len;
        let (delta, delta_len) = body
            .get(delta_at..)
            .and_then(|b| uvarint_at(b, 5))
            .ok_or_else(|| malformed("record ends early"))?;
        let delta = zigzag32(new_delta(index, unzigzag32(delta)).map_err(malformed)?);
        let timestamp = (timestamp_shift != 0)
            .then(|| zigzag64(unzigzag64(timestamp).wrapping_add(timestamp_shift)));
        let ts_len = timestamp.map_or(ts_len, uvarint_len);
        let tail = body.get(delta_at + delta_len..).unwrap_or(&[]);
        let new_len = i32::try_from(1 + ts_len + uvarint_len(u64::from(delta)) + tail.len())
            .map_err(|_| malformed("record larger than 2 GiB"))?;
        put_uvarint(out, u64::from(zigzag32(new_len)));
        match timestamp {
            Some(t) => {
                out.push(attributes);
                put_uvarint(out, t);
            }
            None => out.extend_from_slice(body.get(..delta_at).unwrap_or(&[])),
        }
        put_uvarint(out, u64::from(delta));
        out.extend_from_slice(tail);
        pos += len_len + body_len;
    }
    if pos != plain.len() {
        return Err(BatchError::MalformedRecord {
            base_offset,
            index: count,
            position: pos,
            what: "bytes left after the last record",
        });
    }
    Ok(())
}

/// Merges consecutive small batches of one partition into one batch (opt-in, for sources
/// that write tiny uncompressed batches: one batch per partition per Produce request makes
/// the target pay per batch).
///
/// Records are re-framed, not decoded: each keeps its attributes, key, value and headers
/// byte for byte; its offsetDelta and timestampDelta are rebased on the first batch's base
/// offset and base timestamp. The header is the first batch's with batchLength,
/// lastOffsetDelta, maxTimestamp, recordCount and CRC of the whole. Every batch must be
/// able to follow the one before it ([`RawBatch::can_follow`]); CRCs are not checked here
/// (the fetch path checked them).
pub fn coalesce(first: &RawBatch, rest: &[RawBatch]) -> Result<RawBatch, BatchError> {
    let base_offset = first.base_offset();
    let not_coalescable = |what| BatchError::MalformedRecord {
        base_offset,
        index: 0,
        position: 0,
        what,
    };
    if !first.is_coalescable() {
        return Err(not_coalescable("batch cannot be coalesced"));
    }
    let total = first.len() + rest.iter().map(RawBatch::len).sum::<usize>();
    let mut out = Vec::with_capacity(total + rest.len() * 64);
    out.extend_from_slice(first.as_bytes());
    let mut last = first;
    let mut count = i64::from(first.record_count());
    let mut max_timestamp = first.max_timestamp();
    for batch in rest {
        if !batch.can_follow(last) {
            return Err(not_coalescable(
                "batches to coalesce must be uncompressed, alike and contiguous",
            ));
        }
        let offset_shift = batch.base_offset() - base_offset;
        let timestamp_shift = batch.base_timestamp().wrapping_sub(first.base_timestamp());
        reframe_records(
            batch.records(),
            batch.record_count() as usize,
            batch.base_offset(),
            timestamp_shift,
            |_, old| {
                i32::try_from(i64::from(old) + offset_shift)
                    .map_err(|_| "offsets span more than an i32 delta")
            },
            &mut out,
        )?;
        count += i64::from(batch.record_count());
        max_timestamp = max_timestamp.max(batch.max_timestamp());
        last = batch;
    }
    let batch_length = i32::try_from(out.len() - LOG_OVERHEAD)
        .map_err(|_| not_coalescable("coalesced batch larger than 2 GiB"))?;
    let last_offset_delta = i32::try_from(last.last_offset() - base_offset)
        .map_err(|_| not_coalescable("offsets span more than an i32 delta"))?;
    let count = i32::try_from(count).map_err(|_| not_coalescable("too many records"))?;
    put(&mut out, BATCH_LENGTH_AT, &batch_length.to_be_bytes());
    put(
        &mut out,
        LAST_OFFSET_DELTA_AT,
        &last_offset_delta.to_be_bytes(),
    );
    put(&mut out, MAX_TIMESTAMP_AT, &max_timestamp.to_be_bytes());
    put(&mut out, RECORD_COUNT_AT, &count.to_be_bytes());
    seal(&mut out);
    RawBatch::new(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{
        arb_records, assemble, patched, plain_copy, simple, with_base_offset, JAVA_BATCHES, STAMP,
    };
    use super::super::{
        decode_uncompressed, encode_batch, DecodedRecord, OwnRecord, ProducerStamp, ATTRIBUTES_AT,
        ATTR_LOG_APPEND_TIME, BASE_OFFSET_AT, BASE_TIMESTAMP_AT, CRC_COVERED_FROM,
    };
    use super::*;
    use proptest::prelude::*;

    // --- renumbering batches with holes -----------------------------------------------

    /// Re-encodes `count` records of `plain` with offsetDelta `new_delta(index)`; returns
    /// the records and their old deltas.
    fn rewrite_offset_deltas(
        plain: &[u8],
        count: usize,
        base_offset: i64,
        new_delta: impl Fn(usize) -> i32,
    ) -> Result<(Vec<u8>, Vec<i32>), BatchError> {
        let (mut out, mut old) = (Vec::new(), Vec::new());
        reframe_records(
            plain,
            count,
            base_offset,
            0,
            |i, d| {
                old.push(d);
                Ok(new_delta(i))
            },
            &mut out,
        )?;
        Ok((out, old))
    }

    /// A batch of `records` whose offset deltas are `deltas`, as compaction leaves them.
    fn holey(
        records: &[OwnRecord<'_>],
        deltas: &[i32],
        last_offset_delta: i32,
        codec: Compression,
    ) -> RawBatch {
        let plain = encode_batch(records, &ProducerStamp::NONE);
        let (recs, _) =
            rewrite_offset_deltas(&plain[HEADER_LEN..], records.len(), 0, |i| deltas[i]).unwrap();
        assemble(&plain, &recs, codec, last_offset_delta)
    }

    /// Batches rewritten by Kafka 4.1.1's log cleaner, with holes (see the README).
    const COMPACTED_BATCHES: [(Compression, &[u8]); 5] = [
        (
            Compression::None,
            include_bytes!("../../testdata/batches/java-none-compacted.bin"),
        ),
        (
            Compression::Gzip,
            include_bytes!("../../testdata/batches/java-gzip-compacted.bin"),
        ),
        (
            Compression::Snappy,
            include_bytes!("../../testdata/batches/java-snappy-compacted.bin"),
        ),
        (
            Compression::Lz4,
            include_bytes!("../../testdata/batches/java-lz4-compacted.bin"),
        ),
        (
            Compression::Zstd,
            include_bytes!("../../testdata/batches/java-zstd-compacted.bin"),
        ),
    ];

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The header fields `renumber` keeps.
    fn kept_fields(b: &RawBatch) -> (i64, i32, i16, i64, i64, i64, i16, i32, i32) {
        (
            b.base_offset(),
            b.partition_leader_epoch(),
            b.attributes(),
            b.base_timestamp(),
            b.max_timestamp(),
            b.producer_id(),
            b.producer_epoch(),
            b.base_sequence(),
            b.record_count(),
        )
    }

    /// Checks a renumbered batch against its source: same records, deltas 0..n-1.
    fn check_renumbered(src: &RawBatch, out: &Renumbered) {
        let b = &out.batch;
        b.verify_crc().unwrap();
        assert!(!b.has_holes());
        assert_eq!(b.last_offset_delta(), src.record_count() - 1);
        assert_eq!(kept_fields(b), kept_fields(src));
        assert_eq!(b.compression().unwrap(), src.compression().unwrap());
        let before = decode_uncompressed(&plain_copy(src)).unwrap();
        let after = decode_uncompressed(&plain_copy(b)).unwrap();
        assert_eq!(before.len(), after.len());
        assert_eq!(out.offset_deltas.len(), before.len());
        for (i, (x, y)) in before.iter().zip(&after).enumerate() {
            assert_eq!(
                x.offset,
                src.base_offset() + i64::from(out.offset_deltas[i])
            );
            assert_eq!(y.offset, src.base_offset() + i as i64);
            assert_eq!(
                (&x.timestamp, &x.key, &x.value, &x.headers),
                (&y.timestamp, &y.key, &y.value, &y.headers)
            );
        }
    }

    #[test]
    fn has_holes() {
        let three = [OwnRecord {
            key: None,
            value: Some(b"v"),
            timestamp: 1,
        }; 3];
        let b = RawBatch::new(encode_batch(&three, &ProducerStamp::NONE)).unwrap();
        assert!(!b.has_holes());
        let wide = RawBatch::new(patched(b.as_bytes(), |v| {
            v[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&5i32.to_be_bytes())
        }))
        .unwrap();
        assert!(wide.has_holes());
        let empty = RawBatch::new(encode_batch(&[], &ProducerStamp::NONE)).unwrap();
        assert!(!empty.has_holes());
        for (_, bytes) in COMPACTED_BATCHES {
            assert!(RawBatch::new(Bytes::from_static(bytes))
                .unwrap()
                .has_holes());
        }
    }

    #[test]
    fn renumber_real_compacted_batches() {
        // 40 records over 4 keys, compacted: the last record of each key is left, at offset
        // deltas 36-39 of a batch whose lastOffsetDelta stays 39.
        for (codec, bytes) in COMPACTED_BATCHES {
            let src = RawBatch::new(Bytes::from_static(bytes)).unwrap();
            assert_eq!(src.compression().unwrap(), codec);
            assert_eq!((src.record_count(), src.last_offset_delta()), (4, 39));
            let out = renumber(&src).unwrap();
            assert_eq!(out.offset_deltas, [36, 37, 38, 39]);
            check_renumbered(&src, &out);
            let keys: Vec<_> = decode_uncompressed(&plain_copy(&out.batch))
                .unwrap()
                .into_iter()
                .map(|r| r.key.unwrap())
                .collect();
            assert_eq!(keys, [&b"key-0"[..], b"key-1", b"key-2", b"key-3"]);
        }
        // Uncompressed, every record byte but the deltas is kept, so the length is too
        // (deltas 36-39 and 0-3 are one-byte varints).
        let src = RawBatch::new(Bytes::from_static(COMPACTED_BATCHES[0].1)).unwrap();
        assert_eq!(renumber(&src).unwrap().batch.len(), src.len());
    }

    #[test]
    fn renumber_keeps_every_record_byte_of_java_batches() {
        // Java wrote deltas 0-11; give them holes (two-byte varints past 63), then renumber:
        // the plain records must come back byte for byte.
        for (codec, bytes) in JAVA_BATCHES {
            let java = RawBatch::new(Bytes::from_static(bytes)).unwrap();
            let plain = crate::batch::compression::decompress(codec, java.records()).unwrap();
            let gaps = |i: usize| (i * i * 7 + 1) as i32;
            let (with_gaps, old) = rewrite_offset_deltas(&plain, 12, 0, gaps).unwrap();
            assert_eq!(old, (0..12).collect::<Vec<i32>>());
            assert_ne!(with_gaps.len(), plain.len());
            let src = assemble(java.as_bytes(), &with_gaps, codec, 900);
            assert!(src.has_holes());
            let out = renumber(&src).unwrap();
            assert_eq!(out.offset_deltas, (0..12).map(gaps).collect::<Vec<_>>());
            check_renumbered(&src, &out);
            let back = crate::batch::compression::decompress(codec, out.batch.records()).unwrap();
            assert!(back == plain, "{codec:?}");
            assert_eq!(
                out.batch.as_bytes()[CRC_COVERED_FROM..HEADER_LEN],
                java.as_bytes()[CRC_COVERED_FROM..HEADER_LEN]
            );
        }
    }

    #[test]
    fn renumber_every_codec_across_blocks() {
        // 300 records of ~1.2 KB: many lz4 (64 KiB) and snappy (32 KiB) blocks.
        let values: Vec<Vec<u8>> = (0..300)
            .map(|i| format!("value {i} ").repeat(120).into_bytes())
            .collect();
        let records: Vec<OwnRecord<'_>> = values
            .iter()
            .enumerate()
            .map(|(i, v)| OwnRecord {
                key: (i % 3 != 0).then_some(&b"k"[..]),
                value: (i % 7 != 0).then_some(&v[..]),
                // Deltas of either sign and all varint sizes.
                timestamp: 1_700_000_000_000 + (i as i64 - 150) * 1_000_003,
            })
            .collect();
        let deltas: Vec<i32> = (0..300).map(|i| i * 1000 + i % 2).collect();
        for codec in CODECS {
            let src = holey(&records, &deltas, 300_000, codec);
            let out = renumber(&src).unwrap();
            assert_eq!(out.offset_deltas, deltas);
            check_renumbered(&src, &out);
        }
    }

    #[test]
    fn renumber_refuses_what_it_cannot_vouch_for() {
        let recs = [OwnRecord {
            key: Some(b"k"),
            value: Some(b"value"),
            timestamp: 5,
        }; 3];
        for codec in CODECS {
            let good = holey(&recs, &[0, 2, 4], 4, codec);
            renumber(&good).unwrap();
            // A bad CRC is never laundered into a good one.
            let mut v = good.as_bytes().to_vec();
            let last = v.len() - 1;
            v[last] ^= 1;
            assert!(matches!(
                renumber(&RawBatch::new(Bytes::from(v)).unwrap()),
                Err(BatchError::CrcMismatch { .. })
            ));
            // Deltas that repeat, fall, go negative or pass lastOffsetDelta.
            for (deltas, last) in [
                ([0, 2, 2], 4),
                ([0, 3, 1], 4),
                ([-1, 0, 1], 4),
                ([0, 1, 5], 4),
            ] {
                let err = renumber(&holey(&recs, &deltas, last, codec)).unwrap_err();
                assert!(
                    matches!(err, BatchError::MalformedRecord { .. }),
                    "{codec:?} {deltas:?}: {err}"
                );
            }
            // A record count that does not match the records.
            for count in [2i32, 4] {
                let b = patched(good.as_bytes(), |v| {
                    v[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes())
                });
                let err = renumber(&RawBatch::new(b).unwrap()).unwrap_err();
                assert!(matches!(err, BatchError::MalformedRecord { .. }), "{err}");
            }
        }
        // Compressed bytes that do not decompress.
        let junk = patched(&simple(b"not really lz4"), |v| v[22] = 3);
        let err = renumber(&RawBatch::new(junk).unwrap()).unwrap_err();
        assert!(matches!(err, BatchError::Codec { base_offset: 0, .. }));
        assert!(err
            .to_string()
            .starts_with("batch at base offset 0: malformed Lz4 records: "));
        assert!(!err.is_retriable());
        // An empty batch has nothing to renumber.
        let empty = RawBatch::new(encode_batch(&[], &STAMP)).unwrap();
        let out = renumber(&empty).unwrap();
        assert_eq!(out.batch, empty);
        assert!(out.offset_deltas.is_empty());
    }

    proptest! {
        #[test]
        fn prop_renumber_closes_any_holes(
            recs in arb_records(),
            gaps in prop::collection::vec(1i32..3000, 12),
            extra in 0i32..100,
            codec in prop::sample::select(CODECS.to_vec()),
        ) {
            prop_assume!(!recs.is_empty());
            let own: Vec<OwnRecord<'_>> = recs
                .iter()
                .map(|(k, v, t)| OwnRecord { key: k.as_deref(), value: v.as_deref(), timestamp: *t })
                .collect();
            let deltas: Vec<i32> = gaps[..recs.len()]
                .iter()
                .scan(-1i32, |d, g| { *d += g; Some(*d) })
                .collect();
            let src = holey(&own, &deltas, deltas[deltas.len() - 1] + extra, codec);
            let out = renumber(&src).unwrap();
            prop_assert_eq!(&out.offset_deltas, &deltas);
            check_renumbered(&src, &out);
        }

        #[test]
        fn prop_renumber_garbage_never_panics(
            records in prop::collection::vec(any::<u8>(), 0..300),
            count in -2i32..20,
            last_offset_delta in -2i32..40,
            codec in 0u8..8,
        ) {
            let mut v = simple(b"").to_vec();
            v.truncate(HEADER_LEN);
            v.extend_from_slice(&records);
            let b = patched(&Bytes::from(v), |v| {
                let l = (v.len() - 12) as i32;
                v[8..12].copy_from_slice(&l.to_be_bytes());
                v[22] = codec;
                v[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
                v[57..61].copy_from_slice(&count.to_be_bytes());
            });
            let b = RawBatch::new(b).unwrap();
            if let Ok(out) = renumber(&b) {
                prop_assert!(out.batch.verify_crc().is_ok());
            }
        }
    }

    // --- coalescing small batches ------------------------------------------------------

    /// `batch` at `base_offset`, its timestamps moved by `shift` ms (fresh CRC).
    fn moved(batch: &RawBatch, base_offset: i64, shift: i64) -> RawBatch {
        let (base, max) = (
            batch.base_timestamp() + shift,
            batch.max_timestamp() + shift,
        );
        RawBatch::new(patched(batch.as_bytes(), |v| {
            v[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
            v[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8].copy_from_slice(&base.to_be_bytes());
            v[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max.to_be_bytes());
        }))
        .unwrap()
    }

    /// What a consumer sees of `batches`, in order.
    fn decoded(batches: &[RawBatch]) -> Vec<DecodedRecord> {
        batches
            .iter()
            .flat_map(|b| decode_uncompressed(b).unwrap())
            .collect()
    }

    #[test]
    fn coalesce_keeps_every_record_of_java_batches() {
        // 12 records with keys, null keys and headers, written by the Java producer; three
        // copies at offsets 100, 112 and 124, the later ones with earlier and later clocks.
        let java = plain_copy(&RawBatch::new(Bytes::from_static(JAVA_BATCHES[0].1)).unwrap());
        let parts = [
            moved(&java, 100, 0),
            moved(&java, 112, -86_400_000),
            moved(&java, 124, 5_000_000_000),
        ];
        let merged = coalesce(&parts[0], &parts[1..]).unwrap();
        assert_eq!(merged.base_offset(), 100);
        assert_eq!(merged.last_offset(), 135);
        assert_eq!(merged.record_count(), 36);
        assert!(!merged.has_holes());
        assert_eq!(merged.base_timestamp(), parts[0].base_timestamp());
        assert_eq!(merged.max_timestamp(), parts[2].max_timestamp());
        assert_eq!(merged.attributes(), java.attributes());
        assert_eq!(decoded(std::slice::from_ref(&merged)), decoded(&parts));
        // The first batch's records are copied as they are.
        assert_eq!(&merged.records()[..java.records().len()], java.records());
        let out = RawBatch::new(merged.stamp(&STAMP).to_bytes()).unwrap();
        out.verify_crc().unwrap();
        assert_eq!(out.record_count(), 36);
        // One batch alone comes back as it was.
        let alone = coalesce(&parts[0], &[]).unwrap();
        assert_eq!(alone.as_bytes(), parts[0].as_bytes());
    }

    #[test]
    fn coalesce_refuses_what_it_cannot_merge() {
        let java = plain_copy(&RawBatch::new(Bytes::from_static(JAVA_BATCHES[0].1)).unwrap());
        let first = moved(&java, 0, 0);
        let gap = moved(&java, 13, 0);
        assert!(!gap.can_follow(&first));
        let compressed = RawBatch::new(Bytes::from_static(JAVA_BATCHES[2].1)).unwrap();
        assert!(!compressed.is_coalescable());
        let holey = RawBatch::new(Bytes::from_static(COMPACTED_BATCHES[0].1)).unwrap();
        assert!(!holey.is_coalescable());
        let transactional = RawBatch::new(first.stamp(&STAMP).to_bytes()).unwrap();
        assert!(!transactional.is_coalescable());
        let log_append = RawBatch::new(patched(moved(&java, 12, 0).as_bytes(), |v| {
            v[ATTRIBUTES_AT + 1] |= ATTR_LOG_APPEND_TIME as u8;
        }))
        .unwrap();
        assert!(!log_append.can_follow(&first));
        for bad in [gap, compressed, holey, log_append] {
            let err = coalesce(&first, &[bad]).unwrap_err();
            assert!(err.to_string().contains("base offset 0"), "{err}");
        }
        let cut = RawBatch::new(patched(moved(&java, 12, 0).as_bytes(), |v| {
            v.truncate(v.len() - 3);
            let len = (v.len() - LOG_OVERHEAD) as i32;
            v[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&len.to_be_bytes());
        }))
        .unwrap();
        assert!(matches!(
            coalesce(&first, &[cut]),
            Err(BatchError::MalformedRecord {
                base_offset: 12,
                ..
            })
        ));
    }

    proptest! {
        #[test]
        fn coalesce_is_the_concatenation_of_its_batches(
            batches in proptest::collection::vec(
                proptest::collection::vec(
                    (
                        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
                        -(1i64 << 40)..(1i64 << 40),
                    ),
                    1..20,
                ),
                1..8,
            ),
            base in 0i64..(1 << 50),
        ) {
            let mut next = base;
            let parts: Vec<RawBatch> = batches
                .iter()
                .map(|recs| {
                    let own: Vec<OwnRecord<'_>> = recs
                        .iter()
                        .map(|(k, v, ts)| OwnRecord {
                            key: k.as_deref(),
                            value: v.as_deref(),
                            timestamp: 1_700_000_000_000 + ts,
                        })
                        .collect();
                    let b = RawBatch::new(with_base_offset(
                        encode_batch(&own, &ProducerStamp::NONE),
                        next,
                    ))
                    .unwrap();
                    next += own.len() as i64;
                    b
                })
                .collect();
            let merged = coalesce(&parts[0], &parts[1..]).unwrap();
            prop_assert_eq!(merged.base_offset(), base);
            prop_assert_eq!(merged.next_offset(), next);
            prop_assert_eq!(merged.record_count() as i64, next - base);
            prop_assert_eq!(
                merged.max_timestamp(),
                parts.iter().map(RawBatch::max_timestamp).max().unwrap()
            );
            prop_assert_eq!(decoded(&[merged]), decoded(&parts));
        }
    }
}
