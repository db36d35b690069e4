//! The record codec: the records inside a batch, which the forwarding path never reads.
//!
//! [`encode_batch`] builds uncompressed batches for strait's own internal topics;
//! [`decode_uncompressed`] reads them back, and reads the marker of a control batch for
//! [`crate::batch::AbortedFilter`]; [`decode_records`] reads them whatever codec a broker
//! stored them with.
//! The varint and zigzag helpers here are shared with `rewrite`, which re-frames records
//! without decoding them.

use bytes::{BufMut, Bytes};

use super::{
    put, seal, BatchError, Compression, ProducerStamp, RawBatch, ATTRIBUTES_AT, ATTR_CODEC_MASK,
    ATTR_TRANSACTIONAL, BASE_OFFSET_AT, BASE_SEQUENCE_AT, BASE_TIMESTAMP_AT, BATCH_LENGTH_AT,
    HEADER_LEN, LAST_OFFSET_DELTA_AT, LOG_OVERHEAD, MAGIC_AT, MAGIC_V2, MAX_TIMESTAMP_AT,
    PARTITION_LEADER_EPOCH_AT, PRODUCER_EPOCH_AT, PRODUCER_ID_AT, RECORD_COUNT_AT,
};

/// A record for [`encode_batch`]: strait's own internal topics use keys, values and
/// CreateTime timestamps, no headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub timestamp: i64,
}

pub(super) fn zigzag32(n: i32) -> u32 {
    ((n << 1) ^ (n >> 31)) as u32
}

pub(super) fn zigzag64(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// An unsigned varint (protobuf style), as record fields and flexible request fields use.
pub(crate) fn put_uvarint(out: &mut impl BufMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

pub(super) fn uvarint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Length of a nullable byte field: varint length (-1 for null) and the bytes.
fn bytes_field_len(b: Option<&[u8]>) -> usize {
    match b {
        None => uvarint_len(u64::from(zigzag32(-1))),
        Some(b) => uvarint_len(u64::from(zigzag32(len_i32(b.len())))) + b.len(),
    }
}

fn put_bytes_field(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_uvarint(out, u64::from(zigzag32(-1))),
        Some(b) => {
            put_uvarint(out, u64::from(zigzag32(len_i32(b.len()))));
            out.extend_from_slice(b);
        }
    }
}

/// Record and batch lengths are i32 on the wire; internal records never come near 2 GiB.
pub(super) fn len_i32(len: usize) -> i32 {
    i32::try_from(len).expect("record batch larger than 2 GiB")
}

/// Builds an uncompressed v2 batch from simple records, for strait's own internal topics
/// (progress, heartbeats, ...).
///
/// Base offset 0, partition leader epoch -1, CreateTime, no headers; base timestamp is the
/// first record's, max timestamp the largest. No records gives an empty batch (record count
/// 0, timestamps -1), which brokers reject on Produce.
///
/// # Panics
/// If the batch would be larger than 2 GiB (an i32 length on the wire).
pub fn encode_batch(records: &[OwnRecord<'_>], ident: &ProducerStamp) -> Bytes {
    let base_timestamp = records.first().map_or(-1, |r| r.timestamp);
    let max_timestamp = records.iter().map(|r| r.timestamp).max().unwrap_or(-1);
    let mut out = vec![0u8; HEADER_LEN];
    for (i, r) in records.iter().enumerate() {
        let offset_delta = zigzag32(len_i32(i));
        let timestamp_delta = zigzag64(r.timestamp.wrapping_sub(base_timestamp));
        let body_len = 1 // attributes
            + uvarint_len(timestamp_delta)
            + uvarint_len(u64::from(offset_delta))
            + bytes_field_len(r.key)
            + bytes_field_len(r.value)
            + 1; // header count 0
        out.reserve(5 + body_len);
        put_uvarint(&mut out, u64::from(zigzag32(len_i32(body_len))));
        out.push(0); // record attributes: unused
        put_uvarint(&mut out, timestamp_delta);
        put_uvarint(&mut out, u64::from(offset_delta));
        put_bytes_field(&mut out, r.key);
        put_bytes_field(&mut out, r.value);
        put_uvarint(&mut out, 0);
    }
    let batch_length = len_i32(out.len() - LOG_OVERHEAD);
    let last_offset_delta = len_i32(records.len().saturating_sub(1));
    let mut attributes = 0i16;
    if ident.transactional {
        attributes |= ATTR_TRANSACTIONAL;
    }
    put(&mut out, BASE_OFFSET_AT, &0i64.to_be_bytes());
    put(&mut out, BATCH_LENGTH_AT, &batch_length.to_be_bytes());
    put(&mut out, PARTITION_LEADER_EPOCH_AT, &(-1i32).to_be_bytes());
    put(&mut out, MAGIC_AT, &MAGIC_V2.to_be_bytes());
    put(&mut out, ATTRIBUTES_AT, &attributes.to_be_bytes());
    put(
        &mut out,
        LAST_OFFSET_DELTA_AT,
        &last_offset_delta.to_be_bytes(),
    );
    put(&mut out, BASE_TIMESTAMP_AT, &base_timestamp.to_be_bytes());
    put(&mut out, MAX_TIMESTAMP_AT, &max_timestamp.to_be_bytes());
    put(&mut out, PRODUCER_ID_AT, &ident.producer_id.to_be_bytes());
    put(
        &mut out,
        PRODUCER_EPOCH_AT,
        &ident.producer_epoch.to_be_bytes(),
    );
    put(
        &mut out,
        BASE_SEQUENCE_AT,
        &ident.base_sequence.to_be_bytes(),
    );
    put(
        &mut out,
        RECORD_COUNT_AT,
        &len_i32(records.len()).to_be_bytes(),
    );
    seal(&mut out);
    Bytes::from(out)
}

/// One decoded record of an uncompressed batch. Keys, values and headers are zero-copy
/// slices of the batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(Bytes, Option<Bytes>)>,
}

/// Reads the records region of one batch; every read is bounds-checked.
struct RecordReader<'a> {
    batch: &'a RawBatch,
    /// Position in the batch (not in the records region).
    pos: usize,
    /// End of the current record's body (or of the batch).
    end: usize,
    index: usize,
}

