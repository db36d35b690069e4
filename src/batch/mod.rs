//! Kafka record batches (message format v2, magic 2) as opaque bytes.
//!
//! This module owns the unit that strait forwards: a [`RawBatch`] is one complete v2 batch,
//! a zero-copy slice of a Fetch response, with a read-only view of its 61-byte header and
//! its CRC32C check. Here too are the operations the forwarding path needs on a batch:
//! splitting a partition's `records` into batches ([`split_batches`]) and stamping strait's
//! own producer identity into a new header for the target ([`RawBatch::stamp`]). On that
//! path records are never decompressed or decoded: a batch goes out with the records bytes
//! it came with, behind a new header.
//!
//! The submodules own the rest: `aborted` drops the batches of aborted transactions
//! ([`AbortedFilter`], KIP-98); `records` is the record codec ([`encode_batch`],
//! [`decode_uncompressed`]) for strait's own internal topics and the markers of control
//! batches; `rewrite` re-frames the records of batches that cannot go out as they came:
//! batches of compacted topics with holes in their offsets ([`renumber`]) and, opt-in,
//! small batches coalesced into one ([`coalesce`]). `compression` and `crc` are the codecs
//! those use.
//!
//! The layout follows `org.apache.kafka.common.record.DefaultRecordBatch` and
//! `DefaultRecord`; every read of a length or an offset that came off the network is
//! checked, so malformed input gives a [`BatchError`], never a panic.

use std::fmt;

use bytes::Bytes;

mod aborted;
pub mod compression;
pub(crate) mod crc;
mod read_committed;
mod records;
mod rewrite;
#[cfg(test)]
mod testing;

pub use aborted::AbortedFilter;
pub use compression::Compression;
pub use read_committed::ReadCommitted;
pub(crate) use records::put_uvarint;
pub use records::{decode_records, decode_uncompressed, encode_batch, DecodedRecord, OwnRecord};
pub use rewrite::{coalesce, renumber, Renumbered};

/// Size of the fixed v2 batch header (`DefaultRecordBatch.RECORD_BATCH_OVERHEAD`).
pub const HEADER_LEN: usize = 61;

/// `producerId` of a batch written without idempotence (`RecordBatch.NO_PRODUCER_ID`).
pub const NO_PRODUCER_ID: i64 = -1;

/// Bytes before `partitionLeaderEpoch`: `baseOffset` and `batchLength` (`Records.LOG_OVERHEAD`).
/// `batchLength` counts everything after these 12 bytes.
const LOG_OVERHEAD: usize = 12;
/// The smallest legal `batchLength`: a header without records.
const MIN_BATCH_LENGTH: i32 = (HEADER_LEN - LOG_OVERHEAD) as i32;
/// The only message format this module accepts.
const MAGIC_V2: i8 = 2;

// Header field offsets (DefaultRecordBatch).
const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORD_COUNT_AT: usize = 57;
/// The CRC32C covers attributes to the end of the batch.
const CRC_COVERED_FROM: usize = ATTRIBUTES_AT;

// Attribute bits.
const ATTR_CODEC_MASK: i16 = 0x07;
const ATTR_LOG_APPEND_TIME: i16 = 0x08;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

/// Control record types (`ControlRecordType`), read from a control record's key.
const CONTROL_TYPE_ABORT: i16 = 0;

/// What is wrong with a batch, and where.
///
/// `position` is the byte position of the batch inside the buffer that was parsed (the
/// partition's `records` for [`split_batches`], the batch itself otherwise).
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    #[error("batch at byte {position}: {len} bytes is shorter than the {HEADER_LEN}-byte v2 batch header")]
    TooShort { position: usize, len: usize },
    #[error(
        "batch at byte {position} (base offset {base_offset}): unsupported magic {magic}; only \
         message format v2 (magic 2) is supported, older message formats (v0/v1) are not"
    )]
    BadMagic {
        position: usize,
        base_offset: i64,
        magic: i8,
    },
    #[error(
        "batch at byte {position} (base offset {base_offset}): batch length {batch_length} out of \
         range (a v2 batch length is at least {MIN_BATCH_LENGTH})"
    )]
    LengthOutOfRange {
        position: usize,
        base_offset: i64,
        batch_length: i32,
    },
    #[error(
        "batch at base offset {base_offset}: batch length {batch_length} does not match the \
         {len}-byte buffer (expected {len} - 12)"
    )]
    LengthMismatch {
        base_offset: i64,
        batch_length: i32,
        len: usize,
    },
    #[error("crc mismatch at base offset {base_offset}: header says {expected:#010x}, bytes give {actual:#010x}")]
    CrcMismatch {
        base_offset: i64,
        expected: u32,
        actual: u32,
    },
    #[error("batch at base offset {base_offset}: unknown compression codec {codec} in attributes {attributes:#06x}")]
    UnknownCompression {
        base_offset: i64,
        codec: u8,
        attributes: i16,
    },
    #[error("batch at base offset {base_offset} is {compression:?}-compressed; only uncompressed batches can be decoded")]
    Compressed {
        base_offset: i64,
        compression: Compression,
    },
    #[error("batch at base offset {base_offset}: malformed record {index} at byte {position} of the records: {what}")]
    MalformedRecord {
        base_offset: i64,
        index: usize,
        position: usize,
        what: &'static str,
    },
    #[error("batch at base offset {base_offset}: {source}")]
    Codec {
        base_offset: i64,
        source: crate::batch::compression::CompressionError,
    },
}

