//! Kafka record batches (message format v2, magic 2) as opaque bytes.
//!
//! This module owns the unit that strait forwards: a [`RawBatch`] is one complete v2 batch,
//! a zero-copy slice of a Fetch response, with a read-only view of its 61-byte header. It
//! also owns the few operations the forwarding path needs on a batch: splitting a
//! partition's `records` into batches ([`split_batches`]), checking the CRC32C, dropping the
//! batches of aborted transactions ([`AbortedFilter`], KIP-98), and stamping strait's own
//! producer identity into a new header for the target ([`RawBatch::stamp`]). Records are never
//! decompressed or decoded on that path. The small encoder ([`encode_batch`]) and decoder
//! ([`decode_uncompressed`]) exist for strait's own internal topics and for tests.
//!
//! The layout follows `org.apache.kafka.common.record.DefaultRecordBatch` and
//! `DefaultRecord`; every read of a length or an offset that came off the network is
//! checked, so malformed input gives a [`BatchError`], never a panic.

use std::collections::HashSet;
use std::fmt;

use bytes::{BufMut, Bytes};

pub mod committed;
pub mod compression;
pub(crate) mod crc;

pub use committed::Committed;
pub use compression::Compression;

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

/// A record for [`encode_batch`]: strait's own internal topics use keys, values and
/// CreateTime timestamps, no headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub timestamp: i64,
}

fn zigzag32(n: i32) -> u32 {
    ((n << 1) ^ (n >> 31)) as u32
}

fn zigzag64(n: i64) -> u64 {
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

fn uvarint_len(mut v: u64) -> usize {
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
fn len_i32(len: usize) -> i32 {
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
    fn uvarint(&mut self, max_bytes: u32) -> Result<u64, BatchError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error("varint too long"))
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let v = self.uvarint(5)? as u32;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let v = self.uvarint(10)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
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

/// Decodes the records of an uncompressed batch (tests and strait's readers of its own
/// internal topics). Compressed batches are an error: the forwarding path never decodes.
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

impl RawBatch {
    /// A batch from a compacted topic with records removed from inside it: its offset range
    /// (`lastOffsetDelta + 1`) is wider than its record count. Brokers refuse such a batch on
    /// Produce (`LogValidator.validateBatch`: "Inconsistent batch offset range"), so it has to
    /// go through [`renumber`] first. Empty batches (record count 0) have no holes.
    pub fn has_holes(&self) -> bool {
        self.record_count() > 0
            && i64::from(self.last_offset_delta()) + 1 != i64::from(self.record_count())
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

/// Unsigned LEB128 of at most `max_bytes` bytes at the start of `buf`: the value and its
/// length in bytes, `None` if cut short or too long.
fn uvarint_at(buf: &[u8], max_bytes: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().take(max_bytes).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

fn unzigzag32(v: u64) -> i32 {
    let v = v as u32;
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Rewrites a batch with holes (see [`RawBatch::has_holes`]) into one a broker accepts: each
/// record's `offsetDelta` becomes its index, `lastOffsetDelta` becomes `recordCount - 1`.
///
/// The only place strait re-encodes records. A compressed batch is decompressed (bounded,
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

impl RawBatch {
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

/// Writes the CRC32C of a batch built in `out` into its header.
fn seal(out: &mut [u8]) {
    let crc = crc32c::crc32c(out.get(CRC_COVERED_FROM..).unwrap_or(&[]));
    put(out, CRC_AT, &crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Three batches fetched from a Kafka 0.11 broker (the fixture of kafka-python's record
    /// tests): values "123" | "" and "" | "123", no keys, CreateTime.
    const BROKER_BATCHES: &[u8] =
        include_bytes!("../../testdata/batches/kafka-0.11-broker-3-batches.bin");

    const STAMP: ProducerStamp = ProducerStamp {
        producer_id: 4242,
        producer_epoch: 7,
        base_sequence: 1000,
        transactional: true,
    };

    /// Applies `f` to a copy of `batch` and recomputes the CRC.
    fn patched(batch: &Bytes, f: impl FnOnce(&mut Vec<u8>)) -> Bytes {
        let mut v = batch.to_vec();
        f(&mut v);
        let crc = crc32c::crc32c(&v[CRC_COVERED_FROM..]);
        v[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        Bytes::from(v)
    }

    fn with_base_offset(batch: Bytes, base_offset: i64) -> Bytes {
        // baseOffset is outside the CRC.
        let mut v = batch.to_vec();
        v[..8].copy_from_slice(&base_offset.to_be_bytes());
        Bytes::from(v)
    }

    fn simple(value: &[u8]) -> Bytes {
        encode_batch(
            &[OwnRecord {
                key: None,
                value: Some(value),
                timestamp: 1_700_000_000_000,
            }],
            &ProducerStamp::NONE,
        )
    }

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

    // --- aborted transactions ---------------------------------------------------------

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

    // --- properties -------------------------------------------------------------------

    /// Key, value, timestamp.
    type Rec = (Option<Vec<u8>>, Option<Vec<u8>>, i64);

    fn arb_records() -> impl Strategy<Value = Vec<Rec>> {
        prop::collection::vec(
            (
                prop::option::of(prop::collection::vec(any::<u8>(), 0..40)),
                prop::option::of(prop::collection::vec(any::<u8>(), 0..300)),
                any::<i64>(),
            ),
            0..12,
        )
    }

    fn arb_stamp() -> impl Strategy<Value = ProducerStamp> {
        (any::<i64>(), any::<i16>(), any::<i32>(), any::<bool>()).prop_map(
            |(producer_id, producer_epoch, base_sequence, transactional)| ProducerStamp {
                producer_id,
                producer_epoch,
                base_sequence,
                transactional,
            },
        )
    }

    fn encode_owned(recs: &[Rec], s: &ProducerStamp) -> Bytes {
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

    // --- renumbering batches with holes -----------------------------------------------

    /// One small Java-produced batch per codec (see testdata/batches/README.md).
    const JAVA_BATCHES: [(Compression, &[u8]); 4] = [
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
    fn assemble(
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
    fn plain_copy(batch: &RawBatch) -> RawBatch {
        let c = batch.compression().unwrap();
        let plain = crate::batch::compression::decompress(c, batch.records()).unwrap();
        assemble(
            batch.as_bytes(),
            &plain,
            Compression::None,
            batch.last_offset_delta(),
        )
    }

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