impl RecordReader<'_> {
    fn error(&self, what: &'static str) -> BatchError {
        BatchError::MalformedRecord {
            base_offset: self.batch.base_offset(),
            index: self.index,
            position: self.pos.saturating_sub(HEADER_LEN),
            what,
        }
    }

    fn byte(&mut self) -> Result<u8, BatchError> {
        let b = *self
            .batch
            .0
            .get(self.pos)
            .filter(|_| self.pos < self.end)
            .ok_or_else(|| self.error("record ends early"))?;
        self.pos += 1;
        Ok(b)
    }

    /// Unsigned LEB128 of at most `max_bytes` bytes (`ByteUtils.readVarint`/`readVarlong`).
    fn uvarint(&mut self, max_bytes: usize) -> Result<u64, BatchError> {
        let rest = self.batch.0.get(self.pos..self.end).unwrap_or(&[]);
        match uvarint_at(rest, max_bytes) {
            Some((value, len)) => {
                self.pos += len;
                Ok(value)
            }
            None if rest.len() < max_bytes => {
                self.pos += rest.len();
                Err(self.error("record ends early"))
            }
            None => {
                self.pos += max_bytes;
                Err(self.error("varint too long"))
            }
        }
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        self.uvarint(5).map(unzigzag32)
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        self.uvarint(10).map(unzigzag64)
    }

    fn take(&mut self, len: usize, what: &'static str) -> Result<Bytes, BatchError> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.end && e <= self.batch.0.len())
            .ok_or_else(|| self.error(what))?;
        let b = self.batch.0.slice(self.pos..end);
        self.pos = end;
        Ok(b)
    }

    /// A nullable byte field: negative length is null, as in `DefaultRecord.readFrom`.
    fn nullable_bytes(&mut self, what: &'static str) -> Result<Option<Bytes>, BatchError> {
        let len = self.varint()?;
        match usize::try_from(len) {
            Ok(len) => self.take(len, what).map(Some),
            Err(_) => Ok(None),
        }
    }
}