impl BatchError {
    /// A malformed batch stays malformed: fetching it again returns the same bytes.
    pub fn is_retriable(&self) -> bool {
        false
    }
}

/// The producer identity written into a batch: strait's own on the target (InitProducerId),
/// never the source producer's, which would collide with other writers there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProducerStamp {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// Sets (or clears) attributes bit 4. A transactional batch produced outside a
    /// transaction fails with INVALID_TXN_STATE, so this is set only in EOS mode.
    pub transactional: bool,
}

impl ProducerStamp {
    /// No producer identity: a plain, non-idempotent batch (-1 / -1 / -1).
    pub const NONE: ProducerStamp = ProducerStamp {
        producer_id: NO_PRODUCER_ID,
        producer_epoch: -1,
        base_sequence: -1,
        transactional: false,
    };
}

/// Exactly one complete v2 record batch (header + records), usually a zero-copy slice of a
/// Fetch response. The header fields are read in place; the records stay opaque.
#[derive(Clone, PartialEq, Eq)]
pub struct RawBatch(Bytes);

impl fmt::Debug for RawBatch {
    // The whole batch can be megabytes: show the header, not the bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawBatch")
            .field("base_offset", &self.base_offset())
            .field("len", &self.len())
            .field("last_offset_delta", &self.last_offset_delta())
            .field("record_count", &self.record_count())
            .field("attributes", &format_args!("{:#06x}", self.attributes()))
            .field("producer_id", &self.producer_id())
            .field("producer_epoch", &self.producer_epoch())
            .field("base_sequence", &self.base_sequence())
            .finish()
    }
}

/// `N` bytes of `buf` from `at`, or `None` if `buf` is too short.
fn array_at<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..)?.first_chunk::<N>().copied()
}

fn i64_at(buf: &[u8], at: usize) -> Option<i64> {
    array_at(buf, at).map(i64::from_be_bytes)
}

fn i32_at(buf: &[u8], at: usize) -> Option<i32> {
    array_at(buf, at).map(i32::from_be_bytes)
}

fn i16_at(buf: &[u8], at: usize) -> Option<i16> {
    array_at(buf, at).map(i16::from_be_bytes)
}

/// Overwrites `buf[at..at + src.len()]`; does nothing if that range is out of bounds (only
/// used on buffers whose length was checked to hold the whole header).
fn put(buf: &mut [u8], at: usize, src: &[u8]) {
    if let Some(dst) = at
        .checked_add(src.len())
        .and_then(|end| buf.get_mut(at..end))
    {
        dst.copy_from_slice(src);
    }
}

impl RawBatch {
    /// Wraps exactly one v2 batch. Checks that the buffer holds a whole header, that
    /// `batchLength` accounts for exactly the buffer, and that the magic is 2. The CRC is
    /// checked separately ([`RawBatch::verify_crc`]).
    pub fn new(bytes: Bytes) -> Result<RawBatch, BatchError> {
        let base_offset = i64_at(&bytes, BASE_OFFSET_AT).unwrap_or(-1);
        // The magic sits at the same place in v0/v1 message sets: report an old message
        // format as such, even when it is shorter than a v2 header.
        if let Some(&magic) = bytes.get(MAGIC_AT) {
            let magic = magic as i8;
            if magic != MAGIC_V2 {
                return Err(BatchError::BadMagic {
                    position: 0,
                    base_offset,
                    magic,
                });
            }
        }
        if bytes.len() < HEADER_LEN {
            return Err(BatchError::TooShort {
                position: 0,
                len: bytes.len(),
            });
        }
        let batch_length = i32_at(&bytes, BATCH_LENGTH_AT).unwrap_or(-1);
        if usize::try_from(batch_length)
            .ok()
            .and_then(|l| l.checked_add(LOG_OVERHEAD))
            != Some(bytes.len())
        {
            return Err(BatchError::LengthMismatch {
                base_offset,
                batch_length,
                len: bytes.len(),
            });
        }
        Ok(RawBatch(bytes))
    }

    fn header(&self) -> &[u8] {
        &self.0
    }

    // The constructors guarantee a whole header, so these reads never fall back.
    fn i64_field(&self, at: usize) -> i64 {
        i64_at(self.header(), at).unwrap_or(0)
    }

    fn i32_field(&self, at: usize) -> i32 {
        i32_at(self.header(), at).unwrap_or(0)
    }

    fn i16_field(&self, at: usize) -> i16 {
        i16_at(self.header(), at).unwrap_or(0)
    }

    pub fn base_offset(&self) -> i64 {
        self.i64_field(BASE_OFFSET_AT)
    }

    /// Bytes after `batchLength`: the batch is `batch_length() + 12` bytes long.
    pub fn batch_length(&self) -> i32 {
        self.i32_field(BATCH_LENGTH_AT)
    }

    pub fn partition_leader_epoch(&self) -> i32 {
        self.i32_field(PARTITION_LEADER_EPOCH_AT)
    }

    pub fn magic(&self) -> i8 {
        self.header().get(MAGIC_AT).map_or(0, |&m| m as i8)
    }

    /// The CRC32C stored in the header.
    pub fn crc(&self) -> u32 {
        array_at(self.header(), CRC_AT).map_or(0, u32::from_be_bytes)
    }

    pub fn attributes(&self) -> i16 {
        self.i16_field(ATTRIBUTES_AT)
    }

    /// The codec from attributes bits 0-2; ids 5-7 are an error.
    pub fn compression(&self) -> Result<Compression, BatchError> {
        let codec = (self.attributes() & ATTR_CODEC_MASK) as u8;
        Compression::from_id(codec).ok_or(BatchError::UnknownCompression {
            base_offset: self.base_offset(),
            codec,
            attributes: self.attributes(),
        })
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes() & ATTR_TRANSACTIONAL != 0
    }

    /// A control batch (transaction marker); brokers reject these on Produce.
    pub fn is_control(&self) -> bool {
        self.attributes() & ATTR_CONTROL != 0
    }

    /// Attributes bit 3: the timestamps are LogAppendTime rather than CreateTime.
    pub fn timestamp_type_log_append(&self) -> bool {
        self.attributes() & ATTR_LOG_APPEND_TIME != 0
    }

    pub fn last_offset_delta(&self) -> i32 {
        self.i32_field(LAST_OFFSET_DELTA_AT)
    }