/// Decodes the records of an uncompressed batch (control-batch markers, tests; strait's own
/// topics go through [`decode_records`]). Compressed batches are an error: control batches
/// are written uncompressed, and forwarding never decodes.
///
/// Offsets are `base_offset + offsetDelta`; timestamps are `base_timestamp + timestampDelta`
/// for CreateTime and the batch's max timestamp for LogAppendTime, as in the Java client.
pub fn decode_uncompressed(batch: &RawBatch) -> Result<Vec<DecodedRecord>, BatchError> {
    let compression = batch.compression()?;
    if compression != Compression::None {
        return Err(BatchError::Compressed {
            base_offset: batch.base_offset(),
            compression,
        });
    }
    let mut r = RecordReader {
        batch,
        pos: HEADER_LEN,
        end: batch.len(),
        index: 0,
    };
    let count =
        usize::try_from(batch.record_count()).map_err(|_| r.error("negative record count"))?;
    // Every record takes at least 7 bytes: do not trust the count for the allocation.
    let mut records = Vec::with_capacity(count.min(batch.records().len() / 7));
    for index in 0..count {
        r.index = index;
        r.end = batch.len();
        let body_len = usize::try_from(r.varint()?).map_err(|_| r.error("negative length"))?;
        let body_end = r
            .pos
            .checked_add(body_len)
            .filter(|&e| e <= batch.len())
            .ok_or_else(|| r.error("length past the end of the batch"))?;
        r.end = body_end;
        let _attributes = r.byte()?;
        let timestamp_delta = r.varlong()?;
        let offset_delta = r.varint()?;
        let key = r.nullable_bytes("key past the end of the record")?;
        let value = r.nullable_bytes("value past the end of the record")?;
        let header_count =
            usize::try_from(r.varint()?).map_err(|_| r.error("negative header count"))?;
        let mut headers = Vec::with_capacity(header_count.min(body_len / 2));
        for _ in 0..header_count {
            let key_len =
                usize::try_from(r.varint()?).map_err(|_| r.error("negative header key length"))?;
            let key = r.take(key_len, "header key past the end of the record")?;
            let value = r.nullable_bytes("header value past the end of the record")?;
            headers.push((key, value));
        }
        if r.pos != body_end {
            return Err(r.error("record length does not match its fields"));
        }
        let timestamp = if batch.timestamp_type_log_append() {
            batch.max_timestamp()
        } else {
            batch.base_timestamp().wrapping_add(timestamp_delta)
        };
        records.push(DecodedRecord {
            offset: batch.base_offset().wrapping_add(i64::from(offset_delta)),
            timestamp,
            key,
            value,
            headers,
        });
    }
    r.end = batch.len();
    if r.pos != batch.len() {
        return Err(r.error("bytes left after the last record"));
    }
    Ok(records)
}