    /// Offset of the last record: `base_offset + last_offset_delta` (saturating on garbage).
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .saturating_add(i64::from(self.last_offset_delta()))
    }

    /// The offset after this batch, where the next fetch continues.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    pub fn base_timestamp(&self) -> i64 {
        self.i64_field(BASE_TIMESTAMP_AT)
    }

    pub fn max_timestamp(&self) -> i64 {
        self.i64_field(MAX_TIMESTAMP_AT)
    }

    pub fn producer_id(&self) -> i64 {
        self.i64_field(PRODUCER_ID_AT)
    }

    pub fn producer_epoch(&self) -> i16 {
        self.i16_field(PRODUCER_EPOCH_AT)
    }

    pub fn base_sequence(&self) -> i32 {
        self.i32_field(BASE_SEQUENCE_AT)
    }

    pub fn record_count(&self) -> i32 {
        self.i32_field(RECORD_COUNT_AT)
    }

    /// The records: every byte after the 61-byte header, compressed or not.
    pub fn records(&self) -> &[u8] {
        self.0.get(HEADER_LEN..).unwrap_or(&[])
    }

    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Length of the whole batch in bytes (header included).
    #[allow(clippy::len_without_is_empty)] // a batch always holds at least its header
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Checks the CRC32C over attributes..end against the header's `crc`.
    pub fn verify_crc(&self) -> Result<(), BatchError> {
        let actual = crc32c::crc32c(self.0.get(CRC_COVERED_FROM..).unwrap_or(&[]));
        let expected = self.crc();
        if actual == expected {
            Ok(())
        } else {
            Err(BatchError::CrcMismatch {
                base_offset: self.base_offset(),
                expected,
                actual,
            })
        }
    }

    /// This batch as it leaves for the target: a new header with strait's producer
    /// identity and a patched CRC, followed by the records bytes of the source batch,
    /// shared, not copied.
    ///
    /// The base offset becomes 0, as Produce requires; leader epoch, offset deltas and
    /// timestamps are left as they are (the broker assigns offsets and the epoch on append).
    ///
    /// The CRC is the source's, corrected for the header fields that changed
    /// ([`crc::patch`]): the records bytes are not read again, and a batch whose CRC did not
    /// match its bytes leaves with one that does not match either. [`RawBatch::verify_crc`]
    /// is still what names the corruption, at the source.
    pub fn stamp(&self, ident: &ProducerStamp) -> Stamped {
        let mut header = [0u8; HEADER_LEN];
        if let Some(src) = self.0.first_chunk::<HEADER_LEN>() {
            header = *src;
        }
        let source = header;
        let attributes = if ident.transactional {
            self.attributes() | ATTR_TRANSACTIONAL
        } else {
            self.attributes() & !ATTR_TRANSACTIONAL
        };
        // The broker assigns offsets on append and refuses a produced batch whose base
        // offset is not 0 (INVALID_RECORD); the field lies outside the CRC.
        put(&mut header, BASE_OFFSET_AT, &0i64.to_be_bytes());
        put(&mut header, ATTRIBUTES_AT, &attributes.to_be_bytes());
        put(
            &mut header,
            PRODUCER_ID_AT,
            &ident.producer_id.to_be_bytes(),
        );
        put(
            &mut header,
            PRODUCER_EPOCH_AT,
            &ident.producer_epoch.to_be_bytes(),
        );
        put(
            &mut header,
            BASE_SEQUENCE_AT,
            &ident.base_sequence.to_be_bytes(),
        );
        let records = self.0.slice(HEADER_LEN.min(self.0.len())..);
        let crc = crc::patch(
            self.crc(),
            &source[CRC_COVERED_FROM..],
            &header[CRC_COVERED_FROM..],
            records.len(),
        );
        put(&mut header, CRC_AT, &crc.to_be_bytes());
        Stamped { header, records }
    }
}

/// A batch stamped for the target ([`RawBatch::stamp`]): its own 61-byte header, and the
/// source batch's records as a shared slice. A Produce request sends the two one after the
/// other, so the records bytes go from the Fetch response to the socket without a copy.
#[derive(Clone, Debug)]
pub struct Stamped {
    pub header: [u8; HEADER_LEN],
    pub records: Bytes,
}

impl Stamped {
    /// Length of the whole batch in bytes.
    pub fn size(&self) -> usize {
        HEADER_LEN + self.records.len()
    }

    /// The batch in one contiguous buffer (a copy; for tests and checks).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.size());
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&self.records);
        Bytes::from(out)
    }
}

/// The complete batches of one Fetch partition's `records`.
#[derive(Debug, Default)]
pub struct BatchSplit {
    pub batches: Vec<RawBatch>,
    /// Trailing bytes of a batch the broker cut short at the fetch size limit; not an error,
    /// fetch again from the next offset to get it whole.
    pub truncated_bytes: usize,
}

/// Splits a Fetch partition's `records` bytes into complete batches (zero-copy slices).
///
/// The last batch may be cut short by the broker (fetch size limit): it is not an error, it
/// is reported as `truncated_bytes`, as `ByteBufferLogInputStream` does. A batch whose
/// header is visible but wrong is an error: magic other than 2 (v0/v1 message sets are not
/// supported) or a `batchLength` below the 49 bytes of a v2 header (negative included). A
/// huge `batchLength` cannot be told apart from a batch cut short, so it counts as truncated.
pub fn split_batches(records: Bytes) -> Result<BatchSplit, BatchError> {
    let mut split = BatchSplit::default();
    let mut position = 0usize;
    while let Some(rest) = records.get(position..).filter(|r| !r.is_empty()) {
        let (Some(base_offset), Some(batch_length)) =
            (i64_at(rest, BASE_OFFSET_AT), i32_at(rest, BATCH_LENGTH_AT))
        else {
            split.truncated_bytes = rest.len();
            break;
        };
        if let Some(&magic) = rest.get(MAGIC_AT) {
            let magic = magic as i8;
            if magic != MAGIC_V2 {
                return Err(BatchError::BadMagic {
                    position,
                    base_offset,
                    magic,
                });
            }
        }
        let total = usize::try_from(batch_length)
            .ok()
            .filter(|_| batch_length >= MIN_BATCH_LENGTH)
            .and_then(|l| l.checked_add(LOG_OVERHEAD))
            .ok_or(BatchError::LengthOutOfRange {
                position,
                base_offset,
                batch_length,
            })?;
        let Some(end) = position.checked_add(total).filter(|&e| e <= records.len()) else {
            split.truncated_bytes = rest.len();
            break;
        };
        split.batches.push(RawBatch(records.slice(position..end)));
        position = end;
    }
    Ok(split)
}

/// Writes the CRC32C of a batch built in `out` into its header.
fn seal(out: &mut [u8]) {
    let crc = crc32c::crc32c(out.get(CRC_COVERED_FROM..).unwrap_or(&[]));
    put(out, CRC_AT, &crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::testing::{
        arb_records, arb_stamp, encode_owned, patched, simple, with_base_offset, STAMP,
    };
    use super::*;
    use proptest::prelude::*;

    /// Three batches fetched from a Kafka 0.11 broker (the fixture of kafka-python's record
    /// tests): values "123" | "" and "" | "123", no keys, CreateTime.
    const BROKER_BATCHES: &[u8] =
        include_bytes!("../../testdata/batches/kafka-0.11-broker-3-batches.bin");

    #[test]
    fn crc32c_known_answer() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn header_accessors_on_hand_built_batch() {
        let records = b"opaque records, never decoded";
        let mut v = Vec::new();
        v.extend_from_slice(&0x0102_0304_0506_0708i64.to_be_bytes()); // baseOffset
        v.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes()); // batchLength
        v.extend_from_slice(&17i32.to_be_bytes()); // partitionLeaderEpoch
        v.push(2); // magic
        v.extend_from_slice(&[0; 4]); // crc, filled below
        v.extend_from_slice(&(0x0004i16 | 0x08 | 0x10).to_be_bytes()); // zstd, LogAppendTime, txn
        v.extend_from_slice(&9i32.to_be_bytes()); // lastOffsetDelta
        v.extend_from_slice(&1_600_000_000_000i64.to_be_bytes()); // baseTimestamp
        v.extend_from_slice(&1_600_000_000_999i64.to_be_bytes()); // maxTimestamp
        v.extend_from_slice(&(-77i64).to_be_bytes()); // producerId
        v.extend_from_slice(&(-3i16).to_be_bytes()); // producerEpoch
        v.extend_from_slice(&123_456i32.to_be_bytes()); // baseSequence
        v.extend_from_slice(&10i32.to_be_bytes()); // recordCount
        assert_eq!(v.len(), HEADER_LEN);
        v.extend_from_slice(records);
        let crc = crc32c::crc32c(&v[21..]);
        v[17..21].copy_from_slice(&crc.to_be_bytes());
        let len = v.len();

        let b = RawBatch::new(Bytes::from(v)).unwrap();
        assert_eq!(b.base_offset(), 0x0102_0304_0506_0708);
        assert_eq!(b.batch_length() as usize, len - 12);
        assert_eq!(b.partition_leader_epoch(), 17);
        assert_eq!(b.magic(), 2);
        assert_eq!(b.crc(), crc);
        assert_eq!(b.attributes(), 0x1c);
        assert_eq!(b.compression().unwrap(), Compression::Zstd);
        assert!(b.is_transactional());
        assert!(!b.is_control());
        assert!(b.timestamp_type_log_append());
        assert_eq!(b.last_offset_delta(), 9);
        assert_eq!(b.last_offset(), 0x0102_0304_0506_0708 + 9);
        assert_eq!(b.next_offset(), 0x0102_0304_0506_0708 + 10);
        assert_eq!(b.base_timestamp(), 1_600_000_000_000);
        assert_eq!(b.max_timestamp(), 1_600_000_000_999);
        assert_eq!(b.producer_id(), -77);
        assert_eq!(b.producer_epoch(), -3);
        assert_eq!(b.base_sequence(), 123_456);
        assert_eq!(b.record_count(), 10);
        assert_eq!(b.records(), records);
        assert_eq!(b.len(), len);
        b.verify_crc().unwrap();
        assert!(matches!(
            decode_uncompressed(&b),
            Err(BatchError::Compressed {
                compression: Compression::Zstd,
                ..
            })
        ));
        assert!(format!("{b:?}").contains("base_offset: 72623859790382856"));
    }

    #[test]
    fn compression_codecs() {
        let base = simple(b"x");
        for (id, c) in [
            (0, Compression::None),
            (1, Compression::Gzip),
            (2, Compression::Snappy),
            (3, Compression::Lz4),
            (4, Compression::Zstd),
        ] {
            let b = patched(&base, |v| v[22] = id);
            assert_eq!(RawBatch::new(b).unwrap().compression().unwrap(), c);
        }
        for id in 5..8u8 {
            let b = RawBatch::new(patched(&base, |v| v[22] = id)).unwrap();
            let err = b.compression().unwrap_err();
            assert!(matches!(err, BatchError::UnknownCompression { codec, .. } if codec == id));
            assert!(!err.is_retriable());
            assert!(decode_uncompressed(&b).is_err());
        }
    }

    #[test]
    fn verify_crc_detects_a_flipped_byte() {
        let good = simple(b"some value bytes");
        RawBatch::new(good.clone()).unwrap().verify_crc().unwrap();
        // Every covered byte matters; bytes before attributes are outside the CRC.
        for at in CRC_COVERED_FROM..good.len() {
            let mut v = good.to_vec();
            v[at] ^= 0x01;
            let err = RawBatch::new(Bytes::from(v))
                .unwrap()
                .verify_crc()
                .unwrap_err();
            assert!(matches!(
                err,
                BatchError::CrcMismatch { base_offset: 0, .. }
            ));
            assert!(err.to_string().contains("crc mismatch at base offset 0"));
        }
        let mut v = good.to_vec();
        v[CRC_AT] ^= 0x80;
        assert!(RawBatch::new(Bytes::from(v)).unwrap().verify_crc().is_err());
    }

    #[test]
    fn real_broker_batches() {
        let all = Bytes::from_static(BROKER_BATCHES);
        // A fetch cut 4 bytes into a fourth batch, as in the original fixture.
        let mut cut = all.to_vec();
        cut.extend_from_slice(&[0, 0, 0, 0]);
        let split = split_batches(Bytes::from(cut)).unwrap();
        assert_eq!(split.truncated_bytes, 4);
        let b = &split.batches;
        assert_eq!(
            b.iter().map(RawBatch::len).collect::<Vec<_>>(),
            [71, 76, 71]
        );
        assert_eq!(
            b.iter().map(RawBatch::base_offset).collect::<Vec<_>>(),
            [0, 1, 3]
        );
        for batch in b {
            batch.verify_crc().unwrap();
            assert_eq!(batch.compression().unwrap(), Compression::None);
            assert_eq!(batch.producer_id(), NO_PRODUCER_ID);
        }
        assert_eq!(b[0].crc(), 0x0318_a270);
        assert_eq!(b[1].last_offset(), 2);
        assert_eq!(b[2].next_offset(), 4);

        let decoded: Vec<_> = b
            .iter()
            .flat_map(|b| decode_uncompressed(b).unwrap())
            .collect();
        let values: Vec<_> = decoded.iter().map(|r| r.value.clone().unwrap()).collect();
        assert_eq!(values, [&b"123"[..], b"", b"", b"123"]);
        assert!(decoded
            .iter()
            .all(|r| r.key.is_none() && r.headers.is_empty()));
        assert_eq!(
            decoded.iter().map(|r| r.offset).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(decoded[0].timestamp, 1_503_229_838_908);
        assert_eq!(decoded[2].timestamp, b[1].max_timestamp());

        // Our encoder writes the same bytes for the same records (CRC included).
        let again = encode_batch(
            &[OwnRecord {
                key: None,
                value: Some(b"123"),
                timestamp: 1_503_229_838_908,
            }],
            &ProducerStamp::NONE,
        );
        let mut expected = b[0].as_bytes().to_vec();
        expected[12..16].copy_from_slice(&(-1i32).to_be_bytes()); // leader epoch set by broker
        assert_eq!(&again[..], &expected[..]);
    }

    #[test]
    fn truncated_trailing_batch() {
        let one = simple(b"first");
        let two = with_base_offset(simple(b"second"), 1);
        let mut buf = one.to_vec();
        buf.extend_from_slice(&two);
        let whole = Bytes::from(buf);
        for cut in 0..=whole.len() {
            let split = split_batches(whole.slice(..cut)).unwrap();
            let complete = usize::from(cut >= one.len()) + usize::from(cut == whole.len());
            assert_eq!(split.batches.len(), complete, "cut at {cut}");
            let used: usize = split.batches.iter().map(RawBatch::len).sum();
            assert_eq!(split.truncated_bytes, cut - used);
        }
        let split = split_batches(Bytes::new()).unwrap();
        assert!(split.batches.is_empty());
        assert_eq!(split.truncated_bytes, 0);
    }

    #[test]
    fn split_is_zero_copy() {
        let one = simple(b"zero copy");
        let split = split_batches(one.clone()).unwrap();
        assert_eq!(split.batches[0].as_bytes().as_ptr(), one.as_ptr());
    }

    #[test]
    fn garbage_gives_errors_not_panics() {
        let good = simple(b"v");
        let set_len = |len: i32| {
            let mut v = good.to_vec();
            v[8..12].copy_from_slice(&len.to_be_bytes());
            Bytes::from(v)
        };
        // Negative length.
        let err = split_batches(set_len(-1)).unwrap_err();
        assert!(matches!(
            err,
            BatchError::LengthOutOfRange {
                batch_length: -1,
                position: 0,
                ..
            }
        ));
        assert!(RawBatch::new(set_len(-1)).is_err());
        // Smaller than a header.
        assert!(matches!(
            split_batches(set_len(48)),
            Err(BatchError::LengthOutOfRange {
                batch_length: 48,
                ..
            })
        ));
        assert!(matches!(
            RawBatch::new(set_len(48)),
            Err(BatchError::LengthMismatch { .. })
        ));
        // Huge: a batch cut short for split, a mismatch for one batch.
        let split = split_batches(set_len(i32::MAX)).unwrap();
        assert!(split.batches.is_empty());
        assert_eq!(split.truncated_bytes, good.len());
        assert!(matches!(
            RawBatch::new(set_len(i32::MAX)),
            Err(BatchError::LengthMismatch { .. })
        ));
        // Wrong magic, here a v1 message set, also after a good batch.
        let mut v = good.to_vec();
        v[16] = 1;
        let mut two = good.to_vec();
        two.extend_from_slice(&v);
        let err = split_batches(Bytes::from(two)).unwrap_err();
        assert!(matches!(
            err,
            BatchError::BadMagic { magic: 1, position, .. } if position == good.len()
        ));
        assert!(err.to_string().contains("unsupported magic 1"));
        assert!(matches!(
            RawBatch::new(Bytes::from(v)),
            Err(BatchError::BadMagic { magic: 1, .. })
        ));
        // Shorter than a header.
        assert!(matches!(
            RawBatch::new(good.slice(..60)),
            Err(BatchError::TooShort { len: 60, .. })
        ));
        assert!(matches!(
            RawBatch::new(Bytes::new()),
            Err(BatchError::TooShort { len: 0, .. })
        ));
        // A decoder fed a lying record count or record length.
        let lying = patched(&good, |v| v[57..61].copy_from_slice(&2i32.to_be_bytes()));
        assert!(decode_uncompressed(&RawBatch::new(lying).unwrap()).is_err());
        let lying = patched(&good, |v| v[61] = 0x7e);
        assert!(decode_uncompressed(&RawBatch::new(lying).unwrap()).is_err());
        let lying = patched(&good, |v| v[57..61].copy_from_slice(&(-5i32).to_be_bytes()));
        assert!(decode_uncompressed(&RawBatch::new(lying).unwrap()).is_err());
        let mut extra = good.to_vec();
        extra.push(0);
        let extra = patched(&Bytes::from(extra), |v| {
            let l = (v.len() - 12) as i32;
            v[8..12].copy_from_slice(&l.to_be_bytes());
        });
        assert!(decode_uncompressed(&RawBatch::new(extra).unwrap()).is_err());
    }

    #[test]
    fn error_messages_say_where_and_what() {
        let cases = [
            (
                BatchError::TooShort {
                    position: 5,
                    len: 3,
                },
                "batch at byte 5: 3 bytes is shorter than the 61-byte v2 batch header",
            ),
            (
                BatchError::LengthOutOfRange {
                    position: 0,
                    base_offset: 9,
                    batch_length: -4,
                },
                "batch at byte 0 (base offset 9): batch length -4 out of range (a v2 batch \
                 length is at least 49)",
            ),
            (
                BatchError::CrcMismatch {
                    base_offset: 12,
                    expected: 0xdead_beef,
                    actual: 1,
                },
                "crc mismatch at base offset 12: header says 0xdeadbeef, bytes give 0x00000001",
            ),
            (
                BatchError::BadMagic {
                    position: 71,
                    base_offset: 3,
                    magic: 0,
                },
                "batch at byte 71 (base offset 3): unsupported magic 0; only message format v2 \
                 (magic 2) is supported, older message formats (v0/v1) are not",
            ),
        ];
        for (err, msg) in cases {
            assert_eq!(err.to_string(), msg);
            assert!(!err.is_retriable());
        }
    }

    #[test]
    fn stamp_writes_and_clears() {
        let src = RawBatch::new(simple(b"payload")).unwrap();
        let out = RawBatch::new(src.stamp(&STAMP).to_bytes()).unwrap();
        out.verify_crc().unwrap();
        assert_eq!(out.producer_id(), 4242);
        assert_eq!(out.producer_epoch(), 7);
        assert_eq!(out.base_sequence(), 1000);
        assert!(out.is_transactional());
        assert_eq!(out.records(), src.records());
        let cleared = RawBatch::new(
            out.stamp(&ProducerStamp {
                transactional: false,
                ..STAMP
            })
            .to_bytes(),
        )
        .unwrap();
        cleared.verify_crc().unwrap();
        assert!(!cleared.is_transactional());
        assert_eq!(cleared.attributes(), src.attributes());
        assert_eq!(cleared.len(), src.len());
    }

    #[test]
    fn stamp_keeps_a_corruption_visible() {
        let mut bytes = simple(b"payload").to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        let corrupt = RawBatch::new(Bytes::from(bytes)).unwrap();
        assert!(corrupt.verify_crc().is_err());
        let out = RawBatch::new(corrupt.stamp(&STAMP).to_bytes()).unwrap();
        assert!(matches!(
            out.verify_crc(),
            Err(BatchError::CrcMismatch { .. })
        ));
    }

    proptest! {
        #[test]
        fn prop_rewrite_keeps_records(
            recs in arb_records(),
            source in arb_stamp(),
            stamp in arb_stamp(),
            base_offset in any::<i64>(),
        ) {
            let src = RawBatch::new(with_base_offset(encode_owned(&recs, &source), base_offset))
                .unwrap();
            let out = RawBatch::new(src.stamp(&stamp).to_bytes()).unwrap();
            prop_assert!(out.verify_crc().is_ok());
            prop_assert_eq!(out.records(), src.records());
            prop_assert_eq!(out.len(), src.len());
            prop_assert_eq!(out.producer_id(), stamp.producer_id);
            prop_assert_eq!(out.producer_epoch(), stamp.producer_epoch);
            prop_assert_eq!(out.base_sequence(), stamp.base_sequence);
            prop_assert_eq!(out.is_transactional(), stamp.transactional);
            prop_assert_eq!(out.attributes() & !0x10, src.attributes() & !0x10);
            prop_assert_eq!(out.base_offset(), 0);
            prop_assert_eq!(src.base_offset(), base_offset);
            prop_assert_eq!(out.last_offset_delta(), src.last_offset_delta());
            prop_assert_eq!(out.base_timestamp(), src.base_timestamp());
            prop_assert_eq!(out.max_timestamp(), src.max_timestamp());
            prop_assert_eq!(out.record_count(), src.record_count());
            prop_assert_eq!(out.partition_leader_epoch(), src.partition_leader_epoch());
        }


        #[test]
        fn prop_split_returns_the_complete_prefix(
            batches in prop::collection::vec(arb_records(), 1..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut buf = Vec::new();
            let mut ends = Vec::new();
            let mut offset = 0i64;
            for recs in &batches {
                let b = with_base_offset(encode_owned(recs, &ProducerStamp::NONE), offset);
                offset += recs.len().max(1) as i64;
                buf.extend_from_slice(&b);
                ends.push(buf.len());
            }
            let cut = cut.index(buf.len() + 1);
            let split = split_batches(Bytes::from(buf).slice(..cut)).unwrap();
            let complete = ends.iter().filter(|&&e| e <= cut).count();
            prop_assert_eq!(split.batches.len(), complete);
            let used = if complete == 0 { 0 } else { ends[complete - 1] };
            prop_assert_eq!(split.truncated_bytes, cut - used);
            for b in &split.batches {
                prop_assert!(b.verify_crc().is_ok());
            }
        }

        #[test]
        fn prop_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let bytes = Bytes::from(bytes);
            if let Ok(b) = RawBatch::new(bytes.clone()) {
                let _ = b.verify_crc();
                let _ = b.compression();
                let _ = decode_uncompressed(&b);
                let _ = b.stamp(&ProducerStamp::NONE);
                let _ = AbortedFilter::new([(b.producer_id(), b.base_offset())]).keep(&b);
            }
            if let Ok(split) = split_batches(bytes) {
                for b in &split.batches {
                    let _ = decode_uncompressed(b);
                }
            }
        }

    }
}