/// Decodes the records of a batch whatever its codec: a compressed one is decompressed
/// (bounded, [`crate::batch::compression::DEFAULT_MAX_DECOMPRESSED`]) into an uncompressed
/// copy first. For strait's readers of its own internal topics, which it writes
/// uncompressed but a broker or topic with another `compression.type` stores recompressed.
pub fn decode_records(batch: &RawBatch) -> Result<Vec<DecodedRecord>, BatchError> {
    let compression = batch.compression()?;
    if compression == Compression::None {
        return decode_uncompressed(batch);
    }
    let plain = super::compression::decompress(compression, batch.records()).map_err(|source| {
        BatchError::Codec {
            base_offset: batch.base_offset(),
            source,
        }
    })?;
    let mut bytes = Vec::with_capacity(HEADER_LEN + plain.len());
    bytes.extend_from_slice(batch.as_bytes().get(..HEADER_LEN).unwrap_or(&[]));
    bytes.extend_from_slice(&plain);
    // At most 64 MiB of records: the length fits.
    let batch_length = (bytes.len() - LOG_OVERHEAD) as i32;
    bytes[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&batch_length.to_be_bytes());
    let attributes = batch.attributes() & !ATTR_CODEC_MASK;
    bytes[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    decode_uncompressed(&RawBatch::new(Bytes::from(bytes))?)
}

/// Unsigned LEB128 of at most `max_bytes` bytes at the start of `buf`: the value and its
/// length in bytes, `None` if cut short or too long.
pub(super) fn uvarint_at(buf: &[u8], max_bytes: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().take(max_bytes).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

pub(super) fn unzigzag32(v: u64) -> i32 {
    let v = v as u32;
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

pub(super) fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{
        arb_records, arb_stamp, encode_owned, patched, plain_copy, simple, JAVA_BATCHES, STAMP,
    };
    use super::super::AbortedFilter;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decode_records_reads_every_codec_as_its_plain_copy() {
        for (codec, bytes) in JAVA_BATCHES {
            let batch = RawBatch::new(Bytes::from_static(bytes)).unwrap();
            let plain = decode_uncompressed(&plain_copy(&batch)).unwrap();
            assert_eq!(plain.len(), 12, "{codec:?}");
            assert_eq!(decode_records(&batch).unwrap(), plain, "{codec:?}");
        }
        let plain = RawBatch::new(simple(b"v")).unwrap();
        assert_eq!(
            decode_records(&plain).unwrap(),
            decode_uncompressed(&plain).unwrap()
        );
    }

    #[test]
    fn encode_decode_round_trip() {
        let records = [
            OwnRecord {
                key: None,
                value: Some(b"null key"),
                timestamp: 10,
            },
            OwnRecord {
                key: Some(b"null value"),
                value: None,
                timestamp: 5,
            },
            OwnRecord {
                key: Some(b"empty value"),
                value: Some(b""),
                timestamp: 30,
            },
            OwnRecord {
                key: Some(b""),
                value: Some(&[0xff; 300]),
                timestamp: -1,
            },
        ];
        let batch = RawBatch::new(encode_batch(&records, &ProducerStamp::NONE)).unwrap();
        batch.verify_crc().unwrap();
        assert_eq!(batch.record_count(), 4);
        assert_eq!(batch.last_offset_delta(), 3);
        assert_eq!(batch.base_timestamp(), 10);
        assert_eq!(batch.max_timestamp(), 30);
        assert_eq!(batch.partition_leader_epoch(), -1);
        assert_eq!(batch.producer_id(), -1);
        assert!(!batch.is_transactional() && !batch.is_control());
        assert!(!batch.timestamp_type_log_append());
        let decoded = decode_uncompressed(&batch).unwrap();
        assert_eq!(decoded.len(), 4);
        for (i, (d, r)) in decoded.iter().zip(&records).enumerate() {
            assert_eq!(d.offset, i as i64);
            assert_eq!(d.timestamp, r.timestamp);
            assert_eq!(d.key.as_deref(), r.key);
            assert_eq!(d.value.as_deref(), r.value);
            assert!(d.headers.is_empty());
        }

        let empty = RawBatch::new(encode_batch(&[], &STAMP)).unwrap();
        empty.verify_crc().unwrap();
        assert_eq!(empty.len(), HEADER_LEN);
        assert_eq!(empty.record_count(), 0);
        assert!(empty.is_transactional());
        assert_eq!(empty.producer_id(), 4242);
        assert!(decode_uncompressed(&empty).unwrap().is_empty());
    }

    #[test]
    fn decode_reads_headers_and_log_append_time() {
        // One record with two headers (one with a null value), hand-encoded.
        let mut rec = vec![0u8, 0, 2]; // attributes, timestampDelta 0, offsetDelta 1
        rec.extend_from_slice(&[2, b'k']); // key "k"
        rec.extend_from_slice(&[1]); // null value
        rec.extend_from_slice(&[4]); // 2 headers
        rec.extend_from_slice(&[4, b'h', b'1', 2, b'v']);
        rec.extend_from_slice(&[4, b'h', b'2', 1]);
        let mut v = simple(b"").to_vec();
        v.truncate(HEADER_LEN);
        v.push((rec.len() * 2) as u8);
        v.extend_from_slice(&rec);
        let l = (v.len() - 12) as i32;
        v[8..12].copy_from_slice(&l.to_be_bytes());
        let b = patched(&Bytes::from(v), |v| {
            v[22] |= 0x08;
            v[35..43].copy_from_slice(&99i64.to_be_bytes());
        });
        let d = decode_uncompressed(&RawBatch::new(b).unwrap()).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].offset, 1);
        assert_eq!(d[0].timestamp, 99);
        assert_eq!(d[0].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(d[0].value, None);
        assert_eq!(
            d[0].headers,
            vec![
                (Bytes::from_static(b"h1"), Some(Bytes::from_static(b"v"))),
                (Bytes::from_static(b"h2"), None)
            ]
        );
    }

    proptest! {
        #[test]
        fn prop_encode_decode_round_trip(recs in arb_records(), stamp in arb_stamp()) {
            let batch = RawBatch::new(encode_owned(&recs, &stamp)).unwrap();
            prop_assert!(batch.verify_crc().is_ok());
            let decoded = decode_uncompressed(&batch).unwrap();
            prop_assert_eq!(decoded.len(), recs.len());
            for (i, (d, (k, v, t))) in decoded.iter().zip(&recs).enumerate() {
                prop_assert_eq!(d.offset, i as i64);
                prop_assert_eq!(d.timestamp, *t);
                prop_assert_eq!(d.key.as_deref(), k.as_deref());
                prop_assert_eq!(d.value.as_deref(), v.as_deref());
            }
        }


        #[test]
        fn prop_valid_header_arbitrary_records_never_panic(
            records in prop::collection::vec(any::<u8>(), 0..300),
            count in -2i32..20,
            attributes in any::<i16>(),
        ) {
            // A well-formed header in front of garbage records reaches deep into the decoder.
            let mut v = simple(b"").to_vec();
            v.truncate(HEADER_LEN);
            v.extend_from_slice(&records);
            let l = (v.len() - 12) as i32;
            v[8..12].copy_from_slice(&l.to_be_bytes());
            v[21..23].copy_from_slice(&(attributes & !0x07).to_be_bytes());
            v[57..61].copy_from_slice(&count.to_be_bytes());
            let b = RawBatch::new(Bytes::from(v)).unwrap();
            let _ = decode_uncompressed(&b);
            let _ = AbortedFilter::new([(b.producer_id(), 0)]).keep(&b);
        }
    }

    #[test]
    fn java_batches_decode_for_every_codec() {
        // Workload produce --count 12 --headers --null-key-every 5 --null-value-every 4
        // --value-size 40: record i as the tool documents it.
        for (codec, bytes) in JAVA_BATCHES {
            let b = RawBatch::new(Bytes::from_static(bytes)).unwrap();
            b.verify_crc().unwrap();
            assert_eq!(b.compression().unwrap(), codec);
            assert_eq!((b.base_offset(), b.record_count()), (0, 12));
            assert!(!b.has_holes());
            let records = decode_uncompressed(&plain_copy(&b)).unwrap();
            assert_eq!(records.len(), 12);
            for (i, r) in records.iter().enumerate() {
                let key = (i % 5 != 4).then(|| format!("key-{i}"));
                let value = (i % 4 != 3).then(|| {
                    let mut v = format!("value-{i}-");
                    let pad = char::from(b'a' + i as u8);
                    while v.len() < 40 {
                        v.push(pad);
                    }
                    v
                });
                let mut headers = vec![
                    (Bytes::from("h1"), Some(Bytes::from(format!("v{i}")))),
                    (Bytes::from("h2"), None),
                ];
                if i % 5 == 0 {
                    headers.push((Bytes::from("h1"), Some(Bytes::from(format!("again-{i}")))));
                }
                assert_eq!(r.offset, i as i64);
                assert_eq!(r.key, key.map(Bytes::from), "{codec:?} record {i}");
                assert_eq!(r.value, value.map(Bytes::from), "{codec:?} record {i}");
                assert_eq!(r.headers, headers);
            }
        }
    }
}
